package etcdcluster

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"
	mcmanager "sigs.k8s.io/multicluster-runtime/pkg/manager"
	mcreconcile "sigs.k8s.io/multicluster-runtime/pkg/reconcile"

	etcdfedv1 "github.com/etcdfed/etcdfed/api/v1alpha1"
	"github.com/etcdfed/etcdfed/hub/planner"
)

// The fleet-wide limit on disruptive operations (--max-fleet-disruptions):
// a version roll, a CA roll or the evacuation of a lost member cluster
// across hundreds of rings does not restart, replace or move members in
// hundreds of rings at once. Each ring still runs one operation at a time
// (its planner); the limit bounds how many rings of this hub have a
// disruptive one in flight. A ring whose next operation would pass the
// limit waits, Progressing=False with reason WaitingForFleetLimit, and is
// woken when a place frees for it (wake: the rings at the head of the
// queue, as many as places are free), else asks again after
// fleetLimitRetry; operations in flight always finish. A recovery from quorum loss, membership changes that
// restart nothing (Add, Remove, Bootstrap) and leadership moves are not
// limited.
//
// The rings that wait form one queue, and a place that frees goes to the
// head of it, not to whichever ring's pass comes first: by priority (a
// ring that lost a member, whose Replace restores its failure tolerance,
// before one that moves a member, before a planned disruption, a roll and
// a defragmentation: fleetPriority), then to the namespace with the fewest
// operations in flight (so one tenant's roll of a hundred rings does not
// hold every place while another tenant's rings wait), then by how long
// the ring has waited. A ring's Progressing message says where it stands
// ("place 3 of 45 in the queue"). A ring leaves the queue at its first
// pass that plans no limited operation's beginning, or when it is
// deleted; one whose passes stop before they decide (its observation
// fails) after fleetWaiterStale.

// fleetLimitRetry is how soon a ring that waits for the fleet limit looks
// again if it is not woken before: a place that frees wakes the ring it
// goes to (fleetLimit.wake), so this is only the safety net for a wake
// lost (its channel full). It was 2 s, with no wake: a hundred waiting
// rings asked fifty times a second, and each freed place went unused for
// up to a pass of every waiting ring (BenchmarkFleet, 2026-11-29).
const fleetLimitRetry = 15 * time.Second

// fleetWaitPriority is the workqueue priority of a waiting ring's next
// pass (controller-runtime's priority queue, on by default): below every
// other pass, so that the rings holding a place, whose passes move their
// operations on, and spec changes are not queued behind a hundred
// waiting rings' retries (BenchmarkFleet's CA rotation of 100 rings under
// a limit of 10, 2026-11-30: a holder's pass came about every 20 s with
// about 90 rings waiting, and fewer than 10 places were used most of the
// time). A waiting ring loses nothing by it: a place that frees wakes it
// (fleetSource, at the default priority, which lifts a queued item), and
// its retry is only the safety net for a lost wake.
const fleetWaitPriority = handler.LowPriority

// stepPriority is the workqueue priority of the pass that checks a step
// just taken (a member's objects written, a learner added, a member
// removed), and of a ring's pass woken by its own member objects while
// an operation is in flight (stepNews): above the default, so that a
// ring in the middle of an operation is not queued behind every ring
// woken for news that changes nothing of theirs. With one member cluster
// lost under 300 rings, each step of the 75 repairs waited about 50 s
// behind the rest of the fleet (BenchmarkFleet, 2026-12-03). Polls while
// a step takes effect (a learner catching up) stay at the default, so
// ten operations in flight cannot keep every worker.
const stepPriority = 10

// passPriority is the priority of a ring's next pass. It is set on every
// pass: a request keeps the priority it was queued with when a result
// names none, so a ring once queued low (waiting, or an unchanged object
// relisted at a hub's start) would otherwise stay low as it goes on, and
// one queued for a step would stay high.
func passPriority(d *decision) *int {
	switch {
	case d.fleetWait:
		return ptr.To(fleetWaitPriority)
	case !actions[d.plan.Action].idle:
		return ptr.To(stepPriority)
	}
	return ptr.To(0)
}

