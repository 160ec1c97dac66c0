package etcdcluster

import (
	"slices"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	etcdfedv1 "github.com/etcdfed/etcdfed/api/v1alpha1"
)

// TestConcerns: which member clusters a ring hears of. A ring is concerned
// with a cluster it may place members in (listed, selected by label, or
// any when it names none), one that holds its members or the member an
// operation moves, one where a declared client resolves its names, and
// every cluster when it adopts a running etcd; with none of those, not.
// A ring that selects by label is concerned with a cluster whose labels
// the hub does not know (a wake too many costs a pass; one too few, a
// missed news).
func TestConcerns(t *testing.T) {
	base := func(change func(*etcdfedv1.EtcdCluster)) *etcdfedv1.EtcdCluster {
		ec := &etcdfedv1.EtcdCluster{}
		ec.Spec.Topology.Clusters = []string{"a", "b", "c"}
		ec.Status.Members = []etcdfedv1.MemberStatus{{Name: "m0", Cluster: "a"}, {Name: "m1", Cluster: "b"}}
		if change != nil {
			change(ec)
		}
		return ec
	}
	gold := func() (map[string]string, bool) { return map[string]string{"tier": "gold"}, true }
	silver := func() (map[string]string, bool) { return map[string]string{"tier": "silver"}, true }
	unknown := func() (map[string]string, bool) { return nil, false }
	selectGold := func(ec *etcdfedv1.EtcdCluster) {
		ec.Spec.Topology.Clusters = nil
		ec.Spec.Topology.ClusterSelector = &metav1.LabelSelector{MatchLabels: map[string]string{"tier": "gold"}}
	}
	for _, tc := range []struct {
		name    string
		ec      *etcdfedv1.EtcdCluster
		cluster string
		labels  func() (map[string]string, bool)
		want    bool
	}{
		{"listed, holds a member", base(nil), "a", unknown, true},
		{"listed, holds none", base(nil), "c", unknown, true},
		{"not listed, holds none", base(nil), "z", unknown, false},
		{"no topology: every cluster", base(func(ec *etcdfedv1.EtcdCluster) { ec.Spec.Topology.Clusters = nil }), "z", unknown, true},
		{"holds a member outside the list", base(func(ec *etcdfedv1.EtcdCluster) {
			ec.Status.Members = append(ec.Status.Members, etcdfedv1.MemberStatus{Name: "m2", Cluster: "y"})
		}), "y", unknown, true},
		{"an operation moves a member out of it", base(func(ec *etcdfedv1.EtcdCluster) {
			ec.Status.Operation = &etcdfedv1.MembershipOperation{From: &etcdfedv1.FailureDomain{Cluster: "y"}}
		}), "y", unknown, true},
		{"an operation moves a member into it", base(func(ec *etcdfedv1.EtcdCluster) {
			ec.Status.Operation = &etcdfedv1.MembershipOperation{To: &etcdfedv1.FailureDomain{Cluster: "y"}}
		}), "y", unknown, true},
		{"a declared client runs there", base(func(ec *etcdfedv1.EtcdCluster) {
			ec.Spec.Clients = []etcdfedv1.ClientSpec{{Name: "apiserver", Cluster: "y"}}
		}), "y", unknown, true},
		{"adopts a running etcd", base(func(ec *etcdfedv1.EtcdCluster) { ec.Spec.Adopt = &etcdfedv1.AdoptSpec{} }), "y", unknown, true},
		{"selected by label", base(selectGold), "z", gold, true},
		{"not selected by label", base(selectGold), "z", silver, false},
		{"labels unknown to the hub", base(selectGold), "z", unknown, true},
		{"not selected but holds a member", base(selectGold), "a", silver, true},
	} {
		if got := concerns(tc.ec, tc.cluster, tc.labels); got != tc.want {
			t.Errorf("%s: concerns(%q) = %v, want %v", tc.name, tc.cluster, got, tc.want)
		}
	}
}

