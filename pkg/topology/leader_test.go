package topology

import (
	"strings"
	"testing"
	"time"
)

// lmems parses "main-0@c1/a main-1@c2/b! main-2@c3/c~" into leader
// placement members: a trailing ! marks one not ready, ~ a learner.
func lmems(spec string) []LeaderMember {
	var out []LeaderMember
	for _, f := range strings.Fields(spec) {
		m := LeaderMember{Voter: true, Ready: true}
		for strings.HasSuffix(f, "!") || strings.HasSuffix(f, "~") {
			if strings.HasSuffix(f, "!") {
				m.Ready = false
			} else {
				m.Voter = false
			}
			f = f[:len(f)-1]
		}
		name, where, _ := strings.Cut(f, "@")
		m.Name, m.Domain = name, dom(where)
		out = append(out, m)
	}
	return out
}

// matrix is a round-trip matrix between clusters, in milliseconds; a
// missing pair is unknown.
func matrix(pairs map[[2]string]int) RoundTrip {
	return func(from, to string) (time.Duration, bool) {
		ms, ok := pairs[[2]string{from, to}]
		return time.Duration(ms) * time.Millisecond, ok
	}
}

func TestDecideLeader(t *testing.T) {
	t0 := time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)
	ring := "m-0@c1/a m-1@c1/a m-2@c2/b m-3@c2/b m-4@c3/c"
	prefer := func(places ...Place) LeaderPolicy {
		return LeaderPolicy{Placement: LeaderPreferred, Preferred: places, Settle: 30 * time.Second, MinInterval: 5 * time.Minute}
	}
	auto := LeaderPolicy{Placement: LeaderAuto, Settle: 30 * time.Second, MinInterval: 5 * time.Minute}
	// c3 is far from the others, c1 and c2 near each other.
	far3 := matrix(map[[2]string]int{{"c1", "c2"}: 2, {"c1", "c3"}: 40, {"c2", "c3"}: 45})
	for _, tc := range []struct {
		name string
		in   LeaderInput
		// want: the member moved to ("" none) and the reason.
		moveTo  string
		reason  LeaderReason
		inPlace bool
		// outsideSince: the recorded value expected (zero: cleared).
		outsideSince time.Time
		message      string
	}{
		{name: "placement none", in: LeaderInput{Policy: LeaderPolicy{Placement: LeaderNone}, Members: lmems(ring), Leader: "m-4"},
			reason: LeaderNotWanted},
		{name: "placement unset is none", in: LeaderInput{Members: lmems(ring), Leader: "m-4"},
			reason: LeaderNotWanted},
		{name: "leader unknown", in: LeaderInput{Policy: prefer(Place{Zone: "a"}), Members: lmems(ring)},
			reason: LeaderUnknown},
		{name: "in the preferred zone", in: LeaderInput{Policy: prefer(Place{Zone: "a"}), Members: lmems(ring), Leader: "m-1", Now: t0, OutsideSince: t0.Add(-time.Hour)},
			reason: LeaderInPlace, inPlace: true},
		{name: "outside: the settle clock starts", in: LeaderInput{Policy: prefer(Place{Zone: "a"}), Members: lmems(ring), Leader: "m-4", Now: t0},
			reason: LeaderSettling, outsideSince: t0, message: "moved to m-0 once"},
		{name: "outside, settling", in: LeaderInput{Policy: prefer(Place{Zone: "a"}), Members: lmems(ring), Leader: "m-4", Now: t0, OutsideSince: t0.Add(-29 * time.Second)},
			reason: LeaderSettling, outsideSince: t0.Add(-29 * time.Second)},
		{name: "outside, settled: moved", in: LeaderInput{Policy: prefer(Place{Zone: "a"}), Members: lmems(ring), Leader: "m-4", Now: t0, OutsideSince: t0.Add(-30 * time.Second)},
			moveTo: "m-0", reason: LeaderMove, outsideSince: t0.Add(-30 * time.Second)},
		{name: "a recorded time in the future is now", in: LeaderInput{Policy: prefer(Place{Zone: "a"}), Members: lmems(ring), Leader: "m-4", Now: t0, OutsideSince: t0.Add(time.Hour)},
			reason: LeaderSettling, outsideSince: t0},
		{name: "unhealthy ring: not moved, clock cleared", in: LeaderInput{Policy: prefer(Place{Zone: "a"}), Members: lmems(ring), Leader: "m-4", Now: t0, OutsideSince: t0.Add(-time.Hour), Unhealthy: "m-2 is not a ready voter"},
			reason: LeaderRingUnhealthy, message: "m-2 is not a ready voter"},
		{name: "operation in flight: not moved, clock kept", in: LeaderInput{Policy: prefer(Place{Zone: "a"}), Members: lmems(ring), Leader: "m-4", Now: t0, OutsideSince: t0.Add(-time.Hour), Busy: "Roll of m-2 is in flight"},
			reason: LeaderOperationInFlight, outsideSince: t0.Add(-time.Hour), message: "Roll of m-2"},
		{name: "moved recently: rate limited", in: LeaderInput{Policy: prefer(Place{Zone: "a"}), Members: lmems(ring), Leader: "m-4", Now: t0, OutsideSince: t0.Add(-time.Hour), LastMoved: t0.Add(-4 * time.Minute)},
			reason: LeaderRateLimited, outsideSince: t0.Add(-time.Hour)},
		{name: "moved long ago", in: LeaderInput{Policy: prefer(Place{Zone: "a"}), Members: lmems(ring), Leader: "m-4", Now: t0, OutsideSince: t0.Add(-time.Hour), LastMoved: t0.Add(-5 * time.Minute)},
			moveTo: "m-0", reason: LeaderMove, outsideSince: t0.Add(-time.Hour)},
		{name: "preferred member not ready: the other one", in: LeaderInput{Policy: prefer(Place{Zone: "a"}), Members: lmems("m-0@c1/a! m-1@c1/a m-2@c2/b m-3@c2/b m-4@c3/c"), Leader: "m-4", Now: t0, OutsideSince: t0.Add(-time.Hour)},
			moveTo: "m-1", reason: LeaderMove, outsideSince: t0.Add(-time.Hour)},
		{name: "a learner is no candidate", in: LeaderInput{Policy: prefer(Place{Cluster: "c9"}, Place{Zone: "a"}), Members: lmems("m-0@c1/a~ m-1@c1/a m-2@c2/b m-3@c2/b m-4@c3/c m-5@c9/z~"), Leader: "m-4", Now: t0, OutsideSince: t0.Add(-time.Hour)},
			moveTo: "m-1", reason: LeaderMove, outsideSince: t0.Add(-time.Hour)},
		{name: "preferred cluster absent: the next entry", in: LeaderInput{Policy: prefer(Place{Cluster: "c9"}, Place{Cluster: "c2"}), Members: lmems(ring), Leader: "m-4", Now: t0, OutsideSince: t0.Add(-time.Hour)},
			moveTo: "m-2", reason: LeaderMove, outsideSince: t0.Add(-time.Hour)},
		{name: "preferred cluster absent, the leader in the next entry", in: LeaderInput{Policy: prefer(Place{Cluster: "c9"}, Place{Cluster: "c3"}), Members: lmems(ring), Leader: "m-4", Now: t0},
			reason: LeaderInPlace, inPlace: true},
		{name: "no preferred place holds a ready voter", in: LeaderInput{Policy: prefer(Place{Cluster: "c9"}, Place{Zone: "z"}), Members: lmems(ring), Leader: "m-4", Now: t0},
			reason: LeaderNoCandidate, message: "cluster c9; zone z"},
		{name: "a later entry does not hold the leader when an earlier one has a voter", in: LeaderInput{Policy: prefer(Place{Zone: "b"}, Place{Zone: "c"}), Members: lmems(ring), Leader: "m-4", Now: t0, OutsideSince: t0.Add(-time.Hour)},
			moveTo: "m-2", reason: LeaderMove, outsideSince: t0.Add(-time.Hour)},
		{name: "cluster preference: the zone with the most voters", in: LeaderInput{Policy: prefer(Place{Cluster: "c1"}), Members: lmems("m-0@c1/a m-1@c1/b m-2@c1/b m-3@c2/c m-4@c2/c"), Leader: "m-3", Now: t0, OutsideSince: t0.Add(-time.Hour)},
			moveTo: "m-1", reason: LeaderMove, outsideSince: t0.Add(-time.Hour)},
		{name: "zone of one cluster", in: LeaderInput{Policy: prefer(Place{Cluster: "c2", Zone: "b"}), Members: lmems("m-0@c1/b m-1@c2/a m-2@c2/b"), Leader: "m-0", Now: t0, OutsideSince: t0.Add(-time.Hour)},
			moveTo: "m-2", reason: LeaderMove, outsideSince: t0.Add(-time.Hour)},
		{name: "settle 0 moves at once", in: LeaderInput{Policy: LeaderPolicy{Placement: LeaderPreferred, Preferred: []Place{{Zone: "b"}}}, Members: lmems(ring), Leader: "m-0", Now: t0},
			moveTo: "m-2", reason: LeaderMove, outsideSince: t0},

		// Auto.
		{name: "auto without a matrix does nothing", in: LeaderInput{Policy: auto, Members: lmems(ring), Leader: "m-4", Now: t0},
			reason: LeaderNoMeasurements, message: "no round trips"},
		{name: "auto: leader in the far zone moves near", in: LeaderInput{Policy: auto, Members: lmems(ring), Leader: "m-4", Now: t0, OutsideSince: t0.Add(-time.Hour), RoundTrip: far3},
			// From c1/a: quorum 3 = itself, m-1 (0) and c2 (2 ms); from
			// c3/c: 40 ms. c1 and c2 tie at 2 ms; c1/a sorts first.
			moveTo: "m-0", reason: LeaderMove, outsideSince: t0.Add(-time.Hour)},
		{name: "auto: within the margin is in place", in: LeaderInput{Policy: auto, Members: lmems(ring), Leader: "m-2", Now: t0, RoundTrip: far3},
			reason: LeaderInPlace, inPlace: true},
		{name: "auto: zero distance everywhere is in place", in: LeaderInput{Policy: auto, Members: lmems(ring), Leader: "m-4", Now: t0,
			RoundTrip: matrix(map[[2]string]int{{"c1", "c2"}: 0, {"c1", "c3"}: 0, {"c2", "c3"}: 0})},
			reason: LeaderInPlace, inPlace: true},
		{name: "auto: the zone of 1 needs the nearest zone of 2", in: LeaderInput{Policy: auto, Members: lmems(ring), Leader: "m-0", Now: t0, OutsideSince: t0.Add(-time.Hour),
			// c3 sits between: 5 ms to both; c1-c2 are 30 ms apart. From
			// c3/c the quorum is itself and two of c1 (5 ms); from c1/a
			// itself, m-1 and one more at 5 ms (c3).
			RoundTrip: matrix(map[[2]string]int{{"c1", "c2"}: 30, {"c1", "c3"}: 5, {"c2", "c3"}: 5})},
			reason: LeaderInPlace, inPlace: true},
		{name: "auto: a partial matrix judges only covered zones", in: LeaderInput{Policy: auto, Members: lmems(ring), Leader: "m-4", Now: t0, OutsideSince: t0.Add(-time.Hour),
			RoundTrip: matrix(map[[2]string]int{{"c1", "c2"}: 3})},
			// c3 to anyone is unknown: only c1 and c2 are judged.
			moveTo: "m-0", reason: LeaderMove, outsideSince: t0.Add(-time.Hour)},
		{name: "auto: a matrix that covers no quorum does nothing", in: LeaderInput{Policy: auto, Members: lmems("m-0@c1/a m-1@c2/b m-2@c3/c"), Leader: "m-2", Now: t0,
			RoundTrip: matrix(map[[2]string]int{})},
			reason: LeaderNoMeasurements},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := DecideLeader(tc.in)
			if got.MoveTo != tc.moveTo || got.Reason != tc.reason || got.InPlace != tc.inPlace || !got.OutsideSince.Equal(tc.outsideSince) {
				t.Errorf("got move to %q, %s, in place %v, outside since %v (%s); want move to %q, %s, in place %v, outside since %v",
					got.MoveTo, got.Reason, got.InPlace, got.OutsideSince, got.Message, tc.moveTo, tc.reason, tc.inPlace, tc.outsideSince)
			}
			if !strings.Contains(got.Message, tc.message) {
				t.Errorf("message %q does not say %q", got.Message, tc.message)
			}
			if got.Message == "" {
				t.Error("no message")
			}
			if got.MoveTo == "" && (got.Reason == LeaderSettling || got.Reason == LeaderRateLimited) && got.RequeueAfter <= 0 {
				t.Errorf("%s without a time to look again", got.Reason)
			}
		})
	}
}

