package etcdcluster

import (
	"slices"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	etcdfedv1 "github.com/etcdfed/etcdfed/api/v1alpha1"
	"github.com/etcdfed/etcdfed/hub/planner"
)

func adoptingEC(retire bool) *etcdfedv1.EtcdCluster {
	ec := &etcdfedv1.EtcdCluster{}
	ec.Spec.Replicas = 3
	ec.Spec.Adopt = &etcdfedv1.AdoptSpec{Endpoints: []string{"https://127.0.0.1:2379", "https://127.0.0.2:2379/", "https://127.0.0.3:2379"}, Retire: retire}
	return ec
}

func origEntry(name string, id uint64, n string) planner.ListEntry {
	return planner.ListEntry{ID: id, Name: name, ClientURLs: []string{"https://127.0.0." + n + ":2379"}, PeerURLs: []string{"https://127.0.0." + n + ":2380"}, Healthy: true}
}

// The originals are recorded once, when the running cluster is found;
// each is marked retired when a quorate member list of the same cluster
// no longer has it; the phase follows.
func TestRecordAdoption(t *testing.T) {
	now := time.Date(2026, 11, 26, 23, 0, 0, 0, time.UTC)
	origs := []planner.ListEntry{origEntry("orig-0", 0x10, "1"), origEntry("orig-1", 0x11, "2"), origEntry("orig-2", 0x12, "3")}
	managed := []planner.ListEntry{{ID: 0x20, Name: "main-0"}, {ID: 0x21, Name: "main-1"}, {ID: 0x22, Name: "main-2"}}
	ledgerMembers := []etcdfedv1.MemberStatus{{Name: "main-0", ID: "20"}, {Name: "main-1", ID: "21"}, {Name: "main-2", ID: "22"}}

	// Found: every member etcd lists is an original.
	s := &snapshot{ec: adoptingEC(false), now: now, etcd: planner.Etcd{Reachable: true, ClusterID: 0xc1, Members: origs}}
	st := &etcdfedv1.EtcdClusterStatus{}
	recordAdoption(s, st, planner.Decision{Action: planner.ActFinishBootstrap, Reason: "adopting"})
	if a := st.Adoption; a == nil || len(a.Originals) != 3 || a.Originals[1].ID != "11" || a.Originals[1].Name != "orig-1" || a.Phase != etcdfedv1.AdoptionConnecting {
		t.Fatalf("after the find: %+v", st.Adoption)
	}
	st.ClusterID = "c1"

	// Joining: two of three of etcdfed's members are voters, one a learner.
	s.etcd.Members = append(slices.Clone(origs), managed...)
	s.etcd.Members[5].IsLearner = true
	st.Members = ledgerMembers
	recordAdoption(s, st, planner.Decision{Action: planner.ActPromote, Reason: "promoting learner main-2"})
	if a := st.Adoption; len(a.Originals) != 3 || a.Phase != etcdfedv1.AdoptionJoining || a.Summary != "Joining: 0/3 retired, 2/3 joined" || a.Message != "promoting learner main-2" {
		t.Fatalf("joining: %+v", a)
	}

	// Joined, retire not asked.
	s.etcd.Members[5].IsLearner = false
	recordAdoption(s, st, planner.Decision{Action: planner.ActNone, Reason: "set spec.adopt.retire"})
	if a := st.Adoption; a.Phase != etcdfedv1.AdoptionJoined {
		t.Fatalf("joined: %+v", a)
	}

	// Another cluster answering (a wrong endpoint) retires nothing.
	s.ec = adoptingEC(true)
	s.etcd = planner.Etcd{Reachable: true, ClusterID: 0xbad, Members: managed}
	recordAdoption(s, st, planner.Decision{})
	if a := st.Adoption; slices.ContainsFunc(a.Originals, func(o etcdfedv1.AdoptedMember) bool { return o.Retired != nil }) {
		t.Fatalf("originals retired on another cluster's member list: %+v", a)
	}
	// Silent etcd retires nothing either.
	s.etcd = planner.Etcd{Error: "timeout"}
	recordAdoption(s, st, planner.Decision{})
	if a := st.Adoption; slices.ContainsFunc(a.Originals, func(o etcdfedv1.AdoptedMember) bool { return o.Retired != nil }) {
		t.Fatalf("originals retired while etcd was silent: %+v", a)
	}

	// orig-0 removed: retired, its endpoint no longer dialled.
	s.etcd = planner.Etcd{Reachable: true, ClusterID: 0xc1, Members: append(slices.Clone(origs[1:]), managed...)}
	recordAdoption(s, st, planner.Decision{})
	if a := st.Adoption; a.Phase != etcdfedv1.AdoptionRetiring || a.Originals[0].Retired == nil || a.Originals[1].Retired != nil {
		t.Fatalf("retiring: %+v", a)
	}
	if got, want := adoptEndpoints(s.ec, st), []string{"https://127.0.0.2:2379/", "https://127.0.0.3:2379"}; !slices.Equal(got, want) {
		t.Errorf("endpoints %v, want %v", got, want)
	}
	if !originalsLeft(s.ec, st) {
		t.Errorf("originals left reported none")
	}

	// All gone: complete, no endpoint of the originals, peers may require
	// the peer name again.
	s.etcd.Members = managed
	recordAdoption(s, st, planner.Decision{})
	if a := st.Adoption; a.Phase != etcdfedv1.AdoptionComplete || a.Summary != "Complete: 3/3 retired, 3/3 joined" {
		t.Fatalf("complete: %+v", a)
	}
	if got := adoptEndpoints(s.ec, st); len(got) != 0 {
		t.Errorf("endpoints after the adoption %v, want none", got)
	}
	if originalsLeft(s.ec, st) {
		t.Errorf("originals left after every one retired")
	}
}

// Before the originals are recorded every adopt endpoint is dialled, and
// no adoption means none.
func TestAdoptEndpoints(t *testing.T) {
	ec := adoptingEC(false)
	if got := adoptEndpoints(ec, &etcdfedv1.EtcdClusterStatus{}); len(got) != 3 {
		t.Errorf("before the find: %v", got)
	}
	if got := adoptEndpoints(&etcdfedv1.EtcdCluster{}, &etcdfedv1.EtcdClusterStatus{}); got != nil {
		t.Errorf("no adoption: %v", got)
	}
	// Found, with no original recorded (the status rebuilt after the last
	// retirement): nothing left to dial.
	if got := adoptEndpoints(ec, &etcdfedv1.EtcdClusterStatus{ClusterID: "c1", Adoption: &etcdfedv1.AdoptionStatus{}}); got != nil {
		t.Errorf("found with no originals: %v", got)
	}
	retired := metav1.Now()
	st := &etcdfedv1.EtcdClusterStatus{ClusterID: "c1", Adoption: &etcdfedv1.AdoptionStatus{Originals: []etcdfedv1.AdoptedMember{
		{ID: "10", ClientURLs: []string{"https://127.0.0.2:2379"}, Retired: &retired}, {ID: "11", ClientURLs: []string{"https://127.0.0.1:2379"}},
	}}}
	if got, want := adoptEndpoints(ec, st), []string{"https://127.0.0.1:2379", "https://127.0.0.3:2379"}; !slices.Equal(got, want) {
		t.Errorf("got %v, want %v (a trailing slash is the same URL)", got, want)
	}
}
