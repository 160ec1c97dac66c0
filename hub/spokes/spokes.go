// Package spokes is the hub's reconciler for EtcdSpoke objects: it tells
// every spoke its member cluster's name and the gossip addresses of the
// other spokes, so the gossip ring forms across clusters without anyone
// seeding it by hand, and hands every spoke the ring's gossip key, its
// cluster's gossip identity and the table of every registered cluster's,
// revoking a removed cluster's identity and rotating the key after it
// (gossipkey.go).
package spokes

import (
	"bytes"
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	mcbuilder "sigs.k8s.io/multicluster-runtime/pkg/builder"
	mcmanager "sigs.k8s.io/multicluster-runtime/pkg/manager"
	"sigs.k8s.io/multicluster-runtime/pkg/multicluster"
	mcreconcile "sigs.k8s.io/multicluster-runtime/pkg/reconcile"

	etcdfedv1 "github.com/etcdfed/etcdfed/api/v1alpha1"
	"github.com/etcdfed/etcdfed/hub/registry"
	"github.com/etcdfed/etcdfed/hub/reports"
)

// resync bounds how long a new spoke's address takes to reach the others
// when no event on their own object arrives.
const resync = 15 * time.Second

// Reconciler writes EtcdSpoke.spec, and the copy of the gossip key, in
// every member cluster.
type Reconciler struct {
	Manager       mcmanager.Manager
	Registry      registry.Registry
	RingNamespace string
	// HubNamespace is where the hub keeps the gossip key; HubClient and
	// HubReader (uncached) reach it. With no HubReader the spokes get no
	// key from the hub.
	HubNamespace string
	HubClient    client.Client
	HubReader    client.Reader
	// Recorder records the gossip identities' and the key rotation's
	// events on the hub's gossip Secret; nil records none.
	Recorder events.EventRecorder
	// AllowLoopback accepts loopback gossip addresses (the local
	// environment); any other address a spoke reports must be a unicast
	// IP:port (hub/reports) to reach the other spokes.
	AllowLoopback bool

	// tried is when a pass last tried to hand each cluster without an
	// identity its own from another cluster's pass (mayTry).
	triedMu sync.Mutex
	tried   map[string]time.Time
}

// SetupWithManager watches EtcdSpoke in member clusters only.
func (r *Reconciler) SetupWithManager(mgr mcmanager.Manager) error {
	if r.RingNamespace == "" {
		r.RingNamespace = etcdfedv1.DefaultRingNamespace
	}
	return mcbuilder.ControllerManagedBy(mgr).
		Named("etcdspoke").
		For(&etcdfedv1.EtcdSpoke{}, mcbuilder.WithEngageWithLocalCluster(false), mcbuilder.WithEngageWithProviderClusters(true)).
		Complete(r)
}

// passTimeout bounds one pass: reads come from synced caches, the one write
// goes to a member cluster's apiserver.
const passTimeout = 15 * time.Second

// Reconcile sets clusterName and gossipPeers on one cluster's EtcdSpoke.
func (r *Reconciler) Reconcile(ctx context.Context, req mcreconcile.Request) (ctrl.Result, error) {
	if req.Namespace != r.RingNamespace || req.Name != etcdfedv1.SpokeObjectName {
		return ctrl.Result{}, nil
	}
	ctx, cancel := context.WithTimeout(ctx, passTimeout)
	defer cancel()
	log := ctrl.LoggerFrom(ctx).WithValues("cluster", req.ClusterName)
	cl, err := r.Manager.GetCluster(ctx, req.ClusterName)
	if err != nil {
		return r.notEngaged(ctx, req.ClusterName), nil
	}
	spoke := &etcdfedv1.EtcdSpoke{}
	if err := cl.GetClient().Get(ctx, req.NamespacedName, spoke); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	regs, err := r.Registry.List(ctx)
	if err != nil {
		return ctrl.Result{}, err
	}
	if r.HubReader != nil {
		self := gossipTarget{name: string(req.ClusterName), client: cl.GetClient(), reader: cl.GetAPIReader(), namespace: r.RingNamespace}
		if err := r.gossip(ctx, regs, self, r.gossipTargets); err != nil {
			return ctrl.Result{}, err
		}
	}
	peers := r.peers(ctx, regs, req.ClusterName)
	want := etcdfedv1.EtcdSpokeSpec{ClusterName: string(req.ClusterName), GossipPeers: peers}
	if equality.Semantic.DeepEqual(spoke.Spec, want) {
		return ctrl.Result{RequeueAfter: resync}, nil
	}
	log.Info("Updating spoke gossip peers", "peers", len(peers))
	patched := spoke.DeepCopy()
	patched.Spec = want
	if err := cl.GetClient().Patch(ctx, patched, client.MergeFrom(spoke)); err != nil {
		if apierrors.IsConflict(err) || apierrors.IsNotFound(err) {
			return ctrl.Result{RequeueAfter: time.Second}, nil
		}
		return ctrl.Result{}, fmt.Errorf("update EtcdSpoke in %s: %w", req.ClusterName, err)
	}
	return ctrl.Result{RequeueAfter: resync}, nil
}

