package etcdcluster

import (
	"fmt"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	etcdfedv1 "github.com/etcdfed/etcdfed/api/v1alpha1"
	"github.com/etcdfed/etcdfed/hub/planner"
)

// TestFleetLimitAcrossRings: with a limit of two, three rings whose spec
// changed each want to begin a Roll: two begin (recorded in their status),
// the third waits with Progressing=False WaitingForFleetLimit naming the
// rings that hold the limit, and records no operation; a ring's next pass
// with its operation in flight keeps its place; once a Roll ends the
// third begins. An Add (restarts nothing) is never held, and no limit
// holds nothing.
func TestFleetLimitAcrossRings(t *testing.T) {
	fl := newFleetLimit(2)
	if err := fl.seed(func() ([]etcdfedv1.EtcdCluster, error) { return nil, nil }); err != nil {
		t.Fatal(err)
	}
	pass := func(name string, given func(s *snapshot)) (*snapshot, *decision, etcdfedv1.EtcdClusterStatus) {
		t.Helper()
		s := ring()
		s.ec.Name, s.ec.UID = name, types.UID("uid-"+name)
		given(s)
		uid := s.ec.UID
		s.fleetMax, s.fleetAdmit = fl.max, func(what string) (bool, []string) { return fl.admit(uid, what) }
		d := decide(s)
		st := computeStatus(s, d, applyResult{}, "")
		ec := s.ec.DeepCopy()
		ec.Status = st
		fl.observe(ec)
		return s, d, st
	}
	roll := func(s *snapshot) { s.ec.Spec.Version = "3.6.15" }
	for _, name := range []string{"a", "b"} {
		_, d, st := pass(name, roll)
		if d.plan.Action != planner.ActBegin || st.Operation == nil || st.Operation.Type != etcdfedv1.OperationRoll {
			t.Fatalf("ring %s: plan %s (%s), operation %+v; want its Roll begun", name, d.plan.Action, d.plan.Reason, st.Operation)
		}
	}
	_, d, st := pass("c", roll)
	c := condition(st, etcdfedv1.ConditionProgressing)
	if d.plan.Action != planner.ActWait || st.Operation != nil || c.Status != metav1.ConditionFalse || c.Reason != etcdfedv1.ReasonWaitingForFleetLimit ||
		!strings.Contains(c.Message, "/a Roll") || !strings.Contains(c.Message, "/b Roll") || !strings.Contains(c.Message, "limit of 2") {
		t.Fatalf("ring c: plan %s, operation %+v, Progressing %s %s: %s; want it waiting for the fleet limit held by a and b", d.plan.Action, st.Operation, c.Status, c.Reason, c.Message)
	}
	if requeueAfter(d.plan, applyResult{}) != fleetLimitRetry {
		t.Errorf("a ring waiting for the fleet limit looks again after %s, want %s", requeueAfter(d.plan, applyResult{}), fleetLimitRetry)
	}
	// Ring a's next pass, its Roll in flight: it keeps its place.
	_, d, st = pass("a", func(s *snapshot) {
		roll(s)
		inFlight(s, etcdfedv1.MembershipOperation{Type: etcdfedv1.OperationRoll, Member: "main-1", Reason: planner.ReasonSpecChanged, Step: string(planner.ActUpdateObject)})
	})
	if st.Operation == nil || d.fleetWait {
		t.Fatalf("ring a's roll in flight: plan %s (%s), operation %+v", d.plan.Action, d.plan.Reason, st.Operation)
	}
	// An Add is not limited.
	_, d, st = pass("d", func(s *snapshot) { s.ec.Spec.Replicas = 5 })
	if d.plan.Action != planner.ActBegin || st.Operation == nil || st.Operation.Type != etcdfedv1.OperationAdd {
		t.Fatalf("ring d's Add: plan %s (%s); an Add restarts nothing and is not held", d.plan.Action, d.plan.Reason)
	}
	// Ring b's Roll ends (its status without an operation): c begins.
	fl.observe(&etcdfedv1.EtcdCluster{ObjectMeta: metav1.ObjectMeta{Namespace: "db", Name: "b", UID: "uid-b"}})
	_, d, st = pass("c", roll)
	if d.plan.Action != planner.ActBegin || st.Operation == nil || st.Operation.Type != etcdfedv1.OperationRoll {
		t.Fatalf("ring c after b's roll ended: plan %s (%s)", d.plan.Action, d.plan.Reason)
	}
	if n := len(fl.inFlight); n != 2 {
		t.Errorf("%d rings hold the limit of 2: %v", n, fl.inFlight)
	}

	// No limit: every ring begins.
	fl = newFleetLimit(0)
	for i := range 5 {
		if _, d, _ := pass(fmt.Sprintf("n%d", i), roll); d.plan.Action != planner.ActBegin {
			t.Fatalf("no limit: ring %d: plan %s (%s)", i, d.plan.Action, d.plan.Reason)
		}
	}
}

// TestFleetLimitSeededFromCache: a restarted hub counts the operations in
// flight in the rings' status before it admits a new one.
func TestFleetLimitSeededFromCache(t *testing.T) {
	fl := newFleetLimit(1)
	held := etcdfedv1.EtcdCluster{ObjectMeta: metav1.ObjectMeta{Namespace: "db", Name: "held", UID: "uid-held"}}
	held.Status.Operation = &etcdfedv1.MembershipOperation{Type: etcdfedv1.OperationReplace, Member: "held-2"}
	if err := fl.seed(func() ([]etcdfedv1.EtcdCluster, error) { return []etcdfedv1.EtcdCluster{held}, nil }); err != nil {
		t.Fatal(err)
	}
	if ok, holders := fl.admit("uid-other", "db/other Roll main-1"); ok || len(holders) != 1 || !strings.Contains(holders[0], "db/held Replace held-2") {
		t.Fatalf("admitted %v past a limit of 1 held by a recorded Replace (holders %v)", ok, holders)
	}
	if ok, _ := fl.admit("uid-held", "db/held Replace held-2"); !ok {
		t.Fatal("the ring that holds the place was refused its own operation")
	}
}
