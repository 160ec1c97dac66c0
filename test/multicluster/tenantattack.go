package multicluster

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/miekg/dns"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdfedv1 "github.com/etcdfed/etcdfed/api/v1alpha1"
	"github.com/etcdfed/etcdfed/dev/s3test"
	"github.com/etcdfed/etcdfed/hub/pki"
	"github.com/etcdfed/etcdfed/pkg/backupstore"
)

// TenantAttackInput is the input of TenantCannotReachAnotherTenantSpec:
// two namespaces of the hub (Victim's and Attacker's, the attacker a
// tenant with create rights on EtcdClusters and Secrets in its own
// namespace only) and a store both use.
type TenantAttackInput struct {
	T        *testing.T
	Topology *Topology
	// Victim and Attacker are the two tenants' namespaces; Other a third
	// namespace the hub's domain policy leaves free (any domain).
	Victim, Attacker, Other string
	// S3 and Bucket: the store the victim backs up to, which the attacker
	// can reach with credentials of its own (a company's shared bucket).
	S3     *s3test.Server
	Bucket string
}

// tenantDomains are the domains the scenario gives each tenant
// (--allowed-domains), under one shared parent.
const tenantParent = "tenants.test"

// TenantCannotReachAnotherTenantSpec runs the hub with the tenancy policy
// a shared hub runs with (no ambient store credentials, a domain per
// namespace, no shared CA) and forms two rings in two namespaces: the
// victim's, on a CA of its own (spec.tls.caSecretName), backed up to a
// real S3 store under a recorded workload, and the attacker's. The
// attacker then tries each path of issue 37 in turn against the victim:
//
//   - the hub's cloud identity by another route: a backup store with a
//     credentials Secret lacking the store's keys, one with none, a file://
//     store, an s3.endpoint at the cloud metadata address, an Azure account
//     name that points at another host;
//   - the victim's data through a restore: the victim's snapshot named by
//     its object key (no sourceCluster), by sourceCluster, and copied
//     under the attacker's own key (its sidecar still names the victim);
//   - the victim's names: its domain, its parent, the shared parent, a
//     domain outside the attacker's allowance, a single-label domain (the
//     CRD), and from a namespace the policy leaves free, the victim's
//     parent (overlap);
//   - the victim's trust: a ring on a copy of the victim's CA;
//   - a member cluster's word on Pending (a compromised member cluster
//     hosting the attacker's members): Pending forged on the victim's
//     member it hosts while that member is a ready voter, and an
//     EtcdMember for a victim member it does not host, reporting
//     Pending, both held past the member grace;
//   - the hub's credentials, as a namespace-scoped tenant (an identity
//     with rights on EtcdClusters and Secrets in its namespace only): the
//     hub's tokens for the member clusters, the hub's client certificate
//     on the victim's ring, a token of the hub's ServiceAccount, and the
//     hub made to write a Secret over them (spec.clients) or to issue a
//     certificate of the hub's etcd user.
//
// Each is refused with its condition's reason and a message naming what
// was refused, and writes nothing in any member cluster. Through all of
// it the victim's ring keeps its members (the same pods, never
// restarted), its data (a key written before, read after) and its
// recorded workload (linearizable, nothing acknowledged lost, watches
// complete). The hub runs with its own flags again at the end.
func TenantCannotReachAnotherTenantSpec(ctx context.Context, in TenantAttackInput) {
	t := in.T
	t.Helper()
	topo := in.Topology
	hub := topo.Hub
	must := fatalOnError(t)
	if topo.RestartHubWith == nil {
		t.Skip("the topology cannot restart the hub with other flags")
	}
	victimDomain := "main." + in.Victim + "." + tenantParent
	attackerDomain := "main." + in.Attacker + "." + tenantParent
	must(topo.RestartHubWith(ctx, []string{"--allow-ambient-store-credentials"},
		"--allowed-domains="+in.Victim+"="+in.Victim+"."+tenantParent+","+in.Attacker+"="+in.Attacker+"."+tenantParent+",*=*"))
	t.Cleanup(func() {
		if err := topo.RestartHubWith(context.Background(), nil); err != nil {
			t.Errorf("the hub with its own flags again: %v", err)
		}
	})
	t.Logf("hub restarted without --allow-ambient-store-credentials, with --allowed-domains for %s and %s", in.Victim, in.Attacker)

	// The victim: a ring on its own CA, backed up, under a workload.
	ca, err := pki.NewCA("victim-ca", time.Now())
	must(err)
	caData := map[string][]byte{pki.KeyCert: ca.CertPEM, pki.KeyKey: ca.KeyPEM}
	must(ensureNamespace(ctx, hub, in.Victim))
	must(createSecret(ctx, hub, in.Victim, "victim-ca", caData))
	victim := EtcdClusterSpec(ctx, EtcdClusterSpecInput{T: t, Topology: topo, Namespace: in.Victim, Name: "main", Domain: victimDomain, Replicas: 3, WantZones: "1/1/1",
		Spec: func(s *etcdfedv1.EtcdClusterSpec) { s.TLS.CASecretName = "victim-ca" }})
	vec, err := victim.Get(ctx, hub)
	must(err)
	if vec.Status.CAFingerprint == "" {
		t.Fatalf("%s/%s recorded no status.caFingerprint for its own CA", in.Victim, victim.Name)
	}
	vpods, err := RingPods(ctx, topo, string(vec.UID))
	must(err)
	vmembers := memberNames(vec)
	vc, err := EtcdClient(victim.Client)
	must(err)
	defer vc.Close()
	pctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	_, err = vc.Put(pctx, "victim-secret", "only "+in.Victim+" reads this")
	cancel()
	must(err)
	w := StartWorkload(ctx, t, StartWorkloadInput{Client: victim.Client, Prefix: "victim/", WatchEachEndpoint: true})
	waitForWorkloadProgress(ctx, t, w)
	store := storeWithCredentials(ctx, t, hub, in.S3, in.Bucket, in.Victim)
	snap := backupOnce(ctx, t, hub, victim, store, nil)
	key := strings.TrimPrefix(snap.Location, "s3://"+in.Bucket+"/hub/")
	t.Logf("%s/%s formed on its own CA, backed up to %s", in.Victim, victim.Name, snap.Location)

	// The attacker's own ring.
	attacker := EtcdClusterSpec(ctx, EtcdClusterSpecInput{T: t, Topology: topo, Namespace: in.Attacker, Name: "main", Domain: attackerDomain, Replicas: 3, WantZones: "1/1/1"})
	// The attacker's Secrets: one with working credentials for the shared
	// bucket (its own), and ones lacking the store's keys.
	must(createSecret(ctx, hub, in.Attacker, "own-credentials", in.S3.Credentials()))
	must(createSecret(ctx, hub, in.Attacker, "no-keys", map[string][]byte{"region": []byte("us-east-1")}))
	must(createSecret(ctx, hub, in.Attacker, "foreign-account", map[string][]byte{
		etcdfedv1.BackupSecretAzureAccount: []byte("attacker.example/"), etcdfedv1.BackupSecretAzureKey: []byte("a2V5")}))

	t.Run("the hub's cloud identity by another route", func(t *testing.T) {
		s3store := func(secret string) etcdfedv1.BackupStore { return in.S3.Store(in.Bucket, in.Attacker, secret) }
		metadata := s3store("own-credentials")
		metadata.S3.Endpoint = "http://169.254.169.254"
		cases := []struct {
			what   string
			store  etcdfedv1.BackupStore
			reason string
			says   string
		}{
			{"a credentials Secret without the store's keys", s3store("no-keys"), etcdfedv1.BackupReasonCredentials, etcdfedv1.BackupSecretAWSAccessKeyID},
			{"no credentials Secret (the hub's own identity)", s3store(""), etcdfedv1.BackupReasonForbidden, "has no credentialsSecretName"},
			{"a file:// store (the hub's filesystem)", etcdfedv1.BackupStore{URL: "file:///etc"}, etcdfedv1.BackupReasonForbidden, "file:///etc"},
			{"an s3.endpoint at the cloud metadata address", metadata, etcdfedv1.BackupReasonInvalidSpec, "169.254.169.254"},
			{"an Azure account name pointing at another host", etcdfedv1.BackupStore{URL: "azblob://backups", CredentialsSecretName: "foreign-account"}, etcdfedv1.BackupReasonCredentials, "attacker.example/"},
		}
		for i, c := range cases {
			f := requestBackupRefused(ctx, t, hub, attacker, c.store, fmt.Sprintf("attack-%d", i), c.reason, c.says)
			if f != "" {
				t.Logf("%s: refused: %s", c.what, f)
			}
		}
	})

	t.Run("the victim's snapshot restored into the attacker's namespace", func(t *testing.T) {
		must := fatalOnError(t)
		own := in.S3.Store(in.Bucket, "hub", "own-credentials")
		// The victim's snapshot copied under the attacker's own key: the
		// key names the attacker, the sidecar still names the victim.
		copyKey := in.Attacker + "/thief/" + strings.TrimPrefix(key, in.Victim+"/"+victim.Name+"/")
		copyObject(ctx, t, in.S3, in.Bucket, "hub/"+key, "hub/"+copyKey)
		cases := []struct {
			what string
			src  etcdfedv1.SnapshotSource
			says string
		}{
			{"by its object key, no sourceCluster", etcdfedv1.SnapshotSource{Store: own, Object: key}, key},
			{"by sourceCluster", etcdfedv1.SnapshotSource{Store: own, Object: etcdfedv1.SnapshotLatest, SourceCluster: in.Victim + "/" + victim.Name}, in.Victim + "/" + victim.Name},
			{"copied under the attacker's own key", etcdfedv1.SnapshotSource{Store: own, Object: copyKey}, in.Victim + "/" + victim.Name},
		}
		for i, c := range cases {
			thief := &etcdfedv1.EtcdCluster{
				ObjectMeta: metav1.ObjectMeta{Namespace: in.Attacker, Name: fmt.Sprintf("thief-%d", i)},
				Spec: etcdfedv1.EtcdClusterSpec{Replicas: 3, Version: "3.6.16", DNS: etcdfedv1.DNSSpec{Domain: fmt.Sprintf("thief-%d.%s.%s", i, in.Attacker, tenantParent)},
					TLS:       etcdfedv1.TLSSpec{PeerSkipClientSANVerification: !topo.PeerSourceIsPodIP},
					Bootstrap: &etcdfedv1.ClusterBootstrap{FromSnapshot: &c.src}},
			}
			must(hub.Client.Create(ctx, thief))
			m := &ManagedEtcd{Namespace: thief.Namespace, Name: thief.Name}
			cond, err := WaitForSnapshotRefused(ctx, hub, m, etcdfedv1.SnapshotReasonForbidden, 2*time.Minute)
			if err != nil {
				t.Errorf("%s: %v", c.what, err)
			} else if !strings.Contains(cond.Message, c.says) {
				t.Errorf("%s: refused with %q, which does not name %s", c.what, cond.Message, c.says)
			} else {
				t.Logf("%s: refused: %s", c.what, cond.Message)
			}
			must(hub.Client.Get(ctx, client.ObjectKeyFromObject(thief), thief))
			nothingWritten(ctx, t, topo, thief)
			must(hub.Client.Delete(ctx, thief))
			must(WaitForGone(ctx, hub, thief, 2*time.Minute))
		}
	})

	t.Run("the victim's names", func(t *testing.T) {
		must := fatalOnError(t)
		// The CRD refuses a single-label domain before the hub sees it.
		single := squatter(in.Attacker, "tld", "test", topo)
		if err := hub.Client.Create(ctx, single); err == nil || !strings.Contains(err.Error(), "at least two labels") {
			t.Errorf("a single-label domain: created (%v), want the CRD's refusal", err)
			_ = hub.Client.Delete(ctx, single)
		} else {
			t.Logf("single-label domain refused at admission: %v", err)
		}
		cases := []struct {
			what, ns, name, domain, reason, says string
		}{
			{"the victim's domain", in.Attacker, "same", victimDomain, etcdfedv1.ReasonPolicyViolation, "--allowed-domains"},
			{"the victim's parent domain", in.Attacker, "parent", in.Victim + "." + tenantParent, etcdfedv1.ReasonPolicyViolation, "--allowed-domains"},
			{"the tenants' shared parent", in.Attacker, "shared", tenantParent, etcdfedv1.ReasonPolicyViolation, "--allowed-domains"},
			{"the victim's parent, from a namespace free to use any domain", in.Other, "parent", in.Victim + "." + tenantParent, etcdfedv1.ReasonDomainInUse, in.Victim + "/" + victim.Name},
		}
		for _, c := range cases {
			must(ensureNamespace(ctx, hub, c.ns))
			sq := squatter(c.ns, c.name, c.domain, topo)
			must(hub.Client.Create(ctx, sq))
			msg, err := waitForRefused(ctx, hub, sq, c.reason, c.says)
			if err != nil {
				t.Errorf("%s: %v", c.what, err)
			} else {
				t.Logf("%s (%s from %s): refused: %s", c.what, c.domain, c.ns, msg)
			}
			must(hub.Client.Get(ctx, client.ObjectKeyFromObject(sq), sq))
			nothingWritten(ctx, t, topo, sq)
			must(hub.Client.Delete(ctx, sq))
			must(WaitForGone(ctx, hub, sq, 2*time.Minute))
		}
	})

	t.Run("the victim's trust: a ring on a copy of its CA", func(t *testing.T) {
		must := fatalOnError(t)
		must(createSecret(ctx, hub, in.Attacker, "copied-ca", caData))
		sq := squatter(in.Attacker, "copyca", "copyca."+in.Attacker+"."+tenantParent, topo)
		sq.Spec.TLS.CASecretName = "copied-ca"
		must(hub.Client.Create(ctx, sq))
		msg, err := waitForRefused(ctx, hub, sq, etcdfedv1.ReasonPolicyViolation, in.Victim+"/"+victim.Name)
		if err != nil {
			t.Error(err)
		} else {
			t.Logf("refused: %s", msg)
		}
		must(hub.Client.Get(ctx, client.ObjectKeyFromObject(sq), sq))
		nothingWritten(ctx, t, topo, sq)
		// Nor did the hub issue its own client certificate from the copy.
		var secrets corev1.SecretList
		must(hub.Client.List(ctx, &secrets, client.InNamespace(in.Attacker)))
		for _, s := range secrets.Items {
			if strings.HasPrefix(s.Name, sq.Name+"-") {
				t.Errorf("Secret %s/%s written for the refused ring", s.Namespace, s.Name)
			}
		}
		must(hub.Client.Delete(ctx, sq))
		must(WaitForGone(ctx, hub, sq, 2*time.Minute))
	})

	t.Run("a member cluster's Pending reports", func(t *testing.T) {
		forgedPending(ctx, t, topo, victim)
	})

	t.Run("the hub's credentials", func(t *testing.T) {
		tenantTriesHubCredentials(ctx, t, topo, in.Attacker, in.Victim, victim.Name, attacker.Name)
	})

	t.Run("the hub's backup workers", func(t *testing.T) {
		must := fatalOnError(t)
		// Two rings of the attacker back up to a store that holds every
		// upload: they hold one of the hub's two backup workers (one
		// backup per namespace), and the victim's backup still runs.
		small := EtcdClusterSpec(ctx, EtcdClusterSpecInput{T: t, Topology: topo, Namespace: in.Attacker, Name: "small", Domain: "small." + in.Attacker + "." + tenantParent, Replicas: 1, NotTolerant: true})
		defer DeleteEtcdClusterSpec(ctx, t, topo, small)
		endpoint, stalled := holdingStore(t, in.S3)
		slow := in.S3.Store(in.Bucket, in.Attacker, "own-credentials")
		slow.S3.Endpoint = endpoint
		for _, m := range []*ManagedEtcd{attacker, small} {
			must(setBackup(ctx, hub, m, slow, "slow-"+m.Name))
		}
		must(poll(ctx, time.Minute, "the attacker's uploads held", func(context.Context) (string, error) {
			if n := stalled.Load(); n < 1 {
				return fmt.Sprintf("%d uploads held", n), nil
			}
			return "", nil
		}))
		token := fmt.Sprintf("victim-%d", time.Now().UnixNano())
		must(requestBackup(ctx, hub, victim, token))
		start := time.Now()
		must(WaitForStatus(ctx, WaitForStatusInput{Hub: hub, Etcd: victim, What: "the victim's backup " + token + " stored while the attacker's store holds its uploads", Until: func(ec *etcdfedv1.EtcdCluster) string {
			b := ec.Status.Backup
			if b == nil || b.LastRequest != token || b.LastSuccess == nil || b.LastSuccess.Request != token {
				return fmt.Sprintf("backup status %+v", b)
			}
			return ""
		}}))
		if n := stalled.Load(); n != 1 {
			t.Errorf("%d of the attacker's uploads held at once, want 1 (one backup per namespace)", n)
		}
		t.Logf("the victim's backup stored %.1fs after its request, while the attacker's store held %d upload", time.Since(start).Seconds(), stalled.Load())

		// Its one member's cluster alone serves the small ring's zone:
		// the other clusters' spokes refuse its names.
		ec, err := small.Get(ctx, hub)
		must(err)
		host := ec.Status.Members[0].Cluster
		name := dns.Fqdn(MemberHost(ec.Status.Members[0].Name, small.Domain))
		for _, c := range topo.Members {
			var zones etcdfedv1.EtcdDNSZoneList
			must(c.Client.List(ctx, &zones, client.InNamespace(etcdfedv1.DefaultRingNamespace), client.MatchingLabels{etcdfedv1.LabelClusterUID: string(ec.UID)}))
			_, lerr := lookup(ctx, topo.DNSServerOf[c.Name], name, dns.TypeA)
			switch {
			case c.Name == host && (len(zones.Items) != 1 || lerr != nil):
				t.Errorf("%s hosts %s/%s's member: %d zones, lookup of %s: %v", c.Name, small.Namespace, small.Name, len(zones.Items), name, lerr)
			case c.Name != host && (len(zones.Items) != 0 || !errors.Is(lerr, errRefused)):
				t.Errorf("%s hosts none of %s/%s's members: %d zones, lookup of %s: %v, want none and REFUSED", c.Name, small.Namespace, small.Name, len(zones.Items), name, lerr)
			}
		}
		t.Logf("%s/%s's zone is served by %s alone", small.Namespace, small.Name, host)
	})

	// The victim is untouched: the same members and pods, its data, its
	// workload.
	got, err := WaitForEtcdClusterReady(ctx, WaitForEtcdClusterInput{Hub: hub, Namespace: in.Victim, Name: victim.Name, Replicas: 3, Tolerant: true})
	must(err)
	if now := memberNames(got); !slices.Equal(now, vmembers) {
		t.Errorf("%s/%s's members %v, were %v", in.Victim, victim.Name, now, vmembers)
	}
	after, err := RingPods(ctx, topo, string(vec.UID))
	must(err)
	samePods(t, in.Victim+"/"+victim.Name+" through the attacks", vpods, after)
	pctx, cancel = context.WithTimeout(ctx, 10*time.Second)
	resp, err := vc.Get(pctx, "victim-secret")
	cancel()
	if err != nil || len(resp.Kvs) != 1 || string(resp.Kvs[0].Value) != "only "+in.Victim+" reads this" {
		t.Errorf("%s/%s reads victim-secret as %v (%v)", in.Victim, victim.Name, resp, err)
	}
	checkWorkload(ctx, t, w)
	if c := meta.FindStatusCondition(got.Status.Conditions, etcdfedv1.ConditionBackupHealthy); c == nil || c.Status != metav1.ConditionTrue {
		t.Errorf("%s/%s BackupHealthy %+v, want True", in.Victim, victim.Name, c)
	}
	t.Logf("%s/%s untouched: members %v, %d pods the same, its data and workload intact", in.Victim, victim.Name, vmembers, len(vpods))
	DeleteEtcdClusterSpec(ctx, t, topo, attacker)
	DeleteEtcdClusterSpec(ctx, t, topo, victim)
}

