// Package liveness decides whether a member cluster is alive, unknown or
// failed, by membership rule 8 as restated in wave 3: a cluster is failed
// only when the hub's own observation of its spoke Lease has been stale
// for the grace period, measured on the hub's clock (not the time the
// spoke wrote), AND a majority of ALL the other witnesses (the spokes of
// the ring's other eligible clusters, and of clusters holding its
// members), each seen fresh by the hub, report it gone. A witness the hub does not see, or whose
// gossip is not healthy (not running, no key, never joined, no peer alive),
// counts in that majority's denominator but does not vote: it abstains.
// Everything short of that is "unknown", and the hub does not act on
// unknown. So a hub that sees only a minority of the clusters (it sits on
// the small side of a partition) can declare nothing failed: the spokes
// that could vote are on the other side.
package liveness

import (
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"
)

// Tracker remembers, per member cluster, when the hub last saw its spoke's
// Lease change. It is fed by the Lease watch and by each pass's read of
// the Lease; the hub keeps a second one, keyed "cluster/node", for node
// Leases (zones.go).
type Tracker struct {
	mu      sync.Mutex
	now     func() time.Time
	entries map[string]*entry
	// watched is when the hub first looked for each cluster's Lease.
	watched map[string]time.Time
}

type entry struct {
	renew    time.Time // the spoke's renewTime, only compared for change
	holder   string
	lastSeen time.Time // hub clock when a change was observed
	// back is when the hub saw the Lease renewed after a gap longer than
	// the staleness window (ObserveLease's staleAfter): the cluster came
	// back into view (BackSince).
	back time.Time
}

// NewTracker returns a tracker on the given clock (time.Now when nil).
func NewTracker(now func() time.Time) *Tracker {
	if now == nil {
		now = time.Now
	}
	return &Tracker{now: now, entries: map[string]*entry{}, watched: map[string]time.Time{}}
}

// ObserveLease records the Lease as seen now. Only a changed renewTime (or
// holder) counts as a renewal; the first observation counts too, so a hub
// that just started gives every cluster a full staleness window.
//
// It returns the gap since the previous renewal the hub saw, when this
// observation is one; renewed is false when nothing changed, and a first
// sighting has a zero gap and renewed true. A caller compares the gap with
// the staleness window to tell a cluster that comes back from one that
// merely renewed.
func (t *Tracker) ObserveLease(cluster string, renewTime time.Time, holder string, staleAfter time.Duration) (gap time.Duration, first, renewed bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	now := t.now()
	e, ok := t.entries[cluster]
	if ok && e.renew.Equal(renewTime) && e.holder == holder {
		return 0, false, false
	}
	var back time.Time
	if ok {
		gap = now.Sub(e.lastSeen)
		back = e.back
		if gap > staleAfter {
			back = now
		}
	}
	t.entries[cluster] = &entry{renew: renewTime, holder: holder, lastSeen: now, back: back}
	return gap, !ok, true
}

// BackSince returns when the hub last saw cluster's Lease renewed after a
// gap longer than the staleness window, that is when the cluster came
// back into the hub's view (a partition healed, the cluster restarted);
// false when it never went out of view since the hub first saw it. What
// the hub recorded about the cluster's members while it could not see it
// (a member unhealthy in etcd because it was cut off) counts from then
// on, not from before: a member gets its whole grace in view.
func (t *Tracker) BackSince(cluster string) (time.Time, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	e, ok := t.entries[cluster]
	if !ok || e.back.IsZero() {
		return time.Time{}, false
	}
	return e.back, true
}

// Forget drops a cluster (unregistered).
func (t *Tracker) Forget(cluster string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	delete(t.entries, cluster)
	delete(t.watched, cluster)
}

// WatchedSince returns when the hub first looked for cluster's Lease,
// recording now on the first call. A cluster whose Lease the hub has
// never seen is stale from then on the hub's clock: a hub started while a
// cluster is down judges it like one that saw it die, instead of holding
// it unknown forever.
func (t *Tracker) WatchedSince(cluster string) time.Time {
	t.mu.Lock()
	defer t.mu.Unlock()
	w, ok := t.watched[cluster]
	if !ok {
		w = t.now()
		t.watched[cluster] = w
	}
	return w
}

// LastSeen returns when the hub last saw cluster's Lease renewed.
func (t *Tracker) LastSeen(cluster string) (time.Time, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	e, ok := t.entries[cluster]
	if !ok {
		return time.Time{}, false
	}
	return e.lastSeen, true
}

// State is the verdict on one member cluster.
type State string

