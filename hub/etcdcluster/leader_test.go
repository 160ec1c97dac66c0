package etcdcluster

import (
	"testing"
	"time"

	"k8s.io/utils/ptr"

	etcdfedv1 "github.com/etcdfed/etcdfed/api/v1alpha1"
	"github.com/etcdfed/etcdfed/hub/planner"
	"github.com/etcdfed/etcdfed/pkg/topology"
)

// TestLeaderPlacementThroughDecide: a ring whose spec.leader prefers
// zone-3, led from zone-1. The first pass records the leader outside
// (settling) and moves nothing; once the settle time has passed a
// MoveLeader is recorded before anything is done; the next pass asks the
// leader (main-0's client URL) to hand leadership to main-2; once main-2
// leads the operation ends and the status says the leader is in place.
func TestLeaderPlacementThroughDecide(t *testing.T) {
	s := ring()
	s.ec.Spec.Leader = &etcdfedv1.LeaderSpec{Preferred: []etcdfedv1.LeaderPreference{{Zone: "zone-3"}}, SettleSeconds: ptr.To[int32](10)}

	pass := func(want planner.Action) *etcdfedv1.EtcdClusterStatus {
		t.Helper()
		d := decide(s)
		if d.plan.Action != want {
			t.Fatalf("at %s: action %s (%s), want %s", s.now.Sub(now), d.plan.Action, d.plan.Reason, want)
		}
		st := computeStatus(s, d, applyResult{}, "")
		s.ec.Status = st
		return &st
	}

	st := pass(planner.ActNone)
	lp := st.LeaderPlacement
	if lp == nil || lp.Reason != etcdfedv1.LeaderReasonSettling || lp.Leader != "main-0" || lp.Zone != "zone-1" || lp.InPlace || lp.OutsideSince == nil || !lp.OutsideSince.Time.Equal(now) {
		t.Fatalf("first pass: leaderPlacement = %+v, want main-0 in zone-1 settling since now", lp)
	}
	if st.Operation != nil {
		t.Fatalf("operation %+v while settling", st.Operation)
	}

	s.now = now.Add(10 * time.Second)
	st = pass(planner.ActBegin)
	if op := st.Operation; op == nil || op.Type != etcdfedv1.OperationMoveLeader || op.Member != "main-2" || op.Step != string(planner.ActTransferLeadership) || op.Reason != "Preferred" {
		t.Fatalf("operation = %+v, want MoveLeader to main-2 recorded at step TransferLeadership", st.Operation)
	}
	if lp := st.LeaderPlacement; lp.Reason != etcdfedv1.LeaderReasonMoving || lp.Moves != 1 || lp.LastMoveTime == nil || !lp.LastMoveTime.Time.Equal(s.now) {
		t.Fatalf("leaderPlacement = %+v, want Moving, one move at %s", lp, s.now)
	}

	d := decide(s)
	if d.plan.Action != planner.ActTransferLeadership || d.plan.TransfereeID != 3 || len(d.step.leaderURLs) != 1 || d.step.leaderURLs[0] != memberURL(s.ec, "main-0", etcdfedv1.DefaultClientPort) {
		t.Fatalf("got %s to [%x] via %v (%s), want TransferLeadership to [3] asked of main-0", d.plan.Action, d.plan.TransfereeID, d.step.leaderURLs, d.plan.Reason)
	}

	s.etcd.LeaderID = 3
	s.now = now.Add(11 * time.Second)
	st = pass(planner.ActFinish)
	if st.Operation != nil {
		t.Fatalf("operation %+v after main-2 leads", st.Operation)
	}
	if lp := st.LeaderPlacement; !lp.InPlace || lp.Reason != etcdfedv1.LeaderReasonInPlace || lp.Leader != "main-2" || lp.Zone != "zone-3" || lp.OutsideSince != nil {
		t.Fatalf("leaderPlacement = %+v, want main-2 in place in zone-3", lp)
	}

	// An election puts the leader back in zone-1 right away: not moved
	// before the interval (default 5 min) has passed.
	s.etcd.LeaderID = 1
	for _, after := range []time.Duration{12 * time.Second, time.Minute, 4 * time.Minute} {
		s.now = now.Add(after)
		st = pass(planner.ActNone)
	}
	if lp := st.LeaderPlacement; lp.Reason != etcdfedv1.LeaderReasonRateLimited {
		t.Fatalf("leaderPlacement = %+v, want RateLimited", lp)
	}
	s.now = now.Add(10*time.Second + 5*time.Minute)
	pass(planner.ActBegin)
}

