package planner

import (
	"strings"
	"testing"
	"time"

	"github.com/etcdfed/etcdfed/pkg/topology"
)

var (
	t0 = time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)
	dA = topology.Domain{Cluster: "a", Zone: "za"}
	dB = topology.Domain{Cluster: "b", Zone: "zb"}
	dC = topology.Domain{Cluster: "c", Zone: "zc"}
)

func url(name string) string { return "https://" + name + ".etcd.example.com:2380" }

// running is a member with its object, started and recorded.
func running(name string, id uint64, d topology.Domain, inc int64) Member {
	return Member{
		Name: name, Domain: d, Incarnation: inc, ID: id, Ready: true, ReadyChangedAt: t0.Add(-time.Hour), ClusterVisible: true,
		Object: &Object{Incarnation: inc, StatusIncarnation: inc, Bootstrap: "existing", PeerURL: url(name), Healthy: true},
	}
}

func voter(name string, id uint64) ListEntry {
	return ListEntry{ID: id, Name: name, PeerURLs: []string{url(name)}, Healthy: true}
}

// steady is a bootstrapped, healthy three-member cluster led by main-0.
func steady() Input {
	return Input{
		Now: t0, Replicas: 3, Automatic: true, MemberGrace: 5 * time.Minute, Bootstrapped: true, LastIncarnation: 3,
		Etcd:    Etcd{Reachable: true, LeaderID: 1, Members: []ListEntry{voter("main-0", 1), voter("main-1", 2), voter("main-2", 3)}},
		Members: []Member{running("main-0", 1, dA, 1), running("main-1", 2, dB, 2), running("main-2", 3, dC, 3)},
	}
}

type check func(t *testing.T, d Decision)

func action(a Action) check {
	return func(t *testing.T, d Decision) {
		t.Helper()
		if d.Action != a {
			t.Errorf("action = %s (%s), want %s", d.Action, d.Reason, a)
		}
	}
}

func reason(sub string) check {
	return func(t *testing.T, d Decision) {
		t.Helper()
		if !strings.Contains(d.Reason, sub) {
			t.Errorf("reason %q does not contain %q", d.Reason, sub)
		}
	}
}

func opRecorded(typ OpType, step Action) check {
	return func(t *testing.T, d Decision) {
		t.Helper()
		if d.Operation == nil || d.Operation.Type != typ || d.Operation.Step != step {
			t.Errorf("operation = %+v, want %s at step %s", d.Operation, typ, step)
		}
	}
}

func run(t *testing.T, cases []struct {
	name   string
	input  func() Input
	checks []check
}) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			d := Next(tc.input())
			for _, c := range tc.checks {
				c(t, d)
			}
		})
	}
}

