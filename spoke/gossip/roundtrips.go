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

// MinRoundTripSamples is how many probes a peer's window holds before its
// round trip is published: enough for the p99 to leave out one stalled
// probe (timing.TrimFrom).
const MinRoundTripSamples = timing.TrimFrom

// roundTrips is the window of one peer and what was last published of it.
type roundTrips struct {
	window    timing.Window
	confirm   timing.Confirm
	published *etcdfedv1.PeerRoundTrip
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
	r.window.Add(rtt)
	median, p99, n := r.window.Stats()
	if n < MinRoundTripSamples {
		return
	}
	old := r.published
	if old == nil {
		old = &etcdfedv1.PeerRoundTrip{}
	}
	if !r.confirm.Publish(r.published != nil, old.MedianMicros, old.P99Micros, median, p99) {
		return
	}
	t := metav1.NewTime(a.now()).Rfc3339Copy()
	r.published = &etcdfedv1.PeerRoundTrip{Cluster: peerName, MedianMicros: min(median, etcdfedv1.MaxRoundTripMicros),
		P99Micros: min(p99, etcdfedv1.MaxRoundTripMicros), Samples: int32(n), ObservedAt: &t}
	a.cfg.Log.Info("Gossip round trip published", "peer", peerName, "median", time.Duration(median)*time.Microsecond, "p99", time.Duration(p99)*time.Microsecond, "samples", n)
	a.signal()
}

// RoundTrips returns the published round trip to each peer, sorted by
// cluster name, at most etcdfedv1.MaxRoundTrips of them; nil when gossip
// does not run or no peer has enough probes yet.
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
