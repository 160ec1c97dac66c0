package planner

import (
	"testing"
	"time"

	"github.com/etcdfed/etcdfed/pkg/topology"
)

var (
	dD  = topology.Domain{Cluster: "d", Zone: "zd"}
	dC2 = topology.Domain{Cluster: "c", Zone: "zc2"}
)

// surgeURL is the peer URL of an incarnation served under its own name.
func surgeURL(name string) string { return "https://" + name + "-i4.etcd.example.com:2380" }

// Rule 13: a placement move of a live member is make-before-break; only
// a dead old incarnation (or a move inside one member cluster) is moved
// break-before-make, and the decision says which and why.
func TestRule13MoveBeginsMakeBeforeBreak(t *testing.T) {
	moving := func(to topology.Domain, mut func(in *Input)) func() Input {
		return func() Input {
			in := steady()
			in.Placement.Steps = []topology.Step{{Action: topology.Move, Member: "main-2", From: dC, To: to, Reason: topology.Spread}}
			mut(&in)
			return in
		}
	}
	run(t, []struct {
		name   string
		input  func() Input
		checks []check
	}{
		{"a live member moves make before break, under its own name", moving(dD, func(*Input) {}), []check{
			action(ActBegin), opRecorded(OpMove, ActCreateObjects), reason("make before break"),
			func(t *testing.T, d Decision) {
				op := d.Operation
				if op.MemberID != 3 || op.FromIncarnation != 3 || op.Incarnation != 4 || *op.From != dC || *op.To != dD || op.Reason != string(topology.Spread) {
					t.Errorf("op = %+v", op)
				}
				if len(d.Assign) != 1 || !d.Assign[0].OwnName || d.Assign[0].Domain != dD || d.Assign[0].Incarnation != 4 {
					t.Errorf("assign = %+v, want main-2 incarnation 4 in d under its own name", d.Assign)
				}
			},
		}},
		{"asked for by annotation: break before make, said", moving(dD, func(in *Input) { in.BreakBeforeMake = true }), []check{opRecorded(OpReplace, ActCreateObjects), reason("annotation etcdfed.dev/break-before-make")}},
		{"moves paused: a live member's move waits", moving(dD, func(in *Input) { in.MovesPaused = true }), []check{action(ActWait), reason("paused"), reason("1 move(s) planned")}},
		{"old incarnation does not answer: break before make, said", moving(dD, func(in *Input) { in.Etcd.Members[2].Healthy = false }), []check{
			action(ActBegin), opRecorded(OpReplace, ActCreateObjects), reason("break before make"), reason("does not answer"),
			func(t *testing.T, d Decision) {
				if d.Assign[0].OwnName {
					t.Errorf("a Replace's incarnation takes the stable name: %+v", d.Assign)
				}
			},
		}},
		{"paused does not hold a dead member's move", moving(dD, func(in *Input) { in.Etcd.Members[2].Healthy = false; in.MovesPaused = true }), []check{action(ActBegin), opRecorded(OpReplace, ActCreateObjects)}},
		{"old domain declared failed: break before make", moving(dD, func(in *Input) { in.Members[2].DomainFailed = true }), []check{opRecorded(OpReplace, ActCreateObjects), reason("declared failed")}},
		{"old cluster out of sight: break before make", moving(dD, func(in *Input) { in.Members[2].ClusterVisible = false }), []check{opRecorded(OpReplace, ActCreateObjects), reason("out of sight")}},
		{"old incarnation not in etcd: break before make", moving(dD, func(in *Input) { in.Members[2].ID = 0 }), []check{opRecorded(OpReplace, ActCreateObjects), reason("not in etcd's member list")}},
		{"inside one member cluster (another zone of it): make before break, under its own name", moving(dC2, func(*Input) {}), []check{
			action(ActBegin), opRecorded(OpMove, ActCreateObjects), reason("make before break"),
			func(t *testing.T, d Decision) {
				if op := d.Operation; op.MemberID != 3 || op.FromIncarnation != 3 || op.Incarnation != 4 || *op.From != dC || *op.To != dC2 {
					t.Errorf("op = %+v", op)
				}
				if len(d.Assign) != 1 || !d.Assign[0].OwnName || d.Assign[0].Domain != dC2 {
					t.Errorf("assign = %+v, want main-2 incarnation 4 in c/zc2 under its own name", d.Assign)
				}
			},
		}},
		{"inside one member cluster, its object named after the member alone: break before make, said", moving(dC2, func(in *Input) { in.Members[2].Object.NamedAfterMember = true }), []check{
			opRecorded(OpReplace, ActCreateObjects), reason("named after the member alone"),
		}},
		{"inside one member cluster, the old incarnation dead: break before make", moving(dC2, func(in *Input) { in.Etcd.Members[2].Healthy = false }), []check{
			opRecorded(OpReplace, ActCreateObjects), reason("does not answer"),
		}},
		{"another member cluster, its object named after the member alone: make before break (another cluster's Service)", moving(dD, func(in *Input) { in.Members[2].Object.NamedAfterMember = true }), []check{
			opRecorded(OpMove, ActCreateObjects),
		}},
		{"a drained zone whose pod still runs: make before break", moving(dD, func(in *Input) { in.Members[2].DomainClosed = true }), []check{opRecorded(OpMove, ActCreateObjects)}},
	})
}

