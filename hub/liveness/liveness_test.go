package liveness

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

var t0 = time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)

func TestTrackerUsesHubClock(t *testing.T) {
	now := t0
	tr := NewTracker(func() time.Time { return now })
	// The spoke's clock is an hour off; only the change matters.
	if gap, first, renewed := tr.ObserveLease("a", t0.Add(time.Hour), "spoke-1", time.Minute); gap != 0 || !first || !renewed {
		t.Errorf("first sighting: gap %s, first %v, renewed %v", gap, first, renewed)
	}
	now = now.Add(5 * time.Second)
	if _, _, renewed := tr.ObserveLease("a", t0.Add(time.Hour), "spoke-1", time.Minute); renewed { // no renewal
		t.Error("an unchanged Lease counted as a renewal")
	}
	if seen, _ := tr.LastSeen("a"); !seen.Equal(t0) {
		t.Fatalf("unchanged lease moved lastSeen to %v", seen)
	}
	if gap, first, renewed := tr.ObserveLease("a", t0.Add(time.Hour+2*time.Second), "spoke-1", time.Minute); gap != 5*time.Second || first || !renewed {
		t.Errorf("renewal after 5s on the hub's clock: gap %s, first %v, renewed %v", gap, first, renewed)
	}
	if seen, _ := tr.LastSeen("a"); !seen.Equal(now) {
		t.Fatalf("renewal not recorded at hub time: %v", seen)
	}
	if _, ok := tr.LastSeen("b"); ok {
		t.Fatal("unknown cluster reported seen")
	}
}

func TestJudge(t *testing.T) {
	stale, grace := 15*time.Second, time.Minute
	fresh := t0.Add(-time.Second)
	long := t0.Add(-2 * time.Minute)
	short := t0.Add(-30 * time.Second)
	for _, tc := range []struct {
		name string
		obs  []Observation
		want map[string]State
	}{
		{"all fresh", []Observation{{Cluster: "a", LastSeen: fresh}, {Cluster: "b", LastSeen: fresh}}, map[string]State{"a": Alive, "b": Alive}},
		{"stale, both peers agree, beyond grace: failed", []Observation{
			{Cluster: "a", LastSeen: long},
			{Cluster: "b", LastSeen: fresh, Gossip: map[string]bool{"a": false, "c": true}},
			{Cluster: "c", LastSeen: fresh, Gossip: map[string]bool{"a": false, "b": true}},
		}, map[string]State{"a": Failed, "b": Alive, "c": Alive}},
		{"stale, peers agree, within grace: unknown", []Observation{
			{Cluster: "a", LastSeen: short},
			{Cluster: "b", LastSeen: fresh, Gossip: map[string]bool{"a": false, "c": true}},
			{Cluster: "c", LastSeen: fresh, Gossip: map[string]bool{"a": false, "b": true}},
		}, map[string]State{"a": Unknown}},
		{"stale to the hub but peers see it: unknown (hub's path failed)", []Observation{
			{Cluster: "a", LastSeen: long},
			{Cluster: "b", LastSeen: fresh, Gossip: map[string]bool{"a": true}},
			{Cluster: "c", LastSeen: fresh, Gossip: map[string]bool{"a": true}},
		}, map[string]State{"a": Unknown}},
		{"one of two peers agrees: no majority, unknown", []Observation{
			{Cluster: "a", LastSeen: long},
			{Cluster: "b", LastSeen: fresh, Gossip: map[string]bool{"a": false, "c": true}},
			{Cluster: "c", LastSeen: fresh, Gossip: map[string]bool{"a": true}},
		}, map[string]State{"a": Unknown}},
		// Issue 24: before, the witnesses were only the spokes the hub
		// saw fresh, so the one spoke on the hub's side of a partition
		// was "a majority" and declared the other side failed.
		{"the hub with the minority: it sees only c; a and b may be alive, neither failed", []Observation{
			{Cluster: "a", LastSeen: long, Gossip: map[string]bool{"b": true, "c": false}},
			{Cluster: "b", LastSeen: long, Gossip: map[string]bool{"a": true, "c": false}},
			{Cluster: "c", LastSeen: fresh, Gossip: map[string]bool{"a": false, "b": false}},
		}, map[string]State{"a": Unknown, "b": Unknown, "c": Alive}},
		{"two fresh spokes of three others are a majority; the stale one counts but cannot vote", []Observation{
			{Cluster: "a", LastSeen: long},
			{Cluster: "b", LastSeen: long, Gossip: map[string]bool{"a": false}},
			{Cluster: "c", LastSeen: fresh, Gossip: map[string]bool{"a": false, "b": false, "d": true}},
			{Cluster: "d", LastSeen: fresh, Gossip: map[string]bool{"a": false, "b": false, "c": true}},
		}, map[string]State{"a": Failed, "b": Failed, "c": Alive}},
		{"a spoke whose gossip never joined abstains (it reports its only peer dead)", []Observation{
			{Cluster: "a", LastSeen: long},
			{Cluster: "b", LastSeen: fresh, Gossip: map[string]bool{"a": false}},
		}, map[string]State{"a": Unknown}},
		{"a spoke whose gossip sees no peer alive abstains, with the hub cut off from a and c", []Observation{
			{Cluster: "a", LastSeen: long},
			{Cluster: "b", LastSeen: fresh, Gossip: map[string]bool{"a": false, "c": false}},
			{Cluster: "c", LastSeen: long, Gossip: map[string]bool{"a": true, "b": false}},
		}, map[string]State{"a": Unknown, "c": Unknown}},
		{"alone: never failed", []Observation{{Cluster: "a", LastSeen: long}}, map[string]State{"a": Unknown}},
		{"hub lost everything: nobody failed", []Observation{
			{Cluster: "a", LastSeen: long, Gossip: map[string]bool{"b": true}},
			{Cluster: "b", LastSeen: long, Gossip: map[string]bool{"a": true}},
		}, map[string]State{"a": Unknown, "b": Unknown}},
		{"never seen, peers agree: unknown", []Observation{
			{Cluster: "a"},
			{Cluster: "b", LastSeen: fresh, Gossip: map[string]bool{"a": false, "c": true}},
			{Cluster: "c", LastSeen: fresh, Gossip: map[string]bool{"a": false, "b": true}},
		}, map[string]State{"a": Unknown}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := map[string]Verdict{}
			for _, v := range Judge(tc.obs, t0, stale, grace) {
				got[v.Cluster] = v
			}
			for c, want := range tc.want {
				if got[c].State != want {
					t.Errorf("%s: %s (%s), want %s", c, got[c].State, got[c].Reason, want)
				}
				if got[c].Reason == "" {
					t.Errorf("%s: no reason", c)
				}
			}
		})
	}
}

