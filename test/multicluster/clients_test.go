package multicluster

import (
	"context"
	"crypto/x509"
	"net/url"
	"path/filepath"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdfedv1 "github.com/etcdfed/etcdfed/api/v1alpha1"
	"github.com/etcdfed/etcdfed/hub/pki"
)

// TestScenarioConsumerCredentials: a consumer declared in spec.clients
// gets its Secret in a member cluster (in the EtcdCluster's own namespace:
// no other without the hub's policy); a kube-apiserver started from that
// Secret's contents alone serves from the ring (an object created through
// it is read back from etcd); its certificate, presented to every member's
// peer port, is refused; a ReadOnly consumer reads and cannot write; a
// certificate near its expiry is renewed by the hub and the renewed one
// works; a removed entry's Secret is deleted and its etcd user with it.
// All under the recorded workload (linearizable, no acknowledged write
// lost, watchers complete, no failed request beyond one election).
func TestScenarioConsumerCredentials(t *testing.T) {
	ctx, topo, etcd := setUpRing(t, ringScenarioInput{What: "consumers added, renewed and removed under a recorded workload",
		Ring: EtcdClusterSpecInput{Namespace: "consumers", Name: "cc", Domain: "cc.etcd.test", Replicas: 3, WantZones: "1/1/1"}})
	formed, err := etcd.Get(ctx, topo.Hub)
	if err != nil {
		t.Fatal(err)
	}
	// The recorded workload runs through the whole scenario, as in every
	// scenario: consumers come and go, certificates are renewed, a
	// kube-apiserver writes through the ring beside it.
	elections := StartElectionWatch(ctx, t, etcd.Client, formed)
	w := StartWorkload(ctx, t, StartWorkloadInput{Client: etcd.Client, Prefix: "consumers/", WatchEachEndpoint: true})
	waitForWorkloadProgress(ctx, t, w)
	member := topo.Members[1]
	// The EtcdCluster's own namespace: a spec reaches no other unless the
	// hub runs with --allow-client-secrets-in-other-namespaces.
	const consumerNS = "consumers"
	if err := ensureNamespace(ctx, member, consumerNS); err != nil {
		t.Fatal(err)
	}
	if err := grantHubSecrets(ctx, member, consumerNS); err != nil {
		t.Fatal(err)
	}
	clients := []etcdfedv1.ClientSpec{
		{Name: "kube-apiserver", Cluster: member.Name, Namespace: consumerNS, SecretName: "etcd-client"},
		{Name: "app"}, // the hub cluster, the EtcdCluster's namespace
		{Name: "reader", Role: etcdfedv1.ClientRoleReadOnly},
	}
	start := time.Now()
	if err := setClients(ctx, topo.Hub, etcd, clients); err != nil {
		t.Fatal(err)
	}
	sec, err := WaitForClientSecret(ctx, WaitForClientSecretInput{Cluster: member, Namespace: consumerNS, Name: "etcd-client"})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("consumer Secret in %s/%s %.1fs after spec.clients was set", member.Name, consumerNS, time.Since(start).Seconds())
	if sec.Type != corev1.SecretTypeTLS {
		t.Errorf("Secret type %s, want %s", sec.Type, corev1.SecretTypeTLS)
	}
	if _, err := WaitForClientSecret(ctx, WaitForClientSecretInput{Cluster: topo.Hub, Namespace: "consumers", Name: "cc-app-etcd-client"}); err != nil {
		t.Fatal(err)
	}
	ec, err := etcd.Get(ctx, topo.Hub)
	if err != nil {
		t.Fatal(err)
	}
	if got := string(sec.Data[etcdfedv1.ClientSecretKeyEndpoints]); got != strings.Join(ec.Status.Endpoints, ",") {
		t.Fatalf("endpoints %q, want status.endpoints %v", got, ec.Status.Endpoints)
	}
	if err := WaitForStatus(ctx, WaitForStatusInput{Hub: topo.Hub, Etcd: etcd, What: "ClientsReady=True", Timeout: time.Minute, Until: func(ec *etcdfedv1.EtcdCluster) string {
		if !meta.IsStatusConditionTrue(ec.Status.Conditions, etcdfedv1.ConditionClientsReady) || len(ec.Status.Clients) != len(clients) {
			return clientsStatus(ec)
		}
		return ""
	}}); err != nil {
		t.Fatal(err)
	}

	t.Run("kube-apiserver from the Secret serves from the ring", func(t *testing.T) {
		kas := StartConsumerAPIServer(ctx, StartConsumerAPIServerInput{T: t, Binary: filepath.Join(hubFx.bin, "kube-apiserver"),
			Data: sec.Data, DNSServers: topo.DNSServers, Prefix: "/consumer-a"})
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "written-through-the-consumer", Namespace: "default"}, Data: map[string]string{"proof": "served-by-the-ring"}}
		if _, err := kas.Client.CoreV1().ConfigMaps("default").Create(ctx, cm, metav1.CreateOptions{}); err != nil {
			t.Fatalf("create a ConfigMap through the consumer apiserver: %v", err)
		}
		got, err := kas.Client.CoreV1().ConfigMaps("default").Get(ctx, cm.Name, metav1.GetOptions{})
		if err != nil || got.Data["proof"] != "served-by-the-ring" {
			t.Fatalf("read it back through the apiserver: %v %v", got, err)
		}
		// Read it from etcd directly, with the Secret's credentials.
		cli := consumerClient(t, sec.Data, topo.DNSServers)
		rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		resp, err := cli.Get(rctx, "/consumer-a/configmaps/default/"+cm.Name)
		if err != nil {
			t.Fatal(err)
		}
		if len(resp.Kvs) != 1 || !strings.Contains(string(resp.Kvs[0].Value), "served-by-the-ring") {
			t.Fatalf("etcd holds %d keys at /consumer-a/configmaps/default/%s (want the ConfigMap)", len(resp.Kvs), cm.Name)
		}
		t.Logf("the ConfigMap is in the ring at revision %d (%d bytes)", resp.Kvs[0].ModRevision, len(resp.Kvs[0].Value))
	})

	t.Run("a consumer's certificate is refused on every peer port", func(t *testing.T) {
		leaf := &pki.Leaf{CertPEM: sec.Data[etcdfedv1.ClientSecretKeyCert], KeyPEM: sec.Data[etcdfedv1.ClientSecretKeyKey]}
		roots := x509.NewCertPool()
		roots.AppendCertsFromPEM(sec.Data[etcdfedv1.ClientSecretKeyCA])
		for _, m := range ec.Status.Members {
			obj := &etcdfedv1.EtcdMember{}
			if err := memberCluster(t, topo, m.Cluster).Client.Get(ctx, client.ObjectKey{Namespace: etcdfedv1.DefaultRingNamespace, Name: etcdfedv1.MemberObjectName(ec.Namespace, ec.Name, m.Name)}, obj); err != nil {
				t.Fatal(err)
			}
			for _, raw := range []string{obj.Status.ClientURL, obj.Status.PeerURL} {
				u, err := url.Parse(raw)
				if err != nil {
					t.Fatal(err)
				}
				tg := tlsTarget{member: m.Name, host: u.Hostname(), port: u.Port()}
				err = tryTLS(ctx, topo.DNSServers, tg, roots, leaf)
				switch {
				case raw == obj.Status.ClientURL && err != nil:
					t.Errorf("%s client port refuses the consumer: %v", tg, err)
				case raw == obj.Status.PeerURL && err == nil:
					t.Errorf("%s peer port serves /version to the consumer's client certificate", tg)
				case raw == obj.Status.PeerURL:
					t.Logf("%s peer port refuses the consumer: %v", tg, err)
				}
			}
		}
	})

	t.Run("a read-only consumer cannot write", func(t *testing.T) {
		rs, err := WaitForClientSecret(ctx, WaitForClientSecretInput{Cluster: topo.Hub, Namespace: "consumers", Name: "cc-reader-etcd-client"})
		if err != nil {
			t.Fatal(err)
		}
		cli := consumerClient(t, rs.Data, topo.DNSServers)
		rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		if _, err := cli.Get(rctx, "consumers/", clientv3.WithPrefix(), clientv3.WithCountOnly()); err != nil {
			t.Fatalf("the read-only consumer cannot read: %v", err)
		}
		_, err = cli.Put(rctx, "consumers/by-the-reader", "x")
		if err == nil || !strings.Contains(err.Error(), "permission denied") {
			t.Fatalf("the read-only consumer's put: %v, want permission denied", err)
		}
		t.Logf("the read-only consumer's put is refused: %v", err)
	})

	t.Run("a certificate near expiry is renewed", func(t *testing.T) {
		ca, err := pki.ReadCA(ctx, topo.Hub.Client, ec)
		if err != nil {
			t.Fatal(err)
		}
		// Issued 6 days ago for the default 7: a day left, less than the
		// third at which the hub renews.
		short, err := issueAged(ca, "kube-apiserver", 6*24*time.Hour, 24*time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		cur := &corev1.Secret{}
		if err := member.Client.Get(ctx, client.ObjectKey{Namespace: consumerNS, Name: "etcd-client"}, cur); err != nil {
			t.Fatal(err)
		}
		old := cur.DeepCopy()
		cur.Data[etcdfedv1.ClientSecretKeyCert], cur.Data[etcdfedv1.ClientSecretKeyKey] = short.CertPEM, short.KeyPEM
		if err := member.Client.Patch(ctx, cur, client.MergeFrom(old)); err != nil {
			t.Fatal(err)
		}
		// The hub does not watch consumers' Secrets; it reads them on its
		// own schedule (at the earliest renewal, at most every 5 minutes)
		// and on every edit of the EtcdCluster. An edit of an annotation
		// spares the test the 5 minute wait.
		start := time.Now()
		if err := pokeEtcdCluster(ctx, topo.Hub, etcd); err != nil {
			t.Fatal(err)
		}
		renewed, err := WaitForClientSecret(ctx, WaitForClientSecretInput{Cluster: member, Namespace: consumerNS, Name: "etcd-client", Until: func(d map[string][]byte) string {
			na, err := certNotAfter(d[etcdfedv1.ClientSecretKeyCert])
			if err != nil {
				return err.Error()
			}
			if time.Until(na) < 2*24*time.Hour {
				return "still expires at " + na.Format(time.RFC3339)
			}
			return ""
		}})
		if err != nil {
			t.Fatal(err)
		}
		na, _ := certNotAfter(renewed.Data[etcdfedv1.ClientSecretKeyCert])
		t.Logf("renewed %.1fs after the request: now valid until %s", time.Since(start).Seconds(), na.Format(time.RFC3339))
		cli := consumerClient(t, renewed.Data, topo.DNSServers)
		rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		if _, err := cli.Put(rctx, "/consumer-renewed", "ok"); err != nil {
			t.Fatalf("a put with the renewed certificate: %v", err)
		}
	})

	t.Run("a removed client's Secret is deleted, its etcd user too", func(t *testing.T) {
		cfg, err := etcdClientFromSecret(sec.Data, topo.DNSServers)
		if err != nil {
			t.Fatal(err)
		}
		if err := setClients(ctx, topo.Hub, etcd, clients[1:]); err != nil {
			t.Fatal(err)
		}
		// Its certificate, still valid, reads nothing from now on.
		if err := WaitForUserRefused(ctx, cfg, "the removed consumer's", "consumers/", time.Minute); err != nil {
			t.Fatal(err)
		}
		if err := WaitForGone(ctx, member, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: consumerNS, Name: "etcd-client"}}, time.Minute); err != nil {
			t.Fatal(err)
		}
	})
	pctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	if err := w.WaitForProgress(pctx, 20); err != nil {
		t.Fatal(err)
	}
	cancel()
	t.Logf("workload beside the consumers: longest gap between acknowledged writes %s; %s", w.MaxWriteGap().Round(time.Millisecond), elections.FailuresWithinElections(t, w))
	checkWorkload(ctx, t, w)
	DeleteEtcdClusterSpec(ctx, t, topo, etcd)
}
