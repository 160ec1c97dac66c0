package etcdcluster

import (
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

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
