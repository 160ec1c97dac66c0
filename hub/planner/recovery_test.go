package planner

import (
	"testing"
	"time"

	"github.com/etcdfed/etcdfed/pkg/topology"
)

// lostQuorum is steady() after main-1's and main-2's clusters failed and
// both were fenced (confirmed): etcd does not answer, main-0's etcd
// answers its spoke without a leader, the loss began 10 minutes ago
// (beyond the 5-minute grace).
func lostQuorum() Input {
	in := unfenced(steady())
	for i := 1; i < 3; i++ {
		in.Members[i].Fenced = "confirmed at " + t0.Add(-time.Minute).Format(time.RFC3339) + " by test"
	}
	return in
}

// unfenced is in after main-1's and main-2's clusters went out of sight
// (declared failed by the witnesses), nobody having confirmed them fenced.
func unfenced(in Input) Input {
	in.Etcd = Etcd{Error: "context deadline exceeded"}
	in.Members[0].Object.Etcd = &EtcdView{ID: 1, RaftIndex: 900, Answers: true}
	for i := 1; i < 3; i++ {
		in.Members[i].ClusterVisible, in.Members[i].DomainFailed, in.Members[i].Object = false, true, nil
	}
	in.Quorum = QuorumInput{LostSince: t0.Add(-10 * time.Minute), Grace: 5 * time.Minute}
	return in
}

func requested(in Input, from string, at time.Time) Input {
	in.Quorum.Request = &RecoveryRequest{FromMember: from, RequestedAt: at, UID: "req-1"}
	return in
}

func recovering(step Action, mut func(in *Input)) func() Input {
	return func() Input {
		in := lostQuorum()
		in.Operation = &Operation{Type: OpRecover, Member: "main-0", MemberID: 1, Reason: "QuorumLost", Step: step, StartedAt: t0}
		mut(&in)
		return in
	}
}

// alone: etcd answers as main-0 alone (after --force-new-cluster).
func alone(in *Input) {
	in.Etcd = Etcd{Reachable: true, LeaderID: 1, Members: []ListEntry{voter("main-0", 1)}}
}

func memberNamed(name string) check {
	return func(t *testing.T, d Decision) {
		t.Helper()
		if d.Member != name {
			t.Errorf("member = %q, want %q", d.Member, name)
		}
	}
}