// Rule 2: bootstrap is static, all founding members at once, "new" only then.
func TestRule2Bootstrap(t *testing.T) {
	fresh := func() Input {
		in := Input{Now: t0, Replicas: 3, Automatic: true, LastIncarnation: 7}
		in.Placement.Target = []topology.Member{{Name: "main-0", Domain: dA}, {Name: "main-1", Domain: dB}, {Name: "main-2", Domain: dC}}
		return in
	}
	inBootstrap := func(mut func(ms []Member)) func() Input {
		return func() Input {
			in := fresh()
			in.Operation = &Operation{Type: OpBootstrap, Step: ActCreateObjects, StartedAt: t0}
			in.Members = []Member{running("main-0", 0, dA, 8), running("main-1", 0, dB, 9), running("main-2", 0, dC, 10)}
			for i := range in.Members {
				in.Members[i].Object.Bootstrap = ""
			}
			mut(in.Members)
			return in
		}
	}
	run(t, []struct {
		name   string
		input  func() Input
		checks []check
	}{
		{"fresh cluster records the whole founding placement first", fresh, []check{
			action(ActBegin), opRecorded(OpBootstrap, ActCreateObjects),
			func(t *testing.T, d Decision) {
				if len(d.Assign) != 3 || d.Assign[0].Incarnation != 8 || d.Assign[2].Incarnation != 10 || d.Assign[1].Domain != dB {
					t.Errorf("assignments = %+v", d.Assign)
				}
			},
		}},
		{"a member cluster not seen yet: wait, never found on a partial view", func() Input {
			in := fresh()
			in.Unseen = []string{"c2: spoke has not reported"}
			return in
		}, []check{action(ActWait), reason("c2: spoke has not reported")}},
		{"fewer placeable members than replicas waits", func() Input {
			in := fresh()
			in.Placement.Target = in.Placement.Target[:2]
			return in
		}, []check{action(ActWait), reason("only 2 of 3 founding members")}},
		{"missing objects are created together", inBootstrap(func(ms []Member) { ms[1].Object = nil; ms[2].Object = nil }), []check{
			action(ActCreateObjects), opRecorded(OpBootstrap, ActCreateObjects),
			func(t *testing.T, d Decision) {
				if strings.Join(d.Members, ",") != "main-1,main-2" {
					t.Errorf("members = %v", d.Members)
				}
			},
		}},
		{"a founding member's cluster out of sight mid-bootstrap: wait, no object re-created", inBootstrap(func(ms []Member) {
			for i := range ms {
				ms[i].Object.Bootstrap = "new"
			}
			ms[1].ClusterVisible, ms[1].Object = false, nil
		}), []check{action(ActWait), reason("main-1 (b) to come back into sight")}},
		{"no peer URL yet waits for the spoke", inBootstrap(func(ms []Member) { ms[0].Object.PeerURL = "" }), []check{action(ActWait), reason("main-0 (a)")}},
		{"all exposed: start every founding member at once", inBootstrap(func([]Member) {}), []check{
			action(ActStartBootstrap),
			func(t *testing.T, d Decision) {
				if len(d.Members) != 3 {
					t.Errorf("members = %v, want all three", d.Members)
				}
			},
		}},
		{"started but etcd not formed waits", inBootstrap(func(ms []Member) {
			for i := range ms {
				ms[i].Object.Bootstrap = "new"
			}
		}), []check{action(ActWait), reason("waiting for etcd to form")}},
		{"a majority started finishes bootstrap", func() Input {
			in := inBootstrap(func(ms []Member) {
				for i := range ms {
					ms[i].Object.Bootstrap = "new"
				}
			})()
			in.Etcd = Etcd{Reachable: true, Members: []ListEntry{voter("main-0", 1), voter("main-1", 2), {ID: 3, PeerURLs: []string{url("main-2")}}}}
			return in
		}, []check{action(ActFinishBootstrap), reason("2 of 3")}},
		{"status lost, members' objects there, etcd not answering: wait, never found again", func() Input {
			in := fresh()
			in.Members = []Member{running("main-0", 1, dA, 1), running("main-1", 2, dB, 2), running("main-2", 3, dC, 3)}
			in.Etcd = Etcd{Error: "no client certificate yet"}
			return in
		}, []check{action(ActWait), reason("never founding a second cluster"), reason("main-0, main-1, main-2")}},
		{"status lost, etcd formed: adopt, never found a second cluster", func() Input {
			in := fresh()
			in.Etcd = Etcd{Reachable: true, Members: []ListEntry{voter("main-0", 1)}}
			return in
		}, []check{action(ActFinishBootstrap), reason("adopting")}},
	})
}

