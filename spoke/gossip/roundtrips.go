package gossip

import (
	"maps"
	"slices"
	"time"

	"github.com/hashicorp/memberlist"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	etcdfedv1 "github.com/etcdfed/etcdfed/api/v1alpha1"
	"github.com/etcdfed/etcdfed/pkg/timing"
)

// Round trips (rule 15): memberlist calls the ping delegate with the round
// trip of every direct probe it sends (UDP ping to ack; indirect probes
// and the TCP fallback are not reported, memberlist.PingDelegate). The
// agent keeps a window of the last probes per peer (timing.Window) and
// publishes its median and p99 when they first have MinRoundTripSamples,
// and then only when one of them moved significantly (timing.Moved) on
// timing.Confirmations consecutive probes (timing.Confirm: a loaded
// prober's flips are not published), signalling a change as the view
// does: the EtcdSpoke status is rewritten for a distance that changed, not
// for every probe.
//
// A restarted spoke carries on from what it published before (Seed: the
// round trips its EtcdSpoke status holds, read from the apiserver when
// gossip starts), and a peer declared dead keeps what was published of it
// while its new window fills. Every window warms up for RoundTripWarmUp
// from its first probe: its probes are taken, but what is already
// published is not replaced (held, roundTripsHeld); a peer never
// published is still published on its first MinRoundTripSamples probes (a
// new ring is founded on what is measured). When the warm-up ends its
// probes leave the window, and what follows is a move from what was
// published, published once confirmed.

// MinRoundTripSamples is how many probes a peer's window holds before its
// round trip is published: enough for the p99 to leave out one stalled
// probe (timing.TrimFrom).
const MinRoundTripSamples = timing.TrimFrom

// RoundTripWarmUp is how long a window's first probes (a restarted
// spoke's, or those of a peer come back) replace nothing already
// published. A restart loads the machine: on real nodes a restarted
// spoke's first ten probes at loopback had a median of 174 ms and a p99 of
// 286 ms, its first twenty still a median of 53 ms (25 and 45 s after its
// cluster came back, docs/measurements/realnodes.md, 30 Nov), and
// published at once they rolled every member of the ring. Two minutes is
// more than twice that burst and less than the hub's timing.Settle, and
// the warm-up's probes are dropped when it ends, so none of the burst's
// stalled probes stays in the window to hold its p99 up.
const RoundTripWarmUp = 2 * time.Minute

// roundTrips is the window of one peer and what was last published of it.
type roundTrips struct {
	window    timing.Window
	confirm   timing.Confirm
	published *etcdfedv1.PeerRoundTrip
	// warmUntil is when the window's warm-up ends (zero before its first
	// probe); warm once it ended and its probes were dropped.
	warmUntil time.Time
	warm      bool
	// heldLogged: a hold of this warm-up was logged.
	heldLogged bool
}

// pings is memberlist's ping delegate.
type pings struct{ a *Agent }

// AckPayload sends nothing with an ack: a peer's word on the round trip
// would be untrusted, and each side measures its own.
func (p *pings) AckPayload() []byte { return nil }

// NotifyPingComplete records one probe's round trip to other.
func (p *pings) NotifyPingComplete(other *memberlist.Node, rtt time.Duration, _ []byte) {
	p.a.observeRoundTrip(other.Name, rtt)
}

