package etcdcluster

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/go-logr/logr"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/cluster"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/controller/priorityqueue"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	mcbuilder "sigs.k8s.io/multicluster-runtime/pkg/builder"
	mchandler "sigs.k8s.io/multicluster-runtime/pkg/handler"
	mcmanager "sigs.k8s.io/multicluster-runtime/pkg/manager"
	"sigs.k8s.io/multicluster-runtime/pkg/multicluster"
	mcreconcile "sigs.k8s.io/multicluster-runtime/pkg/reconcile"

	etcdfedv1 "github.com/etcdfed/etcdfed/api/v1alpha1"
	"github.com/etcdfed/etcdfed/hub/liveness"
	"github.com/etcdfed/etcdfed/hub/planner"
	"github.com/etcdfed/etcdfed/hub/registry"
	"github.com/etcdfed/etcdfed/hub/shard"
	"github.com/etcdfed/etcdfed/hub/tenancy"
)

// Finalizer keeps an EtcdCluster until its objects in the member clusters
// are deleted.
const Finalizer = "etcdfed.dev/members"

// Reconciler reconciles EtcdCluster objects in the hub cluster.
type Reconciler struct {
	// Version is the hub's version, judged against each spoke's reported
	// version (the SpokeVersions condition); empty: this build's
	// (internal/version).
	Version string
	// Manager is the multicluster manager: the local cluster is the hub,
	// provider clusters are the member clusters.
	Manager mcmanager.Manager
	// Registry lists registered member clusters with their labels.
	Registry registry.Registry
	// Tracker records spoke Lease renewals on the hub's clock.
	Tracker *liveness.Tracker
	// RingNamespace is the namespace of etcdfed objects in member clusters.
	RingNamespace string
	// LeaseStaleAfter is how long without a renewal makes a spoke's Lease
	// stale. Default 4s (spokes renew every second).
	LeaseStaleAfter time.Duration
	// NodeTracker records node Lease renewals (kube-node-lease) in member
	// clusters on the hub's clock, keyed "cluster/node": the first signal
	// of the zone witness (zones.go).
	NodeTracker *liveness.Tracker
	// NodeStaleAfter is how long without a renewal makes a node Lease
	// stale. Default DefaultNodeStaleAfter.
	NodeStaleAfter time.Duration
	// Recorder records events on EtcdClusters.
	Recorder events.EventRecorder
	// sweepNotes bounds the VolumesRetained events of the sweep per ring
	// and member cluster (sweepnotes.go).
	sweepNotes sweepNotes
	// Now is the hub's clock; time.Now when nil.
	Now func() time.Time
	// PassTimeout bounds one reconcile pass, every call to member
	// clusters, etcd and DNS included. Default 30s.
	PassTimeout time.Duration
	// ClusterReadTimeout bounds the reads of one member cluster within a
	// pass; a cluster that does not answer in time is unknown for the
	// pass. Default 3s.
	ClusterReadTimeout time.Duration
	// MaxConcurrentReconciles is how many EtcdClusters are passed over at
	// once. Default DefaultMaxConcurrentReconciles.
	MaxConcurrentReconciles int
	// AllowLoopbackAddresses accepts loopback addresses in what spokes
	// report (the local environment); see hub/reports.
	AllowLoopbackAddresses bool
	// Policy is the hub's tenancy policy: what an EtcdCluster's spec may
	// choose for pods in every member cluster (admit.go).
	Policy tenancy.Policy
	// MaxFleetDisruptions bounds how many rings may have a disruptive
	// operation (Replace, Move, Roll, Disrupt, Defrag) in flight at once
	// (fleetlimit.go); 0: no limit.
	MaxFleetDisruptions int
	// Owns says whether a ring is of this hub's shard (hub/shard); nil:
	// every ring. A ring it does not own is let go at its first read.
	Owns func(*etcdfedv1.EtcdCluster) bool
	// Claims, when set, holds a ring of the shard that another live hub's
	// shard selects too: neither hub acts on it (hub/shard, claims.go).
	Claims *shard.Claims

	etcd     clientCache
	verdicts verdictMemory
	matrices matrixMemory
	evidence replaceEvidence
	dnsMu    sync.Mutex
	dnsPub   map[types.UID]string // last record set pushed to RFC 2136, and where (forget.go)
	staleCh  chan event.TypedGenericEvent[string]
	nodes    nodeZones
	names    ringNames
	fleet    *fleetLimit
	// shardHolds: rings held for a shard overlap, and why (shardhold.go).
	shardHolds sync.Map
}

