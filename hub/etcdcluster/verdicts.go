package etcdcluster

import (
	"fmt"
	"sort"
	"strings"
	"sync"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	etcdfedv1 "github.com/etcdfed/etcdfed/api/v1alpha1"
	"github.com/etcdfed/etcdfed/hub/liveness"
)

// verdictMemory keeps each ring's last liveness verdict per member cluster,
// so that a change of verdict is told once, as an event.
type verdictMemory struct {
	mu    sync.Mutex
	rings map[types.UID]map[string]liveness.State
}

// last is the verdicts of ring's previous pass (nil on the hub's first).
func (m *verdictMemory) last(ring types.UID) map[string]liveness.State {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.rings[ring]
}

// set records this pass's verdicts.
func (m *verdictMemory) set(ring types.UID, now map[string]liveness.State) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.rings == nil {
		m.rings = map[types.UID]map[string]liveness.State{}
	}
	m.rings[ring] = now
}

func (m *verdictMemory) forget(ring types.UID) {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.rings, ring)
}

// clusterEvent is one event about a member cluster's verdict.
type clusterEvent struct {
	typ, reason, message string
}

// verdictEvents compares this pass's verdicts with the previous pass's: a
// cluster that this ring cares about (members there, or eligible) and that
// is newly failed gets ZoneFailed with the evidence (the verdict's reason:
// since when the Lease is stale, which spokes see it gone); a failed one
// that is alive again gets ZoneReturned. Unknown is not told: it moves
// nothing and Degraded already says it. now holds this pass's verdicts.
func verdictEvents(prev map[string]liveness.State, s *snapshot, hasMembers func(cluster string) bool) (events []clusterEvent, now map[string]liveness.State) {
	now = make(map[string]liveness.State, len(s.clusters))
	for _, cs := range s.clusters {
		cur := cs.verdict.State
		was := prev[cs.name]
		now[cs.name] = remembered(was, cur)
		if !cs.eligible && !hasMembers(cs.name) {
			continue
		}
		switch told(was, cur) {
		case etcdfedv1.EventZoneFailed:
			events = append(events, clusterEvent{corev1.EventTypeWarning, etcdfedv1.EventZoneFailed,
				fmt.Sprintf("member cluster %s%s failed: %s", cs.name, zonesOf(cs), cs.verdict.Reason)})
		case etcdfedv1.EventZoneReturned:
			events = append(events, clusterEvent{corev1.EventTypeNormal, etcdfedv1.EventZoneReturned,
				fmt.Sprintf("member cluster %s%s is back: %s", cs.name, zonesOf(cs), cs.verdict.Reason)})
		}
	}
	return events, now
}

// remembered is what the next pass compares with: a failed cluster or
// zone stays failed in memory while it is unknown, so that a return
// through a pass or two of "unknown" (its Lease renewed before its peers
// have seen it again, or its apiserver not yet watched) is still told as
// ZoneReturned once it is alive, and a failure that merely went unknown
// for a while is not told twice.
func remembered(was, cur liveness.State) liveness.State {
	if cur == liveness.Unknown && was == liveness.Failed {
		return liveness.Failed
	}
	return cur
}

// told is the event a verdict change from was (as remembered) to cur
// calls for: etcdfedv1.EventZoneFailed, etcdfedv1.EventZoneReturned, or "".
func told(was, cur liveness.State) string {
	switch {
	case cur == liveness.Failed && was != liveness.Failed:
		return etcdfedv1.EventZoneFailed
	case cur == liveness.Alive && was == liveness.Failed:
		return etcdfedv1.EventZoneReturned
	}
	return ""
}

// zonesOf is " (zones a, b)" from the cluster's last spoke report.
func zonesOf(cs *clusterSnapshot) string {
	if cs.spoke == nil || len(cs.spoke.Status.Zones) == 0 {
		return ""
	}
	z := append([]string(nil), cs.spoke.Status.Zones...)
	sort.Strings(z)
	if len(z) == 1 {
		return " (zone " + z[0] + ")"
	}
	return " (zones " + strings.Join(z, ", ") + ")"
}
