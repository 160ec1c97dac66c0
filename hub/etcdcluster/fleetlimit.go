package etcdcluster

import (
	"fmt"
	"sort"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"

	etcdfedv1 "github.com/etcdfed/etcdfed/api/v1alpha1"
	"github.com/etcdfed/etcdfed/hub/planner"
)

// The fleet-wide limit on disruptive operations (--max-fleet-disruptions):
// a version roll, a CA roll or the evacuation of a lost member cluster
// across hundreds of rings does not restart, replace or move members in
// hundreds of rings at once. Each ring still runs one operation at a time
// (its planner); the limit bounds how many rings of this hub have a
// disruptive one in flight. A ring whose next operation would pass the
// limit waits, Progressing=False with reason WaitingForFleetLimit, and
// tries again at its next pass (fleetLimitRetry); operations in flight
// always finish. A recovery from quorum loss, membership changes that
// restart nothing (Add, Remove, Bootstrap) and leadership moves are not
// limited.

// fleetLimitRetry is how soon a ring that waits for the fleet limit looks
// again.
const fleetLimitRetry = 2 * time.Second

// limitedOps are the operation types the fleet limit counts: each
// restarts, replaces or moves a member, or stops it for a while.
var limitedOps = map[planner.OpType]bool{
	planner.OpReplace: true, planner.OpMove: true, planner.OpRoll: true,
	planner.OpDisrupt: true, planner.OpDefrag: true,
}

func limited(t etcdfedv1.OperationType) bool { return limitedOps[planner.OpType(t)] }

// fleetLimit counts the rings with a limited operation in flight, from
// every ring's status as its passes record it (seeded from the hub's
// cache of EtcdClusters before the first admission, so a restarted hub
// does not admit past the limit while rings are still unread).
type fleetLimit struct {
	max int

	mu       sync.Mutex
	seeded   bool
	inFlight map[types.UID]string // ring -> "namespace/name Type member"
}

func newFleetLimit(max int) *fleetLimit {
	return &fleetLimit{max: max, inFlight: map[types.UID]string{}}
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
		f.inFlight[ec.UID] = fmt.Sprintf("%s/%s %s %s", ec.Namespace, ec.Name, op.Type, op.Member)
		return
	}
	delete(f.inFlight, ec.UID)
}

// forget drops a deleted ring.
func (f *fleetLimit) forget(uid types.UID) {
	if f == nil {
		return
	}
	f.mu.Lock()
	delete(f.inFlight, uid)
	f.mu.Unlock()
}

// admit reserves a place for ring uid's new operation (what names it):
// true when there is no limit, the ring holds a place already, or one is
// free; else false with the rings in flight, for the status.
func (f *fleetLimit) admit(uid types.UID, what string) (bool, []string) {
	if f == nil || f.max <= 0 {
		return true, nil
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if _, ok := f.inFlight[uid]; ok || len(f.inFlight) < f.max {
		f.inFlight[uid] = what
		return true, nil
	}
	held := make([]string, 0, len(f.inFlight))
	for _, v := range f.inFlight {
		held = append(held, v)
	}
	sort.Strings(held)
	return false, held
}

// gateFleet turns the beginning of a limited operation the fleet limit
// does not admit into a wait (what admit answers is the only input not
// in the plan). It returns the plan and whether it now waits for the
// limit.
func gateFleet(plan planner.Decision, ring string, max int, admit func(what string) (bool, []string)) (planner.Decision, bool) {
	if admit == nil || !actions[plan.Action].begins || plan.Operation == nil || !limitedOps[plan.Operation.Type] {
		return plan, false
	}
	what := fmt.Sprintf("%s %s %s", ring, plan.Operation.Type, plan.Operation.Member)
	ok, held := admit(what)
	if ok {
		return plan, false
	}
	shown := held
	if len(shown) > 5 {
		shown = append(shown[:5:5], fmt.Sprintf("and %d more", len(held)-5))
	}
	return planner.Decision{
		Action: planner.ActWait,
		Reason: fmt.Sprintf("%s of %s (%s) waits for the fleet-wide limit of %d disruptive operations in flight: %v",
			plan.Operation.Type, plan.Operation.Member, plan.Reason, max, shown),
		RequeueAfter: fleetLimitRetry,
	}, true
}
