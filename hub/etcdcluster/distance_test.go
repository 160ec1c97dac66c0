package etcdcluster

import (
	"slices"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"

	etcdfedv1 "github.com/etcdfed/etcdfed/api/v1alpha1"
	"github.com/etcdfed/etcdfed/hub/planner"
	"github.com/etcdfed/etcdfed/pkg/timing"
)

// withRoundTrips makes every spoke of s report a round trip to every other
// cluster: p99Ms between member-1 and member-3 (both ways), loopback's
// 0.3 ms elsewhere; jitter adds microseconds to every value.
func withRoundTrips(s *snapshot, p99Ms float64, jitter int64) {
	for _, cs := range s.clusters {
		var rts []etcdfedv1.PeerRoundTrip
		for _, o := range s.clusters {
			if o == cs {
				continue
			}
			p99 := int64(300)
			if (cs.name == "member-1" && o.name == "member-3") || (cs.name == "member-3" && o.name == "member-1") {
				p99 = int64(p99Ms * 1000)
			}
			rts = append(rts, etcdfedv1.PeerRoundTrip{Cluster: o.name, MedianMicros: p99*4/5 + jitter, P99Micros: p99 + jitter, Samples: 100})
		}
		cs.spoke.Status.RoundTrips = rts
	}
}

// settled records what s's spokes report in its matrix as the hub recorded
// it timing.Settle before s.now: round trips that have held still, whose
// change of the timing a running ring applies.
func settled(s *snapshot) {
	var reports []timing.Report
	var clusters []string
	for _, cs := range s.clusters {
		clusters = append(clusters, cs.name)
		reports = append(reports, timing.Report{From: cs.name, RoundTrips: cs.spoke.Status.RoundTrips})
	}
	s.ec.Status.RoundTrips = timing.Matrix(nil, reports, clusters, s.now.Add(-timing.Settle), matrixReaders(s.ec))
}