// requestBackupRefused sets m's backup store and asks for one backup
// (token), and waits until the hub records it failed with reason and a
// message that says says; it returns the message ("" after an error).
func requestBackupRefused(ctx context.Context, t testing.TB, hub *Cluster, m *ManagedEtcd, store etcdfedv1.BackupStore, token, reason, says string) string {
	t.Helper()
	ec, err := m.Get(ctx, hub)
	if err != nil {
		t.Fatal(err)
	}
	before := ec.DeepCopy()
	ec.Spec.Backup = &etcdfedv1.BackupSpec{Schedule: "0 0 1 1 *", Store: store}
	if ec.Annotations == nil {
		ec.Annotations = map[string]string{}
	}
	ec.Annotations[etcdfedv1.AnnotationBackupRequested] = token
	if err := hub.Client.Patch(ctx, ec, client.MergeFrom(before)); err != nil {
		t.Fatalf("store %s: %v", store.URL, err)
	}
	gen := ec.Generation
	var msg string
	// A store the policy refuses is refused before any request is taken
	// (the request waits for a spec that complies); one it allows is
	// tried, and fails, for the request.
	err = WaitForStatus(ctx, WaitForStatusInput{Hub: hub, Etcd: m, What: "backup " + token + " refused (" + reason + ")", Until: func(ec *etcdfedv1.EtcdCluster) string {
		c := meta.FindStatusCondition(ec.Status.Conditions, etcdfedv1.ConditionBackupHealthy)
		if c == nil || c.ObservedGeneration < gen || c.Status != metav1.ConditionFalse || c.Reason != reason || !strings.Contains(c.Message, says) {
			return fmt.Sprintf("BackupHealthy %+v", c)
		}
		if reason != etcdfedv1.BackupReasonForbidden && (ec.Status.Backup == nil || ec.Status.Backup.LastRequest != token) {
			return "request " + token + " not taken yet"
		}
		msg = c.Message
		return ""
	}})
	if err != nil {
		t.Error(err)
		return ""
	}
	return msg
}

