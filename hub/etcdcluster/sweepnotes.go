package etcdcluster

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"
)

// VolumesRetained events, bounded. The sweep deletes objects left behind
// in a member cluster and says which volumes it kept (sweep, apply.go).
// A member cluster decides what objects it holds: a compromised one that
// re-creates a forged EtcdMember after every sweep made every pass record
// a VolumesRetained warning on the ring it names, filling the ring's
// events and exhausting the recorder's budget for the EtcdCluster (its
// other events went unsaid). So, per ring and member cluster:
//   - an object swept again within sweepObjectQuiet of the event that
//     named it is not named again, only counted, and the count is said
//     at most once per sweepEventInterval;
//   - at most sweepEventBurst events per sweepEventInterval (a Move or a
//     recovery sweeps a few objects of one cluster in successive passes,
//     and each is said at once): objects swept past that wait (at most
//     maxPendingNotes named, the rest counted) and are said, with the
//     count, by the first pass that may record one again;
//   - at most maxSweepNames object names are remembered; past that, a new
//     name is counted like a repeat, not named.
//
// Kept in the hub's memory: a restarted hub says each at most once more.

const (
	sweepEventInterval = 10 * time.Minute
	sweepEventBurst    = 3
	sweepObjectQuiet   = time.Hour
	maxSweepNames      = 256
	maxPendingNotes    = 8
)

// sweepNote is one swept object's note: its cluster, its object name
// (member/object) and the text naming its volume.
type sweepNote struct {
	cluster, object, text string
}

type sweepKey struct {
	ring    types.UID
	cluster string
}

type sweepState struct {
	// events: when the last events were recorded, within sweepEventInterval.
	events    []time.Time
	lastEvent time.Time
	// said: object names named (or counted) and when.
	said map[string]time.Time
	// pending: notes not said yet; dropped: more beyond them; repeats:
	// objects swept again within sweepObjectQuiet, since lastEvent.
	pending  []string
	dropped  int
	repeats  int
	repeatOf map[string]bool
}

// sweepNotes is the hub's memory of the VolumesRetained events it
// recorded; the zero value is ready.
type sweepNotes struct {
	mu sync.Mutex
	by map[sweepKey]*sweepState
}

// admit takes the notes of one pass over ring (any cluster) and returns
// the event messages to record now, one per member cluster at most.
func (n *sweepNotes) admit(ring types.UID, notes []sweepNote, now time.Time) []string {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.by == nil {
		n.by = map[sweepKey]*sweepState{}
	}
	for _, note := range notes {
		k := sweepKey{ring, note.cluster}
		st := n.by[k]
		if st == nil {
			st = &sweepState{said: map[string]time.Time{}, repeatOf: map[string]bool{}}
			n.by[k] = st
		}
		maps.DeleteFunc(st.said, func(_ string, at time.Time) bool { return now.Sub(at) >= sweepObjectQuiet })
		if at, ok := st.said[note.object]; ok && now.Sub(at) < sweepObjectQuiet || !ok && len(st.said) >= maxSweepNames {
			st.repeats++
			if len(st.repeatOf) < maxPendingNotes {
				st.repeatOf[note.object] = true
			}
			continue
		}
		st.said[note.object] = now
		if len(st.pending) < maxPendingNotes {
			st.pending = append(st.pending, note.text)
		} else {
			st.dropped++
		}
	}
	var out []string
	for _, k := range slices.SortedFunc(maps.Keys(n.by), func(a, b sweepKey) int { return strings.Compare(a.cluster, b.cluster) }) {
		st := n.by[k]
		if k.ring != ring {
			continue
		}
		if len(st.pending) == 0 && st.repeats == 0 {
			maps.DeleteFunc(st.said, func(_ string, at time.Time) bool { return now.Sub(at) >= sweepObjectQuiet })
			if now.Sub(st.lastEvent) >= sweepObjectQuiet && len(st.said) == 0 {
				delete(n.by, k)
			}
			continue
		}
		st.events = slices.DeleteFunc(st.events, func(at time.Time) bool { return now.Sub(at) >= sweepEventInterval })
		if len(st.events) >= sweepEventBurst || len(st.pending) == 0 && now.Sub(st.lastEvent) < sweepEventInterval {
			// Repeats alone are said once per interval.
			continue
		}
		var parts []string
		if len(st.pending) > 0 {
			parts = append(parts, strings.Join(st.pending, "; "))
		}
		if st.dropped > 0 {
			parts = append(parts, fmt.Sprintf("and %d more in %s", st.dropped, k.cluster))
		}
		if st.repeats > 0 {
			since := "the last hour"
			if !st.lastEvent.IsZero() {
				since = st.lastEvent.UTC().Format(time.RFC3339)
			}
			parts = append(parts, fmt.Sprintf("%d objects in %s swept again since %s, each named by an earlier event (%s): objects that come back after every sweep are written by the member cluster itself, not by the hub",
				st.repeats, k.cluster, since, strings.Join(slices.Sorted(maps.Keys(st.repeatOf)), ", ")))
		}
		out = append(out, strings.Join(parts, "; "))
		st.events = append(st.events, now)
		st.lastEvent, st.pending, st.dropped, st.repeats = now, nil, 0, 0
		clear(st.repeatOf)
	}
	return out
}

// forget drops what was said of a deleted ring.
func (n *sweepNotes) forget(ring types.UID) {
	n.mu.Lock()
	defer n.mu.Unlock()
	maps.DeleteFunc(n.by, func(k sweepKey, _ *sweepState) bool { return k.ring == ring })
}