// Rules 3 and 4: add as learner, start with existing, promote; resumable.
func TestRule4AddLearnerThenPromote(t *testing.T) {
	adding := func(mut func(in *Input, m *Member)) func() Input {
		return func() Input {
			in := steady()
			in.Replicas = 5
			to := dA
			in.Operation = &Operation{Type: OpAdd, Member: "main-3", Incarnation: 4, To: &to, Reason: "ScaleUp", Step: ActCreateObjects, StartedAt: t0}
			in.LastIncarnation = 4
			m := running("main-3", 0, dA, 4)
			m.Object.Bootstrap = ""
			mut(&in, &m)
			in.Members = append(in.Members, m)
			return in
		}
	}
	learner := ListEntry{ID: 9, PeerURLs: []string{url("main-3")}, IsLearner: true}
	run(t, []struct {
		name   string
		input  func() Input
		checks []check
	}{
		{"placement asks for a member: record the add with the next incarnation", func() Input {
			in := steady()
			in.Replicas = 5
			in.Placement.Steps = []topology.Step{{Action: topology.Add, Reason: topology.ScaleUp, Member: "main-3", To: dA}}
			return in
		}, []check{action(ActBegin), opRecorded(OpAdd, ActCreateObjects), func(t *testing.T, d Decision) {
			if d.Operation.Incarnation != 4 || len(d.Assign) != 1 || d.Assign[0].Domain != dA {
				t.Errorf("op %+v assign %+v", d.Operation, d.Assign)
			}
		}}},
		{"no object yet: create it", adding(func(_ *Input, m *Member) { m.Object = nil }), []check{action(ActCreateObjects)}},
		{"cluster not visible: wait, do not write", adding(func(_ *Input, m *Member) { m.Object = nil; m.ClusterVisible = false }), []check{action(ActWait), reason("not visible")}},
		{"object without peer URL: wait for exposure", adding(func(_ *Input, m *Member) { m.Object.PeerURL = "" }), []check{action(ActWait), reason("expose")}},
		{"exposed: add as learner", adding(func(*Input, *Member) {}), []check{action(ActAddLearner), opRecorded(OpAdd, ActAddLearner)}},
		{"another learner present: one at a time", adding(func(in *Input, _ *Member) {
			in.Etcd.Members = append(in.Etcd.Members, ListEntry{ID: 77, PeerURLs: []string{"https://x:2380"}, IsLearner: true})
		}), []check{action(ActWait), reason("one learner at a time")}},
		{"learner exists although step says CreateObjects (hub restarted): start it", adding(func(in *Input, _ *Member) {
			in.Etcd.Members = append(in.Etcd.Members, learner)
		}), []check{action(ActStartMember), func(t *testing.T, d Decision) {
			if d.MemberID != 9 || d.Operation.NewMemberID != 9 {
				t.Errorf("learner ID not recorded: %+v", d)
			}
		}}},
		{"learner started with existing but not yet running: wait", adding(func(in *Input, m *Member) {
			in.Etcd.Members = append(in.Etcd.Members, learner)
			m.Object.Bootstrap = "existing"
		}), []check{action(ActWait), reason("waiting for learner main-3 to start")}},
		{"learner running but not answering yet: not promoted (a fourth voter down leaves three of four and no tolerance)", adding(func(in *Input, m *Member) {
			l := learner
			l.Name = "main-3"
			in.Etcd.Members = append(in.Etcd.Members, l)
			m.Object.Bootstrap = "existing"
		}), []check{action(ActWait), opRecorded(OpAdd, ActPromote), reason("waiting for learner main-3 to answer before it is promoted as a voter that counts")}},
		{"learner running and answering: promote", adding(func(in *Input, m *Member) {
			l := learner
			l.Name = "main-3"
			l.Healthy = true
			in.Etcd.Members = append(in.Etcd.Members, l)
			m.Object.Bootstrap = "existing"
		}), []check{action(ActPromote), func(t *testing.T, d Decision) {
			if d.RequeueAfter == 0 {
				t.Error("promotion must poll while etcd says the learner is not ready")
			}
		}}},
		{"voter: finish", adding(func(in *Input, m *Member) {
			in.Etcd.Members = append(in.Etcd.Members, voter("main-3", 9))
			m.Object.Bootstrap = "existing"
		}), []check{action(ActFinish)}},
		{"etcd unreachable mid-add: wait", adding(func(in *Input, _ *Member) { in.Etcd = Etcd{Error: "context deadline exceeded"} }), []check{action(ActWait), reason("deadline")}},
	})
}