// Rule 13: the steps of a Move in flight. The new incarnation joins and is
// promoted while the old one is still a voter; only then is leadership
// moved and the old ID removed, and its object deleted last.
func TestRule13MoveStepsNewFirstOldLast(t *testing.T) {
	// moving is main-2 moved from c (incarnation 3, ID 3) to d
	// (incarnation 4, under its own name), at the start of the walk.
	moving := func(mut func(in *Input)) func() Input {
		return func() Input {
			in := steady()
			from, to := dC, dD
			in.Operation = &Operation{Type: OpMove, Member: "main-2", MemberID: 3, Incarnation: 4, FromIncarnation: 3, From: &from, To: &to, Reason: "Spread", Step: ActCreateObjects, StartedAt: t0}
			in.LastIncarnation = 4
			m := running("main-2", 0, dD, 4)
			m.Object = nil
			m.StaleIn = []string{"c"}
			in.Members[2] = m
			mut(&in)
			return in
		}
	}
	exposed := func(in *Input) {
		in.Members[2].Object = &Object{Incarnation: 4, StatusIncarnation: 4, PeerURL: surgeURL("main-2")}
	}
	learner := func(started bool) func(in *Input) {
		return func(in *Input) {
			exposed(in)
			in.Members[2].Object.Bootstrap = "existing"
			e := ListEntry{ID: 40, PeerURLs: []string{surgeURL("main-2")}, IsLearner: true, Healthy: started}
			if started {
				e.Name = "main-2"
			}
			in.Etcd.Members = append(in.Etcd.Members, e)
		}
	}
	promoted := func(in *Input) {
		learner(true)(in)
		in.Etcd.Members[3].IsLearner = false
		in.Members[2].ID = 40
	}
	run(t, []struct {
		name   string
		input  func() Input
		checks []check
	}{
		{"no object yet: the new incarnation is created first, the old ID stays", moving(func(*Input) {}), []check{
			action(ActCreateObjects), opRecorded(OpMove, ActCreateObjects),
			func(t *testing.T, d Decision) {
				if d.Domain != dD {
					t.Errorf("domain = %v, want %v", d.Domain, dD)
				}
			},
		}},
		{"the old ID leading does not matter yet", moving(func(in *Input) { in.Etcd.LeaderID = 3 }), []check{action(ActCreateObjects)}},
		{"exposed: added as a learner beside the old voter", moving(exposed), []check{action(ActAddLearner), opRecorded(OpMove, ActAddLearner)}},
		{"the new cluster not visible yet at a later step (a restarted hub): the step recorded is kept", moving(func(in *Input) {
			in.Operation.Step = ActPromote
			in.Members[2].ClusterVisible = false
		}), []check{action(ActWait), opRecorded(OpMove, ActPromote), reason("member cluster d is not visible (yet); Move of main-2 goes on at step Promote")}},
		{"the new cluster not visible before its object: waiting to create it", moving(func(in *Input) {
			in.Members[2].ClusterVisible = false
		}), []check{action(ActWait), opRecorded(OpMove, ActCreateObjects), reason("waiting to create main-2 there")}},
		{"another learner joining: one at a time", moving(func(in *Input) {
			exposed(in)
			in.Etcd.Members = append(in.Etcd.Members, ListEntry{ID: 77, PeerURLs: []string{url("main-9")}, IsLearner: true})
		}), []check{action(ActWait), reason("one learner at a time")}},
		{"learner listed, not started: start it with existing", moving(func(in *Input) {
			learner(false)(in)
			in.Members[2].Object.Bootstrap = ""
		}), []check{action(ActStartMember), func(t *testing.T, d Decision) {
			if d.MemberID != 40 || d.Operation.NewMemberID != 40 {
				t.Errorf("member ID = %d (op %d), want the learner 40", d.MemberID, d.Operation.NewMemberID)
			}
		}}},
		{"learner started: promote it (the ring gains a voter)", moving(learner(true)), []check{action(ActPromote), opRecorded(OpMove, ActPromote)}},
		{"learner started but not answering yet: not promoted (a voter that does not answer would count as one down)", moving(func(in *Input) {
			learner(true)(in)
			in.Etcd.Members[3].Healthy = false
		}), []check{action(ActWait), reason("to answer before it is promoted")}},
		{"promoted but not answering: the old voter is not removed yet", moving(func(in *Input) {
			promoted(in)
			in.Etcd.Members[3].Healthy = false
		}), []check{action(ActWait), opRecorded(OpMove, ActRemoveMember), reason("to answer before its old one is removed")}},
		{"promoted, silent within the grace: still waiting, the give-up said", moving(func(in *Input) {
			promoted(in)
			in.Etcd.Members[3].Healthy = false
			in.Members[2].Ready, in.Members[2].ReadyChangedAt = false, t0.Add(-time.Minute)
		}), []check{action(ActWait), reason("given up if silent for 5m0s after its promotion")}},
		{"promoted, silent for the grace: the NEW ID is removed, the old voter stays", moving(func(in *Input) {
			promoted(in)
			in.Etcd.Members[3].Healthy = false
			in.Members[2].Ready, in.Members[2].ReadyChangedAt = false, t0.Add(-6*time.Minute)
		}), []check{action(ActRemoveMember), opRecorded(OpMove, ActRemoveMember), reason("the move is given up"), func(t *testing.T, d Decision) {
			if d.MemberID != 40 {
				t.Errorf("removing %d, want the silent new voter 40 (never the old voter 3)", d.MemberID)
			}
		}}},
		{"promoted, silent for the grace, two other voters down: not removed without quorum", moving(func(in *Input) {
			promoted(in)
			in.Etcd.Members[3].Healthy = false
			in.Etcd.Members[0].Healthy, in.Etcd.Members[1].Healthy = false, false
			in.Members[2].Ready, in.Members[2].ReadyChangedAt = false, t0.Add(-6*time.Minute)
		}), []check{action(ActWait), reason("not removing it")}},
		{"the silent new voter removed: the member is handed back to its old incarnation", moving(func(in *Input) {
			exposed(in)
			in.Members[2].Object.Bootstrap = "existing"
			in.Operation.Step, in.Operation.NewMemberID = ActRemoveMember, 40
		}), []check{action(ActFinish), reason("never answered after its promotion"), func(t *testing.T, d Decision) {
			if !d.GaveUp || d.MemberID != 3 || len(d.Assign) != 1 || d.Assign[0].Domain != dC || d.Assign[0].Incarnation != 3 || d.Assign[0].ID != 3 {
				t.Errorf("finish = %+v, want main-2 given back to c, incarnation 3, ID 3", d)
			}
		}}},
		{"promoted, the old incarnation leads: leadership moves away from it", moving(func(in *Input) {
			promoted(in)
			in.Etcd.LeaderID = 3
		}), []check{action(ActMoveLeader), func(t *testing.T, d Decision) {
			if d.MemberID != 3 || d.TransfereeID == 3 || d.TransfereeID == 0 {
				t.Errorf("moving leadership from %d to %d, want from 3 to another voter", d.MemberID, d.TransfereeID)
			}
		}}},
		{"promoted, the old incarnation leads after a minute of MoveLeader begun long after the Move: removed as the leader", moving(func(in *Input) {
			promoted(in)
			in.Etcd.LeaderID = 3
			in.Operation.StartedAt = t0.Add(-time.Hour)
			in.Operation.Step, in.Operation.StepStartedAt = ActMoveLeader, t0.Add(-leaderHandOffLimit)
		}), []check{action(ActRemoveMember), opRecorded(OpMove, ActRemoveMember), reason("removing it as the leader"), func(t *testing.T, d Decision) {
			if d.MemberID != 3 {
				t.Errorf("removing %d, want the old ID 3", d.MemberID)
			}
		}}},
		{"promoted, the old incarnation leads, the Move an hour old but its MoveLeader new: MoveLeader again", moving(func(in *Input) {
			promoted(in)
			in.Etcd.LeaderID = 3
			in.Operation.StartedAt = t0.Add(-time.Hour)
			in.Operation.Step, in.Operation.StepStartedAt = ActMoveLeader, t0.Add(-time.Second)
		}), []check{action(ActMoveLeader)}},
		{"promoted: the old ID is removed", moving(promoted), []check{action(ActRemoveMember), opRecorded(OpMove, ActRemoveMember), func(t *testing.T, d Decision) {
			if d.MemberID != 3 {
				t.Errorf("removing %d, want the old ID 3", d.MemberID)
			}
		}}},
		{"promoted, another voter down: removing the old one keeps quorum of the four", moving(func(in *Input) {
			promoted(in)
			in.Etcd.Members[0].Healthy = false
		}), []check{action(ActRemoveMember)}},
		{"old ID removed: its object is deleted last", moving(func(in *Input) {
			promoted(in)
			in.Etcd.Members = append(in.Etcd.Members[:2], in.Etcd.Members[3])
		}), []check{action(ActDeleteObject), opRecorded(OpMove, ActDeleteObject), func(t *testing.T, d Decision) {
			if d.From.Cluster != "c" {
				t.Errorf("from = %v", d.From)
			}
		}}},
		{"old object gone: the move is done, the new ID recorded", moving(func(in *Input) {
			promoted(in)
			in.Etcd.Members = append(in.Etcd.Members[:2], in.Etcd.Members[3])
			in.Members[2].StaleIn = nil
		}), []check{action(ActFinish), reason("make-before-break"), func(t *testing.T, d Decision) {
			if d.MemberID != 40 || d.GaveUp {
				t.Errorf("finish = %+v, want the new ID 40", d)
			}
		}}},
		{"new domain failed with the learner in etcd: the learner goes, the old voter stays", moving(func(in *Input) {
			learner(true)(in)
			in.Members[2].DomainFailed = true
		}), []check{action(ActRemoveMember), func(t *testing.T, d Decision) {
			if d.MemberID != 40 {
				t.Errorf("removing %d, want the learner 40 (never the old voter 3)", d.MemberID)
			}
		}}},
		{"new domain failed, no learner: the member is handed back to its old incarnation", moving(func(in *Input) {
			exposed(in)
			in.Members[2].DomainFailed = true
		}), []check{action(ActFinish), reason("given up"), func(t *testing.T, d Decision) {
			if !d.GaveUp || d.MemberID != 3 || len(d.Assign) != 1 || d.Assign[0].Domain != dC || d.Assign[0].Incarnation != 3 || d.Assign[0].ID != 3 {
				t.Errorf("finish = %+v, want main-2 given back to c, incarnation 3, ID 3", d)
			}
		}}},
	})
}

