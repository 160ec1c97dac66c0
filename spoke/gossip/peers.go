package gossip

import (
	"maps"
	"slices"
	"time"

	"github.com/hashicorp/memberlist"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	etcdfedv1 "github.com/etcdfed/etcdfed/api/v1alpha1"
)

// View returns every peer the agent knows of (seen alive at some point, or
// named in expected), sorted by cluster name, without this spoke itself
// and without the peers whose names it cannot check (Unverifiable: it
// abstains on them, identity.go). Peers never seen are reported dead
// without a since time.
func (a *Agent) View(expected []string) []etcdfedv1.GossipPeerStatus {
	a.peersMu.Lock()
	defer a.peersMu.Unlock()
	names := map[string]bool{}
	for n := range a.peers {
		names[n] = true
	}
	for _, n := range expected {
		names[n] = true
	}
	delete(names, a.self)
	out := make([]etcdfedv1.GossipPeerStatus, 0, len(names))
	for _, n := range slices.Sorted(maps.Keys(names)) {
		if a.ids.unverifiable(n) != "" {
			continue
		}
		ps := etcdfedv1.GossipPeerStatus{Cluster: n}
		if p := a.peers[n]; p != nil {
			since := p.since
			ps.Alive = p.alive
			if p.alive {
				fresh, staleAt := a.ids.fresh(n)
				if !fresh {
					ps.Alive = false
					if staleAt.After(since) {
						since = staleAt
					}
				}
			}
			t := metav1.NewTime(since).Rfc3339Copy()
			ps.Since = &t
		}
		out = append(out, ps)
	}
	return out
}

// counted: memberlist has the peer alive, and its identity (when names
// are checked) is known and fresh.
func (a *Agent) counted(name string, p *peer) bool {
	if !p.alive {
		return false
	}
	ok, _ := a.ids.fresh(name)
	return ok
}

// checkStale signals a change when the set of peers memberlist has alive
// but that are not counted (stale or unknown identity) changed.
func (a *Agent) checkStale() {
	a.peersMu.Lock()
	var stale []string
	for n, p := range a.peers {
		if n != a.self && p.alive && !a.counted(n, p) && a.ids.unverifiable(n) == "" {
			stale = append(stale, n)
		}
	}
	slices.Sort(stale)
	// A peer that went fresh and stale again since the last check leaves
	// the set unchanged, but the view reported meanwhile counted it.
	changed := !slices.Equal(stale, a.staleNames) || a.ids.takeFreshened()
	a.staleNames = stale
	a.peersMu.Unlock()
	if changed {
		if len(stale) > 0 {
			a.cfg.Log.Info("Gossip peers alive but not counted: no new signed identity from them lately", "peers", stale)
		}
		a.signal()
	}
}

// Joined returns when this run of gossip first saw a peer alive, and when
// it started; joined is zero while it has never reached one, started zero
// when gossip does not run.
func (a *Agent) Joined() (joined, started time.Time) {
	if a.cur.Load() == nil {
		return time.Time{}, time.Time{}
	}
	a.peersMu.Lock()
	defer a.peersMu.Unlock()
	return a.joinedAt, a.startedAt
}

// AliveCount returns how many peers (not counting this spoke, nor the
// peers it abstains on) are alive and dead.
func (a *Agent) AliveCount() (alive, dead int) {
	a.peersMu.Lock()
	defer a.peersMu.Unlock()
	return a.countLocked()
}

func (a *Agent) countLocked() (alive, dead int) {
	for n, p := range a.peers {
		switch {
		case n == a.self, a.ids.unverifiable(n) != "":
		case a.counted(n, p):
			alive++
		default:
			dead++
		}
	}
	return alive, dead
}

func (a *Agent) setPeer(n *memberlist.Node, alive bool) {
	a.peersMu.Lock()
	defer a.peersMu.Unlock()
	if n.Name == a.self {
		return
	}
	p := a.peers[n.Name]
	if p != nil && p.alive == alive {
		p.addr = n.Address()
		return
	}
	a.peers[n.Name] = &peer{alive: alive, since: a.now(), addr: n.Address()}
	if r := a.rtts[n.Name]; !alive && r != nil {
		// A peer that comes back starts a new window: its old round trips
		// may be of another path. What was published of it stays until
		// that window, warmed up, confirms a move (roundtrips.go): its
		// first probes are taken while its cluster comes back, on a loaded
		// machine.
		if r.published == nil {
			delete(a.rtts, n.Name)
		} else {
			a.rtts[n.Name] = &roundTrips{published: r.published}
		}
	}
	if alive && a.joinedAt.IsZero() {
		a.joinedAt = a.now()
	}
	a.cfg.Log.Info("Gossip peer changed", "peer", n.Name, "address", n.Address(), "alive", alive)
	alivePeers, deadPeers := a.countLocked()
	peersGauge.WithLabelValues("alive").Set(float64(alivePeers))
	peersGauge.WithLabelValues("dead").Set(float64(deadPeers))
	a.signal()
}

type events struct{ a *Agent }

func (e *events) NotifyJoin(n *memberlist.Node) { e.a.setPeer(n, true) }

func (e *events) NotifyLeave(n *memberlist.Node) { e.a.setPeer(n, false) }

func (e *events) NotifyUpdate(n *memberlist.Node) { e.a.setPeer(n, true) }
