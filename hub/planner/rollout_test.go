package planner

import (
	"slices"
	"testing"
	"time"

	"github.com/etcdfed/etcdfed/pkg/topology"
)

// rolled is steady() with every object settled and the given members'
// objects outdated (a spec change the hub has not written to them yet).
func rolled(outdated ...string) Input {
	in := steady()
	for i := range in.Members {
		in.Members[i].Object.Settled = true
		in.Members[i].Object.Outdated = slices.Contains(outdated, in.Members[i].Name)
	}
	return in
}

// rolling is rolled() with a Roll of member in flight.
func rolling(member string, outdated ...string) Input {
	in := rolled(outdated...)
	in.Operation = &Operation{Type: OpRoll, Member: member, Reason: ReasonSpecChanged, Step: ActUpdateObject, StartedAt: t0}
	return in
}

func rollOf(member string) check {
	return func(t *testing.T, d Decision) {
		t.Helper()
		if d.Operation == nil || d.Operation.Type != OpRoll || d.Operation.Member != member {
			t.Errorf("operation = %+v, want a Roll of %s", d.Operation, member)
		}
	}
}

func noOperation(t *testing.T, d Decision) {
	t.Helper()
	if d.Operation != nil {
		t.Errorf("operation = %+v, want none", d.Operation)
	}
}

// A spec change that restarts pods rolls one member at a time, each only
// when every member is a ready voter, followers first and the leader last.
func TestRolloutBegins(t *testing.T) {
	run(t, []struct {
		name   string
		input  func() Input
		checks []check
	}{
		{"nothing outdated: nothing to do", func() Input { return rolled() }, []check{action(ActNone), noOperation}},
		{"every member outdated: a follower first, in name order", func() Input { return rolled("main-0", "main-1", "main-2") },
			[]check{action(ActBegin), opRecorded(OpRoll, ActUpdateObject), rollOf("main-1"), reason("3 of 3 members to go")}},
		{"only the leader left: it goes last, leadership first", func() Input { return rolled("main-0") },
			[]check{action(ActBegin), rollOf("main-0"), reason("leadership moves away first")}},
		{"a member not ready: no roll begins", func() Input {
			in := rolled("main-0", "main-1")
			in.Members[2].Ready = false
			return in
		}, []check{action(ActWait), noOperation, reason("main-2 is not a ready voter")}},
		{"a pod not ready on its latest spec: no roll begins", func() Input {
			in := rolled("main-1")
			in.Members[1].Object.Settled = false
			return in
		}, []check{action(ActWait), noOperation, reason("main-1's pod is not ready")}},
		{"a member cluster out of sight: no roll begins", func() Input {
			in := rolled("main-1")
			in.Members[2].ClusterVisible, in.Members[2].Object = false, nil
			return in
		}, []check{action(ActWait), noOperation, reason("cluster c is not visible")}},
		{"an unhealthy etcd member the hub does not record: no roll begins", func() Input {
			in := rolled("main-1")
			in.Etcd.Members[2].Healthy = false
			return in
		}, []check{action(ActWait), reason("is not a healthy voter")}},
		{"membership goes first: a scale-up begins before the rollout", func() Input {
			in := rolled("main-1")
			in.Replicas = 5
			in.Placement.Steps = scaleUpSteps()
			return in
		}, []check{action(ActBegin), opRecorded(OpAdd, ActCreateObjects)}},
		{"foreign members stop rollouts as they stop membership changes", func() Input {
			in := rolled("main-1")
			in.Etcd.Members = append(in.Etcd.Members, ListEntry{ID: 0xbeef, Name: "intruder", PeerURLs: []string{"https://intruder:2380"}, Healthy: true})
			return in
		}, []check{action(ActWait), reason("does not manage")}},
	})
}

