package etcdcluster

import (
	"context"
	"strings"
	"time"

	"k8s.io/client-go/util/workqueue"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"
	mcmanager "sigs.k8s.io/multicluster-runtime/pkg/manager"
	mcreconcile "sigs.k8s.io/multicluster-runtime/pkg/reconcile"

	etcdfedv1 "github.com/etcdfed/etcdfed/api/v1alpha1"
	"github.com/etcdfed/etcdfed/hub/liveness"
)

// The hub's staleness timer. A spoke Lease going stale is the one verdict
// change that time alone brings to rings whose clusters are all alive, and
// nothing in the API says it happened. One timer for the whole hub, set to
// the instant the first fresh Lease would go stale, wakes the rings its
// cluster concerns (concern.go) when a Lease does; until then rings at rest sleep (resyncPeriod), instead of
// each ring scheduling its own pass for that instant, which reconciled
// every ring every few seconds at rest. A Lease coming back is an event
// (observeLease).

// staleSource is the controller's source of "a Lease went stale" events:
// a spoke Lease's is mapped to the EtcdClusters its cluster concerns, a
// node Lease's to the EtcdClusters with members in the node's zone
// (zoneScope).
func (r *Reconciler) staleSource() source.TypedSource[mcreconcile.Request] {
	r.staleCh = make(chan event.TypedGenericEvent[string], 16)
	return source.TypedChannel(r.staleCh, handler.TypedFuncs[string, mcreconcile.Request]{
		GenericFunc: func(ctx context.Context, e event.TypedGenericEvent[string], q workqueue.TypedRateLimitingInterface[mcreconcile.Request]) {
			scope := ""
			if r.isZoneScope(e.Object) {
				scope = e.Object
			}
			for _, req := range r.ringsForScope(ctx, scope) {
				q.Add(req)
			}
		},
	})
}

// isZoneScope: the event is a node Lease's (zoneScope), not a cluster's.
func (r *Reconciler) isZoneScope(s string) bool { return strings.Contains(s, "\x00") }

// watchStaleness runs the timer until ctx ends: it tells the controller
// once per stale spell of each cluster (a Lease seen again starts a new
// spell), within a millisecond of the instant Judge calls the Lease stale.
func (r *Reconciler) watchStaleness(ctx context.Context) error {
	told := map[string]time.Time{}      // cluster -> the last sighting already told stale
	toldNodes := map[string]time.Time{} // cluster/node -> the same
	for {
		now := r.now()
		seen := r.Tracker.Seen()
		for c, last := range seen {
			if now.Sub(last) > r.LeaseStaleAfter && !told[c].Equal(last) {
				told[c] = last
				metricLeaseStale.WithLabelValues(c).Inc()
				ctrl.LoggerFrom(ctx).Info("Spoke Lease went stale; waking the rings it concerns", "memberCluster", c, "lastSeen", last)
				select {
				case r.staleCh <- event.TypedGenericEvent[string]{Object: c}:
				case <-ctx.Done():
					return nil
				}
			}
		}
		wait := r.LeaseStaleAfter
		if _, at, ok := liveness.NextStale(seen, now, r.LeaseStaleAfter); ok {
			wait = min(wait, at.Sub(now))
		}
		// Node Leases: a zone's rings are woken when one of its nodes goes
		// stale (a zone is stale when its last node is).
		scopes, at, ok := r.staleNodes(now, toldNodes)
		for _, sc := range scopes {
			cluster, zone, _ := strings.Cut(sc, "\x00")
			ctrl.LoggerFrom(ctx).Info("Node Lease went stale; waking the rings with members in its zone", "memberCluster", cluster, "zone", zone)
			select {
			case r.staleCh <- event.TypedGenericEvent[string]{Object: sc}:
			case <-ctx.Done():
				return nil
			}
		}
		if ok {
			wait = min(wait, at.Sub(now))
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(wait):
		}
	}
}

// allRings is a request for every EtcdCluster in the hub's cache.
func (r *Reconciler) allRings(ctx context.Context) []mcreconcile.Request {
	rings := r.ringsReadOnly(ctx)
	out := make([]mcreconcile.Request, 0, len(rings))
	for i := range rings {
		out = append(out, mcreconcile.Request{Request: reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&rings[i])}, ClusterName: mcmanager.LocalCluster})
	}
	return out
}

// ringsReadOnly lists the hub's EtcdClusters from its cache without
// copying them, for the functions that choose which rings to wake: they
// read names and members' places, and must never write to what they get.
// Every spoke event woke every ring through a list, and the list's copy of
// every ring was a sixth of the hub's CPU at 300 rings (BenchmarkFleet's
// profile, docs/measurements/fleet.md). Nil, logged, on error.
func (r *Reconciler) ringsReadOnly(ctx context.Context) []etcdfedv1.EtcdCluster {
	var list etcdfedv1.EtcdClusterList
	if err := r.hub().List(ctx, &list, client.UnsafeDisableDeepCopy); err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "Listing EtcdClusters to enqueue")
		return nil
	}
	return list.Items
}