// engagingRetry is how soon a pass over a registered cluster that is not
// engaged (yet) comes back.
const engagingRetry = time.Second

// notEngaged is the result of a pass over a cluster the manager does not
// hand out. The registry starts a cluster's sources before it hands the
// cluster out, so the first events of a cluster being engaged arrive
// while it is not yet: such a pass comes back within engagingRetry (it
// waited a whole resync: in the local environment member-2's first pass
// came 15 s late, then hung on a cut path, and its gossip identity 42 s
// after the others'). A cluster no longer registered is done with.
func (r *Reconciler) notEngaged(ctx context.Context, cluster multicluster.ClusterName) ctrl.Result {
	regs, err := r.Registry.List(ctx)
	if err != nil {
		return ctrl.Result{RequeueAfter: resync}
	}
	if slices.ContainsFunc(regs, func(mc registry.MemberCluster) bool { return mc.Name == string(cluster) }) {
		return ctrl.Result{RequeueAfter: engagingRetry}
	}
	return ctrl.Result{}
}

// gossip revokes the identities of clusters no longer registered, steps
// the key rotation, and brings the copies of the key, the identities and
// the table in line (gossipkey.go): self's copy, and in the same pass
// every registered cluster without an identity in the table (so that
// identities are issued to every registered cluster at once, whichever
// EtcdSpoke is reconciled), and every registered cluster's when the key
// or the table changed; reach gives the registered clusters of names
// that the hub reaches (gossipTargets). An error in another cluster is
// logged, not returned: that cluster's own pass retries it.
func (r *Reconciler) gossip(ctx context.Context, regs []registry.MemberCluster, self gossipTarget, reach func(context.Context, []string) []gossipTarget) error {
	hub, err := r.hubGossipSecret(ctx)
	if err != nil {
		return err
	}
	before := maps.Clone(hub.Data)
	names := make([]string, 0, len(regs))
	for _, mc := range regs {
		names = append(names, mc.Name)
	}
	if err := r.revoke(ctx, hub, names); err != nil {
		return err
	}
	if err := r.rotate(ctx, hub, gossipReports(ctx, names, reach)); err != nil {
		return err
	}
	t, err := table(hub)
	if err != nil {
		return err
	}
	changed := !maps.EqualFunc(before, hub.Data, bytes.Equal)
	r.forgetTried(names)
	var others []string
	for _, n := range names {
		if _, issued := t[n]; n != self.name && (changed || !issued && r.mayTry(n)) {
			others = append(others, n)
		}
	}
	more := func(done []string) []gossipTarget {
		var rest []string
		for _, n := range names {
			if !slices.Contains(done, n) {
				rest = append(rest, n)
			}
		}
		return reach(ctx, rest)
	}
	errs, err := r.syncCopies(ctx, hub, append([]gossipTarget{self}, reach(ctx, others)...), more)
	if err != nil {
		return err
	}
	for n, err := range errs {
		if n != self.name {
			ctrl.LoggerFrom(ctx).Info("Gossip key and identity not handed over yet", "cluster", n, "error", err.Error())
		}
	}
	if err := errs[self.name]; err != nil {
		return fmt.Errorf("gossip key in %s: %w", self.name, err)
	}
	return nil
}