// TestNextChange: NextChange is the instant the oldest fresh Lease goes
// stale or a corroborated absence reaches its grace, whichever is first;
// and at that instant Judge's verdict has indeed changed.
func TestNextChange(t *testing.T) {
	stale, grace := 5*time.Second, time.Minute
	for _, tc := range []struct {
		name string
		obs  []Observation
		want time.Duration // 0: no change by time alone
	}{
		{"fresh Leases: the oldest goes stale first", []Observation{
			{Cluster: "a", LastSeen: t0.Add(-1 * time.Second)},
			{Cluster: "b", LastSeen: t0.Add(-3 * time.Second)},
		}, 2*time.Second + time.Millisecond},
		{"a corroborated absence reaches its grace", []Observation{
			{Cluster: "a", LastSeen: t0.Add(-50 * time.Second)},
			{Cluster: "b", LastSeen: t0.Add(-1 * time.Second), Gossip: map[string]bool{"a": false, "c": true}},
			{Cluster: "c", LastSeen: t0.Add(-4 * time.Second), Gossip: map[string]bool{"a": false, "b": true}},
		}, time.Second + time.Millisecond},
		{"grace before any staleness", []Observation{
			{Cluster: "a", LastSeen: t0.Add(-59 * time.Second)},
			{Cluster: "b", LastSeen: t0, Gossip: map[string]bool{"a": false, "c": true}},
			{Cluster: "c", LastSeen: t0, Gossip: map[string]bool{"a": false, "b": true}},
		}, time.Second},
		{"failed and never seen: nothing changes by itself", []Observation{
			{Cluster: "a", LastSeen: t0.Add(-2 * time.Minute)},
			{Cluster: "b"},
		}, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := NextChange(tc.obs, t0, stale, grace)
			if ok != (tc.want != 0) || got != tc.want {
				t.Fatalf("NextChange = %s, %v; want %s", got, ok, tc.want)
			}
			if !ok {
				return
			}
			before, after := Judge(tc.obs, t0.Add(got-time.Millisecond), stale, grace), Judge(tc.obs, t0.Add(got), stale, grace)
			changed := false
			for i := range before {
				changed = changed || before[i].State != after[i].State
			}
			if !changed {
				t.Errorf("no verdict changed at %s: %+v", got, after)
			}
		})
	}
}

