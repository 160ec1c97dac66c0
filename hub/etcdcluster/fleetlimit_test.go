package etcdcluster

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/event"

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
		ns := s.ec.Namespace
		s.fleetMax, s.fleetAdmit = fl.max, func(req fleetRequest) fleetAnswer {
			return fl.admit(uid, types.NamespacedName{Namespace: ns, Name: string(uid)}, req)
		}
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
	if p := passPriority(d); p == nil || *p != fleetWaitPriority || *p >= 0 {
		t.Errorf("a ring waiting for the fleet limit is queued at priority %v, want %d (below every other pass)", p, fleetWaitPriority)
	}
	// Ring a's next pass, its Roll in flight: it keeps its place.
	_, d, st = pass("a", func(s *snapshot) {
		roll(s)
		inFlight(s, etcdfedv1.MembershipOperation{Type: etcdfedv1.OperationRoll, Member: "main-1", Reason: planner.ReasonSpecChanged, Step: string(planner.ActUpdateObject)})
	})
	if st.Operation == nil || d.fleetWait {
		t.Fatalf("ring a's roll in flight: plan %s (%s), operation %+v", d.plan.Action, d.plan.Reason, st.Operation)
	}
	// Its next pass, which checks the step it just took, is queued at
	// stepPriority, whatever it was queued with before (a request keeps
	// its priority when a result names none).
	if d.plan.Action == planner.ActWait {
		t.Fatalf("ring a's roll in flight took no step: %s", d.plan.Reason)
	}
	if p := passPriority(d); p == nil || *p != stepPriority {
		t.Errorf("a ring holding a place, after a step, is queued at priority %v, want %d", ptr.Deref(p, -1), stepPriority)
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
	if a := fl.admit("uid-other", types.NamespacedName{Namespace: "db", Name: "other"}, fleetRequest{what: "db/other Roll main-1"}); a.ok || len(a.held) != 1 || !strings.Contains(a.held[0], "db/held Replace held-2") {
		ok, holders := a.ok, a.held
		t.Fatalf("admitted %v past a limit of 1 held by a recorded Replace (holders %v)", ok, holders)
	}
	if a := fl.admit("uid-held", types.NamespacedName{Namespace: "db", Name: "held"}, fleetRequest{what: "db/held Replace held-2"}); !a.ok {
		t.Fatal("the ring that holds the place was refused its own operation")
	}
}