func (r *Reconciler) now() time.Time {
	if r.Now != nil {
		return r.Now()
	}
	return time.Now()
}

func (r *Reconciler) hub() client.Client { return r.Manager.GetLocalManager().GetClient() }

// hubReader reads Secrets in EtcdCluster namespaces straight from the
// apiserver: the hub caches Secrets of its own namespace only (the
// kubeconfig Secrets), so it needs no cluster-wide watch on Secrets.
func (r *Reconciler) hubReader() client.Reader { return r.Manager.GetLocalManager().GetAPIReader() }

// SetupWithManager registers the controller: EtcdCluster in the hub only
// (a deleted one also wakes the rings refused for its domain); EtcdMember,
// EtcdSpoke, EtcdDNSZone, the member certificate Secrets and the spoke
// Lease in member clusters, mapped back to the EtcdClusters they concern;
// for the zone witness, the node Leases (kube-node-lease) and the Nodes'
// metadata (their zone label), mapped to the EtcdClusters with members in
// that zone, and only when a verdict may change; and the hub's staleness
// timer (a spoke Lease gone stale). It also starts the timer and the
// sweeper of idle etcd clients.
func (r *Reconciler) SetupWithManager(mgr mcmanager.Manager) error {
	if r.LeaseStaleAfter == 0 {
		r.LeaseStaleAfter = DefaultLeaseStaleAfter
	}
	if r.fleet == nil {
		r.fleet = newFleetLimit(r.MaxFleetDisruptions)
	}
	if r.RingNamespace == "" {
		r.RingNamespace = etcdfedv1.DefaultRingNamespace
	}
	if r.Tracker == nil {
		r.Tracker = liveness.NewTracker(r.Now)
	}
	if r.NodeTracker == nil {
		r.NodeTracker = liveness.NewTracker(r.Now)
	}
	if r.NodeStaleAfter <= 0 {
		r.NodeStaleAfter = DefaultNodeStaleAfter
	}
	if r.PassTimeout <= 0 {
		r.PassTimeout = 30 * time.Second
	}
	if r.ClusterReadTimeout <= 0 {
		r.ClusterReadTimeout = 3 * time.Second
	}
	if r.MaxConcurrentReconciles <= 0 {
		r.MaxConcurrentReconciles = DefaultMaxConcurrentReconciles
	}
	// Longer than any pass, so a pass's client is never closed under it.
	r.etcd.idleAfter, r.etcd.now = max(etcdClientIdle, 2*r.PassTimeout), r.Now
	member := mcbuilder.WithEngageWithLocalCluster(false)
	if err := mgr.GetLocalManager().Add(manager.RunnableFunc(r.watchStaleness)); err != nil {
		return err
	}
	if err := mgr.GetLocalManager().Add(manager.RunnableFunc(r.sweepIdleClients)); err != nil {
		return err
	}
	if err := indexDomains(context.Background(), mgr); err != nil {
		return fmt.Errorf("index EtcdClusters by domain: %w", err)
	}
	if err := indexCAs(context.Background(), mgr); err != nil {
		return fmt.Errorf("index EtcdClusters by CA: %w", err)
	}
	b := mcbuilder.ControllerManagedBy(mgr).
		Named("etcdcluster").
		For(&etcdfedv1.EtcdCluster{}, mcbuilder.WithEngageWithLocalCluster(true), mcbuilder.WithEngageWithProviderClusters(false),
			mcbuilder.WithPredicates(waitingRingNews())).
		// A deleted EtcdCluster, or one refused itself, may leave its
		// domain to one refused for it.
		Watches(&etcdfedv1.EtcdCluster{}, r.mapDomainRivals(), mcbuilder.WithEngageWithLocalCluster(true), mcbuilder.WithEngageWithProviderClusters(false), mcbuilder.WithPredicates(onDomainHoldChange())).
		Watches(&etcdfedv1.EtcdMember{}, r.mapByClusterLabel(), member, mcbuilder.WithPredicates(memberNews())).
		Watches(&etcdfedv1.EtcdDNSZone{}, r.mapByClusterLabel(), member).
		// Member certificate Secrets: watched so the cache holds them (a
		// read never starts an informer) and a deleted one is rewritten.
		Watches(&corev1.Secret{}, r.mapByClusterLabel(), member).
		// A change of a spoke's round trips alone wakes only the rings
		// that record it (roundtripwake.go).
		Watches(&etcdfedv1.EtcdSpoke{}, r.spokeEvents(), member).
		Watches(&coordinationv1.Lease{}, r.mapLease(), member).
		Watches(&coordinationv1.Lease{}, r.mapNodeLease(), member).
		Watches(nodeMeta(), r.mapNode(), member, mcbuilder.WithPredicates(zoneLabelChanged())).
		WatchesRawSource(r.staleSource()).
		WatchesRawSource(r.fleetSource()).
		WithOptions(controller.TypedOptions[mcreconcile.Request]{MaxConcurrentReconciles: r.MaxConcurrentReconciles})
	if r.Claims != nil {
		// The hubs' shard claims (the local cache holds only those
		// Leases): a claim made, dropped or changed wakes every ring,
		// which then holds or resumes (shardhold.go).
		b = b.Watches(&coordinationv1.Lease{}, r.mapToRings(), mcbuilder.WithEngageWithLocalCluster(true), mcbuilder.WithEngageWithProviderClusters(false),
			mcbuilder.WithPredicates(claimNews(r.Claims)))
	}
	return b.Complete(r)
}