// One member's roll, step by step, each found by inspection.
func TestRollSteps(t *testing.T) {
	run(t, []struct {
		name   string
		input  func() Input
		checks []check
	}{
		{"a follower: the new spec is written", func() Input { return rolling("main-1", "main-1") },
			[]check{action(ActUpdateObject), opRecorded(OpRoll, ActUpdateObject), rollOf("main-1")}},
		{"the leader: leadership moves first, to the lowest healthy voter", func() Input { return rolling("main-0", "main-0") },
			[]check{action(ActMoveLeader), opRecorded(OpRoll, ActMoveLeader), func(t *testing.T, d Decision) {
				if d.MemberID != 1 || d.TransfereeID != 2 {
					t.Errorf("move leader from %x to %x, want 1 to 2", d.MemberID, d.TransfereeID)
				}
			}}},
		{"the leader, leadership not moved after a minute of trying: restarted as the leader", func() Input {
			in := rolling("main-0", "main-0")
			in.Operation.Step, in.Operation.StepStartedAt = ActMoveLeader, t0.Add(-leaderHandOffLimit)
			return in
		}, []check{action(ActUpdateObject), opRecorded(OpRoll, ActUpdateObject), reason("leadership did not move away from main-0 [1] in 1m0s"), reason("preStop hands leadership over")}},
		{"the leader, tried for less than a minute: MoveLeader again", func() Input {
			in := rolling("main-0", "main-0")
			in.Operation.Step, in.Operation.StepStartedAt = ActMoveLeader, t0.Add(-leaderHandOffLimit+time.Second)
			return in
		}, []check{action(ActMoveLeader)}},
		{"the leader, the roll begun an hour ago but MoveLeader for a second: MoveLeader again", func() Input {
			in := rolling("main-0", "main-0")
			in.Operation.Step, in.Operation.StartedAt, in.Operation.StepStartedAt = ActMoveLeader, t0.Add(-time.Hour), t0.Add(-time.Second)
			return in
		}, []check{action(ActMoveLeader)}},
		{"the leader, on MoveLeader since an unknown time (an older hub's status): MoveLeader again", func() Input {
			in := rolling("main-0", "main-0")
			in.Operation.Step, in.Operation.StartedAt = ActMoveLeader, t0.Add(-time.Hour)
			return in
		}, []check{action(ActMoveLeader)}},
		{"the leader, a minute of trying but no healthy voter to take over: still waits", func() Input {
			in := rolling("main-0", "main-0")
			in.Operation.Step, in.Operation.StepStartedAt = ActMoveLeader, t0.Add(-time.Hour)
			in.Etcd.Members[1].Healthy, in.Etcd.Members[2].Healthy = false, false
			return in
		}, []check{action(ActWait), reason("no other healthy voter")}},
		{"the leader with no healthy voter to take over: wait", func() Input {
			in := rolling("main-0", "main-0")
			in.Etcd.Members[1].Healthy, in.Etcd.Members[2].Healthy = false, false
			return in
		}, []check{action(ActWait), opRecorded(OpRoll, ActMoveLeader), reason("no other healthy voter")}},
		{"a single member: no one to hand leadership to, the spec is written", func() Input {
			in := rolling("main-0", "main-0")
			in.Replicas = 1
			in.Etcd.Members, in.Members = in.Etcd.Members[:1], in.Members[:1]
			return in
		}, []check{action(ActUpdateObject)}},
		{"written, the spoke has not acted on it yet: wait", func() Input {
			in := rolling("main-1")
			in.Members[1].Object.Settled = false
			return in
		}, []check{action(ActWait), opRecorded(OpRoll, ActUpdateObject), reason("restart on the new spec")}},
		{"the pod restarted, etcd not healthy yet: wait", func() Input {
			in := rolling("main-1")
			in.Etcd.Members[1].Healthy, in.Members[1].Ready = false, false
			in.Members[1].ReadyChangedAt = t0.Add(-time.Second)
			return in
		}, []check{action(ActWait), opRecorded(OpRoll, ActUpdateObject), reason("ready voter again")}},
		{"back as a ready voter: done", func() Input { return rolling("main-1") },
			[]check{action(ActFinish), noOperation, reason("runs the new spec")}},
		{"not back within the grace period: the roll gives way to a replacement", func() Input {
			in := rolling("main-1")
			in.Operation.StartedAt = t0.Add(-time.Hour) // the member went down after its roll began
			in.Etcd.Members[1].Healthy, in.Members[1].Ready = false, false
			in.Members[1].ReadyChangedAt = t0.Add(-in.MemberGrace)
			return in
		}, []check{action(ActFinish), reason("gives way to its replacement")}},
		// Issue 24: a spec change whose pod cannot be scheduled (a
		// nodeSelector no node matches) was read as a failing member: the
		// roll gave way to a replacement that could not start either.
		{"the pod on the new spec cannot be scheduled, beyond the grace: halted, no replacement", func() Input {
			in := rolling("main-1", "main-0", "main-2") // the first member rolled: no one runs the new spec
			in.Operation.StartedAt = t0.Add(-time.Hour)
			in.Etcd.Members[1].Healthy, in.Members[1].Ready = false, false
			in.Members[1].ReadyChangedAt = t0.Add(-in.MemberGrace)
			in.Members[1].Object.Pending, in.Members[1].Object.Settled = "pod main-1 is not scheduled", false
			return in
		}, []check{action(ActWait), halt(true), opRecorded(OpRoll, ActUpdateObject), reason("rollout halted: main-1's pod cannot start on the new spec"),
			reason("pod main-1 is not scheduled"), reason("the members not rolled keep the old spec")}},
		// Issue 37: a member cluster that reports its member Pending for
		// ever held the roll halted, and with it every later roll of the
		// ring. When another member runs the same spec, the spec starts:
		// beyond the grace the roll gives way, to a replacement placed
		// outside that cluster.
		{"pending beyond the grace while another member runs the same spec: the roll gives way", func() Input {
			in := rolling("main-1", "main-2") // main-0 runs the new spec already
			in.Operation.StartedAt = t0.Add(-time.Hour)
			in.Etcd.Members[1].Healthy, in.Members[1].Ready = false, false
			in.Members[1].ReadyChangedAt = t0.Add(-in.MemberGrace)
			in.Members[1].Object.Pending, in.Members[1].Object.Settled = "pod main-1 is not scheduled", false
			return in
		}, []check{action(ActFinish), noOperation, gaveWay, halt(false), reason("main-0 runs the same spec"),
			reason("pod main-1 is not scheduled"), reason("gives way to a replacement placed outside b")}},
		{"pending beyond the grace, the one running the spec not a ready voter: halted", func() Input {
			in := rolling("main-1", "main-2")
			in.Operation.StartedAt = t0.Add(-time.Hour)
			in.Etcd.Members[1].Healthy, in.Members[1].Ready = false, false
			in.Members[1].ReadyChangedAt = t0.Add(-in.MemberGrace)
			in.Members[1].Object.Pending, in.Members[1].Object.Settled = "pod main-1 is not scheduled", false
			in.Members[0].Ready = false
			return in
		}, []check{action(ActWait), halt(true), reason("rollout halted")}},
		{"pending beyond the grace beside the spec running, no automatic failure policy: halted", func() Input {
			in := rolling("main-1", "main-2")
			in.Automatic = false
			in.Operation.StartedAt = t0.Add(-time.Hour)
			in.Etcd.Members[1].Healthy, in.Members[1].Ready = false, false
			in.Members[1].ReadyChangedAt = t0.Add(-in.MemberGrace)
			in.Members[1].Object.Pending, in.Members[1].Object.Settled = "pod main-1 is not scheduled", false
			return in
		}, []check{action(ActWait), halt(true), reason("rollout halted")}},
		{"pending within the grace beside the spec running: wait", func() Input {
			in := rolling("main-1", "main-2")
			in.Etcd.Members[1].Healthy, in.Members[1].Ready = false, false
			in.Members[1].ReadyChangedAt = t0.Add(-time.Second)
			in.Members[1].Object.Pending, in.Members[1].Object.Settled = "pod main-1 is not scheduled", false
			return in
		}, []check{action(ActWait), halt(false), reason("waiting for main-1's pod to start on the new spec")}},
		{"the pod on the new spec not scheduled yet, within the grace: wait, not halted", func() Input {
			in := rolling("main-1")
			in.Etcd.Members[1].Healthy, in.Members[1].Ready = false, false
			in.Members[1].ReadyChangedAt = t0.Add(-time.Second)
			in.Members[1].Object.Pending, in.Members[1].Object.Settled = "pod main-1 is not scheduled", false
			return in
		}, []check{action(ActWait), halt(false), reason("waiting for main-1's pod to start on the new spec")}},
		// The spec set back while the rolled member's pod could not start:
		// the object is written again, and the grace for the member to
		// come back counts from that write, not from when it went down
		// (a member back from Pending was replaced at once).
		{"the spec set back while the member is down: written again, its grace restarts", func() Input {
			in := rolling("main-1", "main-1")
			in.Etcd.Members[1].Healthy, in.Members[1].Ready = false, false
			in.Members[1].ReadyChangedAt = t0.Add(-2 * in.MemberGrace)
			in.Operation.StartedAt = t0.Add(-3 * in.MemberGrace)
			return in
		}, []check{action(ActUpdateObject), func(t *testing.T, d Decision) {
			if d.Operation == nil || !d.Operation.StartedAt.Equal(t0) {
				t.Errorf("operation %+v: want its clock restarted at the write", d.Operation)
			}
		}}},
		{"written again, the pod starting: not replaced within the grace from the write", func() Input {
			in := rolling("main-1")
			in.Etcd.Members[1].Healthy, in.Members[1].Ready = false, false
			in.Members[1].ReadyChangedAt = t0.Add(-2 * in.MemberGrace)
			in.Operation.StartedAt = t0.Add(-time.Minute)
			in.Members[1].Object.Settled = false
			return in
		}, []check{action(ActWait), reason("waiting for main-1's pod to restart on the new spec")}},
		{"volume lost: the roll gives way to the replacement", func() Input {
			in := rolling("main-1", "main-1")
			in.Members[1].Object.VolumeLost = true
			return in
		}, []check{action(ActFinish), reason("gives way")}},
		{"member cluster out of sight: wait", func() Input {
			in := rolling("main-1", "main-1")
			in.Members[1].ClusterVisible, in.Members[1].Object = false, nil
			return in
		}, []check{action(ActWait), opRecorded(OpRoll, ActUpdateObject), reason("not visible")}},
		{"member gone from the record: the roll is dropped", func() Input {
			in := rolling("main-9", "main-1")
			return in
		}, []check{action(ActFinish), reason("no longer a member")}},
	})
}

