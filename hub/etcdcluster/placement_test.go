package etcdcluster

import (
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	etcdfedv1 "github.com/etcdfed/etcdfed/api/v1alpha1"
	"github.com/etcdfed/etcdfed/hub/liveness"
	"github.com/etcdfed/etcdfed/hub/planner"
	"github.com/etcdfed/etcdfed/pkg/topology"
)

// threeZoneView is a formed 3-member cluster, one member per member cluster
// and zone, every cluster visible and its spoke reporting its zone.
func threeZoneView() *snapshot {
	now := time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)
	seen := metav1.NewTime(now)
	ec := &etcdfedv1.EtcdCluster{ObjectMeta: metav1.ObjectMeta{Name: "main", Namespace: "default"}}
	ec.Spec.Replicas = 3
	ec.Status.ClusterID = "abc"
	v := &snapshot{ec: ec, now: now, byName: map[string]*clusterSnapshot{}}
	for i, c := range []string{"member-1", "member-2", "member-3"} {
		zone := "zone-" + c[len(c)-1:]
		id := uint64(i + 1)
		ec.Status.Members = append(ec.Status.Members, etcdfedv1.MemberStatus{Name: "main-" + c[len(c)-1:], Cluster: c, Zone: zone, ID: hexID(id), Ready: true})
		v.etcd.Members = append(v.etcd.Members, planner.ListEntry{ID: id, Name: "main-" + c[len(c)-1:], Healthy: true})
		cv := &clusterSnapshot{name: c, engaged: true, registered: true, eligible: true, verdict: liveness.Verdict{Cluster: c, State: liveness.Alive},
			spoke: &etcdfedv1.EtcdSpoke{Status: etcdfedv1.EtcdSpokeStatus{Zones: []string{zone}, ObservedAt: &seen}}}
		v.clusters = append(v.clusters, cv)
		v.byName[c] = cv
	}
	v.etcd.Reachable = true
	v.etcd.LeaderID = 1
	return v
}

func plan(t *testing.T, v *snapshot) topology.Result {
	t.Helper()
	res, err := topology.Plan(placementInput(v, &v.ec.Status))
	if err != nil {
		t.Fatal(err)
	}
	return res
}

func TestPlacementSteadyThreeZones(t *testing.T) {
	if res := plan(t, threeZoneView()); len(res.Steps) != 0 || res.Current.ZoneFailures != 1 {
		t.Fatalf("steps %v, zone failures %d; want none and 1", res.Steps, res.Current.ZoneFailures)
	}
}

// A spoke reported its cluster's zones before the nodes registered, the
// hub placed a member in a pseudo-zone and then moved it: a partial spoke
// report must never move a member (found in test/multicluster).
func TestPlacementIgnoresPartialSpokeReports(t *testing.T) {
	for name, mutate := range map[string]func(*snapshot){
		"zone missing from the spoke's list": func(v *snapshot) { v.clusters[0].spoke.Status.Zones = nil },
		"spoke never reported":               func(v *snapshot) { v.clusters[0].spoke.Status.ObservedAt = nil },
		"no spoke object":                    func(v *snapshot) { v.clusters[0].spoke = nil },
		"spoke says no nodes": func(v *snapshot) {
			v.clusters[0].spoke.Status.Conditions = []metav1.Condition{{Type: etcdfedv1.ConditionReady, Status: metav1.ConditionFalse, Reason: etcdfedv1.ReasonNoNodes}}
		},
		"cluster not visible": func(v *snapshot) { v.clusters[0].verdict.State = liveness.Unknown },
		// Issue 24: a cluster that dropped out of the registry (its
		// kubeconfig Secret deleted or re-created) or out of the
		// selector (its labels changed) was evacuated at once; it is
		// judged like any other cluster now.
		"cluster no longer registered": func(v *snapshot) {
			v.clusters[0].registered, v.clusters[0].eligible, v.clusters[0].engaged = false, false, false
			v.clusters[0].verdict.State = liveness.Unknown
		},
		"cluster out of the selector": func(v *snapshot) {
			v.ec.Spec.Topology.ClusterSelector = &metav1.LabelSelector{MatchLabels: map[string]string{"ring": "main"}}
			v.clusters[0].eligible = false
		},
	} {
		t.Run(name, func(t *testing.T) {
			v := threeZoneView()
			mutate(v)
			if res := plan(t, v); len(res.Steps) != 0 {
				t.Fatalf("a partial view moved members: %v", res.Steps)
			}
		})
	}
}

