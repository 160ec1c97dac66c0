package etcdcluster

import (
	"context"
	"sync"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"

	etcdfedv1 "github.com/etcdfed/etcdfed/api/v1alpha1"
)

// ringNames remembers the UID of every ring the hub passed over, by name,
// so that a ring found gone (or under a new UID) can be forgotten: the
// per-ring memories are keyed by UID, which a NotFound does not give.
type ringNames struct {
	mu   sync.Mutex
	uids map[types.NamespacedName]types.UID
}

// seen records ring's current UID and returns the UID it had before, if it
// was another: a ring deleted and created again under its name.
func (n *ringNames) seen(ring types.NamespacedName, uid types.UID) (types.UID, bool) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.uids == nil {
		n.uids = map[types.NamespacedName]types.UID{}
	}
	old, ok := n.uids[ring]
	n.uids[ring] = uid
	return old, ok && old != uid
}

// gone forgets ring's name and returns the UID it had, if any.
func (n *ringNames) gone(ring types.NamespacedName) (types.UID, bool) {
	n.mu.Lock()
	defer n.mu.Unlock()
	uid, ok := n.uids[ring]
	delete(n.uids, ring)
	return uid, ok
}

// remember notes the ring a pass is over; the memory of an earlier ring of
// the same name is dropped.
func (r *Reconciler) remember(ctx context.Context, ec *etcdfedv1.EtcdCluster) {
	if old, replaced := r.names.seen(types.NamespacedName{Namespace: ec.Namespace, Name: ec.Name}, ec.UID); replaced {
		ctrl.LoggerFrom(ctx).V(1).Info("Forgetting the earlier ring of this name", "uid", old)
		r.forgetMemory(old)
	}
}

// forget drops everything the hub holds in memory for one ring: its etcd
// client and probe memory, its last liveness verdicts, the evidence of
// replacements in flight, the record set last pushed to RFC 2136, and its
// metrics. Called when the ring's delete pass is done, and when a ring is
// found gone without one (its finalizer removed by hand). A name no pass
// of this hub saw has nothing to forget (a NotFound also comes from events
// on objects a deleted ring left behind).
func (r *Reconciler) forget(ring types.NamespacedName) {
	uid, ok := r.names.gone(ring)
	if !ok {
		return
	}
	r.forgetMemory(uid)
	forgetMetrics(&etcdfedv1.EtcdCluster{ObjectMeta: metav1.ObjectMeta{Namespace: ring.Namespace, Name: ring.Name}})
	forgetZoneMetrics(ring)
}

func (r *Reconciler) forgetMemory(uid types.UID) {
	r.etcd.drop(uid)
	r.verdicts.forget(uid)
	r.matrices.forget(uid)
	r.evidence.forget(uid)
	r.forgetDNS(uid)
	r.fleet.forget(uid)
	r.sweepNotes.forget(uid)
}

// forgetDNS drops the record set last pushed to RFC 2136 for a ring.
func (r *Reconciler) forgetDNS(uid types.UID) {
	r.dnsMu.Lock()
	defer r.dnsMu.Unlock()
	delete(r.dnsPub, uid)
}
