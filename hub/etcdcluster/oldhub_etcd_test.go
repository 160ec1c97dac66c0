package etcdcluster

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdfedv1 "github.com/etcdfed/etcdfed/api/v1alpha1"
	"github.com/etcdfed/etcdfed/dev/etcdtest"
	"github.com/etcdfed/etcdfed/dev/testenv"
	"github.com/etcdfed/etcdfed/hub/pki"
)

// TestTakeOverRevokesTheOldHubsCurrentCertificate: a hub issues its client
// certificate and signs the ring's list, through a real apiserver that is
// its hub cluster and the member clusters, and a real etcd running with
// --client-crl-file serves that certificate. Then the hub cluster is lost
// (the hub client Secret gone; the CA comes back from the escrow) and a
// rebuilt hub takes the ring over. Its first list, written where etcd
// reads it, refuses the old hub's current certificate (a copy of the lost
// cluster's Secrets is root no more), while its own certificate and
// another certificate of the CA are served; after a restart of the new
// hub it is still listed. Before, the old hub's current certificate was in
// no list and no record the new hub could read: it stayed root on the ring
// until it expired, up to 7 days after the take-over.
func TestTakeOverRevokesTheOldHubsCurrentCertificate(t *testing.T) {
	testenv.SkipIfShort(t, "a kube-apiserver and an etcd process")
	ctx := context.Background()
	start := time.Now()
	ca, crl, writeCRL := ringCAWithList(t, start)
	etcd := etcdtest.Start(t, etcdtest.Options{Members: 1, CA: ca, ExtraArgs: []string{"--client-crl-file=" + crl}})
	addr := strings.TrimPrefix(etcd.Members[0].ClientURL, "https://")

	// The old hub (the EtcdCluster uid-1 that founded the ring). The
	// apiserver is its hub cluster and every member cluster: the member
	// Secrets live in the ring namespace, the hub's in default.
	api, r, s := tlsRing(t, start)
	if err := api.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: s.ringNamespace}}); err != nil {
		t.Fatal(err)
	}
	for _, m := range s.ec.Status.Members {
		cs := s.cluster(m.Cluster)
		cs.client = api.Client
		issueMemberCert(t, s, ca, m.Cluster, m.Name, start.Add(-20*24*time.Hour))
		if err := api.Client.Create(ctx, cs.secrets[pki.MemberSecretName(cs.members[m.Name].Name)]); err != nil {
			t.Fatal(err)
		}
	}
	if err := api.Client.Create(ctx, caSecretOf(s, ca)); err != nil {
		t.Fatal(err)
	}
	observe := func() {
		t.Helper()
		var err error
		if s.pki, err = r.observePKI(ctx, s.ec); err != nil {
			t.Fatal(err)
		}
		for _, cs := range s.clusters {
			for name := range cs.secrets {
				sec := &corev1.Secret{}
				if err := api.Client.Get(ctx, client.ObjectKey{Namespace: s.ringNamespace, Name: name}, sec); err != nil {
					t.Fatal(err)
				}
				cs.secrets[name] = sec
			}
		}
	}
	// pass is one pass of a hub's PKI: its client certificate when due,
	// the ring's list written into the members' Secrets and where etcd
	// reads it.
	pass := func(who string) []byte {
		t.Helper()
		observe()
		if _, err := r.applyPKI(ctx, s, pkiDue(s)); err != nil {
			t.Fatalf("%s: %v", who, err)
		}
		observe()
		list, err := r.applyCRL(s, decideCRL(s), nil)
		if err != nil || list == nil {
			t.Fatalf("%s: no list signed (%v)", who, err)
		}
		if err := r.writeCRLs(ctx, s, list, nil); err != nil {
			t.Fatalf("%s: %v", who, err)
		}
		writeCRL(list)
		return list
	}
	pass("the old hub")
	oldHub := s.pki.hubClientLeaf()
	if oldHub == nil {
		t.Fatal("the old hub issued no client certificate")
	}
	if err := etcdtest.GetAs(ca, oldHub, addr, "/health"); err != nil {
		t.Fatalf("the old hub's certificate under its own list: %v", err)
	}

	// The hub cluster is lost: its hub client Secret with it. The new
	// hub: the same manifest as a new EtcdCluster (uid-2), the ring
	// recorded as taken over (uid-1), the escrowed CA imported.
	if err := api.Client.Delete(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: s.ec.Namespace, Name: pki.HubClientSecretName(s.ec)}}); err != nil {
		t.Fatal(err)
	}
	later := start.Add(time.Minute) // within the backdating of a new certificate: etcd checks it against its own clock
	r = &Reconciler{Manager: r.Manager, Now: func() time.Time { return later }}
	s.now = later
	s.ec.UID = "uid-2"
	s.ec.Status.TakeOver = &etcdfedv1.TakeOverStatus{Phase: etcdfedv1.TakeOverTakingOver, RingUID: "uid-1"}
	list := pass("the new hub")
	fresh := s.pki.hubClientLeaf()
	if fresh == nil || pki.Equal(fresh.CertPEM, oldHub.CertPEM) {
		t.Fatal("the new hub did not issue its own client certificate")
	}
	l, err := pki.ParseRevocationList(list)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(pki.ListedSerials(l), serialOf(t, oldHub)) {
		t.Errorf("the new hub's first list names %v; want the old hub's current certificate %s among them", pki.ListedSerials(l), serialOf(t, oldHub))
	}
	if err := etcdtest.GetAs(ca, oldHub, addr, "/health"); err == nil {
		t.Error("the old hub's current certificate is still served after the take-over")
	} else {
		t.Logf("the old hub's current certificate after the take-over: %v", err)
	}
	for name, leaf := range map[string]*pki.Leaf{"the new hub's certificate": fresh, "another certificate of the CA": etcd.Client} {
		if err := etcdtest.GetAs(ca, leaf, addr, "/health"); err != nil {
			t.Errorf("%s after the take-over: %v", name, err)
		}
	}

	// A restart of the new hub: the carried record in its own Secret
	// still names the old hub's certificate, whatever the members hold.
	r = &Reconciler{Manager: r.Manager, Now: func() time.Time { return later.Add(time.Hour) }}
	s.now = later.Add(time.Hour)
	observe()
	if got := decideCRL(s).want; !slices.Contains(got, serialOf(t, oldHub)) || slices.Contains(got, serialOf(t, fresh)) {
		t.Errorf("after a restart the new hub lists %v; want the old hub's %s and not its own %s", got, serialOf(t, oldHub), serialOf(t, fresh))
	}
}
