package etcdcluster

import (
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	etcdfedv1 "github.com/etcdfed/etcdfed/api/v1alpha1"
	"github.com/etcdfed/etcdfed/hub/pki"
	"github.com/etcdfed/etcdfed/hub/planner"
)

// rebuiltTLS is rebuilt() for a ring with TLS on: the members'
// certificate Secrets, issued by lost (the lost hub's CA), are in the
// member clusters under the founding UID, and the new hub has no CA
// Secret (no escrow imported).
func rebuiltTLS(t *testing.T) (*snapshot, *pki.CA) {
	t.Helper()
	s := ring()
	lost := withTLS(t, s)
	s.ec.UID = "uid-2"
	s.ec.Status = etcdfedv1.EtcdClusterStatus{}
	s.pki = pkiSnapshot{}
	for _, cs := range s.clusters {
		f := &foreignObjects{members: map[types.UID][]*etcdfedv1.EtcdMember{}, zones: map[types.UID][]*etcdfedv1.EtcdDNSZone{}, secrets: map[types.UID][]*corev1.Secret{}}
		for _, o := range cs.members {
			f.members["uid-1"] = append(f.members["uid-1"], o)
		}
		for _, sec := range cs.secrets {
			f.secrets["uid-1"] = append(f.secrets["uid-1"], sec)
		}
		f.zones["uid-1"] = []*etcdfedv1.EtcdDNSZone{{Spec: etcdfedv1.EtcdDNSZoneSpec{Domain: "main.etcd.test"}}}
		cs.foreign, cs.members, cs.secrets = f, map[string]*etcdfedv1.EtcdMember{}, map[string]*corev1.Secret{}
	}
	return s, lost
}

func askRotation(s *snapshot) {
	s.ec.Annotations = map[string]string{etcdfedv1.AnnotationRotateCA: etcdfedv1.CARotationRequest{RequestedAt: now.Add(-time.Minute)}.String()}
}

// A rebuilt hub without the escrow takes a TLS ring over only when a CA
// rotation is asked for, on the CA its members' Secrets name (never on a
// CA of its own, which they would not trust), and refuses when the
// members name more than one CA.
func TestFindTakeOverWithoutTheCAKey(t *testing.T) {
	s, lost := rebuiltTLS(t)
	f := findTakeOver(s)
	if f.phase != etcdfedv1.TakeOverHeld || !strings.Contains(f.message, "etcdfed rotate-ca main -n default") {
		t.Fatalf("no request: %s %q, want Held naming etcdfed rotate-ca", f.phase, f.message)
	}
	askRotation(s)
	f = findTakeOver(s)
	if f.phase != etcdfedv1.TakeOverTakingOver || !strings.Contains(f.message, "its CA's key is not in this hub") || !strings.Contains(f.message, pki.Describe(lost.Cert)) {
		t.Fatalf("with a rotation asked for: %s %q", f.phase, f.message)
	}
	// A member whose certificate another CA signed: two CAs, held.
	other, err := pki.NewCA("other", now)
	if err != nil {
		t.Fatal(err)
	}
	leaf, err := other.IssueMember(pki.MemberRequest{Member: "main-2", DNSNames: []string{"main-2.main.etcd.test"}}, now)
	if err != nil {
		t.Fatal(err)
	}
	sec := s.clusters[2].foreign.secrets["uid-1"][0]
	sec.Data = map[string][]byte{pki.KeyCert: leaf.CertPEM, pki.KeyKey: leaf.KeyPEM, pki.KeyCA: other.CertPEM}
	if f = findTakeOver(s); f.phase != etcdfedv1.TakeOverHeld || !strings.Contains(f.message, "of 2 CAs") {
		t.Fatalf("members of two CAs: %s %q", f.phase, f.message)
	}
	// No member Secret at all: held, saying so.
	for _, cs := range s.clusters {
		cs.foreign.secrets = nil
	}
	if f = findTakeOver(s); f.phase != etcdfedv1.TakeOverHeld || !strings.Contains(f.message, "no member's certificate Secret") {
		t.Fatalf("no member Secret: %s %q", f.phase, f.message)
	}
}

