package etcdcluster

import (
	"context"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/cluster"
	"sigs.k8s.io/controller-runtime/pkg/controller/priorityqueue"
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
// passed over yet; any other change of the spoke wakes the rings the
// cluster concerns (concern.go).

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

// spokeMoved says what moved between two versions of an EtcdSpoke: its
// round trips, its gossip view, and anything else (other), ignoring
// status.observedAt and the object's bookkeeping (resourceVersion,
// managedFields). A GossipHealthy condition True before and after is part
// of the gossip view: its message only restates the view ("gossip sees 18
// of 19 peers alive (...)"), and the hub reads a True one's status alone
// (gossipAbstains). Counted as other, every peer lost or back woke every
// ring the reporting cluster concerns: all 300 of the fleet benchmark's
// rings through nineteen spokes, when one cluster was lost.
func spokeMoved(o, n *etcdfedv1.EtcdSpoke) (roundTrips, gossip, other bool) {
	roundTrips = !equality.Semantic.DeepEqual(o.Status.RoundTrips, n.Status.RoundTrips)
	gossip = !equality.Semantic.DeepEqual(o.Status.GossipView, n.Status.GossipView)
	if !o.DeletionTimestamp.Equal(n.DeletionTimestamp) || o.Generation != n.Generation ||
		!equality.Semantic.DeepEqual(o.Labels, n.Labels) || !equality.Semantic.DeepEqual(o.Spec, n.Spec) {
		return roundTrips, gossip, true
	}
	os, ns := o.Status.DeepCopy(), n.Status.DeepCopy()
	os.RoundTrips, ns.RoundTrips, os.ObservedAt, ns.ObservedAt = nil, nil, nil, nil
	os.GossipView, ns.GossipView = nil, nil
	oc := meta.FindStatusCondition(os.Conditions, etcdfedv1.ConditionGossipHealthy)
	nc := meta.FindStatusCondition(ns.Conditions, etcdfedv1.ConditionGossipHealthy)
	if oc != nil && nc != nil && oc.Status == metav1.ConditionTrue && nc.Status == metav1.ConditionTrue && !equality.Semantic.DeepEqual(*oc, *nc) {
		gossip, *nc = true, *oc
	}
	return roundTrips, gossip, !equality.Semantic.DeepEqual(os, ns)
}

// spokeEvents maps EtcdSpoke events of a member cluster to rings: an update
// of its round trips to the rings that record it, of its gossip view to
// the rings that the cluster and a peer whose entry moved both concern
// (concern.go), anything else to the rings the cluster concerns.
func (r *Reconciler) spokeEvents() mchandler.TypedEventHandlerFunc[client.Object, mcreconcile.Request] {
	return func(name multicluster.ClusterName, _ cluster.Cluster) handler.TypedEventHandler[client.Object, mcreconcile.Request] {
		spoke := func(obj client.Object) bool {
			return obj.GetNamespace() == r.RingNamespace && obj.GetName() == etcdfedv1.SpokeObjectName
		}
		whole := func(ctx context.Context, obj client.Object, q workqueue.TypedRateLimitingInterface[mcreconcile.Request]) {
			if spoke(obj) {
				addAll(q, r.ringsConcerned(ctx, string(name), nil))
			}
		}
		return handler.TypedFuncs[client.Object, mcreconcile.Request]{
			CreateFunc: func(ctx context.Context, e event.TypedCreateEvent[client.Object], q workqueue.TypedRateLimitingInterface[mcreconcile.Request]) {
				pq, ok := q.(priorityqueue.PriorityQueue[mcreconcile.Request])
				if !e.IsInInitialList || !ok || !spoke(e.Object) {
					whole(ctx, e.Object, q)
					return
				}
				// A cache's first list (a hub starting, a cluster
				// reconnected) is no news: low, as controller-runtime's
				// own handlers queue it, behind spec changes.
				for _, req := range r.ringsConcerned(ctx, string(name), nil) {
					pq.AddWithOpts(priorityqueue.AddOpts{Priority: ptr.To(handler.LowPriority)}, req)
				}
			},
			DeleteFunc: func(ctx context.Context, e event.TypedDeleteEvent[client.Object], q workqueue.TypedRateLimitingInterface[mcreconcile.Request]) {
				whole(ctx, e.Object, q)
			},
			GenericFunc: func(ctx context.Context, e event.TypedGenericEvent[client.Object], q workqueue.TypedRateLimitingInterface[mcreconcile.Request]) {
				whole(ctx, e.Object, q)
			},
			UpdateFunc: func(ctx context.Context, e event.TypedUpdateEvent[client.Object], q workqueue.TypedRateLimitingInterface[mcreconcile.Request]) {
				o, ok1 := e.ObjectOld.(*etcdfedv1.EtcdSpoke)
				n, ok2 := e.ObjectNew.(*etcdfedv1.EtcdSpoke)
				if !ok1 || !ok2 {
					whole(ctx, e.ObjectNew, q)
					return
				}
				if !spoke(n) {
					return
				}
				roundTrips, gossip, other := spokeMoved(o, n)
				if other {
					addAll(q, r.ringsConcerned(ctx, string(name), nil))
					return
				}
				if roundTrips {
					addAll(q, r.ringsRecording(ctx, string(name), n.Status.RoundTrips))
				}
				if gossip {
					addAll(q, r.ringsConcerned(ctx, string(name), gossipPeersMoved(o.Status.GossipView, n.Status.GossipView)))
				}
			},
		}
	}
}

func addAll(q workqueue.TypedRateLimitingInterface[mcreconcile.Request], reqs []mcreconcile.Request) {
	for _, req := range reqs {
		q.Add(req)
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
	metricRingWakes.WithLabelValues("round-trips").Add(float64(len(out)))
	return out
}
