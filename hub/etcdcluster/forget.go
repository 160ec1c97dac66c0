package etcdcluster

import (
	"context"
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"

	etcdfedv1 "github.com/etcdfed/etcdfed/api/v1alpha1"
)

// forget drops everything the hub holds in memory for one ring: its etcd
// client and probe memory, its last liveness verdicts, the evidence of
// replacements in flight, the record set last pushed to RFC 2136, and its
// metrics. Called when the ring's delete pass is done, and for a ring that
// went without one (forgetGone).
func (r *Reconciler) forget(uid types.UID, ring types.NamespacedName) {
	r.forgetMemory(uid)
	forgetRingMetrics(ring)
}

func (r *Reconciler) forgetMemory(uid types.UID) {
	r.etcd.drop(uid)
	r.verdicts.forget(uid)
	r.evidence.forget(uid)
	r.forgetDNS(uid)
}

func forgetRingMetrics(ring types.NamespacedName) {
	forgetMetrics(&etcdfedv1.EtcdCluster{ObjectMeta: metav1.ObjectMeta{Namespace: ring.Namespace, Name: ring.Name}})
	forgetZoneMetrics(ring)
}

// forgetDNS drops the record set last pushed to RFC 2136 for a ring.
func (r *Reconciler) forgetDNS(uid types.UID) {
	r.dnsMu.Lock()
	defer r.dnsMu.Unlock()
	delete(r.dnsPub, uid)
}

// forgetGone runs when the ring named is not found: it was deleted without
// its delete pass (its finalizer removed by hand), or after it. Memory is
// keyed by UID, which the name no longer gives, so every remembered ring
// that no longer exists is forgotten. A ring created after the list may
// lose its memory too; that costs it a new etcd dial and one more RFC
// 2136 push, nothing else.
func (r *Reconciler) forgetGone(ctx context.Context, ring types.NamespacedName) error {
	var rings etcdfedv1.EtcdClusterList
	if err := r.hubReader().List(ctx, &rings); err != nil {
		return fmt.Errorf("list EtcdClusters to forget deleted ones: %w", err)
	}
	live := make(map[types.UID]bool, len(rings.Items))
	for i := range rings.Items {
		live[rings.Items[i].UID] = true
	}
	forgetRingMetrics(ring)
	for _, uid := range r.remembered() {
		if !live[uid] {
			ctrl.LoggerFrom(ctx).V(1).Info("Forgetting a deleted ring", "uid", uid)
			r.forgetMemory(uid)
		}
	}
	return nil
}

// remembered lists every ring the hub holds memory for.
func (r *Reconciler) remembered() []types.UID {
	seen := map[types.UID]bool{}
	r.etcd.mu.Lock()
	for uid := range r.etcd.clients {
		seen[uid] = true
	}
	for uid := range r.etcd.probes {
		seen[uid] = true
	}
	r.etcd.mu.Unlock()
	r.verdicts.mu.Lock()
	for uid := range r.verdicts.rings {
		seen[uid] = true
	}
	r.verdicts.mu.Unlock()
	r.evidence.mu.Lock()
	for uid := range r.evidence.rings {
		seen[uid] = true
	}
	r.evidence.mu.Unlock()
	r.dnsMu.Lock()
	for uid := range r.dnsPub {
		seen[uid] = true
	}
	r.dnsMu.Unlock()
	out := make([]types.UID, 0, len(seen))
	for uid := range seen {
		out = append(out, uid)
	}
	return out
}