// TestDecideLeaderFlappingLink: a link that flaps (the ring healthy for
// less than the settle time, then not) never moves the leader; once it
// stays up for the settle time the leader moves once, and a leader that
// leaves again right after is not moved back before the interval.
func TestDecideLeaderFlappingLink(t *testing.T) {
	t0 := time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)
	in := LeaderInput{
		Policy:  LeaderPolicy{Placement: LeaderPreferred, Preferred: []Place{{Zone: "a"}}, Settle: 30 * time.Second, MinInterval: 5 * time.Minute},
		Members: lmems("m-0@c1/a m-1@c1/a m-2@c2/b m-3@c2/b m-4@c3/c"),
		Leader:  "m-4",
	}
	moves := 0
	// One pass every 5 s for 10 min: the link is down 5 s of every 20 s
	// for the first 5 min, then up.
	for s := 0; s < 600; s += 5 {
		in.Now = t0.Add(time.Duration(s) * time.Second)
		in.Unhealthy = ""
		if s < 300 && s%20 == 15 {
			in.Unhealthy = "m-2 is not a ready voter"
		}
		d := DecideLeader(in)
		in.OutsideSince = d.OutsideSince
		if d.MoveTo == "" {
			continue
		}
		moves++
		if s < 300 {
			t.Fatalf("moved at %ds while the link flapped", s)
		}
		in.LastMoved, in.Leader = in.Now, d.MoveTo
		// An election right after (the link again) puts it back far away.
		in.Leader = "m-4"
	}
	if moves != 1 {
		t.Errorf("%d moves in the 5 min after the link settled, want 1 (at most one per 5 min)", moves)
	}
}

