package etcdcluster

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	etcdfedv1 "github.com/etcdfed/etcdfed/api/v1alpha1"
	"github.com/etcdfed/etcdfed/hub/planner"
)

// pendingIn makes main-2 (member-3) down for an hour, its pod Pending on
// its object's latest spec, which is the ring's current one, while main-0
// and main-1 run that spec.
func pendingIn(s *snapshot) {
	long := metav1.NewTime(now.Add(-time.Hour))
	s.ec.Status.Members[2].Ready, s.ec.Status.Members[2].LastTransitionTime = false, &long
	s.etcd.Members[2].Healthy = false
	obj := s.cluster("member-3").members["main-2"]
	obj.Status.Conditions[0] = metav1.Condition{Type: etcdfedv1.ConditionPodReady, Status: metav1.ConditionFalse, Reason: etcdfedv1.ReasonPodPending,
		Message: "0/3 nodes are available: 3 node(s) didn't match Pod's node affinity"}
}

// movedTo records main-2 in cluster (its zone), healthy, with its object
// there on the current spec.
func movedTo(s *snapshot, cluster, zone string) {
	m := &s.ec.Status.Members[2]
	old := s.cluster(m.Cluster).members[m.Name]
	delete(s.cluster(m.Cluster).members, m.Name)
	m.Cluster, m.Zone = cluster, zone
	obj := desiredMember(s, &s.ec.Status, m, nil)
	obj.Spec.Bootstrap = old.Spec.Bootstrap
	obj.Generation = 1
	obj.Status = old.Status
	s.cluster(cluster).members[m.Name] = obj
}

// Issue 37: a member cluster that keeps a member's pod Pending held the
// ring for ever: the member was replaced in place (where it pended again)
// and a roll halted on it. When another member runs the same spec, the
// cluster is at fault: it is recorded in status.notStarting, the member is
// moved out of it, and while the spec is the same the placement does not
// bring it (or another) back there.
func TestAMemberItsClusterDoesNotStartIsMovedOut(t *testing.T) {
	s := ring()
	pendingIn(s)
	d := decide(s)
	if len(d.ledger.NotStarting) != 1 || d.ledger.NotStarting[0].Cluster != "member-3" || d.ledger.NotStarting[0].Generation != s.ec.Generation {
		t.Errorf("status.notStarting = %+v, want member-3 at generation %d", d.ledger.NotStarting, s.ec.Generation)
	}
	op := d.plan.Operation
	if d.plan.Action != planner.ActBegin || op == nil || op.Member != "main-2" || op.To == nil || op.To.Cluster == "member-3" {
		t.Fatalf("plan %s %+v (%s), want main-2 placed outside member-3", d.plan.Action, op, d.plan.Reason)
	}

	// Moved out: the cluster stays closed to the ring while the spec is
	// the same (without the record the placement spreads main-2 back).
	s = ring()
	movedTo(s, "member-1", "zone-1")
	s.ec.Status.NotStarting = []etcdfedv1.NotStartingCluster{{Cluster: "member-3", Generation: s.ec.Generation, Since: metav1.NewTime(now.Add(-time.Hour))}}
	if d := decide(s); d.plan.Action != planner.ActNone {
		t.Errorf("with member-3 recorded as not starting: plan %s (%s), want nothing", d.plan.Action, d.plan.Reason)
	}
	if d := decide(s); len(d.ledger.NotStarting) != 1 {
		t.Errorf("the record went while the spec is the same: %+v", d.ledger.NotStarting)
	}

	// A new spec: the record goes, and the placement may use member-3 again.
	s.ec.Generation++
	d = decide(s)
	if len(d.ledger.NotStarting) != 0 {
		t.Errorf("status.notStarting = %+v after the spec changed, want none", d.ledger.NotStarting)
	}
	if op := d.plan.Operation; d.plan.Action != planner.ActBegin || op == nil || op.To == nil || op.To.Cluster != "member-3" {
		t.Errorf("after the spec changed: plan %s %+v (%s), want main-2 spread back to member-3", d.plan.Action, op, d.plan.Reason)
	}
}

// No member runs the spec: the spec is at fault, not the cluster. Nothing
// is recorded, and the member is replaced in place as before.
func TestAPendingMemberNoOneRunsTheSpecOfStaysPut(t *testing.T) {
	s := ring()
	pendingIn(s)
	for _, c := range []string{"member-1", "member-2"} {
		for _, obj := range s.cluster(c).members {
			obj.Status.Conditions[0] = s.cluster("member-3").members["main-2"].Status.Conditions[0]
		}
	}
	d := decide(s)
	if len(d.ledger.NotStarting) != 0 {
		t.Errorf("status.notStarting = %+v, want none", d.ledger.NotStarting)
	}
	if op := d.plan.Operation; op != nil && op.To != nil && op.To.Cluster != "member-3" {
		t.Errorf("plan %s %+v (%s): main-2 moved out of member-3 though no member runs the spec", d.plan.Action, op, d.plan.Reason)
	}
}

// A zone where no node takes new pods (every node cordoned) explains the
// Pending pod: the cluster is not recorded as not starting the spec, the
// member moves out through the closed zone, and once the zone takes pods
// again the placement spreads the ring back there (the drained-zone and
// start-given-up scenarios failed on this: the record kept member-2 closed
// to the ring until the spec changed).
func TestAPendingMemberInAClosedZoneDoesNotCloseItsCluster(t *testing.T) {
	s := ring()
	pendingIn(s)
	s.cluster("member-3").spoke.Status.UnschedulableZones = []string{"zone-3"}
	d := decide(s)
	if len(d.ledger.NotStarting) != 0 {
		t.Errorf("status.notStarting = %+v with zone-3 closed, want none", d.ledger.NotStarting)
	}
	op := d.plan.Operation
	if d.plan.Action != planner.ActBegin || op == nil || op.Member != "main-2" || op.To == nil || op.To.Cluster == "member-3" {
		t.Fatalf("plan %s %+v (%s), want main-2 moved out of the closed zone", d.plan.Action, op, d.plan.Reason)
	}

	// Moved out, the zone open again: the placement spreads it back.
	s = ring()
	movedTo(s, "member-1", "zone-1")
	d = decide(s)
	if op := d.plan.Operation; d.plan.Action != planner.ActBegin || op == nil || op.To == nil || op.To.Cluster != "member-3" {
		t.Errorf("zone-3 open again: plan %s %+v (%s), want main-2 spread back to member-3", d.plan.Action, op, d.plan.Reason)
	}
}