const (
	// Alive: the hub sees its Lease renewed.
	Alive State = "Alive"
	// Unknown: the hub's view is stale but not enough witnesses agree it is
	// gone (or too little time has passed). Do not act.
	Unknown State = "Unknown"
	// Failed: stale for the grace period and a majority of the other spokes
	// see it gone. Its members may be moved away.
	Failed State = "Failed"
)

// Observation is what the hub knows about one member cluster.
type Observation struct {
	Cluster string
	// LastSeen is when the hub last saw the Lease renewed (hub clock); zero
	// when never.
	LastSeen time.Time
	// WatchedSince is when the hub started looking for the Lease (hub
	// clock): the staleness of a Lease never seen counts from there.
	WatchedSince time.Time
	// Gossip is this cluster's spoke's view of its peers: cluster -> alive.
	Gossip map[string]bool
	// NotWitness: the cluster is neither eligible for the ring nor holds
	// any of its members. Its spoke is no witness, and it does not count
	// among the witnesses of the others. (It is still judged.)
	NotWitness bool
	// Bystander: nothing of the cluster matters to the ring (not even a
	// client of it there, hub/etcdcluster concern.go). It is still
	// judged, but the end of its grace is no change the ring waits for
	// (NextGraceEnd).
	Bystander bool
	// Abstains says why this cluster's spoke does not vote as a witness
	// ("" when it may): its gossip is not healthy (the spoke's GossipHealthy
	// condition). A spoke whose Gossip sees no peer alive abstains too
	// (GossipAbstains): it cannot tell a dead peer from its own cut.
	Abstains string
}

// GossipAbstains says why o's spoke does not vote as a witness, "" when
// it may: it said so itself (Abstains), or its gossip view sees no peer
// alive (never joined, firewalled, or every peer dead: it cannot tell).
func GossipAbstains(o Observation) string {
	if o.Abstains != "" {
		return o.Abstains
	}
	if o.Gossip == nil {
		return ""
	}
	for _, alive := range o.Gossip {
		if alive {
			return ""
		}
	}
	return "its gossip sees no peer alive"
}

// Verdict is the judgement on one cluster with its explanation.
type Verdict struct {
	Cluster string
	State   State
	Reason  string
}

// Judge applies rule 8 to every cluster. staleAfter is how long without a
// renewal makes the hub's view stale; grace is how long it must have been
// stale before the cluster is declared failed.
//
// The witnesses of a cluster are the other witness clusters (not
// NotWitness), all of them: a majority of that whole set must be seen
// fresh by the hub, vote (not abstain) and report the cluster gone. A
// witness the hub does not see, or that abstains, or that says nothing of
// the cluster, counts against.
func Judge(obs []Observation, now time.Time, staleAfter, grace time.Duration) []Verdict {
	fresh := map[string]bool{}
	for _, o := range obs {
		fresh[o.Cluster] = !o.LastSeen.IsZero() && now.Sub(o.LastSeen) <= staleAfter
	}
	out := make([]Verdict, 0, len(obs))
	for _, o := range obs {
		if fresh[o.Cluster] {
			out = append(out, Verdict{Cluster: o.Cluster, State: Alive, Reason: "spoke Lease renewed " + At(o.LastSeen)})
			continue
		}
		var witnesses, dead, alive, unseen, abstain, silent []string
		for _, w := range obs {
			if w.Cluster == o.Cluster || w.NotWitness {
				continue
			}
			witnesses = append(witnesses, w.Cluster)
			seen, reported := w.Gossip[o.Cluster]
			switch why := GossipAbstains(w); {
			case !fresh[w.Cluster]:
				unseen = append(unseen, w.Cluster)
			case why != "":
				abstain = append(abstain, w.Cluster+" ("+why+")")
			case reported && !seen:
				dead = append(dead, w.Cluster)
			case reported:
				alive = append(alive, w.Cluster)
			default:
				silent = append(silent, w.Cluster)
			}
		}
		for _, l := range [][]string{dead, alive, unseen, abstain, silent} {
			sort.Strings(l)
		}
		last, since := "never seen", o.LastSeen
		switch {
		case !o.LastSeen.IsZero():
			last = "spoke Lease last renewed " + At(o.LastSeen)
		case !o.WatchedSince.IsZero():
			last = "spoke Lease never seen since the hub started looking " + At(o.WatchedSince)
			since = o.WatchedSince
		}
		majority := len(witnesses)/2 + 1
		switch {
		case len(witnesses) == 0:
			out = append(out, Verdict{Cluster: o.Cluster, State: Unknown, Reason: last + "; no other spoke to confirm"})
		case len(dead) < majority:
			why := fmt.Sprintf("%s; only %d of the %d other spokes see it gone (%d needed)", last, len(dead), len(witnesses), majority)
			var notes []string
			if len(alive) > 0 {
				notes = append(notes, strings.Join(alive, ", ")+" see it alive: the hub's path to it may be what failed")
			}
			if len(unseen) > 0 {
				notes = append(notes, strings.Join(unseen, ", ")+" not seen by the hub either")
			}
			if len(abstain) > 0 {
				notes = append(notes, strings.Join(abstain, ", ")+" abstain")
			}
			if len(silent) > 0 {
				notes = append(notes, strings.Join(silent, ", ")+" report nothing of it")
			}
			if len(notes) > 0 {
				why += " (" + strings.Join(notes, "; ") + ")"
			}
			out = append(out, Verdict{Cluster: o.Cluster, State: Unknown, Reason: why})
		case since.IsZero() || now.Sub(since) < grace:
			out = append(out, Verdict{Cluster: o.Cluster, State: Unknown, Reason: fmt.Sprintf("%s; %s see it gone; declared failed after %s", last, strings.Join(dead, ", "), grace)})
		default:
			out = append(out, Verdict{Cluster: o.Cluster, State: Failed, Reason: fmt.Sprintf("%s and %s see it gone", last, strings.Join(dead, ", "))})
		}
	}
	return out
}