// TestTimingFromRoundTrips: the hub keeps the matrix from its spokes'
// reports and chooses etcd's timing from it; at zero distance the ring
// keeps etcd's defaults and nothing rolls; far apart, the chosen values
// reach the members' objects through a Roll, followers first.
func TestTimingFromRoundTrips(t *testing.T) {
	t.Run("zero distance: etcd's defaults, nothing rolls", func(t *testing.T) {
		s := ring()
		withRoundTrips(s, 0.3, 0)
		d := decide(s)
		st := computeStatus(s, d, applyResult{}, "")
		if got := st.Timing; got == nil || got.HeartbeatIntervalMillis != 100 || got.ElectionTimeoutMillis != 1000 || got.Source != etcdfedv1.TimingSourceAuto {
			t.Fatalf("timing %+v, want 100/1000 Auto", got)
		}
		if len(st.RoundTrips) != 6 {
			t.Errorf("matrix of %d entries, want 6: %v", len(st.RoundTrips), st.RoundTrips)
		}
		if d.plan.Action != planner.ActNone {
			t.Errorf("plan %s (%s), want None", d.plan.Action, d.plan.Reason)
		}
		want := desiredMember(s, d.ledger, &d.ledger.Members[0], nil)
		if want.Spec.Etcd.HeartbeatIntervalMillis != nil || want.Spec.Etcd.ElectionTimeoutMillis != nil {
			t.Errorf("defaults rendered explicitly: %+v", want.Spec.Etcd)
		}
	})
	t.Run("200 ms between two voters' clusters: 250/2500, rolled followers first", func(t *testing.T) {
		s := ring()
		withRoundTrips(s, 200, 0)
		settled(s)
		d := decide(s)
		st := computeStatus(s, d, applyResult{}, "")
		if got := st.Timing; got == nil || got.HeartbeatIntervalMillis != 250 || got.ElectionTimeoutMillis != 2500 ||
			!strings.Contains(got.Message, "200 ms (member-1 to member-3)") {
			t.Fatalf("timing %+v, want 250/2500 from 200 ms between member-1 and member-3", got)
		}
		if d.plan.Action != planner.ActBegin || d.plan.Operation == nil || d.plan.Operation.Type != planner.OpRoll || d.plan.Operation.Member != "main-1" {
			t.Fatalf("plan %s %+v (%s), want the Roll of main-1 (a follower)", d.plan.Action, d.plan.Operation, d.plan.Reason)
		}
		want := desiredMember(s, d.ledger, &d.ledger.Members[1], nil)
		if hb, el := want.Spec.Etcd.HeartbeatIntervalMillis, want.Spec.Etcd.ElectionTimeoutMillis; hb == nil || *hb != 250 || el == nil || *el != 2500 {
			t.Errorf("rendered etcd settings %+v, want 250/2500", want.Spec.Etcd)
		}
		if want.Spec.Etcd.Timing != "" {
			t.Errorf("timing %q rendered into the member", want.Spec.Etcd.Timing)
		}
	})
	t.Run("a new ring is founded on the timing of its clusters' distance", func(t *testing.T) {
		s := ring()
		s.ec.Status = etcdfedv1.EtcdClusterStatus{}
		for _, cs := range s.clusters {
			cs.members = map[string]*etcdfedv1.EtcdMember{}
		}
		s.etcd = planner.Etcd{}
		withRoundTrips(s, 200, 0)
		d := decide(s)
		if got := d.ledger.Timing; got == nil || got.HeartbeatIntervalMillis != 250 {
			t.Fatalf("timing %+v before any member, want 250 from the eligible clusters' distance", got)
		}
		if len(d.ledger.Members) == 0 {
			t.Fatalf("no member recorded: plan %s (%s)", d.plan.Action, d.plan.Reason)
		}
		want := desiredMember(s, d.ledger, &d.ledger.Members[0], nil)
		if hb := want.Spec.Etcd.HeartbeatIntervalMillis; hb == nil || *hb != 250 {
			t.Errorf("a founding member renders %+v, want heartbeat 250", want.Spec.Etcd)
		}
	})
	t.Run("taken over: the members' running timing is the previous choice", func(t *testing.T) {
		// A rebuilt hub takes the ring over: its status records no
		// timing, the members run etcd's defaults, and the round trips
		// of a loaded machine ask for a little more (120/1200). The
		// take-over left every member running; the hysteresis keeps
		// them so, as it would against a recorded choice.
		s := ring()
		s.ec.Status.Timing = nil
		withRoundTrips(s, 90, 0)
		d := decide(s)
		if got := d.ledger.Timing; got == nil || got.HeartbeatIntervalMillis != 100 || got.ElectionTimeoutMillis != 1000 || !strings.Contains(got.Message, "keeping 100/1000") {
			t.Fatalf("timing %+v, want 100/1000 kept (the members run it)", got)
		}
		if d.plan.Action != planner.ActNone {
			t.Errorf("plan %s %+v (%s), want nothing: no member rolled for a change that small", d.plan.Action, d.plan.Operation, d.plan.Reason)
		}
		// Far enough to matter, it rolls as before.
		s = ring()
		s.ec.Status.Timing = nil
		withRoundTrips(s, 200, 0)
		settled(s)
		if d := decide(s); d.ledger.Timing == nil || d.ledger.Timing.HeartbeatIntervalMillis != 250 || d.plan.Operation == nil || d.plan.Operation.Type != planner.OpRoll {
			t.Errorf("at 200 ms: timing %+v, plan %s %+v, want 250/2500 rolled", d.ledger.Timing, d.plan.Action, d.plan.Operation)
		}
	})
	t.Run("Manual: defaults whatever the distance", func(t *testing.T) {
		s := ring()
		s.ec.Spec.Etcd.Timing = etcdfedv1.TimingManual
		withRoundTrips(s, 200, 0)
		d := decide(s)
		if got := d.ledger.Timing; got == nil || got.HeartbeatIntervalMillis != 100 || got.Source != etcdfedv1.TimingSourceManual || d.plan.Action != planner.ActNone {
			t.Errorf("timing %+v, plan %s, want 100/1000 Manual and nothing to do", got, d.plan.Action)
		}
	})
}