// Explicit signals do move members: a failed cluster (registered or
// not), a cordoned zone, a cordoned cluster, a cluster the spec's list of
// clusters no longer names.
func TestPlacementEvacuatesOnExplicitSignals(t *testing.T) {
	for name, mutate := range map[string]func(*snapshot){
		"cluster failed":   func(v *snapshot) { v.clusters[0].verdict.State = liveness.Failed },
		"zone cordoned":    func(v *snapshot) { v.ec.Spec.Topology.CordonedZones = []string{"zone-1"} },
		"cluster cordoned": func(v *snapshot) { v.ec.Spec.Topology.CordonedClusters = []string{"member-1"} },
		"cluster no longer in spec.topology.clusters": func(v *snapshot) {
			v.ec.Spec.Topology.Clusters = []string{"member-2", "member-3"}
			v.clusters[0].eligible = false
		},
		"cluster no longer registered, declared failed": func(v *snapshot) {
			v.clusters[0].registered, v.clusters[0].eligible, v.clusters[0].engaged = false, false, false
			v.clusters[0].verdict.State = liveness.Failed
		},
	} {
		t.Run(name, func(t *testing.T) {
			v := threeZoneView()
			mutate(v)
			res := plan(t, v)
			if len(res.Steps) != 1 || res.Steps[0].Action != topology.Move || res.Steps[0].Member != "main-1" {
				t.Fatalf("steps %v, want main-1 moved away", res.Steps)
			}
		})
	}
}

// A zone where no node takes new pods (its spoke says so) keeps its
// healthy members and takes no new one; once a member there has failed
// beyond the member grace (it cannot start again in place), the placement
// moves it out. Elsewhere a failed member is left to its replacement in
// place.
func TestPlacementZoneWithoutSchedulableNode(t *testing.T) {
	closed := func(v *snapshot) { v.clusters[0].spoke.Status.UnschedulableZones = []string{"zone-1"} }
	failed := func(since time.Duration) func(v *snapshot) {
		return func(v *snapshot) {
			at := metav1.NewTime(v.now.Add(-since))
			v.ec.Status.Members[0].Ready, v.ec.Status.Members[0].LastTransitionTime = false, &at
			v.etcd.Members[0].Healthy = false
		}
	}
	for _, tc := range []struct {
		name   string
		mutate []func(*snapshot)
		moved  bool
	}{
		{"closed, its member healthy", []func(*snapshot){closed}, false},
		{"closed, its member failed within the grace", []func(*snapshot){closed, failed(time.Minute)}, false},
		{"closed, its member failed beyond the grace", []func(*snapshot){closed, failed(6 * time.Minute)}, true},
		{"open, its member failed beyond the grace", []func(*snapshot){failed(6 * time.Minute)}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v := threeZoneView()
			for _, m := range tc.mutate {
				m(v)
			}
			res := plan(t, v)
			moved := len(res.Steps) == 1 && res.Steps[0].Action == topology.Move && res.Steps[0].Member == "main-1" && res.Steps[0].Reason == topology.Evacuate
			if moved != tc.moved || (!tc.moved && len(res.Steps) != 0) {
				t.Fatalf("steps %v; want main-1 moved out: %v", res.Steps, tc.moved)
			}
		})
	}
	// Growing to five: the new members go to the open zones only.
	v := threeZoneView()
	closed(v)
	v.ec.Spec.Replicas = 5
	res := plan(t, v)
	if len(res.Steps) == 0 {
		t.Fatal("no step to grow to five members")
	}
	for _, s := range res.Steps {
		if s.To.Cluster == "member-1" {
			t.Errorf("step %v places a member in the closed zone", s)
		}
	}
}

// Degraded says why the members of a cluster that left the registry, or
// the selector, stay where they are.
func TestHeldOutsideSaysWhy(t *testing.T) {
	v := threeZoneView()
	cs := v.clusters[0]
	cs.registered, cs.engaged = false, false // eligible still: no list, no selector
	cs.verdict.State = liveness.Unknown
	if msg := heldOutside(v.ec, &v.ec.Status, cs); !strings.Contains(msg, "member cluster member-1 holds main-1 but is no longer registered with the hub") {
		t.Errorf("unregistered: %q", msg)
	}
	v = threeZoneView()
	v.ec.Spec.Topology.ClusterSelector = &metav1.LabelSelector{MatchLabels: map[string]string{"ring": "main"}}
	v.clusters[0].eligible = false
	if msg := heldOutside(v.ec, &v.ec.Status, v.clusters[0]); !strings.Contains(msg, "no longer matches spec.topology.clusterSelector") {
		t.Errorf("out of the selector: %q", msg)
	}
	v.ec.Spec.Topology.CordonedClusters = []string{"member-1"}
	if msg := heldOutside(v.ec, &v.ec.Status, v.clusters[0]); msg != "" {
		t.Errorf("cordoned: %q", msg)
	}
}
