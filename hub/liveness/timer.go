package liveness

import "time"

// Seen returns, per cluster, when the hub last saw its Lease renewed.
func (t *Tracker) Seen() map[string]time.Time {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := make(map[string]time.Time, len(t.entries))
	for c, e := range t.entries {
		out[c] = e.lastSeen
	}
	return out
}

// NextStale is, of the clusters whose Lease is fresh at now, the first to
// go stale and when (the instant Judge first calls it stale); ok is false
// when every cluster is already stale or none is tracked. One timer on it
// lets rings at rest sleep: a Lease going stale is the only verdict change
// that time alone brings to a ring whose clusters are all alive.
func NextStale(seen map[string]time.Time, now time.Time, staleAfter time.Duration) (cluster string, at time.Time, ok bool) {
	for c, last := range seen {
		due := last.Add(staleAfter + time.Millisecond)
		if !due.After(now) {
			continue
		}
		if !ok || due.Before(at) || (due.Equal(at) && c < cluster) {
			cluster, at, ok = c, due, true
		}
	}
	return cluster, at, ok
}

// NextGraceEnd is how long until a cluster already stale on the hub's
// clock, its absence corroborated or not, reaches the grace period after
// which Judge may declare it failed; ok is false when no cluster is stale.
// A fresh Lease going stale is not counted: the hub's staleness timer
// (NextStale) wakes the rings then; nor is a Bystander's.
func NextGraceEnd(obs []Observation, now time.Time, staleAfter, grace time.Duration) (time.Duration, bool) {
	var next time.Duration
	found := false
	for i, v := range Judge(obs, now, staleAfter, grace) {
		o := obs[i]
		// A Lease never seen counts from when the hub started looking.
		since := o.LastSeen
		if since.IsZero() {
			since = o.WatchedSince
		}
		if v.State != Unknown || since.IsZero() || o.Bystander {
			continue
		}
		if d := since.Add(grace).Sub(now); d > 0 && (!found || d < next) {
			next, found = d, true
		}
	}
	return next, found
}