// mapByClusterLabel maps a member-cluster object to the EtcdCluster named in
// its labels. The request's cluster is the hub (cluster preservation: the
// plain map handler would overwrite it with the source cluster). News of a
// ring with an operation in flight goes ahead of the default (stepNews).
func (r *Reconciler) mapByClusterLabel() mchandler.TypedEventHandlerFunc[client.Object, mcreconcile.Request] {
	return func(_ multicluster.ClusterName, _ cluster.Cluster) handler.TypedEventHandler[client.Object, mcreconcile.Request] {
		plain := mchandler.TypedEnqueueRequestsFromMapFuncWithClusterPreservation(func(_ context.Context, obj client.Object) []mcreconcile.Request {
			if req, ok := ringOfLabels(obj); ok {
				return []mcreconcile.Request{req}
			}
			return nil
		})
		type queue = workqueue.TypedRateLimitingInterface[mcreconcile.Request]
		return handler.TypedFuncs[client.Object, mcreconcile.Request]{
			CreateFunc: func(ctx context.Context, e event.TypedCreateEvent[client.Object], q queue) {
				if !r.stepNews(ctx, e.Object, q) {
					plain.Create(ctx, e, q)
				}
			},
			UpdateFunc: func(ctx context.Context, e event.TypedUpdateEvent[client.Object], q queue) {
				// A resync (same version) is no news.
				if e.ObjectOld.GetResourceVersion() == e.ObjectNew.GetResourceVersion() || !r.stepNews(ctx, e.ObjectNew, q) {
					plain.Update(ctx, e, q)
				}
			},
			DeleteFunc: func(ctx context.Context, e event.TypedDeleteEvent[client.Object], q queue) {
				if !r.stepNews(ctx, e.Object, q) {
					plain.Delete(ctx, e, q)
				}
			},
			GenericFunc: plain.Generic,
		}
	}
}