// Rule 11: a ring that lost its quorum is recovered from one survivor only
// once the loss is declared and asked for (or opted in), one step at a
// time, recorded before it is taken.
func TestRule11QuorumLossRecovery(t *testing.T) {
	run(t, []struct {
		name   string
		input  func() Input
		checks []check
	}{
		{"declared loss without a request: wait and say how to recover", lostQuorum, []check{
			action(ActWait), reason("quorum lost: 1 of 3 voters answer; 2 known gone"), reason("main-1 [2]: confirmed fenced"),
			reason("freshest survivor: main-0 [1] at raft index 900"), reason("etcdfed recover"),
		}},
		{"a request: Recover recorded first, from the freshest survivor, the request consumed", func() Input { return requested(lostQuorum(), "", t0) }, []check{
			action(ActBegin), opRecorded(OpRecover, ActBegin), memberNamed("main-0"), reason("recovering from main-0 at raft index 900"),
			func(t *testing.T, d Decision) {
				if d.MemberID != 1 || d.Operation.MemberID != 1 || len(d.Assign) != 0 || d.Request != "req-1" {
					t.Errorf("decision %+v: want survivor ID 1, no new assignment, request req-1 consumed", d)
				}
			},
		}},
		{"the freshest of two survivors by raft index", func() Input {
			in := steady()
			in.Replicas, in.Etcd = 5, Etcd{Error: "timeout"}
			in.Members = append(in.Members, running("main-3", 4, dA, 4), running("main-4", 5, dB, 5))
			in.Members[0].Object.Etcd = &EtcdView{ID: 1, RaftIndex: 900, Answers: true}
			in.Members[3].Object.Etcd = &EtcdView{ID: 4, RaftIndex: 950, Answers: true}
			for _, i := range []int{1, 2, 4} {
				in.Members[i].DomainFailed, in.Members[i].ClusterVisible, in.Members[i].Fenced = true, false, "confirmed"
			}
			in.Quorum = QuorumInput{LostSince: t0.Add(-time.Hour), Grace: time.Minute, Request: &RecoveryRequest{RequestedAt: t0}}
			return in
		}, []check{action(ActBegin), memberNamed("main-3"), reason("also main-0 at 900")}},
		{"a request naming a survivor", func() Input { return requested(lostQuorum(), "main-0", t0) }, []check{action(ActBegin), memberNamed("main-0")}},
		{"a request naming a gone member is refused", func() Input { return requested(lostQuorum(), "main-2", t0) }, []check{
			action(ActWait), reason("recovery requested from main-2, which is not a survivor"),
		}},
		{"a request older than the loss is never taken for it", func() Input { return requested(lostQuorum(), "", t0.Add(-time.Hour)) }, []check{
			action(ActWait), reason("recover with `etcdfed recover`"),
		}},
		// Issue 24: the hub on the minority side of a partition saw its
		// one survivor and declared the other clusters failed; it forced a
		// second ring beside a live majority. Out of sight, even declared
		// failed, is not gone: no new cluster without positive evidence.
		{"the split: the lost voters' clusters declared failed but not fenced, Automatic: nothing forced", func() Input {
			in := unfenced(steady())
			in.Quorum.Automatic = true
			return in
		}, []check{
			action(ActWait), reason("no new cluster is forced while a lost voter may still serve"),
			reason("main-1 [2]: cluster b declared failed, but unreachable is not dead"), reason("--confirm-fenced main-1,main-2"),
			func(t *testing.T, d Decision) {
				if d.Operation != nil {
					t.Errorf("recorded %+v", d.Operation)
				}
			},
		}},
		{"a request without fencing: wait, naming the members to fence", func() Input { return requested(unfenced(steady()), "", t0) }, []check{
			action(ActWait), reason("2 not known gone, to be fenced before any new cluster is forced"), reason("--confirm-fenced main-1,main-2"),
		}},
		{"Manual, not fenced: the condition says how to fence", func() Input { return unfenced(steady()) }, []check{
			action(ActWait), reason("before a recovery, stop main-1,main-2 for good"),
		}},
		{"one of two fenced: still waits for the other", func() Input {
			in := requested(unfenced(steady()), "", t0)
			in.Members[1].Fenced = "confirmed"
			return in
		}, []check{action(ActWait), reason("1 known gone"), reason("--confirm-fenced main-2")}},
		{"its own cluster shows the data lost: gone without fencing", func() Input {
			in := requested(lostQuorum(), "", t0)
			in.Members[2] = running("main-2", 3, dC, 3)
			in.Members[2].Object.VolumeLost = true
			return in
		}, []check{action(ActBegin), reason("main-2 [3]: its data is lost")}},
		{"Automatic recovers without a request", func() Input {
			in := lostQuorum()
			in.Quorum.Automatic = true
			return in
		}, []check{action(ActBegin), opRecorded(OpRecover, ActBegin), reason("automatic")}},
		{"within the grace: not declared, a request waits", func() Input {
			in := requested(lostQuorum(), "", t0)
			in.Quorum.LostSince = t0.Add(-time.Minute)
			return in
		}, []check{action(ActWait), reason("not declared"), reason("declared after 5m0s")}},
		{"a member whose cluster is unseen, not fenced: must be fenced", func() Input {
			in := requested(lostQuorum(), "", t0)
			in.Members[2].DomainFailed, in.Members[2].Fenced = false, ""
			return in
		}, []check{action(ActWait), reason("main-2 [3]: cluster c not visible: it may be alive and serving")}},
		{"a visible member whose etcd does not answer must be fenced too (its pod may come back)", func() Input {
			in := requested(lostQuorum(), "", t0)
			in.Members[2] = running("main-2", 3, dC, 3)
			in.Members[2].Object.Etcd = &EtcdView{ID: 3, RaftIndex: 990}
			return in
		}, []check{action(ActWait), reason("main-2 [3]: etcd does not answer its spoke in c")}},
		{"a visible member whose etcd does not answer, confirmed fenced: gone", func() Input {
			in := requested(lostQuorum(), "", t0)
			in.Members[2] = running("main-2", 3, dC, 3)
			in.Members[2].Object.Etcd = &EtcdView{ID: 3, RaftIndex: 990}
			in.Members[2].Fenced = "confirmed"
			return in
		}, []check{action(ActBegin), memberNamed("main-0")}},
		{"no survivor: nothing to recover from", func() Input {
			in := requested(lostQuorum(), "", t0)
			in.Members[0].Object.Etcd.Answers = false
			return in
		}, []check{action(ActWait), reason("no survivor holds data")}},
		{"a ring with quorum never recovers, whatever is asked", func() Input {
			in := steady()
			in.Quorum = QuorumInput{Automatic: true, Request: &RecoveryRequest{RequestedAt: t0}, Grace: time.Second}
			return in
		}, []check{action(ActNone)}},
		{"a survivor's view of another incarnation's ID does not count", func() Input {
			in := requested(lostQuorum(), "", t0)
			in.Members[0].Object.Etcd.ID = 77
			return in
		}, []check{action(ActWait), reason("no survivor")}},

		{"step 1: the survivor restarts with --force-new-cluster", recovering(ActBegin, func(*Input) {}), []check{
			action(ActForceNewCluster), opRecorded(OpRecover, ActForceNewCluster), memberNamed("main-0"),
		}},
		{"step 1, quorum back before anything was done: finish, never force", recovering(ActBegin, func(in *Input) { *in = steadyWith(in.Operation) }), []check{
			action(ActFinish), reason("recovery not needed"),
		}},
		{"step 1 written but not seen yet: written again", recovering(ActForceNewCluster, func(*Input) {}), []check{action(ActForceNewCluster)}},
		{"step 1 seen, etcd not up yet: wait", recovering(ActForceNewCluster, func(in *Input) { in.Members[0].Object.ForceNewCluster = "recover-x" }), []check{
			action(ActWait), opRecorded(OpRecover, ActForceNewCluster), reason("one-member cluster"),
		}},
		{"step 2: etcd answers as the survivor alone: clear the flag", recovering(ActForceNewCluster, func(in *Input) {
			in.Members[0].Object.ForceNewCluster = "recover-x"
			alone(in)
		}), []check{action(ActClearForceNewCluster), opRecorded(OpRecover, ActClearForceNewCluster)}},
		{"step 2 not seen yet: cleared again", recovering(ActClearForceNewCluster, func(in *Input) {
			in.Members[0].Object.ForceNewCluster = "recover-x"
			alone(in)
		}), []check{action(ActClearForceNewCluster)}},
		{"step 2 written, pod not settled: wait", recovering(ActClearForceNewCluster, func(in *Input) {
			alone(in)
			in.Members[0].Object.Settled = false
		}), []check{action(ActWait), reason("without --force-new-cluster")}},
		{"step 3: survivor ready alone: finish with its ID", recovering(ActClearForceNewCluster, func(in *Input) {
			alone(in)
			in.Members[0].Object.Settled = true
		}), []check{action(ActFinish), memberNamed("main-0"), func(t *testing.T, d Decision) {
			if d.MemberID != 1 || d.Operation != nil {
				t.Errorf("finish %+v: want ID 1 and the operation cleared", d)
			}
		}}},
		{"survivor's cluster out of sight: wait", recovering(ActForceNewCluster, func(in *Input) { in.Members[0].ClusterVisible = false }), []check{
			action(ActWait), reason("not visible"),
		}},
	})
}

func steadyWith(op *Operation) Input {
	in := steady()
	in.Operation = op
	return in
}

// After a recovery the planner adds the gone members back one at a time:
// the ledger forgot them (etcd no longer lists them) and the placement
// wants them under their names with new incarnations, as learners (Add).
func TestRecoveredRingGrowsBackByAdds(t *testing.T) {
	in := steady()
	alone(&in)
	in.Members = in.Members[:1]
	in.Placement.Steps = []topology.Step{{Action: topology.Add, Reason: topology.ScaleUp, Member: "main-1", To: dA}}
	d := Next(in)
	if d.Action != ActBegin || d.Operation == nil || d.Operation.Type != OpAdd || d.Operation.Member != "main-1" || d.Operation.Incarnation != 4 {
		t.Fatalf("decision %s %+v (%s), want Add main-1 with incarnation 4", d.Action, d.Operation, d.Reason)
	}
	if q := AssessQuorum(in); q.Lost || q.Declared {
		t.Fatalf("a quorate ring assessed as %+v", q)
	}
}