// Rule 5: remove only with quorum kept, leader moved away first.
func TestRule5RemoveKeepsQuorum(t *testing.T) {
	removing := func(id uint64, mut func(in *Input)) func() Input {
		return func() Input {
			in := steady()
			from := in.Members[id-1].Domain
			in.Operation = &Operation{Type: OpRemove, Member: in.Members[id-1].Name, MemberID: id, From: &from, Reason: "ScaleDown", Step: ActRemoveMember}
			mut(&in)
			return in
		}
	}
	run(t, []struct {
		name   string
		input  func() Input
		checks []check
	}{
		{"the leader is moved away first", removing(1, func(*Input) {}), []check{action(ActMoveLeader), func(t *testing.T, d Decision) {
			if d.TransfereeID != 2 {
				t.Errorf("transferee = %d, want 2 (lowest healthy voter)", d.TransfereeID)
			}
		}}},
		{"an unhealthy voter is not a transferee", removing(1, func(in *Input) { in.Etcd.Members[1].Healthy = false }), []check{action(ActMoveLeader), func(t *testing.T, d Decision) {
			if d.TransfereeID != 3 {
				t.Errorf("transferee = %d, want 3", d.TransfereeID)
			}
		}}},
		{"the leader, MoveLeader for less than a minute: MoveLeader again", removing(1, func(in *Input) {
			in.Operation.Step, in.Operation.StepStartedAt = ActMoveLeader, t0.Add(-leaderHandOffLimit+time.Second)
		}), []check{action(ActMoveLeader)}},
		{"the leader, MoveLeader for a minute without it moving: removed as the leader", removing(1, func(in *Input) {
			in.Operation.Step, in.Operation.StepStartedAt = ActMoveLeader, t0.Add(-leaderHandOffLimit)
		}), []check{action(ActRemoveMember), opRecorded(OpRemove, ActRemoveMember), actsOn("main-0", 1),
			reason("leadership did not move away from main-0 [1] in 1m0s"), reason("removing it as the leader")}},
		{"the leader, a minute of MoveLeader but no healthy voter to take over: waits", removing(1, func(in *Input) {
			in.Operation.Step, in.Operation.StepStartedAt = ActMoveLeader, t0.Add(-time.Hour)
			in.Etcd.Members[1].Healthy, in.Etcd.Members[2].Healthy = false, false
		}), []check{action(ActWait), reason("no other healthy voter")}},
		{"the leader, a minute of MoveLeader, removing it would break quorum: waits", func() Input {
			in := removing(1, func(in *Input) { in.Operation.Step, in.Operation.StepStartedAt = ActMoveLeader, t0.Add(-time.Hour) })()
			in.Etcd.Members = append(in.Etcd.Members, voter("main-3", 4), voter("main-4", 5))
			in.Etcd.Members[3].Healthy, in.Etcd.Members[4].Healthy = false, false
			return in
		}, []check{action(ActWait), reason("not removing main-0")}},
		{"a follower is removed", removing(3, func(*Input) {}), []check{action(ActRemoveMember), opRecorded(OpRemove, ActRemoveMember)}},
		{"removal that would break quorum waits", removing(3, func(in *Input) { in.Etcd.Members[1].Healthy = false }), []check{action(ActWait), reason("1 healthy of the 2 voters left, quorum is 2")}},
		{"removed from etcd: delete its object", removing(3, func(in *Input) { in.Etcd.Members = in.Etcd.Members[:2] }), []check{action(ActDeleteObject), func(t *testing.T, d Decision) {
			if d.From != dC {
				t.Errorf("from = %v", d.From)
			}
		}}},
		{"object gone: finish", removing(3, func(in *Input) { in.Etcd.Members = in.Etcd.Members[:2]; in.Members[2].Object = nil }), []check{action(ActFinish)}},
		{"object in an invisible cluster is left for the sweep: finish", removing(3, func(in *Input) {
			in.Etcd.Members = in.Etcd.Members[:2]
			in.Members[2].ClusterVisible = false
		}), []check{action(ActFinish)}},
	})
}

// Rule 6: replace removes the old ID and adds a new incarnation under the same name.
func TestRule6ReplaceSameName(t *testing.T) {
	replacing := func(mut func(in *Input)) func() Input {
		return func() Input {
			in := steady()
			from, to := dC, topology.Domain{Cluster: "d", Zone: "zc"}
			in.Operation = &Operation{Type: OpReplace, Member: "main-2", MemberID: 3, Incarnation: 4, From: &from, To: &to, Reason: "Evacuate", Step: ActRemoveMember}
			in.LastIncarnation = 4
			m := running("main-2", 0, to, 4)
			m.Object = nil
			m.StaleIn = []string{"c"}
			in.Members[2] = m
			mut(&in)
			return in
		}
	}
	run(t, []struct {
		name   string
		input  func() Input
		checks []check
	}{
		{"the old ID goes first", replacing(func(*Input) {}), []check{action(ActRemoveMember), func(t *testing.T, d Decision) {
			if d.MemberID != 3 {
				t.Errorf("removing %d, want old ID 3", d.MemberID)
			}
		}}},
		{"the old ID leading: move leadership first", replacing(func(in *Input) { in.Etcd.LeaderID = 3 }), []check{action(ActMoveLeader)}},
		{"old ID gone: delete the object left in the old cluster", replacing(func(in *Input) { in.Etcd.Members = in.Etcd.Members[:2] }), []check{action(ActDeleteObject), func(t *testing.T, d Decision) {
			if d.From.Cluster != "c" {
				t.Errorf("from = %v", d.From)
			}
		}}},
		{"old object gone: create the new incarnation in the target", replacing(func(in *Input) {
			in.Etcd.Members = in.Etcd.Members[:2]
			in.Members[2].StaleIn = nil
		}), []check{action(ActCreateObjects), func(t *testing.T, d Decision) {
			if d.Domain.Cluster != "d" {
				t.Errorf("domain = %v", d.Domain)
			}
		}}},
		{"old cluster invisible: do not wait for it, create the new incarnation", replacing(func(in *Input) {
			in.Etcd.Members = in.Etcd.Members[:2]
			in.Members[2].StaleIn = nil // not visible, so not listed
		}), []check{action(ActCreateObjects)}},
		{"the same peer URL in etcd after removal is the new learner", replacing(func(in *Input) {
			in.Etcd.Members = append(in.Etcd.Members[:2], ListEntry{ID: 42, PeerURLs: []string{url("main-2")}, IsLearner: true})
			in.Members[2].StaleIn = nil
			in.Members[2].Object = &Object{Incarnation: 4, StatusIncarnation: 4, PeerURL: url("main-2")}
		}), []check{action(ActStartMember), func(t *testing.T, d Decision) {
			if d.MemberID != 42 {
				t.Errorf("member ID = %d, want the new learner 42", d.MemberID)
			}
		}}},
	})
}