func (a *Agent) observeRoundTrip(peerName string, rtt time.Duration) {
	roundTripSeconds.WithLabelValues(peerName).Observe(rtt.Seconds())
	a.peersMu.Lock()
	defer a.peersMu.Unlock()
	if p := a.peers[peerName]; peerName == a.self || p == nil || !p.alive {
		// A late ack of a peer declared dead would start its window
		// again before it is back.
		return
	}
	r := a.rtts[peerName]
	if r == nil {
		r = &roundTrips{}
		a.rtts[peerName] = r
	}
	now := a.now()
	if r.warmUntil.IsZero() {
		r.warmUntil = now.Add(RoundTripWarmUp)
	}
	if !r.warm && !now.Before(r.warmUntil) {
		// The warm-up's probes (a restart's burst) leave the window.
		r.window, r.confirm, r.warm = timing.Window{}, timing.Confirm{}, true
		a.cfg.Log.V(1).Info("Gossip round trip warmed up: its window starts again", "peer", peerName)
	}
	r.window.Add(rtt)
	median, p99, n := r.window.Stats()
	if n < MinRoundTripSamples {
		return
	}
	old := r.published
	if !r.warm && old != nil {
		if timing.Moved(old.MedianMicros, old.P99Micros, median, p99) {
			roundTripsHeld.WithLabelValues(peerName).Inc()
			if !r.heldLogged {
				r.heldLogged = true
				a.cfg.Log.Info("Gossip round trip held during warm-up", "peer", peerName,
					"median", micros(median), "p99", micros(p99), "samples", n,
					"publishedMedian", micros(old.MedianMicros), "publishedP99", micros(old.P99Micros), "until", r.warmUntil.UTC().Format(time.RFC3339))
			}
		}
		return
	}
	if old == nil {
		old = &etcdfedv1.PeerRoundTrip{}
	}
	if !r.confirm.Publish(r.published != nil, old.MedianMicros, old.P99Micros, median, p99) {
		return
	}
	t := metav1.NewTime(now).Rfc3339Copy()
	r.published = &etcdfedv1.PeerRoundTrip{Cluster: peerName, MedianMicros: min(median, etcdfedv1.MaxRoundTripMicros),
		P99Micros: min(p99, etcdfedv1.MaxRoundTripMicros), Samples: int32(n), ObservedAt: &t}
	a.cfg.Log.Info("Gossip round trip published", "peer", peerName, "median", micros(median), "p99", micros(p99), "samples", n)
	a.signal()
}

func micros(us int64) time.Duration { return time.Duration(us) * time.Microsecond }

// Seed sets the round trips the next start of gossip carries on from:
// those this spoke published before it restarted (its EtcdSpoke status,
// read from the apiserver). Each is published from the start, and replaced
// only by a move its window confirms after its warm-up. Entries to this
// spoke itself, repeated peers, and values the EtcdSpoke API would refuse
// are left out. A running agent is not changed: it carries on from what it
// published (a restart of memberlist within the process, Configure, carries
// those over).
func (a *Agent) Seed(rts []etcdfedv1.PeerRoundTrip) {
	a.peersMu.Lock()
	defer a.peersMu.Unlock()
	a.seed = make([]etcdfedv1.PeerRoundTrip, 0, len(rts))
	for _, r := range rts {
		a.seed = append(a.seed, *r.DeepCopy())
	}
}

// seedLocked starts the round trips of a run named self from the seed
// (kept for a start that fails).
func (a *Agent) seedLocked(self string) {
	a.rtts = map[string]*roundTrips{}
	for _, r := range a.seed {
		switch {
		case r.Cluster == "" || r.Cluster == self || a.rtts[r.Cluster] != nil,
			r.MedianMicros < 0 || r.MedianMicros > r.P99Micros || r.P99Micros > etcdfedv1.MaxRoundTripMicros || r.Samples < 1:
			a.cfg.Log.Info("Round trip published before not carried on", "peer", r.Cluster, "medianMicros", r.MedianMicros, "p99Micros", r.P99Micros, "samples", r.Samples)
			continue
		}
		a.rtts[r.Cluster] = &roundTrips{published: &r}
	}
	if len(a.rtts) > 0 {
		a.cfg.Log.Info("Gossip carries on from the round trips published before", "peers", slices.Sorted(maps.Keys(a.rtts)))
	}
}

// carryLocked keeps what a run published as the seed of the next one.
func (a *Agent) carryLocked() {
	a.seed = nil
	for _, n := range slices.Sorted(maps.Keys(a.rtts)) {
		if p := a.rtts[n].published; p != nil {
			a.seed = append(a.seed, *p)
		}
	}
	a.rtts = map[string]*roundTrips{}
}

// RoundTrips returns the published round trip to each peer, sorted by
// cluster name, at most etcdfedv1.MaxRoundTrips of them: those published
// by this run and those it carried on from (Seed, and a peer declared
// dead keeps its last); nil when gossip does not run or there is none.
func (a *Agent) RoundTrips() []etcdfedv1.PeerRoundTrip {
	if a.cur.Load() == nil {
		return nil
	}
	a.peersMu.Lock()
	defer a.peersMu.Unlock()
	var out []etcdfedv1.PeerRoundTrip
	for _, n := range slices.Sorted(maps.Keys(a.rtts)) {
		if p := a.rtts[n].published; p != nil && len(out) < etcdfedv1.MaxRoundTrips {
			out = append(out, *p.DeepCopy())
		}
	}
	return out
}