// Taken over without the CA's key, a ring keeps running on its CA while
// the hub holds no key: the first pass records the take-over and what it
// reissues; the next stores the members' CA without its key and issues
// nothing; from then on the hub reaches etcd with a member's certificate,
// keeps the members' certificates as they are (a Roll of Trusting only
// changes what they trust), and the rotation asked for begins once the
// take-over is complete.
func TestTakeOverWithoutTheCAKeyThroughDecide(t *testing.T) {
	s, lost := rebuiltTLS(t)
	askRotation(s)
	d := decide(s)
	st := d.ledger
	if st.TakeOver == nil || st.TakeOver.Phase != etcdfedv1.TakeOverTakingOver || !strings.Contains(strings.Join(st.TakeOver.Reissued, "; "), "the ring's CA (its key was not in this hub)") {
		t.Fatalf("first pass: takeOver %+v", st.TakeOver)
	}
	out := computeStatus(s, d, applyResult{}, "")

	// Second pass: the objects and Secrets read under the founding UID,
	// still no CA Secret in the hub.
	s2 := ring()
	withTLS(t, s2)
	for _, m := range s2.ec.Status.Members {
		issueMemberCert(t, s2, lost, m.Cluster, m.Name, now)
	}
	s2.pki = pkiSnapshot{}
	s2.ec.UID, s2.ec.Status = "uid-2", out
	askRotation(s2)
	d2 := decide(s2)
	keep := d2.pki.keepCA
	if keep == nil || !keep.Cert.Equal(lost.Cert) || keep.CanSign() || d2.pki.createCA || d2.pki.issueHubClient {
		t.Fatalf("second pass pki work: keepCA %v, createCA %v, issueHubClient %v", keep != nil, d2.pki.createCA, d2.pki.issueHubClient)
	}
	if len(d2.certs) > 0 {
		t.Fatalf("second pass reissues member certificates: %v", d2.certs)
	}

	// Third pass: the keyless CA Secret is stored.
	auth, err := pki.LoadAuthority((&pki.Authority{Signer: keep}).Data())
	if err != nil {
		t.Fatal(err)
	}
	s2.pki = pkiSnapshot{ca: auth.Signer, auth: auth}
	if w := pkiDue(s2); w.createCA || w.issueHubClient || w.keepCA != nil {
		t.Fatalf("keyless pki work: %+v", w)
	}
	leaf := borrowedLeaf(s2)
	if leaf == nil || auth.Issuer(leaf.CertPEM) == nil {
		t.Fatal("no member certificate to reach etcd with")
	}
	cs := s2.clusters[0]
	name := pki.MemberSecretName(cs.members["main-0"].Name)
	kept, err := memberLeaf(s2, cs, keep, name, "main-0", "", now)
	if err != nil || string(kept.CertPEM) != string(cs.secrets[name].Data[pki.KeyCert]) {
		t.Fatalf("memberLeaf with the keyless CA: %v (kept the Secret's certificate: %v)", err, err == nil)
	}
	delete(cs.secrets, name)
	if _, err := memberLeaf(s2, cs, keep, name, "main-0", "", now); err == nil || !strings.Contains(err.Error(), "Reissuing") {
		t.Fatalf("memberLeaf without a certificate to keep: %v", err)
	}
	issueMemberCert(t, s2, lost, cs.name, "main-0", now)
	if p := consumersPending(s2, &s2.ec.Status); p != "" {
		t.Fatalf("consumers pending with the keyless CA: %q", p)
	}

	d3 := decide(s2)
	s3 := ring()
	s3.ec.UID, s3.ec.Status, s3.clusters, s3.byName, s3.pki = "uid-2", computeStatus(s2, d3, applyResult{}, ""), s2.clusters, s2.byName, s2.pki
	s3.ec.Spec.TLS.Mode = etcdfedv1.TLSEnabled
	askRotation(s3)
	if st3 := s3.ec.Status; st3.TakeOver == nil || st3.TakeOver.Phase != etcdfedv1.TakeOverComplete {
		t.Fatalf("take-over after the keyless CA is stored: %+v (plan %s: %s)", st3.TakeOver, d3.plan.Action, d3.plan.Reason)
	}
	d4 := decide(s3)
	if d4.plan.Action != planner.ActBegin || d4.plan.Operation == nil || d4.plan.Operation.Type != planner.OpRotateCA || d4.plan.Operation.Step != planner.ActAddCA {
		t.Fatalf("after the take-over: plan %s %+v (%s), want the rotation's AddCA", d4.plan.Action, d4.plan.Operation, d4.plan.Reason)
	}
}