// waitForRefused waits until ec says Available=False, Progressing=False
// and Degraded=True with reason and a message that says says.
func waitForRefused(ctx context.Context, hub *Cluster, ec *etcdfedv1.EtcdCluster, reason, says string) (string, error) {
	var msg string
	err := WaitForStatus(ctx, WaitForStatusInput{Hub: hub, Etcd: &ManagedEtcd{Namespace: ec.Namespace, Name: ec.Name}, What: "refused (" + reason + ")", Timeout: time.Minute, Until: func(got *etcdfedv1.EtcdCluster) string {
		for _, typ := range []string{etcdfedv1.ConditionAvailable, etcdfedv1.ConditionProgressing, etcdfedv1.ConditionDegraded} {
			c := meta.FindStatusCondition(got.Status.Conditions, typ)
			if c == nil || c.Reason != reason || !strings.Contains(c.Message, says) {
				return fmt.Sprintf("%s: %+v", typ, c)
			}
			if want := metav1.ConditionStatus(map[bool]string{true: "True", false: "False"}[typ == etcdfedv1.ConditionDegraded]); c.Status != want {
				return fmt.Sprintf("%s %s, want %s", typ, c.Status, want)
			}
			msg = c.Message
		}
		return ""
	}})
	return msg, err
}

// nothingWritten fails t when a member cluster holds an EtcdMember, an
// EtcdDNSZone or a Secret of ec, or ec recorded members.
func nothingWritten(ctx context.Context, t testing.TB, topo *Topology, ec *etcdfedv1.EtcdCluster) {
	t.Helper()
	if len(ec.Status.Members) > 0 || ec.Status.ClusterID != "" {
		t.Errorf("%s/%s recorded members %v, cluster ID %q", ec.Namespace, ec.Name, ec.Status.Members, ec.Status.ClusterID)
	}
	for _, c := range topo.Members {
		for _, list := range []client.ObjectList{&etcdfedv1.EtcdMemberList{}, &etcdfedv1.EtcdDNSZoneList{}, &corev1.SecretList{}} {
			if err := c.Client.List(ctx, list, client.InNamespace(etcdfedv1.DefaultRingNamespace), client.MatchingLabels{etcdfedv1.LabelClusterUID: string(ec.UID)}); err != nil {
				t.Fatal(err)
			}
			if n := meta.LenList(list); n > 0 {
				t.Errorf("%d %T written in %s for %s/%s", n, list, c.Name, ec.Namespace, ec.Name)
			}
		}
	}
}

