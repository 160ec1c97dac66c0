package planner

import (
	"strings"
	"testing"
	"time"

	"github.com/etcdfed/etcdfed/pkg/topology"
)

// wantsLeaderIn is a settled steady ring (led by main-0 in dA) whose
// spec.leader prefers zone zone, the leader outside it since long ago
// when outside.
func wantsLeaderIn(zone string) Input {
	in := rolled()
	in.Leader = LeaderInput{
		Policy:       topology.LeaderPolicy{Placement: topology.LeaderPreferred, Preferred: []topology.Place{{Zone: zone}}, Settle: 30 * time.Second, MinInterval: 5 * time.Minute},
		OutsideSince: t0.Add(-time.Minute),
	}
	return in
}

// movingLeader is wantsLeaderIn("zc") with the MoveLeader to main-2 in
// flight at step.
func movingLeader(step Action) Input {
	in := wantsLeaderIn("zc")
	in.Operation = &Operation{Type: OpMoveLeader, Member: "main-2", MemberID: 3, To: &dC, Reason: "Preferred", Step: step, StartedAt: t0.Add(-time.Second)}
	return in
}

func leaderReason(r topology.LeaderReason) check {
	return func(t *testing.T, d Decision) {
		t.Helper()
		if d.Leader == nil || d.Leader.Reason != r {
			t.Errorf("leader decision = %+v, want reason %s", d.Leader, r)
		}
	}
}

// Rule 16: the leader is moved where spec.leader wants it by an operation
// of the planner (recorded first, then etcd's MoveLeader), only when
// nothing else is to do and every member is a ready voter; the operation
// ends when the target leads and is abandoned when the ring degrades.
func TestLeaderPlacement(t *testing.T) {
	run(t, []struct {
		name   string
		input  func() Input
		checks []check
	}{
		{"no spec.leader: nothing", func() Input { return rolled() }, []check{action(ActNone), leaderReason(topology.LeaderNotWanted)}},
		{"leader in place: nothing", func() Input { return wantsLeaderIn("za") }, []check{action(ActNone), leaderReason(topology.LeaderInPlace)}},
		{"leader outside, settled: a MoveLeader recorded first", func() Input { return wantsLeaderIn("zc") }, []check{
			action(ActBegin), opRecorded(OpMoveLeader, ActTransferLeadership), reason("moving leadership to main-2"), leaderReason(topology.LeaderMove),
			func(t *testing.T, d Decision) {
				if d.Operation.Member != "main-2" || d.Operation.MemberID != 3 || d.Operation.Reason != "Preferred" || *d.Operation.To != dC {
					t.Errorf("operation = %+v", d.Operation)
				}
			},
		}},
		{"leader outside, settling: wait until the settle time ends", func() Input {
			in := wantsLeaderIn("zc")
			in.Leader.OutsideSince = t0.Add(-10 * time.Second)
			return in
		}, []check{action(ActNone), leaderReason(topology.LeaderSettling), func(t *testing.T, d Decision) {
			if d.RequeueAfter != 20*time.Second {
				t.Errorf("requeue after %s, want 20s", d.RequeueAfter)
			}
		}}},
		{"a member not ready: not moved", func() Input { return down(wantsLeaderIn("zc"), "main-1") }, []check{
			leaderReason(topology.LeaderRingUnhealthy), func(t *testing.T, d Decision) {
				if d.Operation != nil && d.Operation.Type == OpMoveLeader {
					t.Errorf("began %+v on an unhealthy ring", d.Operation)
				}
			}}},
		{"the target not ready: not moved", func() Input { return down(wantsLeaderIn("zc"), "main-2") }, []check{
			func(t *testing.T, d Decision) {
				if d.Operation != nil && d.Operation.Type == OpMoveLeader {
					t.Errorf("began %+v toward a member not ready", d.Operation)
				}
			}}},
		{"a roll is due: it goes first", func() Input {
			in := wantsLeaderIn("zc")
			in.Members[1].Object.Outdated = true
			return in
		}, []check{action(ActBegin), opRecorded(OpRoll, ActUpdateObject), leaderReason(topology.LeaderOperationInFlight)}},
		{"a roll in flight: not moved", func() Input {
			in := wantsLeaderIn("zc")
			in.Members[1].Object.Outdated = true
			in.Operation = &Operation{Type: OpRoll, Member: "main-1", Reason: ReasonSpecChanged, Step: ActUpdateObject, StartedAt: t0}
			return in
		}, []check{opRecorded(OpRoll, ActUpdateObject), leaderReason(topology.LeaderOperationInFlight), reasonOfLeader("the Roll of main-1 is in flight")}},
		{"a disruption asked for goes first", func() Input {
			in := wantsLeaderIn("zc")
			in.Members[1].Object.DisruptionRequested = true
			in.Members[1].Object.DisruptionRequestedSince = t0
			return in
		}, []check{action(ActBegin), opRecorded(OpDisrupt, ""), leaderReason(topology.LeaderOperationInFlight)}},
		{"moved recently: rate limited", func() Input {
			in := wantsLeaderIn("zc")
			in.Leader.LastMoved = t0.Add(-time.Minute)
			return in
		}, []check{action(ActNone), leaderReason(topology.LeaderRateLimited)}},
		{"etcd does not answer: not moved", func() Input {
			in := wantsLeaderIn("zc")
			in.Etcd.Reachable, in.Etcd.Error = false, "deadline exceeded"
			return in
		}, []check{leaderReason(topology.LeaderUnknown)}},

		// The operation.
		{"in flight: MoveLeader to the target", func() Input { return movingLeader(ActTransferLeadership) }, []check{
			action(ActTransferLeadership), opRecorded(OpMoveLeader, ActTransferLeadership), leaderReason(topology.LeaderMove),
			func(t *testing.T, d Decision) {
				if d.TransfereeID != 3 || d.MemberID != 3 {
					t.Errorf("transferee %x, member %x, want 3", d.TransfereeID, d.MemberID)
				}
			},
		}},
		{"the target leads: done", func() Input {
			in := movingLeader(ActTransferLeadership)
			in.Etcd.LeaderID = 3
			return in
		}, []check{action(ActFinish), reason("main-2 leads in c/zc")}},
		{"the ring degrades: abandoned", func() Input { return down(movingLeader(ActTransferLeadership), "main-1") }, []check{
			action(ActFinish), reason("abandoned: the ring is not healthy")}},
		{"the target goes: abandoned", func() Input {
			in := movingLeader(ActTransferLeadership)
			in.Etcd.Members[2].Healthy = false
			return in
		}, []check{action(ActFinish), reason("no longer a healthy voter")}},
		{"etcd does not answer: abandoned, recovery not held up", func() Input {
			in := movingLeader(ActTransferLeadership)
			in.Etcd.Reachable = false
			return in
		}, []check{action(ActFinish), reason("etcd does not answer")}},
		{"no move within the timeout: given up", func() Input {
			in := movingLeader(ActTransferLeadership)
			in.Operation.StartedAt = t0.Add(-leaderMoveTimeout)
			return in
		}, []check{action(ActFinish), reason("did not move")}},
	})
}