// ringOfLabels is the request for the EtcdCluster a member-cluster object's
// labels name.
func ringOfLabels(obj client.Object) (mcreconcile.Request, bool) {
	l := obj.GetLabels()
	name, ns := l[etcdfedv1.LabelClusterName], l[etcdfedv1.LabelClusterNamespace]
	if name == "" || ns == "" {
		return mcreconcile.Request{}, false
	}
	return mcreconcile.Request{Request: reconcile.Request{NamespacedName: types.NamespacedName{Namespace: ns, Name: name}}, ClusterName: mcmanager.LocalCluster}, true
}

// stepNews queues the ring of a member object at stepPriority when the
// hub's cache shows an operation in flight on it (a member's pod came up,
// its learner caught up: the next step may be due), and says whether it
// did.
func (r *Reconciler) stepNews(ctx context.Context, obj client.Object, q workqueue.TypedRateLimitingInterface[mcreconcile.Request]) bool {
	pq, ok := q.(priorityqueue.PriorityQueue[mcreconcile.Request])
	if !ok {
		return false
	}
	req, ok := ringOfLabels(obj)
	if !ok {
		return false
	}
	ec := &etcdfedv1.EtcdCluster{}
	if err := r.hub().Get(ctx, req.NamespacedName, ec, &client.GetOptions{UnsafeDisableDeepCopy: ptr.To(true)}); err != nil || ec.Status.Operation == nil {
		return false
	}
	pq.AddWithOpts(priorityqueue.AddOpts{Priority: ptr.To(stepPriority)}, req)
	return true
}

// mapLease maps a spoke Lease of a member cluster to the rings the
// cluster concerns (concern.go), and only when observeLease reports it as
// news.
func (r *Reconciler) mapLease() mchandler.TypedEventHandlerFunc[client.Object, mcreconcile.Request] {
	return func(name multicluster.ClusterName, _ cluster.Cluster) handler.TypedEventHandler[client.Object, mcreconcile.Request] {
		return mchandler.TypedEnqueueRequestsFromMapFuncWithClusterPreservation(func(ctx context.Context, obj client.Object) []mcreconcile.Request {
			if obj.GetNamespace() != r.RingNamespace || obj.GetName() != etcdfedv1.SpokeObjectName || !r.observeLease(name, obj) {
				return nil
			}
			return r.ringsConcerned(ctx, string(name), nil)
		})
	}
}

// observeLease records a spoke Lease renewal on the hub's clock and says
// whether it changes a verdict: the cluster was never seen, or its Lease had
// gone stale and is back. A plain renewal changes nothing and enqueues
// nothing; the hub's staleness timer (watchStaleness) wakes the rings when
// a Lease goes stale.
func (r *Reconciler) observeLease(name multicluster.ClusterName, obj client.Object) bool {
	l, ok := obj.(*coordinationv1.Lease)
	if !ok || l.Spec.RenewTime == nil {
		return false
	}
	holder := ""
	if l.Spec.HolderIdentity != nil {
		holder = *l.Spec.HolderIdentity
	}
	gap, first, renewed := r.Tracker.ObserveLease(string(name), l.Spec.RenewTime.Time, holder, r.LeaseStaleAfter)
	return renewed && (first || gap > r.LeaseStaleAfter)
}