// squatter is an EtcdCluster of namespace ns asking for domain.
func squatter(ns, name, domain string, topo *Topology) *etcdfedv1.EtcdCluster {
	return &etcdfedv1.EtcdCluster{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: etcdfedv1.EtcdClusterSpec{Replicas: 3, Version: "3.6.16", DNS: etcdfedv1.DNSSpec{Domain: domain, TTLSeconds: ptrTo[int32](5)},
			TLS: etcdfedv1.TLSSpec{PeerSkipClientSANVerification: !topo.PeerSourceIsPodIP}},
	}
}

// memberNames are ec's members as cluster/name@id, sorted.
func memberNames(ec *etcdfedv1.EtcdCluster) []string {
	var out []string
	for _, m := range ec.Status.Members {
		out = append(out, m.Cluster+"/"+m.Name+"@"+m.ID)
	}
	slices.Sort(out)
	return out
}

func createSecret(ctx context.Context, c *Cluster, ns, name string, data map[string][]byte) error {
	s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Data: data}
	if err := c.Client.Create(ctx, s); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("create Secret %s/%s: %w", ns, name, err)
	}
	return nil
}

// copyObject copies the object src and its sidecar to dst, through the
// S3 API, unchanged.
func copyObject(ctx context.Context, t testing.TB, srv *s3test.Server, bucket, src, dst string) {
	t.Helper()
	c := srv.Client()
	for _, k := range []struct{ from, to string }{{src, dst}, {backupstore.MetadataKey(src), backupstore.MetadataKey(dst)}} {
		out, err := c.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(bucket), Key: aws.String(k.from)})
		if err != nil {
			t.Fatalf("get %s: %v", k.from, err)
		}
		var buf bytes.Buffer
		_, err = buf.ReadFrom(out.Body)
		_ = out.Body.Close()
		if err != nil {
			t.Fatal(err)
		}
		if _, err := c.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String(bucket), Key: aws.String(k.to), Body: bytes.NewReader(buf.Bytes())}); err != nil {
			t.Fatalf("put %s: %v", k.to, err)
		}
	}
}