// TestFleetQueueOrder: the places that free go to the head of the queue,
// not to whichever ring asks first: a ring that lost a member (Replace)
// before a roll that waited longer, then the namespace with fewer
// operations in flight, then the ring that waited longest; each waiting
// ring is told its place; a ring that stops asking leaves the queue.
func TestFleetQueueOrder(t *testing.T) {
	now := time.Unix(1_000_000, 0)
	fl := newFleetLimit(2)
	fl.now = func() time.Time { return now }
	ask := func(ns, name string, op planner.OpType) fleetAnswer {
		t.Helper()
		return fl.admit(types.UID(ns+"/"+name), types.NamespacedName{Namespace: ns, Name: name}, fleetRequest{what: ns + "/" + name + " " + string(op), priority: fleetPriority[op]})
	}
	end := func(ns, name string) {
		fl.observe(&etcdfedv1.EtcdCluster{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, UID: types.UID(ns + "/" + name)}})
	}
	// Team a's rolls take both places.
	for _, n := range []string{"r1", "r2"} {
		if a := ask("a", n, planner.OpRoll); !a.ok {
			t.Fatalf("a/%s refused with the limit free: %+v", n, a)
		}
	}
	// Queue, in the order they ask: a/r3 (roll), b/r1 (roll), a/x (a lost
	// member), b/r2 (roll), each a second apart.
	order := []struct {
		ns, name string
		op       planner.OpType
	}{{"a", "r3", planner.OpRoll}, {"b", "r1", planner.OpRoll}, {"a", "x", planner.OpReplace}, {"b", "r2", planner.OpRoll}}
	for _, w := range order {
		now = now.Add(time.Second)
		if a := ask(w.ns, w.name, w.op); a.ok {
			t.Fatalf("%s/%s admitted past a full limit", w.ns, w.name)
		}
	}
	// Places: a/x (Replace) first; then among the rolls, team b's (no
	// operation in flight) before team a's; b/r1 before b/r2 (it waited
	// longer).
	want := map[string]int{"a/x": 1, "b/r1": 2, "b/r2": 3, "a/r3": 4}
	for _, w := range order {
		if a := ask(w.ns, w.name, w.op); a.ok || a.position != want[w.ns+"/"+w.name] || a.waiting != 4 {
			t.Errorf("%s/%s: %+v, want place %d of 4", w.ns, w.name, a, want[w.ns+"/"+w.name])
		}
	}
	// One place frees: the roll that asks first does not take it; the
	// Replace does.
	end("a", "r1")
	if a := ask("a", "r3", planner.OpRoll); a.ok {
		t.Fatal("a/r3's roll took the freed place ahead of a/x's Replace")
	}
	if a := ask("b", "r2", planner.OpRoll); a.ok {
		t.Fatal("b/r2's roll took the freed place ahead of a/x's Replace")
	}
	if a := ask("a", "x", planner.OpReplace); !a.ok {
		t.Fatalf("a/x's Replace, at the head of the queue, refused a free place: %+v", a)
	}
	// a/x's Replace ends: one place, team a holds the other (a/r2). Team
	// b has nothing in flight, so its rolls go ahead of a/r3, which waited
	// longer.
	end("a", "x")
	if a := ask("a", "r3", planner.OpRoll); a.ok || a.position != 3 {
		t.Fatalf("a/r3: %+v, want place 3 behind b/r1 and b/r2 (team a holds a place, team b none)", a)
	}
	if a := ask("b", "r1", planner.OpRoll); !a.ok {
		t.Fatalf("b/r1 refused the free place at the head of the queue: %+v", a)
	}
	// Team a's roll ends, team b holds one place: a/r3 is ahead of b/r2.
	end("a", "r2")
	if a := ask("b", "r2", planner.OpRoll); a.ok || a.position != 2 {
		t.Fatalf("b/r2: %+v, want place 2 behind a/r3 (team b holds a place, team a none)", a)
	}
	if a := ask("a", "r3", planner.OpRoll); !a.ok {
		t.Fatalf("a/r3 refused the free place at the head of the queue: %+v", a)
	}
	end("b", "r1")
	if a := ask("b", "r2", planner.OpRoll); !a.ok {
		t.Fatalf("b/r2 refused a free place: %+v", a)
	}
	// A waiter that stops asking leaves the queue: c/z asks once with the
	// limit full (a/r3, b/r2), then never again; after fleetWaiterStale a
	// later ring is not held behind it.
	if a := ask("c", "z", planner.OpReplace); a.ok || a.position != 1 || a.waiting != 1 {
		t.Fatalf("c/z: %+v, want place 1 of 1 with the limit full", a)
	}
	end("a", "r3")
	if a := ask("c", "soon", planner.OpDefrag); a.ok || a.position != 2 {
		t.Fatalf("c/soon: %+v, want place 2 behind c/z, which asked %s ago", a, time.Duration(0))
	}
	now = now.Add(fleetWaiterStale + time.Second)
	if a := ask("c", "soon", planner.OpDefrag); !a.ok {
		t.Fatalf("c/soon refused behind a waiter that stopped asking %s ago: %+v", fleetWaiterStale+time.Second, a)
	}
	if len(fl.waiting) != 0 {
		t.Errorf("queue after the stale waiter left: %v", fl.waiting)
	}
}

