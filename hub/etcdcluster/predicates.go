package etcdcluster

import (
	"k8s.io/apimachinery/pkg/api/equality"
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
		}
	}
	return equality.Semantic.DeepEqual(os, ns)
}
