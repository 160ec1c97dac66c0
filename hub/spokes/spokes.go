// Package spokes is the hub's reconciler for EtcdSpoke objects: it tells
// every spoke its member cluster's name and the gossip addresses of the
// other spokes, so the gossip ring forms across clusters without anyone
// seeding it by hand, and hands every spoke the ring's gossip key, its
// cluster's gossip identity and the table of every registered cluster's,
// revoking a removed cluster's identity and rotating the key after it
// (gossipkey.go).
package spokes

import (
	"context"
	"fmt"
	"slices"
	"strings"
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
		return ctrl.Result{RequeueAfter: resync}, nil // disengaged meanwhile
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
		if err := r.gossip(ctx, regs, string(req.ClusterName), cl.GetClient(), cl.GetAPIReader()); err != nil {
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

// gossip revokes the identities of clusters no longer registered, steps
// the key rotation, and brings cluster's copy of the key, its identity and
// the table in line (gossipkey.go).
func (r *Reconciler) gossip(ctx context.Context, regs []registry.MemberCluster, cluster string, c client.Client, rd client.Reader) error {
	hub, err := r.hubGossipSecret(ctx)
	if err != nil {
		return err
	}
	names := make([]string, 0, len(regs))
	for _, mc := range regs {
		names = append(names, mc.Name)
	}
	if err := r.revoke(ctx, hub, names); err != nil {
		return err
	}
	if err := r.rotate(ctx, hub, r.gossipReports(ctx, regs)); err != nil {
		return err
	}
	if err := r.syncGossip(ctx, hub, cluster, c, rd); err != nil {
		return fmt.Errorf("gossip key in %s: %w", cluster, err)
	}
	return nil
}

// gossipReports are the keys every registered spoke reports installed
// (nil: none, or its cluster is out of reach).
func (r *Reconciler) gossipReports(ctx context.Context, regs []registry.MemberCluster) map[string]*etcdfedv1.GossipKeysStatus {
	out := make(map[string]*etcdfedv1.GossipKeysStatus, len(regs))
	for _, mc := range regs {
		out[mc.Name] = nil
		cl, err := r.Manager.GetCluster(ctx, multicluster.ClusterName(mc.Name))
		if err != nil {
			continue
		}
		s := &etcdfedv1.EtcdSpoke{}
		if err := cl.GetClient().Get(ctx, client.ObjectKey{Namespace: r.RingNamespace, Name: etcdfedv1.SpokeObjectName}, s); err != nil {
			continue
		}
		out[mc.Name] = s.Status.GossipKeys
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