// Rule 8 and the failure policy: replace a failed member only when the
// hub sees its cluster, after the grace period, with quorum kept.
func TestRule8FailedMembersAndPartialViews(t *testing.T) {
	failing := func(since time.Duration, mut func(in *Input)) func() Input {
		return func() Input {
			in := steady()
			in.Etcd.Members[2].Healthy = false
			in.Members[2].Ready = false
			in.Members[2].ReadyChangedAt = t0.Add(-since)
			mut(&in)
			return in
		}
	}
	run(t, []struct {
		name   string
		input  func() Input
		checks []check
	}{
		{"within grace: nothing, but back when the grace runs out", failing(time.Minute, func(*Input) {}), []check{action(ActNone), func(t *testing.T, d Decision) {
			if d.RequeueAfter != 4*time.Minute {
				t.Errorf("requeue after %s, want 4m0s (the grace's end)", d.RequeueAfter)
			}
		}}},
		{"within grace, a shorter wait kept", failing(time.Minute, func(in *Input) {
			in.Placement.Steps = nil
			in.Placement.Unplaced = 1
		}), []check{func(t *testing.T, d Decision) {
			if d.RequeueAfter <= 0 || d.RequeueAfter > 4*time.Minute {
				t.Errorf("requeue after %s, want at most the grace's end", d.RequeueAfter)
			}
		}}},
		{"beyond grace: replace in its own domain with a new incarnation", failing(10*time.Minute, func(*Input) {}), []check{
			action(ActBegin), opRecorded(OpReplace, ActCreateObjects), reason("unhealthy since"), reason("[3] gives no healthy status, the spoke in "),
			func(t *testing.T, d Decision) {
				if d.Operation.MemberID != 3 || d.Operation.Incarnation != 4 || *d.Operation.To != dC {
					t.Errorf("op = %+v", d.Operation)
				}
			},
		}},
		{"cluster not visible: unknown, not dead", failing(time.Hour, func(in *Input) { in.Members[2].ClusterVisible = false }), []check{action(ActNone)}},
		{"no node of its zone takes pods: not replaced in place, the placement moves it", failing(time.Hour, func(in *Input) { in.Members[2].DomainClosed = true }), []check{action(ActNone)}},
		{"no node of its zone takes pods, the placement moves it", failing(time.Hour, func(in *Input) {
			in.Members[2].DomainClosed = true
			in.Placement.Steps = []topology.Step{{Action: topology.Move, Member: "main-2", From: dC, To: dA, Reason: topology.Evacuate}}
		}), []check{action(ActBegin), opRecorded(OpReplace, ActCreateObjects), func(t *testing.T, d Decision) {
			if *d.Operation.From != dC || *d.Operation.To != dA || d.Operation.Reason != string(topology.Evacuate) {
				t.Errorf("op = %+v, want main-2 moved from %v to %v (Evacuate)", d.Operation, dC, dA)
			}
		}}},
		{"automatic off: nothing moves", failing(time.Hour, func(in *Input) { in.Automatic = false }), []check{action(ActNone)}},
		// Issue 37: replaced in place, a member its cluster keeps Pending
		// would pend again there; the placement moves it out instead.
		{"its cluster keeps its pod Pending on a spec another member runs: not replaced in place", failing(time.Hour, func(in *Input) {
			in.Members[0].Object.Settled = true
			in.Members[2].Object.Pending = "pod main-2 is not scheduled"
		}), []check{action(ActNone)}},
		{"Pending, but no member runs the spec: replaced in place as before", failing(time.Hour, func(in *Input) {
			in.Members[2].Object.Pending = "pod main-2 is not scheduled"
		}), []check{action(ActBegin), opRecorded(OpReplace, ActCreateObjects)}},
		{"replacing would break quorum: wait", failing(time.Hour, func(in *Input) { in.Etcd.Members[1].Healthy = false }), []check{action(ActWait), reason("not replacing it")}},
		{"lost volume: replace at once", func() Input {
			in := steady()
			in.Members[1].Object.VolumeLost = true
			return in
		}, []check{action(ActBegin), reason("lost its data volume")}},
		{"etcd unreachable: no change at all", func() Input {
			in := steady()
			in.Etcd = Etcd{Error: "no quorum"}
			in.Placement.Steps = []topology.Step{{Action: topology.Add, Member: "main-3", To: dA}}
			return in
		}, []check{action(ActWait), reason("no quorum")}},
		{"a member etcdfed does not manage stops everything", func() Input {
			in := steady()
			in.Etcd.Members = append(in.Etcd.Members, ListEntry{ID: 0xbeef, Name: "intruder", PeerURLs: []string{"https://intruder:2380"}, Healthy: true})
			in.Placement.Steps = []topology.Step{{Action: topology.Remove, Member: "main-2", From: dC}}
			return in
		}, []check{action(ActWait), reason("intruder [beef]")}},
		{"a member not yet matched to its record, its cluster out of sight: wait for the cluster, no blame", func() Input {
			in := steady()
			in.Members[2].ID, in.Members[2].ClusterVisible, in.Members[2].Object = 0, false, nil
			return in
		}, []check{action(ActWait), reason("not matched yet to the records of main-2"), reason("member cluster(s) c to come back")}},
	})
}

