package gossip_test

import (
	"testing"
	"time"

	"github.com/go-logr/logr"

	"github.com/etcdfed/etcdfed/spoke/gossip"
)

// TestRoundTripsMeasuredOnLoopback forms a ring of two agents on loopback
// and waits until each publishes its round trip to the other from real
// memberlist probes: at least MinRoundTripSamples of them, a median no
// larger than the p99, both under a second (loopback), and none to
// itself. The values are logged, not asserted further.
func TestRoundTripsMeasuredOnLoopback(t *testing.T) {
	k := key(t)
	a, b := agent(t, gossip.ProfileLocal, logr.Discard()), agent(t, gossip.ProfileLocal, logr.Discard())
	if got := a.RoundTrips(); got != nil {
		t.Fatalf("round trips before gossip runs: %v", got)
	}
	if err := a.Configure("cluster-a", k, nil); err != nil {
		t.Fatal(err)
	}
	if err := b.Configure("cluster-b", k, []string{a.Address()}); err != nil {
		t.Fatal(err)
	}
	took := waitFor(t, time.Minute, "round trips published both ways", func() bool {
		return len(a.RoundTrips()) == 1 && len(b.RoundTrips()) == 1
	})
	for name, ag := range map[string]*gossip.Agent{"cluster-a": a, "cluster-b": b} {
		rts := ag.RoundTrips()
		r := rts[0]
		if r.Cluster == name {
			t.Errorf("%s reports a round trip to itself", name)
		}
		if r.Samples < gossip.MinRoundTripSamples || r.MedianMicros <= 0 || r.P99Micros < r.MedianMicros || r.P99Micros >= 1_000_000 || r.ObservedAt == nil {
			t.Errorf("%s to %s: %+v", name, r.Cluster, r)
		}
		t.Logf("%s to %s: median %dµs, p99 %dµs over %d probes (published after %v)", name, r.Cluster, r.MedianMicros, r.P99Micros, r.Samples, took.Round(time.Millisecond))
	}
	// A stopped agent reports none.
	b.Stop()
	if got := b.RoundTrips(); got != nil {
		t.Errorf("round trips of a stopped agent: %v", got)
	}
}