// TestRoundTripsAtRestWriteNothing: spokes whose reports only jitter leave
// the status as the pass before wrote it (no write at rest), and a report
// of a real change is recorded. Jitter includes a loaded prober's medians
// at loopback moving from 6 to 54 ms (twenty simulated spokes in one busy
// process, docs/measurements/fleet.md): they ask for etcd's default
// heartbeat either way, and a ring without leader placement Auto records
// nothing of them (it used to record every such move).
func TestRoundTripsAtRestWriteNothing(t *testing.T) {
	pass := func(prev *etcdfedv1.EtcdClusterStatus, at time.Time, p99Ms float64, jitter int64) etcdfedv1.EtcdClusterStatus {
		s := ring()
		s.now = at
		if prev != nil {
			s.ec.Status = *prev.DeepCopy()
		}
		withRoundTrips(s, p99Ms, jitter)
		return computeStatus(s, decide(s), applyResult{}, "")
	}
	st1 := pass(nil, now, 42, 0)
	st2 := pass(&st1, now.Add(time.Minute), 42, 9000) // 9 ms of jitter
	if !equality.Semantic.DeepEqual(st1.RoundTrips, st2.RoundTrips) || !equality.Semantic.DeepEqual(st1.Timing, st2.Timing) {
		t.Errorf("jitter moved the status:\n%v %+v\n%v %+v", st1.RoundTrips, st1.Timing, st2.RoundTrips, st2.Timing)
	}
	lo1 := pass(nil, now, 0.3, 6000)
	lo2 := pass(&lo1, now.Add(time.Minute), 0.3, 54_000)
	if !equality.Semantic.DeepEqual(lo1.RoundTrips, lo2.RoundTrips) || !equality.Semantic.DeepEqual(lo1.Timing, lo2.Timing) {
		t.Errorf("medians at loopback moving from 6 to 54 ms moved the status:\n%v %+v\n%v %+v", lo1.RoundTrips, lo1.Timing, lo2.RoundTrips, lo2.Timing)
	}
	st3 := pass(&st2, now.Add(2*time.Minute), 300, 0)
	i := slices.IndexFunc(st3.RoundTrips, func(r etcdfedv1.RoundTrip) bool { return r.From == "member-1" && r.To == "member-3" })
	if i < 0 || st3.RoundTrips[i].P99Micros != 300_000 || !st3.RoundTrips[i].ObservedAt.Time.Equal(now.Add(2*time.Minute)) {
		t.Errorf("matrix after the change: %v", st3.RoundTrips)
	}
	// The ring runs: the change waits until the round trips held still.
	if st3.Timing.HeartbeatIntervalMillis != st2.Timing.HeartbeatIntervalMillis {
		t.Errorf("right after a change to 300 ms: timing %+v, want %d kept for %s", st3.Timing, st2.Timing.HeartbeatIntervalMillis, timing.Settle)
	}
	st4 := pass(&st3, now.Add(2*time.Minute+timing.Settle), 300, 0)
	if st4.Timing.HeartbeatIntervalMillis != 380 {
		t.Errorf("%s after a change to 300 ms: timing %+v, want heartbeat 380", timing.Settle, st4.Timing)
	}
}

// TestRestartBurstRollsNothing is issue 38's roll of every member, seen on
// real nodes: a killed member cluster restored, the ring moved a member
// back into it, and its restarted spoke's first window (ten probes on a
// loaded machine, 25 s after the restart) said 174/286 ms to member-3 at
// loopback, member-3's spoke 66/594 ms to it; the hub chose 290/2900 at
// once and rolled every member. Now the change waits until the round trips
// held still (timing.Settle), the pass at its end comes then, and by then
// the windows have come back (the median 20 s later, the p99 once the
// stalled probes left the window): nothing rolls. Nor does the matrix of
// the second run, a loaded machine's p99s of up to 1.2 s at loopback
// (timing.JitterCap), once it has held still.
func TestRestartBurstRollsNothing(t *testing.T) {
	at := now
	report := func(s *snapshot, from, to string, medianMs, p99Ms float64) {
		rts := s.cluster(from).spoke.Status.RoundTrips
		i := slices.IndexFunc(rts, func(r etcdfedv1.PeerRoundTrip) bool { return r.Cluster == to })
		rts[i] = etcdfedv1.PeerRoundTrip{Cluster: to, MedianMicros: int64(medianMs * 1000), P99Micros: int64(p99Ms * 1000), Samples: 10}
	}
	var st *etcdfedv1.EtcdClusterStatus
	pass := func(what string, burst func(s *snapshot)) *snapshot {
		t.Helper()
		s := ring()
		s.now = at
		withRoundTrips(s, 0.3, 0)
		if st == nil {
			settled(s)
			s.ec.Status.Timing = &etcdfedv1.TimingStatus{HeartbeatIntervalMillis: 100, ElectionTimeoutMillis: 1000, Source: etcdfedv1.TimingSourceAuto}
		} else {
			s.ec.Status = *st.DeepCopy()
		}
		burst(s)
		d := decide(s)
		next := computeStatus(s, d, applyResult{}, "")
		st = &next
		if d.plan.Operation != nil && d.plan.Operation.Type == planner.OpRoll {
			t.Fatalf("%s: %s planned (%s); timing %+v", what, d.plan.Operation.Type, d.plan.Reason, st.Timing)
		}
		if tm := st.Timing; tm.HeartbeatIntervalMillis != 100 || tm.ElectionTimeoutMillis != 1000 {
			t.Fatalf("%s: timing %+v, want 100/1000 kept", what, tm)
		}
		return s
	}
	s := pass("the restarted spoke's first window", func(s *snapshot) {
		report(s, "member-1", "member-3", 174, 286)
		report(s, "member-3", "member-1", 66, 594)
	})
	if !strings.Contains(st.Timing.Message, "keeping 100/1000 until") {
		t.Errorf("timing message %q does not say what is held", st.Timing.Message)
	}
	if next := nextTimingChoice(s, st, at); next != timing.Settle {
		t.Errorf("the next pass for the held change in %v, want %v", next, timing.Settle)
	}
	at = at.Add(25 * time.Second)
	burstOver := func(s *snapshot) {
		// The windows' medians came back; the p99s keep the stalled
		// probes until they leave the windows.
		report(s, "member-1", "member-3", 5, 286)
		report(s, "member-3", "member-1", 5, 594)
	}
	pass("the medians back", burstOver)
	at = at.Add(timing.Settle - time.Second)
	pass("just before the hold ends", burstOver)
	at = at.Add(time.Second)
	s = pass("the hold over, the stalled probes out of the windows", func(s *snapshot) {
		report(s, "member-1", "member-3", 5, 20)
		report(s, "member-3", "member-1", 5, 25)
	})
	if next := nextTimingChoice(s, st, at); next != 0 {
		t.Errorf("a next pass for the timing in %v, want none (nothing held)", next)
	}
	// Run 2 (load average 25 to 35): every pair's window at loopback with
	// a median of a few ms and a p99 of up to 1.2 s, each recorded anew
	// once its P99Hold passed; held still past Settle, they ask for
	// etcd's defaults (a quarter of the p99 asked for 310/3100).
	loaded := func(s *snapshot) {
		report(s, "member-1", "member-2", 10.7, 902)
		report(s, "member-2", "member-3", 4.9, 591)
		report(s, "member-3", "member-1", 4.2, 802)
		report(s, "member-3", "member-2", 6.8, 1170)
	}
	at = at.Add(timing.P99Hold)
	pass("a loaded machine's p99s recorded", loaded)
	at = at.Add(timing.Settle)
	s = pass("a loaded machine's p99s held still", loaded)
	if next := nextTimingChoice(s, st, at); next != 0 {
		t.Errorf("a next pass for the timing in %v, want none (nothing held)", next)
	}
}