func reasonOfLeader(sub string) check {
	return func(t *testing.T, d Decision) {
		t.Helper()
		if d.Leader == nil || !strings.Contains(d.Leader.Message, sub) {
			t.Errorf("leader decision %+v does not say %q", d.Leader, sub)
		}
	}
}

// TestLeaderPlacementKeptByPlannedMoves: a member that leads and must
// restart (a roll; a drain and a removal pick the same way) hands
// leadership to a voter where spec.leader wants the leader; without a
// place it wants, to the one the preStop hook would choose
// (topology.ChooseSuccessor): up to date, then the nearest to the leaving
// member's cluster, then the lowest ID.
func TestLeaderPlacementKeptByPlannedMoves(t *testing.T) {
	rtt := func(ms map[[2]string]int) topology.RoundTrip {
		return func(from, to string) (time.Duration, bool) {
			v, ok := ms[[2]string{from, to}]
			return time.Duration(v) * time.Millisecond, ok
		}
	}
	for _, tc := range []struct {
		name   string
		leader LeaderInput
		behind uint64 // a voter whose last status answer is far behind
		want   uint64
	}{
		{"no spec.leader: the lowest ID", LeaderInput{}, 0, 2},
		{"no spec.leader, round trips measured: the nearest to the leaving member", LeaderInput{
			RoundTrip: rtt(map[[2]string]int{{"a", "b"}: 40, {"a", "c"}: 3, {"b", "c"}: 45})}, 0, 3},
		{"no spec.leader: the nearest is far behind, the up-to-date one", LeaderInput{
			RoundTrip: rtt(map[[2]string]int{{"a", "b"}: 40, {"a", "c"}: 3, {"b", "c"}: 45})}, 3, 2},
		{"no spec.leader: a cluster without a measured round trip counts as far", LeaderInput{
			RoundTrip: rtt(map[[2]string]int{{"a", "c"}: 30})}, 0, 3},
		{"preferred zone zc", LeaderInput{Policy: topology.LeaderPolicy{Placement: topology.LeaderPreferred, Preferred: []topology.Place{{Zone: "zc"}}}}, 0, 3},
		{"preferred: the leaving member's own zone, then zc", LeaderInput{Policy: topology.LeaderPolicy{Placement: topology.LeaderPreferred, Preferred: []topology.Place{{Zone: "za"}, {Cluster: "c"}}}}, 0, 3},
		{"preferred nowhere ready: the lowest ID", LeaderInput{Policy: topology.LeaderPolicy{Placement: topology.LeaderPreferred, Preferred: []topology.Place{{Zone: "zz"}}}}, 0, 2},
		{"auto without measurements: the lowest ID", LeaderInput{Policy: topology.LeaderPolicy{Placement: topology.LeaderAuto}}, 0, 2},
		{"auto: the nearest quorum", LeaderInput{Policy: topology.LeaderPolicy{Placement: topology.LeaderAuto},
			// From c: a (3 ms) and b (40 ms): quorum 2 of 3 needs one
			// other, 3 ms. From b: 40 ms.
			RoundTrip: rtt(map[[2]string]int{{"a", "b"}: 40, {"a", "c"}: 3, {"b", "c"}: 45})}, 0, 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := rolled("main-0")
			in.Leader = tc.leader
			for i := range in.Etcd.Members {
				in.Etcd.Members[i].RaftIndex = 5000
				if in.Etcd.Members[i].ID == tc.behind {
					in.Etcd.Members[i].RaftIndex = 5000 - topology.AppliedSlack - 1
				}
			}
			in.Operation = &Operation{Type: OpRoll, Member: "main-0", Reason: ReasonSpecChanged, Step: ActUpdateObject, StartedAt: t0}
			d := Next(in)
			if d.Action != ActMoveLeader || d.TransfereeID != tc.want {
				t.Errorf("got %s to [%x] (%s), want MoveLeader to [%x]", d.Action, d.TransfereeID, d.Reason, tc.want)
			}
		})
	}
}
