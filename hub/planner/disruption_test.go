package planner

import (
	"testing"
	"time"
)

// asking is a settled steady ring whose named members' nodes are cordoned,
// the first named asking longest.
func asking(members ...string) Input {
	in := rolled()
	for i, name := range members {
		for j := range in.Members {
			if in.Members[j].Name == name {
				in.Members[j].Object.DisruptionRequested = true
				in.Members[j].Object.DisruptionRequestedSince = t0.Add(time.Duration(i) * time.Second)
				in.Members[j].Object.DisruptionReason = "node of " + name + " is cordoned"
			}
		}
	}
	return in
}

// granting is asking() with a Disrupt of member in flight at step.
func granting(member string, step Action, others ...string) Input {
	in := asking(append([]string{member}, others...)...)
	in.Operation = &Operation{Type: OpDisrupt, Member: member, Reason: ReasonNodeMaintenance, Step: step, StartedAt: t0}
	return in
}

func disruptionOf(member string) check {
	return func(t *testing.T, d Decision) {
		t.Helper()
		if d.Operation == nil || d.Operation.Type != OpDisrupt || d.Operation.Member != member {
			t.Errorf("operation = %+v, want a Disrupt of %s", d.Operation, member)
		}
	}
}

func down(in Input, name string) Input {
	for i := range in.Members {
		if in.Members[i].Name == name {
			in.Members[i].Ready, in.Members[i].ReadyChangedAt = false, t0
			in.Members[i].Object.Settled = false
		}
	}
	return in
}

// The ring's one disruption budget (rule 12): one grant at a time, only
// while every member is a ready voter and nothing else is in flight, the
// leader's leadership moved first, withdrawn when the ring degrades before
// it is used, closed again once the member is back.
func TestDisruptionBudget(t *testing.T) {
	run(t, []struct {
		name   string
		input  func() Input
		checks []check
	}{
		{"no node drained: nothing to do", func() Input { return asking() }, []check{action(ActNone), noOperation}},
		{"two clusters drain at once: the one asking longest is granted, the other waits", func() Input { return asking("main-2", "main-1") },
			[]check{action(ActBegin), disruptionOf("main-2"), opRecorded(OpDisrupt, ""), reason("1 more wait")}},
		{"a member not ready: no grant", func() Input { return down(asking("main-1"), "main-2") },
			[]check{action(ActWait), noOperation, reason("main-2 is not a ready voter")}},
		{"an unhealthy etcd member: no grant", func() Input {
			in := asking("main-1")
			in.Etcd.Members[2].Healthy = false
			return in
		}, []check{action(ActWait), noOperation}},
		{"a roll due goes first", func() Input {
			in := asking("main-1")
			in.Members[2].Object.Outdated = true
			return in
		}, []check{action(ActBegin), rollOf("main-2")}},
		{"a scale-up due goes first", func() Input {
			in := asking("main-1")
			in.Replicas = 5
			in.Placement.Steps = scaleUpSteps()
			return in
		}, []check{action(ActBegin), opRecorded(OpAdd, ActCreateObjects)}},
		{"recorded: the follower's budget opens", func() Input { return granting("main-1", "") },
			[]check{action(ActGrantDisruption), opRecorded(OpDisrupt, ActGrantDisruption), reason("main-1 may be evicted once")}},
		{"recorded for the leader: leadership moves first", func() Input { return granting("main-0", "") },
			[]check{action(ActMoveLeader), opRecorded(OpDisrupt, ActMoveLeader)}},
		{"granted, nothing changed: the budget stays open", func() Input { return granting("main-1", ActGrantDisruption, "main-2") },
			[]check{action(ActGrantDisruption), disruptionOf("main-1")}},
		{"granted, a scale-up waits for it", func() Input {
			in := granting("main-1", ActGrantDisruption)
			in.Replicas = 5
			in.Placement.Steps = scaleUpSteps()
			return in
		}, []check{action(ActGrantDisruption), disruptionOf("main-1")}},
		{"granted, another member fails first: the grant is withdrawn", func() Input { return down(granting("main-1", ActGrantDisruption), "main-2") },
			[]check{action(ActFinish), noOperation, reason("withdrawn before it was used")}},
		{"granted, the node uncordoned before an eviction: closed", func() Input {
			in := granting("main-1", ActGrantDisruption)
			in.Members[1].Object.DisruptionRequested = false
			return in
		}, []check{action(ActFinish), reason("no longer asks")}},
		{"granted and evicted: the budget closes while it is away", func() Input { return down(granting("main-1", ActGrantDisruption, "main-2"), "main-1") },
			[]check{action(ActAwaitReturn), opRecorded(OpDisrupt, ActAwaitReturn)}},
		{"away: the other drain still waits", func() Input { return down(granting("main-1", ActAwaitReturn, "main-2"), "main-1") },
			[]check{action(ActWait), opRecorded(OpDisrupt, ActAwaitReturn), reason("every budget is closed")}},
		{"back as a ready voter: done, the next may begin", func() Input { return granting("main-1", ActAwaitReturn, "main-2") },
			[]check{action(ActFinish), noOperation, reason("back as a ready voter")}},
		{"not back within the grace period: gives way to its replacement", func() Input {
			in := down(granting("main-1", ActAwaitReturn), "main-1")
			in.Now = t0.Add(6 * time.Minute)
			return in
		}, []check{action(ActFinish), reason("gives way to its replacement")}},
		{"etcd does not answer before the eviction: the grant is taken back", func() Input {
			in := granting("main-1", ActGrantDisruption)
			in.Etcd = Etcd{Error: "timeout"}
			return in
		}, []check{action(ActWait), opRecorded(OpDisrupt, ActWait)}},
	})
	op := &Operation{Type: OpDisrupt, Member: "main-1", Step: ActGrantDisruption}
	if !Allows(op, "main-1") || Allows(op, "main-2") {
		t.Error("a GrantDisruption step opens its own member's budget only")
	}
	for _, s := range []Action{"", ActMoveLeader, ActAwaitReturn, ActWait} {
		if Allows(&Operation{Type: OpDisrupt, Member: "main-1", Step: s}, "main-1") {
			t.Errorf("step %q opens the budget", s)
		}
	}
	if Allows(&Operation{Type: OpRoll, Member: "main-1", Step: ActGrantDisruption}, "main-1") {
		t.Error("a Roll opens a budget")
	}
}
