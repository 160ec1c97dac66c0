package etcdcluster

import (
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	etcdfedv1 "github.com/etcdfed/etcdfed/api/v1alpha1"
)

// memberNews drops the EtcdMember updates that change nothing the hub
// reads: a spoke rewrites a member's etcd view once in five minutes at rest
// only because its counters moved (raft index, database sizes, the time it
// looked). Each such report used to wake the ring for a pass that found
// nothing to do: at rest the hub's passes grew with members, one per member
// per minute. Every other change (conditions, addresses, the member's ID,
// learner or leader, the term, the spec, labels, deletion) still wakes it,
// and so does a move of the database sizes that a size policy may act on
// (etcdfedv1.SizeNews: the spoke writes those at once), so that
// defragmentation and the NOSPACE guard act within seconds of it; the
// resync catches the other counters within resyncPeriod.
func memberNews() predicate.Predicate {
	return predicate.Funcs{UpdateFunc: func(e event.UpdateEvent) bool {
		o, ok1 := e.ObjectOld.(*etcdfedv1.EtcdMember)
		n, ok2 := e.ObjectNew.(*etcdfedv1.EtcdMember)
		if !ok1 || !ok2 {
			return true
		}
		return !onlyCountersMoved(o, n)
	}}
}

// onlyCountersMoved: the two versions differ at most in the etcd view's
// counters and the object's bookkeeping (resourceVersion, managedFields).
func onlyCountersMoved(o, n *etcdfedv1.EtcdMember) bool {
	if !o.DeletionTimestamp.Equal(n.DeletionTimestamp) || o.Generation != n.Generation ||
		!equality.Semantic.DeepEqual(o.Labels, n.Labels) || !equality.Semantic.DeepEqual(o.Spec, n.Spec) {
		return false
	}
	if o.Status.Etcd != nil && n.Status.Etcd != nil && etcdfedv1.SizeNews(o.Status.Etcd, n.Status.Etcd, n.QuotaBytes()) {
		return false
	}
	os, ns := o.Status.DeepCopy(), n.Status.DeepCopy()
	for _, v := range []*etcdfedv1.MemberEtcdView{os.Etcd, ns.Etcd} {
		if v != nil {
			v.RaftIndex, v.DBSize, v.DBSizeInUse, v.ObservedAt = 0, 0, 0, nil
			if d := v.WALFsync; d != nil {
				// The disk view's counts move with every write; its tail
				// (p99 and max), its window coming to full length
				// (timingFloor Disk lowers only on full windows), and late
				// heartbeats coming or going, are news.
				d.Syncs, d.WindowSeconds = 0, min(d.WindowSeconds/etcdfedv1.DiskWindowSeconds, 1)
				d.LateHeartbeats = min(d.LateHeartbeats, 1)
			}
		}
	}
	return equality.Semantic.DeepEqual(os, ns)
}

// waitingRingNews drops the updates of an EtcdCluster that waits for the
// fleet limit, and waited before, when nothing but its status changed: the
// hub wrote them itself, mostly to move the ring's place in the queue
// ("place 7 of 90") as places freed, and each used to wake the ring for a
// pass that found it still waiting. With a hundred rings waiting, every
// freed place rewrote the place of each and queued a pass of each ahead
// of the rings holding places (BenchmarkFleet's CA rotation of 100 rings,
// 2026-11-30). A waiting ring is woken by the place that frees for it
// (fleetSource), by any change of its spec, labels, annotations or
// deletion, by its members' and clusters' news, and by its own retry
// (fleetLimitRetry).
func waitingRingNews() predicate.Predicate {
	return predicate.Funcs{UpdateFunc: func(e event.UpdateEvent) bool {
		o, ok1 := e.ObjectOld.(*etcdfedv1.EtcdCluster)
		n, ok2 := e.ObjectNew.(*etcdfedv1.EtcdCluster)
		if !ok1 || !ok2 {
			return true
		}
		return !waitsForFleet(o) || !waitsForFleet(n) || !onlyStatusChanged(o, n)
	}}
}

// waitsForFleet: ec's last pass left it waiting for the fleet limit.
func waitsForFleet(ec *etcdfedv1.EtcdCluster) bool {
	c := meta.FindStatusCondition(ec.Status.Conditions, etcdfedv1.ConditionProgressing)
	return c != nil && c.Reason == etcdfedv1.ReasonWaitingForFleetLimit
}

// onlyStatusChanged: the two versions differ at most in their status and
// the object's bookkeeping (resourceVersion, managedFields).
func onlyStatusChanged(o, n *etcdfedv1.EtcdCluster) bool {
	return o.Generation == n.Generation && o.DeletionTimestamp.Equal(n.DeletionTimestamp) &&
		equality.Semantic.DeepEqual(o.Labels, n.Labels) && equality.Semantic.DeepEqual(o.Annotations, n.Annotations) &&
		equality.Semantic.DeepEqual(o.Finalizers, n.Finalizers) && equality.Semantic.DeepEqual(o.Spec, n.Spec)
}