// TestLeaderReasonsAreTheAPIs: the decision's reasons are the strings the
// API documents.
func TestLeaderReasonsAreTheAPIs(t *testing.T) {
	for api, dec := range map[string]topology.LeaderReason{
		etcdfedv1.LeaderReasonNotWanted:         topology.LeaderNotWanted,
		etcdfedv1.LeaderReasonInPlace:           topology.LeaderInPlace,
		etcdfedv1.LeaderReasonUnknown:           topology.LeaderUnknown,
		etcdfedv1.LeaderReasonNoMeasurements:    topology.LeaderNoMeasurements,
		etcdfedv1.LeaderReasonNoCandidate:       topology.LeaderNoCandidate,
		etcdfedv1.LeaderReasonRingUnhealthy:     topology.LeaderRingUnhealthy,
		etcdfedv1.LeaderReasonOperationInFlight: topology.LeaderOperationInFlight,
		etcdfedv1.LeaderReasonSettling:          topology.LeaderSettling,
		etcdfedv1.LeaderReasonRateLimited:       topology.LeaderRateLimited,
		etcdfedv1.LeaderReasonMoving:            topology.LeaderMove,
	} {
		if api != string(dec) {
			t.Errorf("API reason %q, decision's %q", api, dec)
		}
	}
	for api, dec := range map[etcdfedv1.LeaderPlacement]topology.LeaderPlacement{
		etcdfedv1.LeaderPlacementNone: topology.LeaderNone, etcdfedv1.LeaderPlacementPreferred: topology.LeaderPreferred, etcdfedv1.LeaderPlacementAuto: topology.LeaderAuto,
	} {
		if string(api) != string(dec) {
			t.Errorf("API placement %q, decision's %q", api, dec)
		}
	}
	if string(planner.OpMoveLeader) != string(etcdfedv1.OperationMoveLeader) {
		t.Errorf("planner's %q is not the API's %q", planner.OpMoveLeader, etcdfedv1.OperationMoveLeader)
	}
}

// Auto reads the round trips the spokes measured: without them it moves
// nothing and says so; with them it takes leadership to a member of the
// clusters whose nearest quorum is closest (member-2 and member-3, 5 ms
// apart, against member-1's 30 ms to its nearest).
func TestLeaderAutoReadsTheMatrix(t *testing.T) {
	s := ring()
	s.ec.Spec.Leader = &etcdfedv1.LeaderSpec{Placement: etcdfedv1.LeaderPlacementAuto, SettleSeconds: ptr.To[int32](10)}
	pass := func(want planner.Action) *etcdfedv1.EtcdClusterStatus {
		t.Helper()
		d := decide(s)
		if d.plan.Action != want {
			t.Fatalf("at %s: action %s (%s), want %s", s.now.Sub(now), d.plan.Action, d.plan.Reason, want)
		}
		st := computeStatus(s, d, applyResult{}, "")
		s.ec.Status = st
		return &st
	}
	st := pass(planner.ActNone)
	if lp := st.LeaderPlacement; lp == nil || lp.Reason != etcdfedv1.LeaderReasonNoMeasurements {
		t.Fatalf("no round trips: leaderPlacement = %+v, want NoMeasurements", lp)
	}

	ms := func(from string, to map[string]int64) {
		for c, millis := range to {
			s.byName[from].spoke.Status.RoundTrips = append(s.byName[from].spoke.Status.RoundTrips,
				etcdfedv1.PeerRoundTrip{Cluster: c, MedianMicros: millis * 1000, P99Micros: millis * 1200, Samples: 20})
		}
	}
	ms("member-1", map[string]int64{"member-2": 30, "member-3": 40})
	ms("member-2", map[string]int64{"member-1": 30, "member-3": 5})
	ms("member-3", map[string]int64{"member-1": 40, "member-2": 5})
	s.now = now.Add(time.Second)
	st = pass(planner.ActNone)
	if len(st.RoundTrips) == 0 {
		t.Fatalf("the spokes' round trips were not kept in status.roundTrips")
	}
	s.now = now.Add(12 * time.Second)
	st = pass(planner.ActBegin)
	if op := st.Operation; op == nil || op.Type != etcdfedv1.OperationMoveLeader || (op.Member != "main-1" && op.Member != "main-2") {
		t.Fatalf("operation = %+v, want MoveLeader to main-1 or main-2 (the clusters 5 ms apart)", st.Operation)
	}
}