// A whole rollout of five members, driven through the planner with the
// reconciler's and the spokes' effects simulated: every member is rolled
// exactly once, never two at a time, never while it leads, and the leader
// of the start goes last.
func TestRolloutWalk(t *testing.T) {
	in := steady()
	in.Etcd.Members, in.Members = nil, nil
	for i, n := range []string{"main-0", "main-1", "main-2", "main-3", "main-4"} {
		in.Etcd.Members = append(in.Etcd.Members, voter(n, uint64(i+1)))
		m := running(n, uint64(i+1), dA, int64(i+1))
		m.Object.Settled, m.Object.Outdated = true, true
		in.Members = append(in.Members, m)
	}
	in.Replicas = 5
	in.Etcd.LeaderID = 3 // main-2 leads
	var order []string
	restarting := ""
	for i := 0; i < 100; i++ {
		d := Next(in)
		switch d.Action {
		case ActNone:
			if len(order) != 5 || order[4] != "main-2" {
				t.Fatalf("rolled %v, want all five once with the leader main-2 last", order)
			}
			return
		case ActBegin:
			if restarting != "" {
				t.Fatalf("began a roll of %s while %s restarts", d.Operation.Member, restarting)
			}
		case ActMoveLeader:
			in.Etcd.LeaderID = d.TransfereeID
		case ActUpdateObject:
			idx := slices.IndexFunc(in.Members, func(m Member) bool { return m.Name == d.Member })
			if in.Members[idx].ID == in.Etcd.LeaderID {
				t.Fatalf("restarted the leader %s", d.Member)
			}
			order = append(order, d.Member)
			restarting = d.Member
			// The spoke replaces the pod: etcd loses the member for a while.
			in.Members[idx].Object.Outdated, in.Members[idx].Object.Settled = false, false
			in.Members[idx].Ready, in.Etcd.Members[idx].Healthy = false, false
			in.Members[idx].ReadyChangedAt = in.Now
		case ActWait:
			if restarting == "" {
				t.Fatalf("waits with nothing restarting: %s", d.Reason)
			}
			// The pod is back on the new spec.
			idx := slices.IndexFunc(in.Members, func(m Member) bool { return m.Name == restarting })
			in.Members[idx].Object.Settled, in.Members[idx].Ready, in.Etcd.Members[idx].Healthy = true, true, true
			in.Members[idx].ReadyChangedAt = in.Now
		case ActFinish:
			restarting = ""
		default:
			t.Fatalf("unexpected %s (%s)", d.Action, d.Reason)
		}
		in.Operation = d.Operation
	}
	t.Fatalf("rollout did not end: rolled %v", order)
}

// scaleUpSteps is a pkg/topology plan that adds main-3 to domain a.
func scaleUpSteps() []topology.Step {
	return []topology.Step{{Action: topology.Add, Member: "main-3", To: dA, Reason: topology.ScaleUp}}
}

func gaveWay(t *testing.T, d Decision) {
	t.Helper()
	if !d.GaveUp {
		t.Errorf("GaveUp = false (%s %s), want the roll given way", d.Action, d.Reason)
	}
}
