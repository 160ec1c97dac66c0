package etcdcluster

import (
	"context"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/cluster"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	mchandler "sigs.k8s.io/multicluster-runtime/pkg/handler"
	mcmanager "sigs.k8s.io/multicluster-runtime/pkg/manager"
	"sigs.k8s.io/multicluster-runtime/pkg/multicluster"
	mcreconcile "sigs.k8s.io/multicluster-runtime/pkg/reconcile"

	etcdfedv1 "github.com/etcdfed/etcdfed/api/v1alpha1"
	"github.com/etcdfed/etcdfed/pkg/timing"
)

// Which rings a spoke's report wakes. An EtcdSpoke concerns every ring
// (its readiness, gossip view and keys are read by all of them), so any
// change of it used to wake every ring. But most of its changes are of
// status.roundTrips alone, one peer at a time, and a round trip concerns
// only the rings whose matrix spans both clusters, and among those only
// the ones that record it (timing.Matrix: a move that matters to none of
// the ring's decisions, or a p99 held, changes nothing). With twenty member clusters, 380 measured
// pairs each woke all the rings: after a hub restart the queue never
// emptied (docs/measurements/fleet.md). Such an update now wakes the rings
// whose last pass's matrix it changes, and the rings this hub has not
// passed over yet; every other change of the spoke still wakes all.

// matrixMemory keeps, per ring, what its last pass recorded of distance:
// the member clusters of its matrix (eligible or holding a member) and the
// matrix itself.
type matrixMemory struct {
	mu    sync.Mutex
	rings map[types.UID]ringMatrix
}

type ringMatrix struct {
	clusters   []string
	roundTrips []etcdfedv1.RoundTrip
	readers    timing.Readers
}

func (m *matrixMemory) set(ring types.UID, clusters []string, roundTrips []etcdfedv1.RoundTrip, readers timing.Readers) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.rings == nil {
		m.rings = map[types.UID]ringMatrix{}
	}
	m.rings[ring] = ringMatrix{clusters: clusters, roundTrips: roundTrips, readers: readers}
}

func (m *matrixMemory) get(ring types.UID) (ringMatrix, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	rm, ok := m.rings[ring]
	return rm, ok
}

func (m *matrixMemory) forget(ring types.UID) {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.rings, ring)
}

// recordsRoundTrips says whether a ring whose last pass left rm would
// record something new of the round trips that the spoke of cluster from
// reports now (the rule of its pass: timing.Matrix). Pure.
func recordsRoundTrips(rm ringMatrix, from string, reported []etcdfedv1.PeerRoundTrip, now time.Time) bool {
	m := timing.Matrix(rm.roundTrips, []timing.Report{{From: from, RoundTrips: reported}}, rm.clusters, now, rm.readers)
	return !equality.Semantic.DeepEqual(m, rm.roundTrips)
}

// onlyRoundTripsMoved: the two versions of an EtcdSpoke differ at most in
// status.roundTrips, status.observedAt and the object's bookkeeping
// (resourceVersion, managedFields).
func onlyRoundTripsMoved(o, n *etcdfedv1.EtcdSpoke) bool {
	if !o.DeletionTimestamp.Equal(n.DeletionTimestamp) || o.Generation != n.Generation ||
		!equality.Semantic.DeepEqual(o.Labels, n.Labels) || !equality.Semantic.DeepEqual(o.Spec, n.Spec) {
		return false
	}
	os, ns := o.Status.DeepCopy(), n.Status.DeepCopy()
	os.RoundTrips, ns.RoundTrips, os.ObservedAt, ns.ObservedAt = nil, nil, nil, nil
	return equality.Semantic.DeepEqual(os, ns)
}

// spokeEvents maps EtcdSpoke events of a member cluster to rings: an update
// of its round trips alone to the rings that record it, anything else to
// every ring.
func (r *Reconciler) spokeEvents() mchandler.TypedEventHandlerFunc[client.Object, mcreconcile.Request] {
	all := r.mapToAll(nil)
	return func(name multicluster.ClusterName, cl cluster.Cluster) handler.TypedEventHandler[client.Object, mcreconcile.Request] {
		toAll := all(name, cl)
		return handler.TypedFuncs[client.Object, mcreconcile.Request]{
			CreateFunc:  toAll.Create,
			DeleteFunc:  toAll.Delete,
			GenericFunc: toAll.Generic,
			UpdateFunc: func(ctx context.Context, e event.TypedUpdateEvent[client.Object], q workqueue.TypedRateLimitingInterface[mcreconcile.Request]) {
				o, ok1 := e.ObjectOld.(*etcdfedv1.EtcdSpoke)
				n, ok2 := e.ObjectNew.(*etcdfedv1.EtcdSpoke)
				if !ok1 || !ok2 || n.Namespace != r.RingNamespace || n.Name != etcdfedv1.SpokeObjectName || !onlyRoundTripsMoved(o, n) {
					toAll.Update(ctx, e, q)
					return
				}
				for _, req := range r.ringsRecording(ctx, string(name), n.Status.RoundTrips) {
					q.Add(req)
				}
			},
		}
	}
}

// ringsRecording lists the rings (of the hub's cache) that record something
// of the round trips cluster's spoke reports: those whose last pass's
// matrix they change, and those not passed over yet.
func (r *Reconciler) ringsRecording(ctx context.Context, cluster string, reported []etcdfedv1.PeerRoundTrip) []mcreconcile.Request {
	rings := r.ringsReadOnly(ctx)
	now := r.now()
	var out []mcreconcile.Request
	for i := range rings {
		ec := &rings[i]
		if r.Owns != nil && !r.Owns(ec) {
			continue
		}
		if rm, ok := r.matrices.get(ec.UID); ok && !recordsRoundTrips(rm, cluster, reported, now) {
			continue
		}
		out = append(out, mcreconcile.Request{Request: reconcile.Request{NamespacedName: client.ObjectKeyFromObject(ec)}, ClusterName: mcmanager.LocalCluster})
	}
	return out
}
