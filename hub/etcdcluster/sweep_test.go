package etcdcluster

import (
	"slices"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	etcdfedv1 "github.com/etcdfed/etcdfed/api/v1alpha1"
	"github.com/etcdfed/etcdfed/hub/liveness"
	"github.com/etcdfed/etcdfed/hub/planner"
)

// TestSweepGuard (issue 24): with no operation in flight the sweep used
// to delete every object the ledger did not place, without asking etcd. A
// stale ledger (the hub cluster's etcd restored from an old backup) then
// deleted live voters, and their volumes under the Delete policy. Now an
// object is swept only when etcd's quorate member list of the same pass
// does not list it, and never when it may be a voter's last copy.
func TestSweepGuard(t *testing.T) {
	for _, tc := range []struct {
		name  string
		given func(s *snapshot)
		sweep []memberRef
		kept  string
	}{
		{"a stale ledger places main-1 in member-3; it runs in member-2 as a voter: kept", func(s *snapshot) {
			s.cluster("member-2").members["main-1"].Status.Etcd = &etcdfedv1.MemberEtcdView{ID: hexID(2)}
			s.ec.Status.Members[1].Cluster = "member-3"
		}, nil, "main-1's object in member-2 (incarnation 2) is kept: etcd lists it as [2]"},
		{"its ID unknown, etcd lists main-1 as a voter no other object runs: kept", func(s *snapshot) {
			s.ec.Status.Members[1].Cluster = "member-3"
		}, nil, "it may be that voter's last copy"},
		{"its ID unknown, another object runs main-1's listed ID: swept", func(s *snapshot) {
			old := s.cluster("member-2").members["main-1"].DeepCopy()
			old.Spec.Incarnation = 1 // its status tells of incarnation 2: no ID known for 1
			s.cluster("member-3").members["main-1"] = old
			s.cluster("member-2").members["main-1"].Status.Etcd = &etcdfedv1.MemberEtcdView{ID: hexID(2)}
		}, []memberRef{{cluster: "member-3", member: "main-1"}}, ""},
		{"an old incarnation etcd no longer lists: swept", func(s *snapshot) {
			old := s.cluster("member-2").members["main-1"].DeepCopy()
			old.Spec.Incarnation, old.Status.Incarnation = 1, 1
			old.Status.Etcd = &etcdfedv1.MemberEtcdView{ID: hexID(0x11)}
			s.cluster("member-3").members["main-1"] = old
		}, []memberRef{{cluster: "member-3", member: "main-1"}}, ""},
		// Two objects of main-2 in member-3 (a Move inside it): the one
		// beside the recorded incarnation's is judged on its own.
		{"beside the recorded incarnation in its cluster, an old incarnation etcd still lists: kept", func(s *snapshot) {
			besideInMember3(s, 3)
		}, nil, "main-2's object in member-3 (incarnation 3) is kept: etcd lists it as [3]"},
		{"beside the recorded incarnation in its cluster, an old incarnation etcd no longer lists: swept, the recorded one stays", func(s *snapshot) {
			besideInMember3(s, 0x33)
		}, []memberRef{{cluster: "member-3", member: "main-2", object: "default-main-2-rbxv5pka"}}, ""},
		{"etcd not answering with a quorum in this pass: nothing swept", func(s *snapshot) {
			old := s.cluster("member-2").members["main-1"].DeepCopy()
			old.Spec.Incarnation, old.Status.Incarnation = 1, 1
			old.Status.Etcd = &etcdfedv1.MemberEtcdView{ID: hexID(0x11)}
			s.cluster("member-3").members["main-1"] = old
			s.etcd.Reachable = false
		}, nil, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := ring()
			tc.given(s)
			sweep, kept := leftBehind(s, &s.ec.Status)
			if !slices.Equal(sweep, tc.sweep) {
				t.Errorf("sweep %v, want %v", sweep, tc.sweep)
			}
			if got := strings.Join(kept, "; "); (tc.kept == "") != (got == "") || !strings.Contains(got, tc.kept) {
				t.Errorf("kept %q, want %q", got, tc.kept)
			}
		})
	}
}

// TestDegradedSaysTheHubSeesAMinority: a hub that sees too few clusters to
// declare any failed says so first in Degraded, and names a spoke that
// abstains as a witness.
func TestDegradedSaysTheHubSeesAMinority(t *testing.T) {
	s := ring()
	s.hubView = liveness.HubView{Seen: []string{"member-3"}, Unseen: []string{"member-1", "member-2"}}
	s.cluster("member-3").spoke.Status.Conditions = []metav1.Condition{{Type: etcdfedv1.ConditionGossipHealthy, Status: metav1.ConditionFalse,
		Reason: etcdfedv1.ReasonGossipNoPeerAlive, Message: "gossip sees no peer alive (member-1, member-2 all dead to it)"}}
	st := computeStatus(s, decide(s), applyResult{}, "")
	c := condition(st, etcdfedv1.ConditionDegraded)
	for _, want := range []string{
		"the hub sees only member-3 of the 3 member clusters: member-1, member-2 may be alive and serving without it",
		"the spoke of member-3 abstains as a witness of other clusters' failure: NoPeerAlive: gossip sees no peer alive",
	} {
		if c.Status != metav1.ConditionTrue || !strings.Contains(c.Message, want) {
			t.Errorf("Degraded %s %q lacks %q", c.Status, c.Message, want)
		}
	}
	if !strings.HasPrefix(c.Message, "the hub sees only") {
		t.Errorf("Degraded does not say it first: %q", c.Message)
	}
}