// fleetWaiterStale is how long a waiting ring keeps its place in the queue
// without asking again. A waiting ring asks every fleetLimitRetry only
// while the hub keeps up: a hundred rings waiting at once fill the
// workqueue, and each ring's pass then comes far later (every 23 s in
// BenchmarkFleet's version roll of 100 rings, 2026-11-29). Shorter than
// that (it was 10 s), every waiter lost its place before it asked again,
// came back at the end of the queue, and no ring was ever admitted. A
// ring that stops asking leaves at its next pass (leave): this bound only
// drops one whose passes stopped.
const fleetWaiterStale = 5 * time.Minute

// limitedOps are the operation types the fleet limit counts: each
// restarts, replaces or moves a member, or stops it for a while.
var limitedOps = map[planner.OpType]bool{
	planner.OpReplace: true, planner.OpMove: true, planner.OpRoll: true,
	planner.OpDisrupt: true, planner.OpDefrag: true,
}

// fleetPriority orders the queue of rings that wait for the limit, lowest
// first: a Replace restores a ring that lost a member (it tolerates one
// failure fewer until it ends), a Move evacuates a member from where it
// cannot stay, a Disrupt is a planned stop a user asked for, a Roll
// applies a spec change, and a Defrag can always wait.
var fleetPriority = map[planner.OpType]int{
	planner.OpReplace: 0, planner.OpMove: 1, planner.OpDisrupt: 2,
	planner.OpRoll: 3, planner.OpDefrag: 4,
}

func limited(t etcdfedv1.OperationType) bool { return limitedOps[planner.OpType(t)] }

// fleetRequest is one ring's ask for a place under the limit.
type fleetRequest struct {
	// what names the operation for the other rings' status:
	// "namespace/name Type member".
	what string
	// priority orders the queue (fleetPriority).
	priority int
}

// fleetAnswer is the limit's answer to a fleetRequest.
type fleetAnswer struct {
	ok bool
	// With !ok: the operations in flight (sorted), this ring's place in
	// the queue (1-based) and how many rings wait.
	held              []string
	position, waiting int
}

// fleetHolder is a ring with a limited operation in flight.
type fleetHolder struct {
	namespace, what string
}

// fleetWaiter is a ring in the queue.
type fleetWaiter struct {
	key         types.NamespacedName
	req         fleetRequest
	since, seen time.Time
	// woken is when a freed place last woke the ring (zero: never); a
	// ring woken since it last asked is not woken again.
	woken time.Time
}

// fleetLimit counts the rings with a limited operation in flight, from
// every ring's status as its passes record it (seeded from the hub's
// cache of EtcdClusters before the first admission, so a restarted hub
// does not admit past the limit while rings are still unread), and queues
// the rings that wait.
type fleetLimit struct {
	max int
	now func() time.Time

	// wake asks for a pass of a waiting ring a freed place goes to; it
	// must not block (it is called under mu). nil: none.
	wake func(types.NamespacedName)

	mu       sync.Mutex
	seeded   bool
	inFlight map[types.UID]fleetHolder
	waiting  map[types.UID]*fleetWaiter
}

func newFleetLimit(max int) *fleetLimit {
	return &fleetLimit{max: max, now: time.Now, inFlight: map[types.UID]fleetHolder{}, waiting: map[types.UID]*fleetWaiter{}}
}

