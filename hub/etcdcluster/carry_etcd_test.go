package etcdcluster

import (
	"context"
	"math/big"
	"slices"
	"strings"
	"testing"
	"time"

	etcdfedv1 "github.com/etcdfed/etcdfed/api/v1alpha1"
	"github.com/etcdfed/etcdfed/dev/etcdtest"
	"github.com/etcdfed/etcdfed/dev/testenv"
	"github.com/etcdfed/etcdfed/hub/pki"
)

// TestTakeOverKeepsTheOldHubsRevocations: a hub rebuilt in a new hub
// cluster takes a running ring over (the escrowed CA imported, no hub
// client Secret: the old hub's records of the certificates it superseded
// were lost with its cluster). The list the members hold, signed by the
// old hub, names a hub client certificate and a member certificate the
// old hub superseded. The new hub's first list, through a real hub
// apiserver and written where a real etcd running with --client-crl-file
// reads it, still names both: a stolen copy of either stays refused,
// while the new hub's certificate and another certificate of the CA are
// served. A member cluster holding a list signed by another CA, with a
// higher number, naming a live certificate, changes nothing. After a
// restart of the hub, with every member's list replaced by an older
// genuine list that names nothing (a compromised member cluster
// replaying it), the hub still lists both: the entries are recorded in
// its own Secret. Before, the first list named spec.tls.revokedCertificates
// alone, and both old certificates were valid again (docs said: rotate
// the CA after a take-over).
func TestTakeOverKeepsTheOldHubsRevocations(t *testing.T) {
	testenv.SkipIfShort(t, "a kube-apiserver and an etcd process")
	ctx := context.Background()
	start := time.Now()
	ca, err := pki.NewCA("ring", start.Add(-30*24*time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	// What the old hub superseded, and the list it signed naming them.
	oldHub, err := ca.IssueClient(etcdfedv1.EtcdHubUser, start.Add(-2*24*time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	oldMember, err := ca.IssueMember(pki.MemberRequest{Member: "main-0", DNSNames: []string{"main-0.main.etcd.test"}}, start.Add(-10*24*time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	oldList, err := ca.RevocationList([]*big.Int{serialNumber(t, oldHub), serialNumber(t, oldMember)}, 7, start.Add(-time.Hour), pki.RevocationListValidity)
	if err != nil {
		t.Fatal(err)
	}
	crl, writeCRL := crlFile(t, oldList)
	etcd := etcdtest.Start(t, etcdtest.Options{Members: 1, CA: ca, ExtraArgs: []string{"--client-crl-file=" + crl}})
	addr := strings.TrimPrefix(etcd.Members[0].ClientURL, "https://")
	for name, l := range map[string]*pki.Leaf{"the old hub's superseded certificate": oldHub, "the superseded member certificate": oldMember} {
		if err := etcdtest.GetAs(ca, l, addr, "/health"); err == nil {
			t.Fatalf("%s is served under the old hub's list", name)
		}
	}

	// The new hub: the same manifest as a new EtcdCluster (uid-2), the
	// ring recorded as taken over (uid-1), the escrowed CA imported.
	api, r, s := tlsRing(t, start)
	s.ec.UID = "uid-2"
	s.ec.Status.TakeOver = &etcdfedv1.TakeOverStatus{Phase: etcdfedv1.TakeOverTakingOver, RingUID: "uid-1"}
	for _, m := range s.ec.Status.Members {
		issueMemberCert(t, s, ca, m.Cluster, m.Name, start)
	}
	// Every member holds the old hub's list, but member-3's: a list of
	// another CA, numbered higher, naming a live certificate of the ring.
	foreign, err := pki.NewCA("ring", start.Add(-time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	forged, err := foreign.RevocationList([]*big.Int{serialNumber(t, etcd.Client)}, 99, start, pki.RevocationListValidity)
	if err != nil {
		t.Fatal(err)
	}
	for _, cs := range s.clusters {
		for _, sec := range cs.secrets {
			sec.Data[etcdfedv1.RevocationListKey] = oldList
			if cs.name == "member-3" {
				sec.Data[etcdfedv1.RevocationListKey] = forged
			}
		}
	}
	if err := api.Client.Create(ctx, caSecretOf(s, ca)); err != nil {
		t.Fatal(err)
	}
	observe := func() {
		t.Helper()
		if s.pki, err = r.observePKI(ctx, s.ec); err != nil {
			t.Fatal(err)
		}
	}
	observe()

	// The first pass after the take-over: the hub issues its client
	// certificate, and signs its first list.
	w := pkiDue(s)
	if !w.issueHubClient {
		t.Fatal("a hub that took a ring over does not issue its client certificate")
	}
	if _, err := r.applyPKI(ctx, s, w); err != nil {
		t.Fatal(err)
	}
	observe()
	fresh := s.pki.hubClientLeaf()
	if fresh == nil {
		t.Fatal("no hub client certificate after the take-over")
	}
	list, err := r.applyCRL(s, decideCRL(s), nil)
	if err != nil {
		t.Fatal(err)
	}
	if list == nil {
		t.Fatal("no list signed after the take-over")
	}
	writeCRL(list)
	want := []string{serialOf(t, oldHub), serialOf(t, oldMember)}
	slices.Sort(want)
	if l, err := pki.ParseRevocationList(list); err != nil || !slices.Equal(pki.ListedSerials(l), want) {
		var got []string
		if l != nil {
			got = pki.ListedSerials(l)
		}
		t.Errorf("the new hub's first list names %v (%v); want %v, the old hub's", got, err, want)
	}
	for name, l := range map[string]*pki.Leaf{"the old hub's superseded certificate": oldHub, "the superseded member certificate": oldMember} {
		if err := etcdtest.GetAs(ca, l, addr, "/health"); err == nil {
			t.Errorf("%s is served again after the take-over", name)
		}
	}
	for name, l := range map[string]*pki.Leaf{"the new hub's certificate": fresh, "another certificate of the CA (named by the foreign list)": etcd.Client} {
		if err := etcdtest.GetAs(ca, l, addr, "/health"); err != nil {
			t.Errorf("%s after the take-over: %v", name, err)
		}
	}

	// A restart: a new reconciler reads the hub's Secret again; every
	// member now holds an older genuine list of the CA naming nothing.
	r = &Reconciler{Manager: r.Manager, Now: func() time.Time { return start.Add(time.Hour) }}
	s.now = start.Add(time.Hour)
	replayed, err := ca.RevocationList(nil, 3, start.Add(-48*time.Hour), pki.RevocationListValidity)
	if err != nil {
		t.Fatal(err)
	}
	for _, cs := range s.clusters {
		for _, sec := range cs.secrets {
			sec.Data[etcdfedv1.RevocationListKey] = replayed
		}
	}
	observe()
	if got := decideCRL(s).want; !slices.Equal(got, want) {
		t.Errorf("after a restart, with the members' lists replayed from before, the hub lists %v; want %v", got, want)
	}
}

func serialNumber(t *testing.T, l *pki.Leaf) *big.Int {
	t.Helper()
	n, ok := pki.Serial(l.CertPEM)
	if !ok {
		t.Fatal("no certificate")
	}
	return n
}