// TestFleetQueueKeepsPlacesOfSlowPasses: forty rings wait for a limit of
// two, and the hub's passes come 20 s apart for each (a workqueue full of
// waiting rings, as in BenchmarkFleet's roll of 100 rings): when a place
// frees, the ring that waited longest takes it at its next pass, however
// late that pass comes; a ring whose pass plans nothing leaves the queue
// at once. With waiters dropped 10 s after their last ask, each came back
// at the end of the queue and no ring was ever admitted.
func TestFleetQueueKeepsPlacesOfSlowPasses(t *testing.T) {
	now := time.Unix(1_000_000, 0)
	fl := newFleetLimit(2)
	fl.now = func() time.Time { return now }
	uid := func(i int) types.UID { return types.UID(fmt.Sprintf("fleet/r%d", i)) }
	ask := func(i int) fleetAnswer {
		return fl.admit(uid(i), types.NamespacedName{Namespace: "fleet", Name: fmt.Sprintf("r%d", i)}, fleetRequest{what: fmt.Sprintf("fleet/r%d Roll", i), priority: fleetPriority[planner.OpRoll]})
	}
	end := func(i int) {
		fl.observe(&etcdfedv1.EtcdCluster{ObjectMeta: metav1.ObjectMeta{Namespace: "fleet", Name: fmt.Sprintf("r%d", i), UID: uid(i)}})
	}
	const rings = 42
	for i := range 2 {
		if a := ask(i); !a.ok {
			t.Fatalf("r%d refused with the limit free: %+v", i, a)
		}
	}
	// Every waiting ring's pass in turn, 0.5 s apart: each ring asks
	// every 20 s.
	round := func() []int {
		var admitted []int
		for i := 2; i < rings; i++ {
			now = now.Add(500 * time.Millisecond)
			if _, in := fl.inFlight[uid(i)]; in {
				continue
			}
			if a := ask(i); a.ok {
				admitted = append(admitted, i)
			}
		}
		return admitted
	}
	if got := round(); len(got) != 0 {
		t.Fatalf("admitted %v past a full limit", got)
	}
	end(0)
	if got := round(); len(got) != 1 || got[0] != 2 {
		t.Fatalf("a place freed, passes 20 s apart: admitted %v, want r2, which waited longest", got)
	}
	end(1)
	end(2)
	if got := round(); len(got) != 2 || got[0] != 3 || got[1] != 4 {
		t.Fatalf("two places freed: admitted %v, want r3 and r4", got)
	}
	// r5, next in the queue, plans nothing at its pass: it leaves, and r6
	// takes the place that frees.
	fl.leave(uid(5))
	end(3)
	now = now.Add(time.Second)
	if a := ask(6); !a.ok {
		t.Fatalf("r6 refused a free place behind r5, which left the queue: %+v", a)
	}
}

// A place that frees wakes the rings it goes to, at the head of the queue,
// as many as places are free, once each until they ask again; a ring that
// leaves the queue passes its turn on. Before, waiting rings asked every
// 2 s whether a place had freed.
func TestFleetPlaceFreedWakesTheHeadOfTheQueue(t *testing.T) {
	now := time.Unix(1_000_000, 0)
	fl := newFleetLimit(1)
	fl.now = func() time.Time { return now }
	var woken []string
	fl.wake = func(k types.NamespacedName) { woken = append(woken, k.Name) }
	key := func(i int) types.NamespacedName {
		return types.NamespacedName{Namespace: "fleet", Name: fmt.Sprintf("r%d", i)}
	}
	uid := func(i int) types.UID { return types.UID(key(i).String()) }
	ask := func(i int) fleetAnswer {
		now = now.Add(time.Second)
		return fl.admit(uid(i), key(i), fleetRequest{what: key(i).String() + " Roll", priority: fleetPriority[planner.OpRoll]})
	}
	end := func(i int) {
		fl.observe(&etcdfedv1.EtcdCluster{ObjectMeta: metav1.ObjectMeta{Namespace: "fleet", Name: key(i).Name, UID: uid(i)}})
	}
	if !ask(0).ok {
		t.Fatal("r0 refused with the limit free")
	}
	fl.observe(&etcdfedv1.EtcdCluster{ObjectMeta: metav1.ObjectMeta{Namespace: "fleet", Name: "r0", UID: uid(0)},
		Status: etcdfedv1.EtcdClusterStatus{Operation: &etcdfedv1.MembershipOperation{Type: etcdfedv1.OperationRoll, Member: "r0-1"}}})
	for i := 1; i <= 3; i++ {
		if ask(i).ok {
			t.Fatalf("r%d admitted past a full limit", i)
		}
	}
	if len(woken) != 0 {
		t.Fatalf("woken %v with no place freed", woken)
	}
	end(0)
	if !slices.Equal(woken, []string{"r1"}) {
		t.Fatalf("r0's operation ended: woken %v, want r1 (the head of the queue) alone", woken)
	}
	end(0) // a second pass of r0 frees nothing more: no second wake
	if len(woken) != 1 {
		t.Fatalf("a pass that freed nothing woke %v", woken[1:])
	}
	fl.leave(uid(1)) // r1's pass plans nothing limited now: its turn passes on
	if !slices.Equal(woken, []string{"r1", "r2"}) {
		t.Fatalf("r1 left the queue: woken %v, want r2 next", woken)
	}
	if !ask(2).ok {
		t.Fatal("r2, woken for the free place, was refused")
	}
	if ask(3).ok {
		t.Fatal("r3 admitted past the limit r2 now fills")
	}
	if len(woken) != 2 {
		t.Fatalf("admitting r2 woke %v", woken[2:])
	}
}