// A hub started while a cluster is down never sees its Lease. Before, such
// a cluster stayed unknown forever and its members were never moved; now
// its staleness counts from when the hub started looking, so with the
// other spokes agreeing it is failed after the grace, and not before
// (TestScenarioHubDownZoneKilled found it).
func TestNeverSeenClusterFailsAfterGraceSinceWatched(t *testing.T) {
	stale, grace := 4*time.Second, 30*time.Second
	now := t0
	tr := NewTracker(func() time.Time { return now })
	watched := tr.WatchedSince("down")
	if !tr.WatchedSince("down").Equal(watched) {
		t.Fatal("WatchedSince moved on a second call")
	}
	obs := func() []Observation {
		return []Observation{
			{Cluster: "down", WatchedSince: tr.WatchedSince("down")},
			{Cluster: "b", LastSeen: now, Gossip: map[string]bool{"down": false, "c": true}},
			{Cluster: "c", LastSeen: now, Gossip: map[string]bool{"down": false, "b": true}},
		}
	}
	now = t0.Add(10 * time.Second)
	v := Judge(obs(), now, stale, grace)
	if v[0].State != Unknown {
		t.Fatalf("within the grace: %+v", v[0])
	}
	// (With a longer staleness window, so that b and c going stale comes later.)
	if d, ok := NextChange(obs(), now, 25*time.Second, grace); !ok || d != 20*time.Second {
		t.Errorf("next change in %s (%v), want 20s: when the grace since watching ends", d, ok)
	}
	now = t0.Add(31 * time.Second)
	v = Judge(obs(), now, stale, grace)
	if v[0].State != Failed || v[0].Reason != "spoke Lease never seen since the hub started looking "+At(t0)+" and b, c see it gone" {
		t.Errorf("past the grace: %+v", v[0])
	}
	// Without corroboration it stays unknown, however long.
	o := obs()
	o[1].Gossip["down"], o[2].Gossip["down"] = true, true
	if v := Judge(o, t0.Add(time.Hour), stale, grace); v[0].State != Unknown {
		t.Errorf("never seen, other spokes see it alive: %+v", v[0])
	}
	tr.Forget("down")
	now = t0.Add(time.Hour)
	if !tr.WatchedSince("down").Equal(now) {
		t.Error("Forget kept the watch start")
	}
}

// TestWitnessesAbstain: a spoke that says its gossip is not healthy
// abstains whatever its view holds, and a cluster outside the ring (no
// member there, not eligible) is no witness: it neither votes nor counts.
func TestWitnessesAbstain(t *testing.T) {
	stale, grace := 15*time.Second, time.Minute
	fresh, long := t0.Add(-time.Second), t0.Add(-2*time.Minute)
	judge := func(obs []Observation) Verdict { return Judge(obs, t0, stale, grace)[0] }
	v := judge([]Observation{
		{Cluster: "a", LastSeen: long},
		{Cluster: "b", LastSeen: fresh, Gossip: map[string]bool{"a": false, "c": true}, Abstains: "gossip Secret spoke-gossip does not exist"},
		{Cluster: "c", LastSeen: fresh, Gossip: map[string]bool{"a": false, "b": true}},
	})
	if v.State != Unknown || !strings.Contains(v.Reason, "b (gossip Secret spoke-gossip does not exist) abstain") || !strings.Contains(v.Reason, "only 1 of the 2 other spokes see it gone (2 needed)") {
		t.Errorf("an abstaining spoke voted: %+v", v)
	}
	// Outside the ring: c neither helps nor hinders.
	v = judge([]Observation{
		{Cluster: "a", LastSeen: long},
		{Cluster: "b", LastSeen: fresh, Gossip: map[string]bool{"a": false, "c": true}},
		{Cluster: "c", LastSeen: long, NotWitness: true},
	})
	if v.State != Failed {
		t.Errorf("a cluster outside the ring counted as a witness: %+v", v)
	}
	v = judge([]Observation{
		{Cluster: "a", LastSeen: long},
		{Cluster: "b", LastSeen: fresh, Gossip: map[string]bool{"a": false}, NotWitness: true},
	})
	if v.State != Unknown || !strings.Contains(v.Reason, "no other spoke to confirm") {
		t.Errorf("a cluster outside the ring voted: %+v", v)
	}
}