// Rule 7: scale down through pkg/topology never picks the leader when an
// equal choice exists, and the planner then removes that member.
func TestRule7ScaleDownAvoidsLeader(t *testing.T) {
	for leader := uint64(1); leader <= 5; leader++ {
		in := steady()
		in.Replicas = 3
		in.Etcd.LeaderID = leader
		names := []string{"main-0", "main-1", "main-2", "main-3", "main-4"}
		doms := []topology.Domain{dA, dB, dC, dA, dB}
		in.Etcd.Members, in.Members = nil, nil
		var tm []topology.Member
		for i, n := range names {
			in.Etcd.Members = append(in.Etcd.Members, voter(n, uint64(i+1)))
			in.Members = append(in.Members, running(n, uint64(i+1), doms[i], int64(i+1)))
			tm = append(tm, topology.Member{Name: n, Domain: doms[i], Healthy: true})
		}
		res, err := topology.Plan(topology.Input{
			Replicas: 3, NamePrefix: "main-", Members: tm, Leader: names[leader-1],
			Domains: []topology.DomainInfo{{Domain: dA}, {Domain: dB}, {Domain: dC}},
		})
		if err != nil {
			t.Fatal(err)
		}
		in.Placement = res
		d := Next(in)
		if d.Action != ActBegin || d.Operation.Type != OpRemove {
			t.Fatalf("leader %d: %s %s, want Begin Remove", leader, d.Action, d.Reason)
		}
		if d.Operation.MemberID == leader {
			t.Errorf("leader %d: scale down picked the leader", leader)
		}
	}
}

func TestSteadyStateDoesNothing(t *testing.T) {
	if d := Next(steady()); d.Action != ActNone {
		t.Fatalf("steady cluster: %s (%s)", d.Action, d.Reason)
	}
}

// A replace once recorded the new learner's ID over the old one and then
// removed its own learner, in a loop (found in test/multicluster). The old
// and the new ID are kept apart: with the old ID gone and the new learner
// present, the next step starts the learner.
func TestReplaceNeverRemovesItsOwnLearner(t *testing.T) {
	in := steady()
	from, to := dC, dC
	in.LastIncarnation = 4
	in.Etcd.Members = append(in.Etcd.Members[:2], ListEntry{ID: 42, PeerURLs: []string{url("main-2")}, IsLearner: true})
	in.Members[2] = running("main-2", 0, dC, 4)
	in.Members[2].Object.Bootstrap = ""
	// As the reconciler records it after AddLearner: old ID 3, new ID 42.
	in.Operation = &Operation{Type: OpReplace, Member: "main-2", MemberID: 3, NewMemberID: 42, Incarnation: 4, From: &from, To: &to, Step: ActAddLearner}
	d := Next(in)
	if d.Action != ActStartMember || d.MemberID != 42 {
		t.Fatalf("got %s on %x (%s), want StartMember on the new learner 42", d.Action, d.MemberID, d.Reason)
	}
	if d.Operation.MemberID != 3 || d.Operation.NewMemberID != 42 {
		t.Fatalf("operation IDs old %x new %x, want 3 and 42 kept apart", d.Operation.MemberID, d.Operation.NewMemberID)
	}
	// The step after: the learner runs; it is promoted, never removed.
	in.Operation = d.Operation
	in.Members[2].Object.Bootstrap = "existing"
	in.Etcd.Members[2].Name = "main-2"
	if d := Next(in); d.Action != ActPromote || d.MemberID != 42 {
		t.Fatalf("got %s on %x, want Promote 42", d.Action, d.MemberID)
	}
}

