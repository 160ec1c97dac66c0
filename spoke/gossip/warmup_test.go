package gossip

// Internal tests of the round trips' warm-up (roundtrips.go): they drive
// observeRoundTrip with chosen round trips on an agent that really runs
// (memberlist on loopback, no peer: nothing probes but the test) under a
// fake clock.

import (
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/hashicorp/memberlist"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	etcdfedv1 "github.com/etcdfed/etcdfed/api/v1alpha1"
	"github.com/etcdfed/etcdfed/pkg/timing"
)

type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *fakeClock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *fakeClock) step(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// started runs an agent named self on loopback under clock, seeded with
// seed (nil: none, a first start), with peer alive.
func started(t *testing.T, clock *fakeClock, self, peer string, seed []etcdfedv1.PeerRoundTrip) *Agent {
	t.Helper()
	a := New(Config{BindAddr: "127.0.0.1:0", Profile: ProfileLocal, Log: logr.Discard()})
	a.now = clock.now
	t.Cleanup(a.Stop)
	if seed != nil {
		a.Seed(seed)
	}
	if err := a.Configure(self, nil, nil); err != nil {
		t.Fatal(err)
	}
	a.setPeer(&memberlist.Node{Name: peer}, true)
	return a
}

// probes observes n probes of peer, one a second.
func probes(a *Agent, clock *fakeClock, peer string, n int, rtt time.Duration) {
	for range n {
		clock.step(time.Second)
		a.observeRoundTrip(peer, rtt)
	}
}

func published(t *testing.T, a *Agent, peer string) *etcdfedv1.PeerRoundTrip {
	t.Helper()
	for _, r := range a.RoundTrips() {
		if r.Cluster == peer {
			return &r
		}
	}
	return nil
}

func same(got *etcdfedv1.PeerRoundTrip, want etcdfedv1.PeerRoundTrip) bool {
	return equality.Semantic.DeepEqual(*got, want)
}

// before is what a spoke published before its restart: 2 ms, 4 ms.
func before(peer string) []etcdfedv1.PeerRoundTrip {
	at := metav1.NewTime(time.Date(2026, 11, 30, 3, 0, 0, 0, time.UTC))
	return []etcdfedv1.PeerRoundTrip{{Cluster: peer, MedianMicros: 2_000, P99Micros: 4_000, Samples: timing.WindowSize, ObservedAt: &at}}
}

// TestRestartBurstPublishesNothing (issue 35): a restarted spoke's first
// window, taken while the restart loads its machine (174/286 ms at
// loopback on real nodes), replaced the round trips it had published
// before, and the hub re-timed every member from it. Now the agent starts
// from what the EtcdSpoke held (Seed), keeps it through the warm-up, holds
// (and counts) the burst, and drops the burst's probes when the warm-up
// ends: steady probes as before publish nothing, during the warm-up or
// after it.
func TestRestartBurstPublishesNothing(t *testing.T) {
	clock := &fakeClock{t: time.Date(2026, 11, 30, 3, 15, 0, 0, time.UTC)}
	const peer = "burst-peer"
	seed := before(peer)
	a := started(t, clock, "burst-self", peer, seed)
	want := seed[0]
	if got := published(t, a, peer); got == nil || !same(got, want) {
		t.Fatalf("at start: published %+v, want the seed %+v", got, want)
	}
	held := testutil.ToFloat64(roundTripsHeld.WithLabelValues(peer))
	// The burst: three windows' worth of stalled probes, inside the warm-up.
	probes(a, clock, peer, 3*MinRoundTripSamples, 174*time.Millisecond)
	probes(a, clock, peer, 2, 286*time.Millisecond)
	if got := published(t, a, peer); got == nil || !same(got, want) {
		t.Fatalf("after the burst: published %+v, want the seed %+v kept", got, want)
	}
	if d := testutil.ToFloat64(roundTripsHeld.WithLabelValues(peer)) - held; d < 1 {
		t.Errorf("etcdfed_spoke_gossip_round_trips_held_total{peer=%q} rose by %v, want the burst's held probes counted", peer, d)
	}
	// The machine calms down; the warm-up ends; a full window and more of
	// probes as before publish nothing, and the burst's probes do not
	// come back.
	probes(a, clock, peer, int(RoundTripWarmUp/time.Second), 2*time.Millisecond)
	probes(a, clock, peer, timing.WindowSize, 2*time.Millisecond)
	if got := published(t, a, peer); got == nil || !same(got, want) {
		t.Fatalf("after the warm-up: published %+v, want the seed %+v kept", got, want)
	}
}

// TestMoveAfterWarmUpPublished: a real change of distance that came with
// the restart is published once the warm-up ended and a window of probes
// after it confirms the move (timing.Confirm), not before.
func TestMoveAfterWarmUpPublished(t *testing.T) {
	clock := &fakeClock{t: time.Date(2026, 11, 30, 3, 15, 0, 0, time.UTC)}
	const peer = "move-peer"
	seed := before(peer)
	a := started(t, clock, "move-self", peer, seed)
	probes(a, clock, peer, int(RoundTripWarmUp/time.Second), 50*time.Millisecond)
	if got := published(t, a, peer); got == nil || !same(got, seed[0]) {
		t.Fatalf("during the warm-up: published %+v, want the seed kept", got)
	}
	// The warm-up ends at the next probe, which starts the window again.
	probes(a, clock, peer, MinRoundTripSamples+timing.Confirmations-2, 50*time.Millisecond)
	if got := published(t, a, peer); got == nil || !same(got, seed[0]) {
		t.Fatalf("before the move is confirmed: published %+v, want the seed kept", got)
	}
	probes(a, clock, peer, 1, 50*time.Millisecond)
	got := published(t, a, peer)
	if got == nil || got.MedianMicros != 50_000 || got.P99Micros != 50_000 || !got.ObservedAt.Time.Equal(clock.now()) {
		t.Fatalf("the move confirmed after the warm-up: published %+v, want 50/50 ms at %v", got, clock.now())
	}
}

// TestNewPeerPublishedOnFirstWindow: a peer never published (a new ring)
// is published on its first full window even in the warm-up; when the
// warm-up ends its probes leave the window, so a first window taken in a
// burst is replaced by what follows, p99 included (before, the burst's
// stalled probes kept the p99 up for a whole window, 128 probes).
func TestNewPeerPublishedOnFirstWindow(t *testing.T) {
	clock := &fakeClock{t: time.Date(2026, 11, 30, 3, 15, 0, 0, time.UTC)}
	const peer = "new-peer"
	a := started(t, clock, "new-self", peer, nil)
	probes(a, clock, peer, MinRoundTripSamples-1, 174*time.Millisecond)
	if got := published(t, a, peer); got != nil {
		t.Fatalf("before a full window: published %+v", got)
	}
	probes(a, clock, peer, 1, 174*time.Millisecond)
	if got := published(t, a, peer); got == nil || got.MedianMicros != 174_000 || got.Samples != MinRoundTripSamples {
		t.Fatalf("on the first full window: published %+v, want 174 ms over %d probes", got, MinRoundTripSamples)
	}
	probes(a, clock, peer, int(RoundTripWarmUp/time.Second)+MinRoundTripSamples+timing.Confirmations, 2*time.Millisecond)
	if got := published(t, a, peer); got == nil || got.MedianMicros != 2_000 || got.P99Micros != 2_000 {
		t.Fatalf("after the warm-up: published %+v, want 2/2 ms", got)
	}
}

// TestDeadPeerKeepsItsRoundTrip: a peer declared dead keeps what was
// published of it (a spoke of a cluster that comes back measured
// 66/595 ms to it at loopback on real nodes, at once published); its new
// window, when it is back, warms up like a restarted spoke's. A restart
// of memberlist within the process (a new name) carries it over too.
func TestDeadPeerKeepsItsRoundTrip(t *testing.T) {
	clock := &fakeClock{t: time.Date(2026, 11, 30, 3, 15, 0, 0, time.UTC)}
	const peer = "dead-peer"
	a := started(t, clock, "dead-self", peer, nil)
	probes(a, clock, peer, MinRoundTripSamples, 2*time.Millisecond)
	want := published(t, a, peer)
	if want == nil {
		t.Fatal("not published on a full window")
	}
	a.setPeer(&memberlist.Node{Name: peer}, false)
	if got := published(t, a, peer); got == nil || !same(got, *want) {
		t.Fatalf("declared dead: published %+v, want %+v kept", got, want)
	}
	clock.step(time.Hour)
	a.setPeer(&memberlist.Node{Name: peer}, true)
	probes(a, clock, peer, 3*MinRoundTripSamples, 300*time.Millisecond)
	if got := published(t, a, peer); got == nil || !same(got, *want) {
		t.Fatalf("back, in its warm-up: published %+v, want %+v kept", got, want)
	}
	if err := a.Configure("dead-self-renamed", nil, nil); err != nil {
		t.Fatal(err)
	}
	if got := published(t, a, peer); got == nil || !same(got, *want) {
		t.Fatalf("memberlist restarted under a new name: published %+v, want %+v carried over", got, want)
	}
}