// TestPlanPrefersLeaderZone: with 5 members over 3 zones (2/2/1), the
// leader's preferred zone holds 2 even when it sorts last; an existing
// placement is not moved for it.
func TestPlanPrefersLeaderZone(t *testing.T) {
	ds := doms("c1/a c2/b c3/c")
	for _, tc := range []struct {
		name    string
		prefer  []Place
		members string
		want    string // members per zone
		steps   int
	}{
		{"no preference: the zones that sort first", nil, "", "a:2 b:2 c:1", 5},
		{"preferred zone c", []Place{{Zone: "c"}}, "", "a:2 b:1 c:2", 5},
		{"preferred cluster c2", []Place{{Cluster: "c2"}}, "", "a:2 b:2 c:1", 5},
		{"preferred c3, then c2", []Place{{Cluster: "c3"}, {Cluster: "c2"}}, "", "a:1 b:2 c:2", 5},
		{"no move for it", []Place{{Zone: "c"}}, "m-0@c1/a m-1@c1/a m-2@c2/b m-3@c2/b m-4@c3/c", "a:2 b:2 c:1", 0},
		{"an added member goes there", []Place{{Zone: "c"}}, "m-0@c1/a m-1@c1/a m-2@c2/b m-4@c3/c", "a:2 b:1 c:2", 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, err := Plan(Input{Replicas: 5, NamePrefix: "m-", Domains: ds, Members: mems(tc.members), Prefer: tc.prefer})
			if err != nil {
				t.Fatal(err)
			}
			if got := counts(r.Tolerance.Zones); got != tc.want || len(r.Steps) != tc.steps {
				t.Errorf("zones %s with %d steps %v, want %s with %d", got, len(r.Steps), stepStrings(r.Steps), tc.want, tc.steps)
			}
		})
	}
}
