package etcdcluster

import (
	"slices"
	"testing"

	"github.com/etcdfed/etcdfed/hub/pki"
	"github.com/etcdfed/etcdfed/hub/planner"
)

// A ring that ran before members required the peer name: its member
// certificates are reissued with the name at once (upkeep, no restart),
// every member is rolled to spec.tls.peerName without the requirement,
// and only once every member runs so is the requirement rolled out: no
// member ever requires the name of a peer whose running etcd may present
// a certificate without it. A new ring's members start with both.
func TestPeerNameMigration(t *testing.T) {
	s := ring()
	ca := withTLS(t, s)
	peerName := pki.PeerName(s.ec.Spec.DNS.Domain)
	// Before: certificates without the name, objects without either field.
	for _, m := range s.ec.Status.Members {
		cs := s.cluster(m.Cluster)
		leaf, err := ca.IssueMember(pki.MemberRequest{Member: m.Name, DNSNames: []string{memberDNSName(s.ec, m.Name)}}, now)
		if err != nil {
			t.Fatal(err)
		}
		obj := cs.members[m.Name]
		cs.secrets[pki.MemberSecretName(obj.Name)] = certSecret(s.ringNamespace, pki.MemberSecretName(obj.Name), memberCertLabels(s.ec, m.Name), ca.CertPEM, leaf)
		obj.Spec.TLS.PeerName, obj.Spec.TLS.RequirePeerName = "", false
	}

	d := decide(s)
	if len(d.certs) != 3 {
		t.Errorf("certificates due %v, want every member's (they lack the peer name)", d.certs)
	}
	if d.plan.Action != planner.ActBegin || d.plan.Operation == nil || d.plan.Operation.Type != planner.OpRoll {
		t.Fatalf("plan %s (%s), want a Roll to the peer name", d.plan.Action, d.plan.Reason)
	}
	for _, m := range s.ec.Status.Members {
		want := desiredMember(s, &s.ec.Status, &m, s.cluster(m.Cluster).members[m.Name])
		if want.Spec.TLS.PeerName != peerName || want.Spec.TLS.RequirePeerName {
			t.Errorf("step 1, %s: peerName %q require %v; want the name without the requirement", m.Name, want.Spec.TLS.PeerName, want.Spec.TLS.RequirePeerName)
		}
	}

	// Two members rolled, the third not yet: still no requirement.
	roll := func(names ...string) {
		for _, m := range s.ec.Status.Members {
			if !slices.Contains(names, m.Name) {
				continue
			}
			obj := s.cluster(m.Cluster).members[m.Name]
			obj.Spec.TLS.PeerName = peerName
			obj.Generation++
			obj.Status.ObservedGeneration = obj.Generation
		}
	}
	roll("main-0", "main-1")
	if requirePeerName(s, &s.ec.Status, s.cluster("member-1").members["main-0"]) {
		t.Error("the requirement before main-2 runs with a certificate carrying the name")
	}
	// The third written but not yet taken by its spoke: still none.
	obj := s.cluster("member-3").members["main-2"]
	obj.Spec.TLS.PeerName = peerName
	obj.Generation++
	if requirePeerName(s, &s.ec.Status, obj) {
		t.Error("the requirement before main-2's spoke took the change")
	}
	obj.Status.ObservedGeneration = obj.Generation
	for _, m := range s.ec.Status.Members {
		want := desiredMember(s, &s.ec.Status, &m, s.cluster(m.Cluster).members[m.Name])
		if !want.Spec.TLS.RequirePeerName {
			t.Errorf("step 2, %s: no requirement once every member runs with the name", m.Name)
		}
	}
	// A member cluster out of sight: nothing is known of its member.
	s.cluster("member-2").engaged = false
	if requirePeerName(s, &s.ec.Status, nil) {
		t.Error("the requirement decided on a partial view")
	}
	// Once required, always.
	s.cluster("member-1").members["main-0"].Spec.TLS.RequirePeerName = true
	if !requirePeerName(s, &s.ec.Status, s.cluster("member-1").members["main-0"]) {
		t.Error("a member's requirement withdrawn")
	}

	// A new ring: no object yet, every member starts with both.
	fresh := ring()
	withTLS(t, fresh)
	for _, cs := range fresh.clusters {
		clear(cs.members)
	}
	for _, m := range fresh.ec.Status.Members {
		want := desiredMember(fresh, &fresh.ec.Status, &m, nil)
		if want.Spec.TLS.PeerName != peerName || !want.Spec.TLS.RequirePeerName {
			t.Errorf("new ring, %s: peerName %q require %v; want both", m.Name, want.Spec.TLS.PeerName, want.Spec.TLS.RequirePeerName)
		}
	}
}

// TestPeerNameHeldWhileClusterOutOfSight (issue 37, low): a ring whose
// members require the peer name loses sight of member-3 (failed, or a
// hostile cluster that stops its spoke). A member created now (main-2's
// replacement in member-4) must require the name as well: before, the
// partial view answered "not every member carries it", and the new
// member's peer port accepted any certificate of the CA, a consumer's
// too, for as long as member-3 stayed away.
func TestPeerNameHeldWhileClusterOutOfSight(t *testing.T) {
	s := ring()
	withTLS(t, s)
	withFourthCluster(s)
	s.cluster("member-3").engaged = false
	m := s.ec.Status.Members[2]
	m.Cluster, m.Zone, m.Incarnation = "member-4", "zone-4", 4
	want := desiredMember(s, &s.ec.Status, &m, nil)
	if !want.Spec.TLS.RequirePeerName || want.Spec.TLS.PeerName != pki.PeerName(s.ec.Spec.DNS.Domain) {
		t.Errorf("a member created while member-3 is out of sight: peerName %q require %v; want both", want.Spec.TLS.PeerName, want.Spec.TLS.RequirePeerName)
	}

	// In the middle of step 1 (main-0 runs without the name), member-2
	// sets the requirement on its own object: it rolls onto nobody.
	obj0 := s.cluster("member-1").members["main-0"]
	obj0.Spec.TLS.PeerName, obj0.Spec.TLS.RequirePeerName = "", false
	if want := desiredMember(s, &s.ec.Status, &s.ec.Status.Members[0], obj0); want.Spec.TLS.RequirePeerName {
		t.Error("main-0 required the peer name on member-2's word, while it runs without it")
	}
}