// Reconcile is one pass over one EtcdCluster, bounded by PassTimeout.
func (r *Reconciler) Reconcile(ctx context.Context, req mcreconcile.Request) (ctrl.Result, error) {
	ctx, cancel := context.WithTimeout(ctx, r.PassTimeout)
	defer cancel()
	pt := passTimes{start: time.Now()}
	// Read uncached: a reconcile requeued right after a status patch would
	// otherwise often see the previous status from the cache, recompute a
	// step already recorded, and lose its own patch to the optimistic lock.
	ec := &etcdfedv1.EtcdCluster{}
	if err := r.hubReader().Get(ctx, req.NamespacedName, ec); err != nil {
		if apierrors.IsNotFound(err) {
			r.forget(req.NamespacedName) // its finalizer was removed by hand, or it is done
		}
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if r.Owns != nil && !r.Owns(ec) {
		r.forget(req.NamespacedName) // another shard's: write, delete and release nothing
		return ctrl.Result{}, nil
	}
	if r.Claims != nil {
		h := r.Claims.Conflict(ctx, ec)
		r.shardHeld(ec, h)
		if h.Why != "" {
			// Two hubs' shards select it, or this hub's claim is not
			// read back yet: write, delete and release nothing.
			r.forget(req.NamespacedName)
			ctrl.LoggerFrom(ctx).V(1).Info("Held for the shards", "etcdcluster", klog.KObj(ec), "why", h.Why)
			if !h.Overlap {
				return ctrl.Result{RequeueAfter: claimWaitRetry}, nil
			}
			return ctrl.Result{RequeueAfter: shardHoldRetry}, nil
		}
	}
	pt.read = time.Since(pt.start)
	log := ctrl.LoggerFrom(ctx).WithValues("etcdcluster", klog.KObj(ec))
	ctx = ctrl.LoggerInto(ctx, log)

	r.remember(ctx, ec)
	if !ec.DeletionTimestamp.IsZero() {
		return r.reconcileDelete(ctx, ec)
	}
	if controllerutil.AddFinalizer(ec, Finalizer) {
		if err := r.hub().Update(ctx, ec); err != nil {
			return ctrl.Result{}, fmt.Errorf("add finalizer: %w", err)
		}
	}

	// A spec the hub may not act on (another ring's domain, what the
	// tenancy policy refuses) is refused before anything is written.
	if f, err := r.admit(ctx, ec); err != nil {
		return ctrl.Result{}, err
	} else if f != nil {
		before := ec.DeepCopy()
		r.setRefused(ec, f)
		log.V(1).Info("Refused", "reason", f.reason, "message", f.message)
		_, err := r.patchStatus(ctx, before, ec)
		return ctrl.Result{}, err
	}

	// A pass that only recorded the start of an operation goes on at once
	// to its first step, on the same observation: that step is what the
	// next pass would decide from it, and waiting for the status event to
	// come back costs a spec change a whole pass (read, observe, status
	// write) before anything moves. The record is written first, as always.
	// The chain is one pass long: the second pass never chains, its next
	// step waits for the next reconcile.
	result, s, chain, err := r.pass(ctx, ec, &pt, nil)
	if err != nil || !chain || ctx.Err() != nil {
		return result, err
	}
	pt = passTimes{start: time.Now(), chained: true}
	metricPassesChained.Inc()
	result, _, _, err = r.pass(ctx, ec, &pt, s)
	return result, err
}

// pass is one observe (or the reuse of one), decide, apply, and the status
// write; chain is true when the pass only began an operation and its
// status was written, so the next step may follow on the same snapshot.
func (r *Reconciler) pass(ctx context.Context, ec *etcdfedv1.EtcdCluster, pt *passTimes, reuse *snapshot) (ctrl.Result, *snapshot, bool, error) {
	before := ec.DeepCopy()
	result, s, chain, err := r.reconcileNormal(ctx, ec, pt, reuse)
	// The status of a pass that ran out of time is still written: it says
	// so, and what did not answer.
	pctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), statusWriteTimeout)
	statusAt := time.Now()
	written, perr := r.patchStatus(pctx, before, ec)
	cancel()
	pt.log(ctrl.LoggerFrom(ctx), time.Since(statusAt))
	if perr != nil {
		return result, nil, false, errors.Join(err, perr)
	}
	return result, s, chain && written && reuse == nil, err
}

// passTimes is where a pass's time went, logged at V(1) as "Pass": the
// EtcdCluster read, the observation by source, the apply, and the status
// write.
type passTimes struct {
	start   time.Time
	read    time.Duration
	observe observeTimes
	apply   time.Duration
	// chained: the pass went on from the previous one's observation.
	chained bool
}