// TestWaitingRingNews: a ring that waits for the fleet limit is not woken
// by its own status rewrites (its place in the queue moving), and is by
// anything else; a ring that does not wait is woken by every update.
func TestWaitingRingNews(t *testing.T) {
	waiting := func(msg string) *etcdfedv1.EtcdCluster {
		ec := &etcdfedv1.EtcdCluster{ObjectMeta: metav1.ObjectMeta{Namespace: "db", Name: "r", Generation: 3, ResourceVersion: "10", Labels: map[string]string{"team": "a"}}}
		ec.Spec.Version = "3.6.16"
		meta.SetStatusCondition(&ec.Status.Conditions, metav1.Condition{Type: etcdfedv1.ConditionProgressing, Status: metav1.ConditionFalse,
			Reason: etcdfedv1.ReasonWaitingForFleetLimit, Message: msg})
		return ec
	}
	old := waiting("Roll of r-0 waits for the fleet-wide limit of 10 disruptive operations in flight (place 7 of 90 in the queue)")
	moved := waiting("Roll of r-0 waits for the fleet-wide limit of 10 disruptive operations in flight (place 6 of 89 in the queue)")
	moved.ResourceVersion = "11"
	pred := waitingRingNews()
	update := func(o, n *etcdfedv1.EtcdCluster) bool {
		return pred.Update(event.UpdateEvent{ObjectOld: o, ObjectNew: n})
	}
	if update(old, moved) {
		t.Error("a waiting ring's place in the queue moved (status only): it is woken, want not")
	}
	for name, change := range map[string]func(ec *etcdfedv1.EtcdCluster){
		"spec":       func(ec *etcdfedv1.EtcdCluster) { ec.Spec.Version = "3.6.17"; ec.Generation++ },
		"label":      func(ec *etcdfedv1.EtcdCluster) { ec.Labels["etcdfed.dev/shard"] = "b" },
		"annotation": func(ec *etcdfedv1.EtcdCluster) { ec.Annotations = map[string]string{"etcdfed.dev/x": "y"} },
		"deletion":   func(ec *etcdfedv1.EtcdCluster) { now := metav1.Now(); ec.DeletionTimestamp = &now },
		"finalizers": func(ec *etcdfedv1.EtcdCluster) { ec.Finalizers = []string{"x"} },
		"admitted": func(ec *etcdfedv1.EtcdCluster) {
			meta.SetStatusCondition(&ec.Status.Conditions, metav1.Condition{Type: etcdfedv1.ConditionProgressing, Status: metav1.ConditionTrue, Reason: "Roll", Message: "rolling"})
		},
	} {
		n := moved.DeepCopy()
		change(n)
		if !update(old, n) {
			t.Errorf("a waiting ring's %s changed: not woken", name)
		}
	}
	// A ring that did not wait before, or has no Progressing at all.
	began := old.DeepCopy()
	meta.RemoveStatusCondition(&began.Status.Conditions, etcdfedv1.ConditionProgressing)
	if !update(began, moved) {
		t.Error("a ring that starts to wait for the fleet limit: not woken")
	}
	if !update(began, began.DeepCopy()) {
		t.Error("a ring that does not wait: an update does not wake it")
	}
}