// TestSpokeMoved: what of a spoke report moved, so that the hub wakes
// only the rings the move concerns. The report's own time (observedAt)
// and bookkeeping are no move; the peers whose gossip entry moved are
// named, those that did not are not; a healthy gossip's condition that
// restates its view is part of the view, one that turns unhealthy is not.
func TestSpokeMoved(t *testing.T) {
	at := metav1.NewTime(time.Date(2026, 12, 3, 12, 0, 0, 0, time.UTC))
	later := metav1.NewTime(at.Add(time.Minute))
	healthy := func(msg string, status metav1.ConditionStatus, since metav1.Time) []metav1.Condition {
		return []metav1.Condition{{Type: etcdfedv1.ConditionGossipHealthy, Status: status, Reason: "R", Message: msg, LastTransitionTime: since}}
	}
	o := &etcdfedv1.EtcdSpoke{ObjectMeta: metav1.ObjectMeta{ResourceVersion: "1"}, Status: etcdfedv1.EtcdSpokeStatus{
		Zones: []string{"z1"}, ObservedAt: &at, Conditions: healthy("gossip sees 2 of 2 peers alive (b, c)", metav1.ConditionTrue, at),
		GossipView: []etcdfedv1.GossipPeerStatus{{Cluster: "b", Alive: true, Since: &at}, {Cluster: "c", Alive: true, Since: &at}},
		RoundTrips: []etcdfedv1.PeerRoundTrip{{Cluster: "b", MedianMicros: 1000}},
	}}
	for _, tc := range []struct {
		name                     string
		change                   func(*etcdfedv1.EtcdSpoke)
		roundTrips, gossip, rest bool
		peers                    []string
	}{
		{"only its time", func(s *etcdfedv1.EtcdSpoke) { s.ResourceVersion, s.Status.ObservedAt = "2", &later }, false, false, false, []string{}},
		{"a round trip", func(s *etcdfedv1.EtcdSpoke) { s.Status.RoundTrips[0].MedianMicros = 2000 }, true, false, false, []string{}},
		{"c seen gone", func(s *etcdfedv1.EtcdSpoke) {
			s.Status.GossipView[1] = etcdfedv1.GossipPeerStatus{Cluster: "c", Since: &later}
		}, false, true, false, []string{"c"}},
		{"b dropped, d new", func(s *etcdfedv1.EtcdSpoke) {
			s.Status.GossipView = []etcdfedv1.GossipPeerStatus{{Cluster: "c", Alive: true, Since: &at}, {Cluster: "d", Alive: true, Since: &later}}
		}, false, true, false, []string{"b", "d"}},
		{"a zone and c seen gone", func(s *etcdfedv1.EtcdSpoke) {
			s.Status.Zones = append(s.Status.Zones, "z2")
			s.Status.GossipView[1].Alive = false
		}, false, true, true, []string{"c"}},
		{"a label", func(s *etcdfedv1.EtcdSpoke) { s.Labels = map[string]string{"x": "y"} }, false, false, true, []string{}},
		{"c seen gone, restated by a healthy gossip's message", func(s *etcdfedv1.EtcdSpoke) {
			s.Status.GossipView[1].Alive = false
			s.Status.Conditions = healthy("gossip sees 1 of 2 peers alive (b)", metav1.ConditionTrue, later)
		}, false, true, false, []string{"c"}},
		{"gossip no longer healthy", func(s *etcdfedv1.EtcdSpoke) {
			s.Status.GossipView[0].Alive, s.Status.GossipView[1].Alive = false, false
			s.Status.Conditions = healthy("gossip sees no peer alive (b, c)", metav1.ConditionFalse, later)
		}, false, true, true, []string{"b", "c"}},
	} {
		n := o.DeepCopy()
		tc.change(n)
		rt, g, rest := spokeMoved(o, n)
		if rt != tc.roundTrips || g != tc.gossip || rest != tc.rest {
			t.Errorf("%s: spokeMoved = round trips %v, gossip %v, rest %v; want %v, %v, %v", tc.name, rt, g, rest, tc.roundTrips, tc.gossip, tc.rest)
		}
		if got := gossipPeersMoved(o.Status.GossipView, n.Status.GossipView); !slices.Equal(got, tc.peers) {
			t.Errorf("%s: peers moved %v, want %v", tc.name, got, tc.peers)
		}
	}
}

// TestConcernedWithFromASnapshot: the pass's view of which clusters
// concern its ring (their verdict is named in its status, their grace
// end is a pass it schedules): eligible, holding a member, declared
// client; a registered cluster the ring neither uses nor serves is a
// bystander.
func TestConcernedWithFromASnapshot(t *testing.T) {
	ec := &etcdfedv1.EtcdCluster{}
	ec.Spec.Topology.Clusters = []string{"a", "b"}
	ec.Spec.Clients = []etcdfedv1.ClientSpec{{Name: "apiserver", Cluster: "c"}}
	ec.Status.Members = []etcdfedv1.MemberStatus{{Name: "m0", Cluster: "y"}}
	s := &snapshot{ec: ec}
	for _, tc := range []struct {
		cs   clusterSnapshot
		want bool
	}{
		{clusterSnapshot{name: "a", eligible: true, registered: true}, true},
		{clusterSnapshot{name: "y", registered: true}, true},
		{clusterSnapshot{name: "c", registered: true}, true},
		{clusterSnapshot{name: "z", registered: true}, false},
		{clusterSnapshot{name: "z"}, false},
	} {
		if got := s.concernedWith(&tc.cs); got != tc.want {
			t.Errorf("cluster %s: concernedWith = %v, want %v", tc.cs.name, got, tc.want)
		}
	}
}