// holdingStore is srv behind a proxy that passes reads and holds every
// upload until the test ends, counting those it holds: a tenant's store
// that answers its check and then is slow.
func holdingStore(t testing.TB, srv *s3test.Server) (endpoint string, held *atomic.Int32) {
	t.Helper()
	target, err := url.Parse(srv.Endpoint)
	if err != nil {
		t.Fatal(err)
	}
	proxy := httputil.NewSingleHostReverseProxy(target)
	release := make(chan struct{})
	held = &atomic.Int32{}
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPut || r.Method == http.MethodPost {
			held.Add(1)
			defer held.Add(-1)
			select {
			case <-release:
			case <-r.Context().Done():
			}
			http.Error(w, "slow store", http.StatusServiceUnavailable)
			return
		}
		proxy.ServeHTTP(w, r)
	}))
	t.Cleanup(func() { close(release); hs.Close() })
	return hs.URL, held
}

// setBackup turns m's backups on into store (a yearly schedule: the first
// backup at once), with token as a backup request.
func setBackup(ctx context.Context, hub *Cluster, m *ManagedEtcd, store etcdfedv1.BackupStore, token string) error {
	ec, err := m.Get(ctx, hub)
	if err != nil {
		return err
	}
	before := ec.DeepCopy()
	ec.Spec.Backup = &etcdfedv1.BackupSpec{Schedule: "0 0 1 1 *", Store: store}
	if ec.Annotations == nil {
		ec.Annotations = map[string]string{}
	}
	ec.Annotations[etcdfedv1.AnnotationBackupRequested] = token
	return hub.Client.Patch(ctx, ec, client.MergeFrom(before))
}