// seed records every ring's operation once, from list (the hub's cache).
func (f *fleetLimit) seed(list func() ([]etcdfedv1.EtcdCluster, error)) error {
	if f == nil || f.max <= 0 {
		return nil
	}
	f.mu.Lock()
	done := f.seeded
	f.mu.Unlock()
	if done {
		return nil
	}
	items, err := list()
	if err != nil {
		return fmt.Errorf("list EtcdClusters for the fleet limit: %w", err)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.seeded {
		return nil
	}
	for i := range items {
		f.observeLocked(&items[i])
	}
	f.seeded = true
	return nil
}

// observe records a ring's operation as its status now says.
func (f *fleetLimit) observe(ec *etcdfedv1.EtcdCluster) {
	if f == nil || f.max <= 0 {
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.observeLocked(ec)
}

func (f *fleetLimit) observeLocked(ec *etcdfedv1.EtcdCluster) {
	if op := ec.Status.Operation; op != nil && limited(op.Type) && ec.DeletionTimestamp.IsZero() {
		f.inFlight[ec.UID] = fleetHolder{namespace: ec.Namespace, what: fmt.Sprintf("%s/%s %s %s", ec.Namespace, ec.Name, op.Type, op.Member)}
		delete(f.waiting, ec.UID)
		f.exportLocked()
		return
	}
	if _, held := f.inFlight[ec.UID]; held {
		delete(f.inFlight, ec.UID)
		f.wakeLocked()
	}
	f.exportLocked()
}

// wakeLocked wakes the rings at the head of the queue that the free
// places go to, each once until it asks again.
func (f *fleetLimit) wakeLocked() {
	if f.wake == nil {
		return
	}
	free := f.max - len(f.inFlight)
	if free <= 0 || len(f.waiting) == 0 {
		return
	}
	now := f.now()
	for i, uid := range f.queueLocked() {
		if i >= free {
			break
		}
		if w := f.waiting[uid]; !w.woken.After(w.seen) {
			w.woken = now
			f.wake(w.key)
		}
	}
}

// leave takes ring uid out of the queue: its pass asked for no place.
func (f *fleetLimit) leave(uid types.UID) {
	if f == nil || f.max <= 0 {
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if _, ok := f.waiting[uid]; ok {
		delete(f.waiting, uid)
		f.wakeLocked()
		f.exportLocked()
	}
}

// forget drops a deleted ring.
func (f *fleetLimit) forget(uid types.UID) {
	if f == nil {
		return
	}
	f.mu.Lock()
	delete(f.inFlight, uid)
	delete(f.waiting, uid)
	f.wakeLocked()
	f.exportLocked()
	f.mu.Unlock()
}

// admit reserves a place for ring uid (key) for the operation req names:
// yes when there is no limit, the ring holds a place already, or a place
// is free and no ring ahead of it in the queue waits for it; else the
// ring joins (or keeps) its place in the queue.
func (f *fleetLimit) admit(uid types.UID, key types.NamespacedName, req fleetRequest) fleetAnswer {
	if f == nil || f.max <= 0 {
		return fleetAnswer{ok: true}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	defer f.exportLocked()
	now, namespace := f.now(), key.Namespace
	if _, ok := f.inFlight[uid]; ok {
		f.inFlight[uid] = fleetHolder{namespace: namespace, what: req.what}
		delete(f.waiting, uid)
		return fleetAnswer{ok: true}
	}
	for id, w := range f.waiting {
		if now.Sub(w.seen) > fleetWaiterStale {
			delete(f.waiting, id)
		}
	}
	w := f.waiting[uid]
	if w == nil {
		w = &fleetWaiter{key: key, since: now}
		f.waiting[uid] = w
	}
	w.req, w.seen = req, now
	queue := f.queueLocked()
	pos := slices.Index(queue, uid)
	if pos < f.max-len(f.inFlight) {
		f.inFlight[uid] = fleetHolder{namespace: namespace, what: req.what}
		delete(f.waiting, uid)
		return fleetAnswer{ok: true}
	}
	held := make([]string, 0, len(f.inFlight))
	for _, h := range f.inFlight {
		held = append(held, h.what)
	}
	sort.Strings(held)
	return fleetAnswer{held: held, position: pos + 1, waiting: len(queue)}
}

// queueLocked is the waiting rings in the order places go to them.
func (f *fleetLimit) queueLocked() []types.UID {
	perNamespace := map[string]int{}
	for _, h := range f.inFlight {
		perNamespace[h.namespace]++
	}
	queue := make([]types.UID, 0, len(f.waiting))
	for id := range f.waiting {
		queue = append(queue, id)
	}
	sort.Slice(queue, func(i, j int) bool {
		a, b := f.waiting[queue[i]], f.waiting[queue[j]]
		switch {
		case a.req.priority != b.req.priority:
			return a.req.priority < b.req.priority
		case perNamespace[a.key.Namespace] != perNamespace[b.key.Namespace]:
			return perNamespace[a.key.Namespace] < perNamespace[b.key.Namespace]
		case !a.since.Equal(b.since):
			return a.since.Before(b.since)
		}
		return queue[i] < queue[j]
	})
	return queue
}

// exportLocked sets the limit's gauges.
func (f *fleetLimit) exportLocked() {
	metricFleetInFlight.Set(float64(len(f.inFlight)))
	metricFleetWaiting.Set(float64(len(f.waiting)))
}

var (
	metricFleetInFlight = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "etcdfed_hub_fleet_disruptions_in_flight", Help: "Rings of this hub with a disruptive operation in flight under --max-fleet-disruptions.",
	})
	metricFleetWaiting = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "etcdfed_hub_fleet_disruptions_waiting", Help: "Rings of this hub waiting for a place under --max-fleet-disruptions.",
	})
	metricFleetWakes = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "etcdfed_hub_fleet_wakes_total", Help: "Passes of waiting rings asked for because a place under --max-fleet-disruptions freed for them.",
	})
)