// Rule 13 inside one member cluster: the new incarnation's object is
// created beside the old one's (the hub's view: Object is the new one,
// Superseded says the old one is still there); once the old ID is removed
// the old object, not the new, is deleted, and the move finishes only when
// it is gone.
func TestRule13MoveInsideOneClusterDeletesTheOldObjectLast(t *testing.T) {
	moving := func(mut func(in *Input)) func() Input {
		return func() Input {
			in := steady()
			from, to := dC, dC2
			in.Operation = &Operation{Type: OpMove, Member: "main-2", MemberID: 3, Incarnation: 4, FromIncarnation: 3, From: &from, To: &to, Reason: "Evacuate", Step: ActCreateObjects, StartedAt: t0}
			in.LastIncarnation = 4
			m := running("main-2", 0, dC2, 4)
			// The hub's current object is still the old incarnation's.
			m.Object = &Object{Incarnation: 3, StatusIncarnation: 3, Bootstrap: "existing", PeerURL: url("main-2"), Healthy: true}
			in.Members[2] = m
			mut(&in)
			return in
		}
	}
	created := func(in *Input) {
		in.Members[2].Object = &Object{Incarnation: 4, StatusIncarnation: 4, Bootstrap: "existing", PeerURL: surgeURL("main-2"), Healthy: true}
		in.Members[2].Superseded = true
	}
	promoted := func(in *Input) {
		created(in)
		in.Etcd.Members = append(in.Etcd.Members, ListEntry{ID: 40, Name: "main-2", PeerURLs: []string{surgeURL("main-2")}, Healthy: true})
		in.Members[2].ID = 40
	}
	removed := func(in *Input) {
		promoted(in)
		in.Etcd.Members = append(in.Etcd.Members[:2], in.Etcd.Members[3])
	}
	run(t, []struct {
		name   string
		input  func() Input
		checks []check
	}{
		{"only the old object there: the new incarnation's is created", moving(func(*Input) {}), []check{
			action(ActCreateObjects), opRecorded(OpMove, ActCreateObjects),
			func(t *testing.T, d Decision) {
				if d.Domain != dC2 {
					t.Errorf("domain = %v, want %v", d.Domain, dC2)
				}
			},
		}},
		{"promoted: the old ID is removed, not an object", moving(promoted), []check{action(ActRemoveMember), func(t *testing.T, d Decision) {
			if d.MemberID != 3 {
				t.Errorf("removing %d, want the old ID 3", d.MemberID)
			}
		}}},
		{"old ID removed, the old object still beside the new: it is deleted", moving(removed), []check{action(ActDeleteObject), opRecorded(OpMove, ActDeleteObject), func(t *testing.T, d Decision) {
			if d.From != dC {
				t.Errorf("from = %v, want the old domain %v", d.From, dC)
			}
		}}},
		{"old object gone, the new one stays: the move is done", moving(func(in *Input) {
			removed(in)
			in.Members[2].Superseded = false
		}), []check{action(ActFinish), reason("make-before-break"), func(t *testing.T, d Decision) {
			if d.MemberID != 40 || d.GaveUp {
				t.Errorf("finish = %+v, want the new ID 40", d)
			}
		}}},
		{"the cluster out of sight at the last step (the hub sees no object there): it waits at its step, nothing deleted blind", moving(func(in *Input) {
			removed(in)
			in.Operation.Step = ActDeleteObject
			in.Members[2].ClusterVisible, in.Members[2].Object, in.Members[2].Superseded = false, nil, false
		}), []check{action(ActWait), opRecorded(OpMove, ActDeleteObject)}},
	})
}