// TestBadRoundTripReportRefused: a spoke's round trip the hub's checks
// refuse (hub/reports) is not used: it does not enter the matrix nor the
// timing, and Degraded says which cluster reported what.
func TestBadRoundTripReportRefused(t *testing.T) {
	s := ring()
	withRoundTrips(s, 0.3, 0)
	cs := s.cluster("member-1")
	// A negative median would make member-1 to member-3 look far in
	// nothing, and a p99 of 50 s would pin the ring's timing at its limits.
	cs.spoke.Status.RoundTrips = []etcdfedv1.PeerRoundTrip{
		{Cluster: "member-2", MedianMicros: 200, P99Micros: 300, Samples: 100},
		{Cluster: "member-3", MedianMicros: 60_000_001, P99Micros: 60_000_001, Samples: 100},
	}
	for _, c := range s.clusters {
		checkReports(s.ec, c, s.allowLoopback)
	}
	st := computeStatus(s, decide(s), applyResult{}, "")
	for _, r := range st.RoundTrips {
		if r.From == "member-1" && r.To == "member-3" {
			t.Errorf("the refused entry reached the matrix: %+v", r)
		}
	}
	if st.Timing == nil || st.Timing.HeartbeatIntervalMillis != timing.MinHeartbeat {
		t.Errorf("timing %+v, want the floor of zero distance, %d", st.Timing, timing.MinHeartbeat)
	}
	c := meta.FindStatusCondition(st.Conditions, etcdfedv1.ConditionDegraded)
	if c == nil || c.Reason != etcdfedv1.ReasonReportRejected || !strings.Contains(c.Message, "member cluster member-1") || !strings.Contains(c.Message, "status.roundTrips[1]") {
		t.Errorf("Degraded %+v, want the refusal of member-1's status.roundTrips[1]", c)
	}
}

// TimingChanged is told when the values change, not for a first choice
// nor for a new message alone.
func TestTimingEvent(t *testing.T) {
	v := func(hb, el int32, msg string) *etcdfedv1.TimingStatus {
		return &etcdfedv1.TimingStatus{HeartbeatIntervalMillis: hb, ElectionTimeoutMillis: el, Source: etcdfedv1.TimingSourceAuto, Message: msg}
	}
	for _, tc := range []struct {
		name          string
		before, after *etcdfedv1.TimingStatus
		want          string
	}{
		{"first choice", nil, v(100, 1000, "a"), ""},
		{"only the message", v(100, 1000, "a"), v(100, 1000, "b"), ""},
		{"changed", v(100, 1000, "a"), v(250, 2500, "max p99 200 ms"), "heartbeat 100 -> 250 ms, election timeout 1000 -> 2500 ms (Auto): max p99 200 ms"},
	} {
		if got := timingEvent(tc.before, tc.after); (tc.want == "") != (got == "") || !strings.Contains(got, tc.want) {
			t.Errorf("%s: %q, want %q", tc.name, got, tc.want)
		}
	}
}
