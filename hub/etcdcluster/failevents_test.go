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

// A member moved out of a failed cluster is told as Evacuating with the
// witnesses' evidence, and that evidence is what MemberReplaced tells at
// the end; a replacement in place (lost volume, failing member) tells no
// Evacuating but keeps its reason; a cordoned zone is named as such; a
// Move (make before break) tells both too.
func TestReplacementEvents(t *testing.T) {
	s := ring()
	s.ec.Spec.FailurePolicy.ZoneGracePeriod = &metav1.Duration{Duration: 30 * time.Second}
	s.cluster("member-2").verdict = liveness.Verdict{Cluster: "member-2", State: liveness.Failed, Reason: "spoke Lease last renewed 35s ago and member-1, member-3 see it gone"}
	from, to := topology.Domain{Cluster: "member-2", Zone: "zone-2"}, topology.Domain{Cluster: "member-1", Zone: "zone-1"}
	op := &planner.Operation{Type: planner.OpReplace, Member: "main-1", MemberID: 0xab, Incarnation: 4, From: &from, To: &to, Reason: string(topology.Evacuate)}
	events, evidence := beginEvents(s, op, "Move main-1 from member-2/zone-2 to member-1/zone-1 (Evacuate)")
	if len(events) != 1 || events[0].reason != etcdfedv1.EventEvacuating || events[0].typ != "Warning" {
		t.Fatalf("evacuation: %+v", events)
	}
	for _, want := range []string{"Evacuating main-1 [ab] from member-2/zone-2 to member-1/zone-1 as incarnation 4", "member cluster member-2 (zone zone-2) failed",
		"member-1, member-3 see it gone", "zone grace 30s expired"} {
		if !strings.Contains(events[0].message, want) {
			t.Errorf("Evacuating %q lacks %q", events[0].message, want)
		}
	}
	s.now = time.Date(2026, 1, 1, 0, 0, 20, 0, time.UTC)
	api := &etcdfedv1.MembershipOperation{Type: etcdfedv1.OperationReplace, Member: "main-1", MemberID: "ab", NewMemberID: "cd", Incarnation: 4,
		From: &etcdfedv1.FailureDomain{Cluster: "member-2", Zone: "zone-2"}, To: &etcdfedv1.FailureDomain{Cluster: "member-1", Zone: "zone-1"},
		Reason: string(topology.Evacuate), StartedAt: metav1.NewTime(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))}
	e := replacedEvent(s, api, evidence)
	if e.reason != etcdfedv1.EventMemberReplaced || !strings.Contains(e.message, "main-1 replaced by incarnation 4: [ab] in member-2/zone-2 -> [cd] in member-1/zone-1, 20s after it began") ||
		!strings.Contains(e.message, "see it gone") {
		t.Errorf("MemberReplaced: %+v", e)
	}
	if e := replacedEvent(s, api, ""); !strings.Contains(e.message, "reason Evacuate") {
		t.Errorf("MemberReplaced without evidence: %+v", e)
	}

	// In place: no Evacuating, the planner's reason kept.
	same := topology.Domain{Cluster: "member-3", Zone: "zone-3"}
	events, evidence = beginEvents(s, &planner.Operation{Type: planner.OpReplace, Member: "main-2", From: &same, To: &same, Reason: "Replace"}, "main-2 lost its data volume")
	if len(events) != 0 || evidence != "main-2 lost its data volume" {
		t.Errorf("in place: %+v %q", events, evidence)
	}
	// Not a replacement: nothing.
	if events, evidence = beginEvents(s, &planner.Operation{Type: planner.OpAdd, Member: "main-3", To: &same}, "scale up"); len(events) != 0 || evidence != "" {
		t.Errorf("add: %+v %q", events, evidence)
	}
	// Cordoned.
	s.cluster("member-2").verdict = liveness.Verdict{Cluster: "member-2", State: liveness.Alive}
	s.ec.Spec.Topology.CordonedZones = []string{"zone-2"}
	events, _ = beginEvents(s, op, "Move main-1 (Evacuate)")
	if len(events) != 1 || !strings.Contains(events[0].message, "zone zone-2 is cordoned") {
		t.Errorf("cordoned: %+v", events)
	}

	// A live member moved out of the cordoned zone, make before break:
	// Evacuating says so, and MemberReplaced says it moved.
	s.ec.Spec.Topology.CordonedZones = []string{"zone-2"}
	move := *op
	move.Type = planner.OpMove
	events, evidence = beginEvents(s, &move, "Move main-1 (Evacuate)")
	if len(events) != 1 || !strings.Contains(events[0].message, "as incarnation 4, make before break: Move main-1 (Evacuate): zone zone-2 is cordoned") {
		t.Errorf("move: %+v", events)
	}
	// The planner's reason of a Move already says how: said once.
	events, _ = beginEvents(s, &move, "Move main-1 (Evacuate), make before break")
	if len(events) != 1 || strings.Count(events[0].message, "make before break") != 1 {
		t.Errorf("move with the planner's reason: %+v", events)
	}
	apiMove := *api
	apiMove.Type = etcdfedv1.OperationMove
	if e := replacedEvent(s, &apiMove, evidence); e.reason != etcdfedv1.EventMemberReplaced || !strings.Contains(e.message, "main-1 moved make before break to incarnation 4: [ab] in member-2/zone-2 -> [cd]") {
		t.Errorf("MemberReplaced of a move: %+v", e)
	}

	// A migration: the cluster no longer allowed is the evidence.
	s.ec.Spec.Topology.CordonedZones = nil
	s.ec.Spec.Topology.Clusters = []string{"member-1", "member-3"}
	if events, _ = beginEvents(s, &move, "Move main-1 (Evacuate)"); len(events) != 1 || !strings.Contains(events[0].message, "member cluster member-2 is no longer allowed (spec.topology.clusters: member-1, member-3)") {
		t.Errorf("migration: %+v", events)
	}

	var mem replaceEvidence
	mem.put(s.ec.UID, "main-1", 4, "why")
	if got, ok := mem.take(s.ec.UID, "main-1", 4); !ok || got != "why" {
		t.Errorf("take: %q %v", got, ok)
	}
	if _, ok := mem.take(s.ec.UID, "main-1", 4); ok {
		t.Errorf("taken twice")
	}
}