func init() { metrics.Registry.MustRegister(metricFleetInFlight, metricFleetWaiting, metricFleetWakes) }

// gateFleet turns the beginning of a limited operation the fleet limit
// does not admit into a wait (what admit answers is the only input not
// in the plan). It returns the plan and whether it now waits for the
// limit.
func gateFleet(plan planner.Decision, ring string, max int, admit func(fleetRequest) fleetAnswer) (planner.Decision, bool) {
	if admit == nil || !actions[plan.Action].begins || plan.Operation == nil || !limitedOps[plan.Operation.Type] {
		return plan, false
	}
	a := admit(fleetRequest{
		what:     fmt.Sprintf("%s %s %s", ring, plan.Operation.Type, plan.Operation.Member),
		priority: fleetPriority[plan.Operation.Type],
	})
	if a.ok {
		return plan, false
	}
	shown := a.held
	if len(shown) > 5 {
		shown = append(shown[:5:5], fmt.Sprintf("and %d more", len(a.held)-5))
	}
	return planner.Decision{
		Action: planner.ActWait,
		Reason: fmt.Sprintf("%s of %s (%s) waits for the fleet-wide limit of %d disruptive operations in flight (place %d of %d in the queue): %v",
			plan.Operation.Type, plan.Operation.Member, plan.Reason, max, a.position, a.waiting, shown),
		RequeueAfter: fleetLimitRetry,
	}, true
}

// fleetSource is the controller's source of "a place under the fleet
// limit freed for this ring" (fleetLimit.wake): a buffered channel, sent
// to without blocking; a wake lost to a full channel leaves the ring to
// its fleetLimitRetry.
func (r *Reconciler) fleetSource() source.TypedSource[mcreconcile.Request] {
	ch := make(chan event.TypedGenericEvent[types.NamespacedName], 1024)
	r.fleet.wake = func(key types.NamespacedName) {
		select {
		case ch <- event.TypedGenericEvent[types.NamespacedName]{Object: key}:
			metricFleetWakes.Inc()
		default:
		}
	}
	return source.TypedChannel(ch, handler.TypedFuncs[types.NamespacedName, mcreconcile.Request]{
		GenericFunc: func(_ context.Context, e event.TypedGenericEvent[types.NamespacedName], q workqueue.TypedRateLimitingInterface[mcreconcile.Request]) {
			q.Add(mcreconcile.Request{Request: reconcile.Request{NamespacedName: e.Object}, ClusterName: mcmanager.LocalCluster})
		},
	})
}