// HubView is how much of the ring the hub sees: the witness clusters (not
// NotWitness) whose spoke Lease it sees fresh, and those it does not.
type HubView struct {
	Seen, Unseen []string
}

// ViewOf sorts the witness clusters of obs into seen and unseen.
func ViewOf(obs []Observation, now time.Time, staleAfter time.Duration) HubView {
	var v HubView
	for _, o := range obs {
		if o.NotWitness {
			continue
		}
		if !o.LastSeen.IsZero() && now.Sub(o.LastSeen) <= staleAfter {
			v.Seen = append(v.Seen, o.Cluster)
		} else {
			v.Unseen = append(v.Unseen, o.Cluster)
		}
	}
	sort.Strings(v.Seen)
	sort.Strings(v.Unseen)
	return v
}

// Minority: the hub sees too few of the witness clusters for Judge to
// declare any unseen one failed, with at least one unseen: fewer than a
// majority of the others of an unseen cluster are on the hub's side.
func (v HubView) Minority() bool {
	n := len(v.Seen) + len(v.Unseen)
	return len(v.Unseen) > 0 && len(v.Seen) < (n-1)/2+1
}

// Message says, in plain words, what a hub with a minority knows: "" when
// it sees a majority.
func (v HubView) Message() string {
	if !v.Minority() {
		return ""
	}
	seen := "none of them"
	if len(v.Seen) > 0 {
		seen = "only " + strings.Join(v.Seen, ", ")
	}
	return fmt.Sprintf("the hub sees %s of the %d member clusters: %s may be alive and serving without it; it declares none of them failed, moves nothing out of them and forces no new cluster until it sees a majority again or their members are confirmed fenced",
		seen, len(v.Seen)+len(v.Unseen), strings.Join(v.Unseen, ", "))
}

// NextChange is how long until the first verdict that Judge, given the same
// observations, would change by the passage of time alone: a fresh Lease
// going stale, or a cluster whose absence is corroborated reaching its
// grace period. ok is false when no verdict changes without a new
// observation. The hub no longer calls it: it wakes rings with NextStale
// (one timer for every ring) and NextGraceEnd (per ring), which together
// cover the same two instants; only tests use it.
func NextChange(obs []Observation, now time.Time, staleAfter, grace time.Duration) (time.Duration, bool) {
	var next time.Duration
	found := false
	consider := func(at time.Time) {
		d := at.Sub(now)
		if d <= 0 {
			return
		}
		if !found || d < next {
			next, found = d, true
		}
	}
	verdicts := Judge(obs, now, staleAfter, grace)
	for i, o := range obs {
		switch {
		case o.LastSeen.IsZero() && !o.WatchedSince.IsZero() && verdicts[i].State == Unknown:
			consider(o.WatchedSince.Add(grace))
		case o.LastSeen.IsZero():
		case verdicts[i].State == Alive:
			// Judge counts a Lease seen exactly staleAfter ago as fresh.
			consider(o.LastSeen.Add(staleAfter + time.Millisecond))
		case verdicts[i].State == Unknown:
			consider(o.LastSeen.Add(grace))
		}
	}
	return next, found
}

// At names an instant of the hub's clock for a message: absolute, so a
// status that quotes it stays the same from pass to pass while nothing
// changes (a relative "12s ago" rewrote the status on every pass of an
// outage).
func At(t time.Time) string {
	return "at " + t.UTC().Format(time.RFC3339)
}