func (pt *passTimes) log(log logr.Logger, status time.Duration) {
	ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
	log.V(1).Info("Pass", "chained", pt.chained, "totalMs", ms(time.Since(pt.start)), "readMs", ms(pt.read),
		"pkiMs", ms(pt.observe.pki), "clustersMs", ms(pt.observe.clusters), "etcdMs", ms(pt.observe.etcd),
		"applyMs", ms(pt.apply), "statusMs", ms(status))
}

// statusWriteTimeout bounds the status patch that ends every pass.
const statusWriteTimeout = 5 * time.Second

// patchStatus writes the pass's status when it changed, and reports
// whether it was written (a conflict is not an error: a newer version
// arrived, and its event brings the ring back).
func (r *Reconciler) patchStatus(ctx context.Context, before, ec *etcdfedv1.EtcdCluster) (bool, error) {
	if equality.Semantic.DeepEqual(before.Status, ec.Status) {
		return false, nil
	}
	if err := r.hub().Status().Patch(ctx, ec, client.MergeFromWithOptions(before, client.MergeFromWithOptimisticLock{})); err != nil {
		if apierrors.IsConflict(err) {
			return false, nil
		}
		return false, fmt.Errorf("patch status: %w", err)
	}
	return true, nil
}

// reconcileNormal is one pass: observe a snapshot, decide purely, apply
// thinly, and compute the status from the three.
//
// With reuse, the pass decides on that observation instead of making a new
// one (ec must be the snapshot's EtcdCluster, with the status the previous
// pass wrote). chain reports whether the pass only recorded an operation's
// start, so that its first step may follow on the same observation.
func (r *Reconciler) reconcileNormal(ctx context.Context, ec *etcdfedv1.EtcdCluster, pt *passTimes, reuse *snapshot) (_ ctrl.Result, _ *snapshot, chain bool, _ error) {
	s := reuse
	if s == nil {
		var err error
		s, err = r.observe(ctx, ec)
		if s != nil {
			pt.observe = s.took
		}
		if err != nil {
			setObserveFailed(ec, err)
			return ctrl.Result{}, nil, false, err
		}
	}
	concerned := func(cluster string) bool { return hasMembers(&ec.Status, cluster) }
	prev := r.verdicts.last(ec.UID)
	events, verdicts := verdictEvents(prev, s, concerned)
	events = append(events, zoneVerdictEvents(prev, s, concerned, verdicts)...)
	r.verdicts.set(ec.UID, verdicts)
	for _, e := range events {
		r.event(ec, e.typ, e.reason, "Observe", "%s", e.message)
	}
	if err := r.fleet.seed(func() ([]etcdfedv1.EtcdCluster, error) {
		var list etcdfedv1.EtcdClusterList
		err := r.hub().List(ctx, &list)
		return slices.DeleteFunc(list.Items, func(ec etcdfedv1.EtcdCluster) bool { return r.Owns != nil && !r.Owns(&ec) }), err
	}); err != nil {
		return ctrl.Result{}, nil, false, err
	}
	s.fleetMax, s.fleetAdmit = 0, nil
	asked := false
	if r.fleet != nil && r.fleet.max > 0 {
		uid, key := ec.UID, types.NamespacedName{Namespace: ec.Namespace, Name: ec.Name}
		s.fleetMax = r.fleet.max
		s.fleetAdmit = func(req fleetRequest) fleetAnswer { asked = true; return r.fleet.admit(uid, key, req) }
	}
	d := decide(s)
	if !asked {
		// This pass plans no limited operation's beginning: the ring
		// leaves the queue now, not fleetWaiterStale later.
		r.fleet.leave(ec.UID)
	}
	applyAt := time.Now()
	res := r.apply(ctx, s, d)
	pt.apply = time.Since(applyAt)
	requeue := requeueAfter(d.plan, res)
	if next := nextPeerListing(s, r.now()); next > 0 {
		// A superseded member certificate's grace ends: the pass that
		// lists it comes then, not at the resync.
		requeue = min(requeue, next)
	}
	if s.livenessChanges {
		// Measured from the snapshot's instant: a pass that spent seconds
		// on a member that does not answer must not push detection back
		// by as much.
		requeue = min(requeue, max(s.livenessChange-r.now().Sub(s.now), 10*time.Millisecond))
	}
	passProblem := ""
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		metricPassDeadline.WithLabelValues(ec.Namespace, ec.Name).Inc()
		passProblem = fmt.Sprintf("the last pass ran out of its %s deadline", r.PassTimeout)
		if err := res.err(); err != nil {
			passProblem += ": " + err.Error()
		}
		requeue = time.Second
	}
	alarmsBefore, timingBefore, roundTripsBefore, takeOverBefore := ec.Status.Alarms, ec.Status.Timing, ec.Status.RoundTrips, ec.Status.TakeOver
	skewBefore := spokeVersionsSkewed(&ec.Status)
	revocationBefore := ec.Status.Revocation.DeepCopy()
	ec.Status = computeStatus(s, d, res, passProblem)
	r.fleet.observe(ec)
	r.matrices.set(ec.UID, distanceClusters(s, &ec.Status), ec.Status.RoundTrips, matrixReaders(ec))
	r.takeOverEvents(ec, takeOverBefore)
	r.revocationEvents(ec, revocationBefore)
	r.alarmEvents(ec, alarmsBefore, ec.Status.Alarms)
	r.spokeVersionEvent(ec, skewBefore)
	if changed := roundTripsChanged(roundTripsBefore, ec.Status.RoundTrips); len(changed) > 0 {
		ctrl.LoggerFrom(ctx).V(1).Info("Round trips recorded", "changed", changed)
	}
	if msg := timingEvent(timingBefore, ec.Status.Timing); msg != "" {
		// Logged too: the event goes with the ring, and a roll of every
		// member it starts must be explained after the ring is deleted.
		ctrl.LoggerFrom(ctx).Info("Timing changed", "change", msg)
		r.event(ec, corev1.EventTypeNormal, etcdfedv1.EventTimingChanged, "Observe", "%s", truncate(msg, maxEventNote))
	}
	if next := nextTimingChoice(s, &ec.Status, r.now()); next > 0 {
		// A change of timing held back until its round trips held still
		// (timing.Settle) is applied by the pass at its end.
		requeue = min(requeue, next)
	}
	recordMetrics(ec, &ec.Status, d, res)
	recordZoneMetrics(ec, s)
	recordCertificateMetrics(ec, s)
	if err := res.err(); err != nil {
		return ctrl.Result{}, s, false, err
	}
	// The next step may be decided on this observation only when the pass
	// wrote nothing but the operation's record: what its upkeep wrote (a
	// CA, certificates, records) is not in the observation, and deciding
	// on it again would write it twice.
	chain = actions[d.plan.Action].begins && passProblem == "" && d.upkeepIdle(s)
	return ctrl.Result{RequeueAfter: requeue, Priority: passPriority(d)}, s, chain, nil
}

