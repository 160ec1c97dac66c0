package etcdcluster

import (
	"context"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/cluster"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	mchandler "sigs.k8s.io/multicluster-runtime/pkg/handler"
	"sigs.k8s.io/multicluster-runtime/pkg/multicluster"
	mcreconcile "sigs.k8s.io/multicluster-runtime/pkg/reconcile"

	etcdfedv1 "github.com/etcdfed/etcdfed/api/v1alpha1"
	"github.com/etcdfed/etcdfed/hub/shard"
)

// shardHoldRetry is the next look at a ring held for a shard overlap;
// claimWaitRetry at one held for this hub's own claim, which its leader
// writes as it starts (a standby that just took over must not lose
// seconds to it).
const (
	shardHoldRetry = 2 * time.Second
	claimWaitRetry = 200 * time.Millisecond
)

// shardHeld tells, once per reason, that the ring is held because another
// hub's shard selects it too, and that such a hold ended. The wait for
// this hub's own claim at its start is not told: it lasts a pass.
func (r *Reconciler) shardHeld(ec *etcdfedv1.EtcdCluster, h shard.Hold) {
	ring := types.NamespacedName{Namespace: ec.Namespace, Name: ec.Name}
	prev, held := r.shardHolds.Load(ring)
	switch {
	case h.Overlap && (!held || prev.(string) != h.Why):
		r.shardHolds.Store(ring, h.Why)
		r.event(ec, corev1.EventTypeWarning, etcdfedv1.EventShardConflict, "HoldRing", "%s", h.Why)
	case !h.Overlap && held && h.Why == "":
		r.shardHolds.Delete(ring)
		r.event(ec, corev1.EventTypeNormal, etcdfedv1.EventShardConflict, "ResumeRing", "No other hub's shard selects the ring any more: this hub acts on it again")
	}
}

// claimNews passes the changes of the hubs' shard claims that can change
// which rings are held (shard.Claims.ClaimNews), not their renewals.
func claimNews(c *shard.Claims) predicate.Predicate {
	lease := func(o client.Object) *coordinationv1.Lease {
		l, _ := o.(*coordinationv1.Lease)
		return l
	}
	return predicate.Funcs{
		CreateFunc:  func(e event.CreateEvent) bool { return lease(e.Object) != nil },
		DeleteFunc:  func(e event.DeleteEvent) bool { return lease(e.Object) != nil },
		GenericFunc: func(event.GenericEvent) bool { return false },
		UpdateFunc: func(e event.UpdateEvent) bool {
			o, n := lease(e.ObjectOld), lease(e.ObjectNew)
			return o != nil && n != nil && c.ClaimNews(o, n)
		},
	}
}

// mapToRings maps an event of the hub cluster to every ring.
func (r *Reconciler) mapToRings() mchandler.TypedEventHandlerFunc[client.Object, mcreconcile.Request] {
	return func(_ multicluster.ClusterName, _ cluster.Cluster) handler.TypedEventHandler[client.Object, mcreconcile.Request] {
		return mchandler.TypedEnqueueRequestsFromMapFuncWithClusterPreservation(func(ctx context.Context, _ client.Object) []mcreconcile.Request {
			return r.allRings(ctx)
		})
	}
}