// TestMoveNeverDropsTolerance walks a Move of a live member through a
// small model of etcd (each decision applied as etcd and the spoke would)
// and samples, after every step, the voters etcd lists: never fewer
// healthy voters than the three it started with, and at most four.
func TestMoveNeverDropsTolerance(t *testing.T) {
	// To another member cluster, and to another zone of the same one.
	for _, c := range []struct {
		to     topology.Domain
		leader uint64
	}{{dD, 1}, {dD, 3}, {dC2, 1}, {dC2, 3}} {
		leader := c.leader
		in := steady()
		in.Etcd.LeaderID = leader
		in.Placement.Steps = []topology.Step{{Action: topology.Move, Member: "main-2", From: dC, To: c.to, Reason: topology.Evacuate}}
		var kinds []Action
		for i := 0; i < 30; i++ {
			d := Next(in)
			kinds = append(kinds, d.Action)
			applyModel(t, &in, d)
			voters := 0
			for _, m := range in.Etcd.Members {
				if !m.IsLearner && m.Healthy {
					voters++
				}
			}
			if voters < 3 || voters > 4 {
				t.Fatalf("leader %d: after %s, %d healthy voters (steps %v)", leader, d.Action, voters, kinds)
			}
			if d.Action == ActFinish {
				break
			}
		}
		if in.Operation != nil || len(in.Etcd.Members) != 3 || in.Members[2].Domain != c.to || in.Members[2].Superseded || in.Members[2].Object == nil || in.Members[2].Object.Incarnation != 4 {
			t.Fatalf("to %v, leader %d: not finished after %v: op %+v, members %+v, main-2 %+v", c.to, leader, kinds, in.Operation, in.Etcd.Members, in.Members[2])
		}
		t.Logf("to %v, leader %d: %v", c.to, leader, kinds)
	}
}