// soon is the requeue after a step whose effect the next pass checks.
const soon = 200 * time.Millisecond

// notYetRetry is the retry after etcd said "not yet" (a learner not caught
// up, a reconfiguration refused until the cluster is healthy): short,
// since each such wait holds up a member's promotion, and etcd answers it
// from memory.
const notYetRetry = time.Second

// requeueAfter: a step taken is checked soon; a wait or a poll comes back
// when the planner says; etcd saying "not yet" in notYetRetry; a quiet ring within
// resyncPeriod.
func requeueAfter(plan planner.Decision, res applyResult) time.Duration {
	after := resyncPeriod
	switch a := actions[plan.Action]; {
	case a.asPlanned:
		if plan.RequeueAfter > 0 {
			after = min(after, plan.RequeueAfter)
		}
	case a.begins:
		after = soon
	default:
		after = min(after, max(soon, plan.RequeueAfter))
	}
	if res.notYet != nil {
		after = min(after, notYetRetry)
	}
	return after
}

// DefaultLeaseStaleAfter is how long a spoke Lease may go unrenewed, on the
// hub's clock, before its cluster is unknown: four renewal intervals of the
// spoke's default (1s). It is the bulk of the time to detect a failed zone
// or cluster; staying unknown for a moment costs nothing, since the hub acts
// only on a failure other spokes corroborate (rule 8).
const DefaultLeaseStaleAfter = 4 * time.Second