// forgetTried drops what mayTry remembers of clusters no longer
// registered.
func (r *Reconciler) forgetTried(registered []string) {
	r.triedMu.Lock()
	defer r.triedMu.Unlock()
	for n := range r.tried {
		if !slices.Contains(registered, n) {
			delete(r.tried, n)
		}
	}
}

// gossipTargets are the registered clusters of names the hub reaches (a
// cluster not engaged is left out), each bounded by copyTimeout.
func (r *Reconciler) gossipTargets(ctx context.Context, names []string) []gossipTarget {
	var out []gossipTarget
	for _, n := range names {
		cl, err := r.Manager.GetCluster(ctx, multicluster.ClusterName(n))
		if err != nil {
			continue
		}
		out = append(out, gossipTarget{name: n, client: cl.GetClient(), reader: cl.GetAPIReader(), namespace: r.RingNamespace, timeout: copyTimeout})
	}
	return out
}

// mayTry says whether a pass over another cluster's EtcdSpoke may try to
// hand cluster its identity now: at most once per resync, so that a
// cluster the hub is cut off from does not hold every pass for
// copyTimeout.
func (r *Reconciler) mayTry(cluster string) bool {
	r.triedMu.Lock()
	defer r.triedMu.Unlock()
	now := time.Now()
	if last, ok := r.tried[cluster]; ok && now.Sub(last) < resync {
		return false
	}
	if r.tried == nil {
		r.tried = map[string]time.Time{}
	}
	r.tried[cluster] = now
	return true
}

// gossipReports are the keys every registered spoke reports installed
// (nil: none, or its cluster is out of reach).
func gossipReports(ctx context.Context, names []string, reach func(context.Context, []string) []gossipTarget) map[string]*etcdfedv1.GossipKeysStatus {
	out := make(map[string]*etcdfedv1.GossipKeysStatus, len(names))
	for _, n := range names {
		out[n] = nil
	}
	for _, tg := range reach(ctx, names) {
		s := &etcdfedv1.EtcdSpoke{}
		if err := tg.client.Get(ctx, client.ObjectKey{Namespace: tg.namespace, Name: etcdfedv1.SpokeObjectName}, s); err != nil {
			continue
		}
		out[tg.name] = s.Status.GossipKeys
	}
	return out
}

// peers are the gossip addresses the other registered spokes report.
func (r *Reconciler) peers(ctx context.Context, regs []registry.MemberCluster, self multicluster.ClusterName) []etcdfedv1.GossipPeer {
	var out []etcdfedv1.GossipPeer
	for _, mc := range regs {
		if mc.Name == string(self) {
			continue
		}
		cl, err := r.Manager.GetCluster(ctx, multicluster.ClusterName(mc.Name))
		if err != nil {
			continue
		}
		s := &etcdfedv1.EtcdSpoke{}
		if err := cl.GetClient().Get(ctx, client.ObjectKey{Namespace: r.RingNamespace, Name: etcdfedv1.SpokeObjectName}, s); err != nil {
			continue
		}
		switch a := s.Status.GossipAddress; {
		case a == "":
		case reports.CheckHostPort(a, r.AllowLoopback, false) != nil:
			// Never handed to the other spokes to dial; the EtcdCluster
			// reconciler names it in every ring's Degraded condition.
			ctrl.LoggerFrom(ctx).Info("Gossip address refused", "cluster", mc.Name, "address", a, "why", reports.CheckHostPort(a, r.AllowLoopback, false).Error())
		default:
			out = append(out, etcdfedv1.GossipPeer{Cluster: mc.Name, Address: a})
		}
	}
	slices.SortFunc(out, func(a, b etcdfedv1.GossipPeer) int { return strings.Compare(a.Cluster, b.Cluster) })
	return out
}