// An add whose new incarnation cannot start where it was placed (its
// domain declared failed, or a zone closed to new pods for the member
// grace) is given up: its learner removed first, then the operation ended
// with GaveUp, so that the placement places the member again. A voter
// already, or a closed zone within the grace, or an open zone: not given up.
func TestGiveUpAStartThatCannotHappen(t *testing.T) {
	adding := func(mut func(in *Input, m *Member)) func() Input {
		return func() Input {
			in := steady()
			in.Replicas = 5
			to := dA
			in.Operation = &Operation{Type: OpAdd, Member: "main-3", Incarnation: 4, To: &to, Reason: "ScaleUp", Step: ActPromote, StartedAt: t0, NewMemberID: 9}
			in.LastIncarnation = 4
			m := running("main-3", 9, dA, 4)
			m.Ready = false
			mut(&in, &m)
			in.Members = append(in.Members, m)
			return in
		}
	}
	notStarted := ListEntry{ID: 9, PeerURLs: []string{url("main-3")}, IsLearner: true}
	withLearner := func(in *Input) { in.Etcd.Members = append(in.Etcd.Members, notStarted) }
	gaveUp := func(want bool) check {
		return func(t *testing.T, d Decision) {
			t.Helper()
			if d.GaveUp != want {
				t.Errorf("GaveUp = %v, want %v (%s %s)", d.GaveUp, want, d.Action, d.Reason)
			}
		}
	}
	run(t, []struct {
		name   string
		input  func() Input
		checks []check
	}{
		{"domain failed, learner not started: remove the learner", adding(func(in *Input, m *Member) {
			withLearner(in)
			m.DomainFailed, m.Object = true, nil
		}), []check{action(ActRemoveMember), opRecorded(OpAdd, ActRemoveMember), reason("removing learner"), reason("declared failed"), func(t *testing.T, d Decision) {
			if d.MemberID != 9 {
				t.Errorf("removes %x, want the learner 9", d.MemberID)
			}
		}}},
		{"domain failed, learner removed: the add ends, given up", adding(func(_ *Input, m *Member) {
			m.DomainFailed, m.Object = true, nil
		}), []check{action(ActFinish), gaveUp(true), reason("never started in"), reason("placed again")}},
		{"domain failed before the learner was added (no ID yet): given up", adding(func(in *Input, m *Member) {
			in.Operation.NewMemberID, in.Operation.Step = 0, ActAddLearner
			m.DomainFailed = true
		}), []check{action(ActFinish), gaveUp(true)}},
		{"learner found by its peer URL when the ID is not recorded: removed", adding(func(in *Input, m *Member) {
			in.Operation.NewMemberID = 0
			withLearner(in)
			m.DomainFailed = true
		}), []check{action(ActRemoveMember), func(t *testing.T, d Decision) {
			if d.MemberID != 9 {
				t.Errorf("removes %x, want the learner 9", d.MemberID)
			}
		}}},
		{"domain failed but the member is a voter already: finishes as usual", adding(func(in *Input, m *Member) {
			in.Etcd.Members = append(in.Etcd.Members, voter("main-3", 9))
			m.DomainFailed = true
		}), []check{action(ActFinish), gaveUp(false), reason("joined as a voter")}},
		{"zone closed within the member grace: wait for the start", adding(func(in *Input, m *Member) {
			withLearner(in)
			in.Now = t0.Add(4 * time.Minute)
			m.DomainClosed = true
		}), []check{action(ActWait), reason("waiting for learner main-3 to start")}},
		{"zone closed for the member grace since the add began: remove the learner", adding(func(in *Input, m *Member) {
			withLearner(in)
			in.Now = t0.Add(5 * time.Minute)
			m.DomainClosed = true
		}), []check{action(ActRemoveMember), reason("no node of a/za has taken new pods for 5m0s")}},
		{"open zone, learner not started for long: wait (only a failed or closed domain is given up)", adding(func(in *Input, _ *Member) {
			withLearner(in)
			in.Now = t0.Add(time.Hour)
		}), []check{action(ActWait), gaveUp(false), reason("waiting for learner main-3 to start")}},
		{"the new incarnation runs as the removed old ID (a stale peer's member list): the learner is removed", adding(func(in *Input, m *Member) {
			withLearner(in)
			m.Object.Etcd = &EtcdView{ID: 0xbae, Answers: true}
		}), []check{action(ActRemoveMember), opRecorded(OpAdd, ActRemoveMember), reason("its etcd runs as [bae], not as the learner [9]"), func(t *testing.T, d Decision) {
			if d.MemberID != 9 {
				t.Errorf("removes %x, want the learner 9", d.MemberID)
			}
		}}},
		// Issue 37: a member cluster that keeps a new incarnation Pending
		// held every membership change of the ring: only a failed or
		// closed domain was given up.
		{"pending for the member grace while another member runs the spec: the learner is removed", adding(func(in *Input, m *Member) {
			withLearner(in)
			in.Now = t0.Add(5 * time.Minute)
			in.Members[0].Object.Settled = true
			m.Object.Pending = "pod main-3 is not scheduled"
		}), []check{action(ActRemoveMember), reason("main-0 runs the same spec"), reason("pod main-3 is not scheduled")}},
		{"pending for the member grace while another member runs the spec, learner removed: given up", adding(func(in *Input, m *Member) {
			in.Now = t0.Add(5 * time.Minute)
			in.Members[0].Object.Settled = true
			m.Object.Pending = "pod main-3 is not scheduled"
		}), []check{action(ActFinish), gaveUp(true), reason("placed again")}},
		{"pending within the member grace: wait", adding(func(in *Input, m *Member) {
			withLearner(in)
			in.Now = t0.Add(4 * time.Minute)
			in.Members[0].Object.Settled = true
			m.Object.Pending = "pod main-3 is not scheduled"
		}), []check{action(ActWait), gaveUp(false)}},
		{"pending for long, no member runs the spec (the spec is at fault): wait", adding(func(in *Input, m *Member) {
			withLearner(in)
			in.Now = t0.Add(time.Hour)
			m.Object.Pending = "pod main-3 is not scheduled"
		}), []check{action(ActWait), gaveUp(false)}},
		{"the new incarnation runs as another ID, its learner removed: the add ends, given up, to be placed again", adding(func(_ *Input, m *Member) {
			m.Object.Etcd = &EtcdView{ID: 0xbae, Answers: true}
		}), []check{action(ActFinish), gaveUp(true), reason("runs as [bae]")}},
		{"the new incarnation runs as its learner: no give-up", adding(func(in *Input, m *Member) {
			withLearner(in)
			m.Object.Etcd = &EtcdView{ID: 9, Answers: true}
		}), []check{action(ActWait), gaveUp(false), reason("waiting for learner main-3 to start")}},
		{"another ID read from the log of an etcd that does not answer: the learner is removed", adding(func(in *Input, m *Member) {
			withLearner(in)
			m.Object.Etcd = &EtcdView{ID: 0xbae}
		}), []check{action(ActRemoveMember), reason("runs as [bae]")}},
		{"no ID known for the new incarnation: no give-up", adding(func(in *Input, m *Member) {
			withLearner(in)
			m.Object.Etcd = &EtcdView{}
		}), []check{action(ActWait), gaveUp(false)}},
		{"another ID reported for an older incarnation: no give-up", adding(func(in *Input, m *Member) {
			withLearner(in)
			m.Object.StatusIncarnation = 3
			m.Object.Etcd = &EtcdView{ID: 0xbae, Answers: true}
		}), []check{gaveUp(false), func(t *testing.T, d Decision) {
			if d.Action == ActRemoveMember {
				t.Errorf("removed the learner on an old incarnation's report: %s", d.Reason)
			}
		}}},
		{"replace whose target failed after the old incarnation was removed: given up", func() Input {
			in := adding(func(_ *Input, m *Member) { m.DomainFailed, m.Object = true, nil })()
			from := dB
			in.Operation.Type, in.Operation.Reason, in.Operation.MemberID, in.Operation.From = OpReplace, "Evacuate", 5, &from
			return in
		}, []check{action(ActFinish), gaveUp(true)}},
	})
}