// resyncPeriod bounds how long a quiet ring goes without a reconcile: a
// safety net only. Everything that changes a ring is an event (its spec,
// its objects in member clusters, a spoke's status, a Lease returning, a
// node Lease or zone label of a zone it has members in), the
// staleness timer (a Lease going stale), or a requeue the pass asked for (a
// step to check, a planner's wait, a grace period ending), so a ring at
// rest costs one pass per resyncPeriod, not one every few seconds.
const resyncPeriod = 5 * time.Minute

// DefaultMaxConcurrentReconciles: passes wait on etcd and apiservers far
// more than they compute (about 14 ms of CPU in a pass of half a second
// measured with 50 rings), and 4 workers capped the hub at about 7 passes
// a second.
const DefaultMaxConcurrentReconciles = 8

// etcdClientIdle is how long a ring's etcd client stays open unused.
const etcdClientIdle = 2 * time.Minute

// deletePendingRetry is the next delete pass while member clusters still
// hold the ring's objects: the spokes' deletions wake the hub as well, a
// cluster coming back does not.
const deletePendingRetry = 15 * time.Second

// reconcileDelete deletes the EtcdCluster's objects in every member cluster
// the hub can reach. Volumes stay (the spoke retains them unless the policy
// says Delete). A member cluster the hub cannot reach, or one its ledger
// places members in that is not registered, keeps the finalizer: nothing
// is abandoned silently.
func (r *Reconciler) reconcileDelete(ctx context.Context, ec *etcdfedv1.EtcdCluster) (ctrl.Result, error) {
	log := ctrl.LoggerFrom(ctx)
	if !controllerutil.ContainsFinalizer(ec, Finalizer) {
		return ctrl.Result{}, nil
	}
	clusters, err := r.Registry.List(ctx)
	if err != nil {
		return ctrl.Result{}, err
	}
	var pending []string
	var errs []error
	// A cluster that holds members of the ring but is not registered now
	// (its kubeconfig Secret deleted or being re-created) keeps the
	// finalizer too: its members would be abandoned silently.
	registered := map[string]bool{}
	for _, mc := range clusters {
		registered[mc.Name] = true
	}
	for _, name := range ledgerClusters(&ec.Status) {
		if !registered[name] {
			pending = append(pending, name+" (not registered)")
		}
	}
	for _, mc := range clusters {
		cl, err := r.Manager.GetCluster(ctx, multicluster.ClusterName(mc.Name))
		if err != nil {
			pending = append(pending, mc.Name)
			continue
		}
		c := cl.GetClient()
		if err := deleteAllOwned(ctx, c, r.RingNamespace, ec.RingUID(), mc.Name); err != nil {
			errs = append(errs, err)
		}
		var left etcdfedv1.EtcdMemberList
		if err := c.List(ctx, &left, client.InNamespace(r.RingNamespace), ownedSelector(ec.RingUID())); err == nil && len(left.Items) > 0 {
			pending = append(pending, mc.Name)
		}
	}
	if err := errors.Join(errs...); err != nil {
		return ctrl.Result{}, err
	}
	if len(pending) > 0 {
		log.Info("Waiting for member clusters before removing the finalizer; remove it by hand to abandon their members", "clusters", pending)
		return ctrl.Result{RequeueAfter: deletePendingRetry}, nil
	}
	r.forget(client.ObjectKeyFromObject(ec))
	controllerutil.RemoveFinalizer(ec, Finalizer)
	if err := r.hub().Update(ctx, ec); err != nil {
		return ctrl.Result{}, fmt.Errorf("remove finalizer: %w", err)
	}
	return ctrl.Result{}, nil
}