// TestHubView: a hub that sees too few clusters for any unseen one to be
// declared failed says so in plain words; one that sees enough says
// nothing.
func TestHubView(t *testing.T) {
	stale := 15 * time.Second
	fresh, long := t0.Add(-time.Second), t0.Add(-2*time.Minute)
	obs := func(seen ...bool) []Observation {
		var out []Observation
		for i, s := range seen {
			o := Observation{Cluster: fmt.Sprintf("member-%d", i+1), LastSeen: long}
			if s {
				o.LastSeen = fresh
			}
			out = append(out, o)
		}
		return out
	}
	for _, tc := range []struct {
		seen     []bool
		minority bool
	}{
		{[]bool{false, false, true}, true},              // 1 of 3
		{[]bool{true, false, true}, false},              // 2 of 3
		{[]bool{true, true, true}, false},               // all
		{[]bool{true, false}, false},                    // 1 of 2: the other can be judged by the one
		{[]bool{true, true, false, false, false}, true}, // 2 of 5
		{[]bool{true, true, true, false, false}, false}, // 3 of 5
		{[]bool{false}, true},
	} {
		v := ViewOf(obs(tc.seen...), t0, stale)
		if v.Minority() != tc.minority {
			t.Errorf("seen %v: minority %v, want %v", tc.seen, v.Minority(), tc.minority)
		}
		// A minority hub's Judge declares no unseen cluster failed, even
		// with every seen spoke voting "gone".
		o := obs(tc.seen...)
		for i := range o {
			o[i].Gossip = map[string]bool{}
			for j := range o {
				if i != j {
					o[i].Gossip[o[j].Cluster] = tc.seen[j]
				}
			}
		}
		failed := false
		for _, verdict := range Judge(o, t0, stale, 0) {
			failed = failed || verdict.State == Failed
		}
		if failed && tc.minority {
			t.Errorf("seen %v: a minority hub's Judge declared a cluster failed", tc.seen)
		}
	}
	msg := ViewOf(obs(false, false, true), t0, stale).Message()
	for _, want := range []string{"the hub sees only member-3 of the 3 member clusters", "member-1, member-2 may be alive and serving without it", "forces no new cluster"} {
		if !strings.Contains(msg, want) {
			t.Errorf("message %q lacks %q", msg, want)
		}
	}
	if msg := ViewOf(obs(true, false, true), t0, stale).Message(); msg != "" {
		t.Errorf("a hub with a majority says %q", msg)
	}
}

// BackSince is when a Lease was seen renewed after a gap longer than the
// staleness window; renewals within the window and a first sighting do
// not move it.
func TestTrackerBackSince(t *testing.T) {
	now := t0
	tr := NewTracker(func() time.Time { return now })
	stale := 15 * time.Second
	renew := t0
	observe := func(after time.Duration) {
		now = now.Add(after)
		renew = renew.Add(after)
		tr.ObserveLease("a", renew, "spoke-1", stale)
	}
	observe(0)
	if at, ok := tr.BackSince("a"); ok {
		t.Fatalf("first sighting counted as back at %v", at)
	}
	observe(2 * time.Second)
	if _, ok := tr.BackSince("a"); ok {
		t.Fatal("a renewal within the window counted as back")
	}
	observe(90 * time.Second) // a partition healed
	back := now
	if at, ok := tr.BackSince("a"); !ok || !at.Equal(back) {
		t.Fatalf("after a 90s gap: back %v %v, want %v", at, ok, back)
	}
	observe(2 * time.Second)
	if at, _ := tr.BackSince("a"); !at.Equal(back) {
		t.Fatalf("a later renewal moved back to %v, want %v", at, back)
	}
}