// applyModel carries a decision out on the model: the ledger, etcd's
// member list and the objects, as the reconciler, etcd and the spoke do.
func applyModel(t *testing.T, in *Input, d Decision) {
	t.Helper()
	if d.Operation != nil {
		op := *d.Operation
		in.Operation = &op
	}
	m := &in.Members[2]
	switch d.Action {
	case ActBegin:
		for _, a := range d.Assign {
			if a.Domain.Cluster == m.Domain.Cluster {
				// Inside the cluster: the old object is the hub's current
				// one there until the new one is written.
				m.Domain, m.Incarnation, m.ID = a.Domain, a.Incarnation, 0
			} else {
				m.Domain, m.Incarnation, m.ID, m.Object = a.Domain, a.Incarnation, 0, nil
				m.StaleIn = []string{dC.Cluster}
			}
			in.LastIncarnation = a.Incarnation
		}
		in.Placement.Steps = nil
	case ActCreateObjects:
		// Beside an old object in the same cluster (the hub writes the new
		// incarnation's under a name of its own).
		m.Superseded = m.Object != nil && m.Object.Incarnation < m.Incarnation
		m.Object = &Object{Incarnation: m.Incarnation, StatusIncarnation: m.Incarnation, PeerURL: surgeURL(m.Name)}
	case ActAddLearner:
		in.Etcd.Members = append(in.Etcd.Members, ListEntry{ID: 40, PeerURLs: []string{m.Object.PeerURL}, IsLearner: true})
		m.ID = 40
	case ActStartMember:
		m.Object.Bootstrap = "existing"
		for i := range in.Etcd.Members {
			if in.Etcd.Members[i].ID == 40 {
				in.Etcd.Members[i].Name, in.Etcd.Members[i].Healthy = m.Name, true
			}
		}
	case ActPromote:
		for i := range in.Etcd.Members {
			if in.Etcd.Members[i].ID == d.MemberID {
				in.Etcd.Members[i].IsLearner = false
			}
		}
	case ActMoveLeader:
		in.Etcd.LeaderID = d.TransfereeID
	case ActRemoveMember:
		if d.MemberID == in.Etcd.LeaderID {
			t.Fatalf("removing the leader %d", d.MemberID)
		}
		var keep []ListEntry
		for _, e := range in.Etcd.Members {
			if e.ID != d.MemberID {
				keep = append(keep, e)
			}
		}
		in.Etcd.Members = keep
	case ActDeleteObject:
		if d.From.Cluster == m.Domain.Cluster {
			m.Superseded = false
		} else {
			m.StaleIn = nil
		}
	case ActFinish:
		in.Operation = nil
		m.ID = d.MemberID
	case ActWait:
	default:
		t.Fatalf("unexpected action %s (%s)", d.Action, d.Reason)
	}
}