// besideInMember3 records main-2 as incarnation 4 in member-3/zone-3b,
// running as [40] under an object of its own, beside its incarnation 3's
// object there, which runs as oldID.
func besideInMember3(s *snapshot, oldID uint64) {
	withSecondZone(s)
	cs := s.cluster("member-3")
	old := cs.members["main-2"]
	old.Status.Etcd = &etcdfedv1.MemberEtcdView{ID: hexID(oldID)}
	m := statusMember(&s.ec.Status, "main-2")
	m.Zone, m.Incarnation, m.ID, m.DNSName = "zone-3b", 4, hexID(40), "main-2-i4.main.etcd.test"
	s.ec.Status.LastIncarnation = 4
	fresh := desiredMember(s, &s.ec.Status, m, nil)
	fresh.Status.Incarnation, fresh.Status.Etcd = 4, &etcdfedv1.MemberEtcdView{ID: hexID(40)}
	cs.add(fresh)
	cs.settle(&s.ec.Status)
	s.etcd.Members = append(s.etcd.Members, planner.ListEntry{ID: 40, Name: "main-2", Healthy: true})
}

// A member whose incarnation a fencing confirmation names (stopped for a
// quorum-loss recovery) comes back under an object of its own in the same
// cluster: rewritten in place, its spoke would delete the fenced
// incarnation's volume by the Delete policy once the new pod runs (seen in
// TestScenarioQuorumLossAutomatic); beside the new object, the old one is
// swept with its volume kept. Without a confirmation, or with one naming
// another incarnation, a new incarnation is written in place as before.
func TestFencedIncarnationGetsAnObjectOfItsOwn(t *testing.T) {
	s := ring()
	st := s.ec.Status.DeepCopy()
	m := statusMember(st, "main-2")
	cs := s.cluster(m.Cluster)
	old := cs.members["main-2"]
	old.Status.Incarnation = old.Spec.Incarnation
	if old.Status.Etcd == nil {
		old.Status.Etcd = &etcdfedv1.MemberEtcdView{}
	}
	old.Status.Etcd.ID = "3"
	m.Incarnation = old.Spec.Incarnation + 1
	fence := func(id string) {
		f := etcdfedv1.FencingConfirmation{Members: []etcdfedv1.FencedMember{{Name: "main-2", ID: id}}, ConfirmedAt: now}
		s.ec.Annotations = map[string]string{etcdfedv1.AnnotationFenced: f.String()}
	}

	if got := heldObject(s, st, cs, m); got != old {
		t.Fatalf("no fencing confirmation: written to %v, want the old object %s in place", got, old.Name)
	}
	fence("ffff")
	if got := heldObject(s, st, cs, m); got != old {
		t.Fatalf("a confirmation of another incarnation [ffff]: written to %v, want the old object in place", got)
	}
	for _, id := range []string{"3", ""} {
		fence(id)
		if got := heldObject(s, st, cs, m); got != nil {
			t.Fatalf("fenced as [%s]: written to %s, want an object of its own", id, got.Name)
		}
		if want := desiredMember(s, st, m, nil); want.Name == old.Name || want.Spec.Incarnation != m.Incarnation {
			t.Fatalf("fenced as [%s]: new object %s incarnation %d, want a name other than %s", id, want.Name, want.Spec.Incarnation, old.Name)
		}
	}

	// Once the new object is there, the fenced one is swept, its volume
	// kept (etcd does not list [3]).
	s.etcd.Members = slices.DeleteFunc(s.etcd.Members, func(e planner.ListEntry) bool { return e.ID == 3 })
	neu := desiredMember(s, st, m, nil)
	cs.add(neu)
	cs.settle(st)
	sweep, kept := leftBehind(s, st)
	if len(sweep) != 1 || sweep[0].object != old.Name || len(kept) != 0 {
		t.Fatalf("sweep %+v (kept %q), want the fenced object %s alone", sweep, kept, old.Name)
	}
	if rv := retainVolumes(s, sweep); len(rv) != 1 || rv[0].want == nil || rv[0].want.Spec.Storage.VolumeReclaimPolicy != etcdfedv1.VolumeRetain {
		t.Fatalf("retained %+v, want the fenced object rewritten with Retain before its deletion", rv)
	}
}
