package planner

import (
	"testing"

	"github.com/etcdfed/etcdfed/pkg/topology"
)

// The originals of an adopted cluster: orig-0..2, IDs 0x100..0x102, led
// by orig-1 unless a case says otherwise.
func originals() []ListEntry {
	return []ListEntry{voter("orig-0", 0x100), voter("orig-1", 0x101), voter("orig-2", 0x102)}
}

// adopting is a cluster adopted with three originals and joined by
// etcdfed's three members, all voters; retire set.
// etcdfed's members have higher IDs than the originals, so that picking
// the lowest healthy voter would pick an original.
func adopting() Input {
	in := steady()
	in.Etcd.LeaderID = 0x101
	in.Members = []Member{running("main-0", 0x201, dA, 1), running("main-1", 0x202, dB, 2), running("main-2", 0x203, dC, 3)}
	in.Etcd.Members = append(originals(), voter("main-0", 0x201), voter("main-1", 0x202), voter("main-2", 0x203))
	in.Adopt = Adopt{Wanted: true, Endpoints: []string{"https://10.0.0.1:2379"}, Originals: []uint64{0x100, 0x101, 0x102}, Retire: true}
	return in
}

func removing(id uint64) check {
	return func(t *testing.T, d Decision) {
		t.Helper()
		if d.MemberID != id {
			t.Errorf("member ID = %x (%s), want %x", d.MemberID, d.Reason, id)
		}
	}
}

func TestAdoption(t *testing.T) {
	run(t, []struct {
		name   string
		input  func() Input
		checks []check
	}{
		{"never founds a cluster: waits while the existing one does not answer", func() Input {
			in := Input{Now: t0, Replicas: 3, Adopt: Adopt{Wanted: true, Endpoints: []string{"https://10.0.0.1:2379"}}}
			in.Placement.Target = []topology.Member{{Name: "main-0", Domain: dA}, {Name: "main-1", Domain: dB}, {Name: "main-2", Domain: dC}}
			in.Etcd.Error = "context deadline exceeded"
			return in
		}, []check{action(ActWait), reason("does not answer at https://10.0.0.1:2379"), reason("nothing is founded")}},
		{"records the running cluster as found, with no Bootstrap", func() Input {
			in := Input{Now: t0, Replicas: 3, Adopt: Adopt{Wanted: true}}
			in.Placement.Target = []topology.Member{{Name: "main-0", Domain: dA}}
			in.Etcd = Etcd{Reachable: true, ClusterID: 0xabc, LeaderID: 0x101, Members: originals()}
			return in
		}, []check{action(ActFinishBootstrap), reason("adopting the running etcd cluster abc with 3 original member(s)")}},
		{"originals are not foreign: the placement adds etcdfed's first member", func() Input {
			in := Input{Now: t0, Replicas: 3, Automatic: true, Bootstrapped: true, Adopt: Adopt{Wanted: true, Originals: []uint64{0x100, 0x101, 0x102}}}
			in.Etcd = Etcd{Reachable: true, LeaderID: 0x101, Members: originals()}
			in.Placement.Steps = []topology.Step{{Action: topology.Add, Member: "main-0", To: dA}}
			return in
		}, []check{action(ActBegin), opRecorded(OpAdd, ActCreateObjects)}},
		{"a member neither original nor etcdfed's is still foreign", func() Input {
			in := adopting()
			in.Etcd.Members = append(in.Etcd.Members, voter("stranger", 0x999))
			return in
		}, []check{action(ActWait), reason("etcd has members etcdfed does not manage: stranger")}},
		{"retire not asked: nothing to do, and it says how to ask", func() Input {
			in := adopting()
			in.Adopt.Retire = false
			return in
		}, []check{action(ActNone), reason("set spec.adopt.retire")}},
		{"retires a follower first, never the leader first", adopting, []check{
			action(ActBegin), opRecorded(OpRetire, ActRemoveMember), removing(0x100), reason("retiring original member orig-0"),
		}},
		{"the leader is retired last", func() Input {
			in := adopting()
			in.Etcd.Members = append([]ListEntry{voter("orig-1", 0x101)}, in.Etcd.Members[3:]...)
			return in
		}, []check{action(ActBegin), removing(0x101)}},
		{"not while etcdfed's members are fewer than replicas", func() Input {
			in := adopting()
			in.Members = in.Members[:2]
			in.Etcd.Members = in.Etcd.Members[:5]
			return in
		}, []check{func(t *testing.T, d Decision) {
			if d.Action == ActBegin && d.Operation != nil && d.Operation.Type == OpRetire {
				t.Errorf("began %s with two of three etcdfed members", d.Reason)
			}
		}}},
		{"not while one of etcdfed's members is a learner", func() Input {
			in := adopting()
			in.Etcd.Members[5].IsLearner = true
			return in
		}, []check{func(t *testing.T, d Decision) {
			if d.Operation != nil && d.Operation.Type == OpRetire {
				t.Errorf("began %s beside a learner", d.Reason)
			}
		}}},
		{"not while one of etcdfed's members is unhealthy", func() Input {
			in := adopting()
			in.Etcd.Members[4].Healthy = false
			in.Members[1].Ready = false
			in.Members[1].ReadyChangedAt = t0
			return in
		}, []check{action(ActWait), reason("not retiring original members yet: main-1 is not a ready, healthy voter")}},
		{"not on a partial view: a member cluster out of sight", func() Input {
			in := adopting()
			in.Unseen = []string{"c: not visible"}
			return in
		}, []check{action(ActWait), reason("not every eligible member cluster is seen")}},
		{"not when the removal would cost the quorum", func() Input {
			in := adopting()
			for i := range 3 {
				in.Etcd.Members[i].Healthy = false
			}
			in.Etcd.Members[3].Healthy = false
			in.Members[0].Ready = false
			in.Members[0].ReadyChangedAt = t0
			return in
		}, []check{action(ActWait)}},
		{"a learner joining the adopted cluster is promoted only once it answers", func() Input {
			in := adopting()
			in.Adopt.Retire = false
			m := running("main-3", 0, dA, 4)
			in.Members = append(in.Members, m)
			learner := voter("main-3", 0x204)
			learner.IsLearner, learner.Healthy = true, false
			in.Etcd.Members = append(in.Etcd.Members, learner)
			in.Operation = &Operation{Type: OpAdd, Member: "main-3", Incarnation: 4, Step: ActPromote, StartedAt: t0}
			return in
		}, []check{action(ActWait), opRecorded(OpAdd, ActPromote), reason("waiting for learner main-3 to answer")}},
		{"all retired: no Retire, membership as placed", func() Input {
			in := adopting()
			in.Etcd.Members = in.Etcd.Members[3:]
			in.Etcd.LeaderID = 0x201
			return in
		}, []check{action(ActNone), reason("membership matches the placement")}},
	})
}

func TestContinueRetire(t *testing.T) {
	inRetire := func(id uint64, mut func(*Input)) func() Input {
		return func() Input {
			in := adopting()
			in.Operation = &Operation{Type: OpRetire, Member: "orig", MemberID: id, Reason: ReasonAdoption, Step: ActRemoveMember, StartedAt: t0}
			if mut != nil {
				mut(&in)
			}
			return in
		}
	}
	run(t, []struct {
		name   string
		input  func() Input
		checks []check
	}{
		{"removes a follower", inRetire(0x100, nil), []check{action(ActRemoveMember), removing(0x100)}},
		{"the leader hands over to an etcdfed voter, never to an original", inRetire(0x101, nil), []check{
			action(ActMoveLeader), func(t *testing.T, d Decision) {
				if d.TransfereeID != 0x201 {
					t.Errorf("transferee %x, want etcdfed's main-0 [201], never an original", d.TransfereeID)
				}
			},
		}},
		{"the transferee skips an unhealthy etcdfed voter", inRetire(0x101, func(in *Input) {
			// main-0 answers no status call but its spoke still reports it
			// ready: not a transferee; the gate waits instead.
			in.Etcd.Members[3].Healthy = false
		}), []check{action(ActWait), reason("main-0 is not a ready, healthy voter")}},
		{"gone from etcd: finished (a hub killed after the removal resumes here)", inRetire(0x100, func(in *Input) {
			in.Etcd.Members = in.Etcd.Members[1:]
		}), []check{action(ActFinish), reason("retired")}},
		{"etcd silent: waits, keeps the step", inRetire(0x100, func(in *Input) {
			in.Etcd = Etcd{Error: "timeout"}
		}), []check{action(ActWait), opRecorded(OpRetire, ActRemoveMember)}},
		{"an etcdfed member failed since it began: waits", inRetire(0x100, func(in *Input) {
			in.Etcd.Members[5].Healthy = false
		}), []check{action(ActWait), opRecorded(OpRetire, ActRemoveMember), reason("main-2 is not a ready, healthy voter")}},
	})
}

// found is the running cluster to adopt, as first reached, its originals
// reporting versions (one each, in order; "" for one that did not
// answer), spec.version want.
func found(want string, versions ...string) Input {
	in := Input{Now: t0, Replicas: 3, Version: want, Adopt: Adopt{Wanted: true, Endpoints: []string{"https://10.0.0.1:2379"}}}
	in.Placement.Target = []topology.Member{{Name: "main-0", Domain: dA}}
	in.Etcd = Etcd{Reachable: true, ClusterID: 0xabc, LeaderID: 0x101, Members: originals()}
	for i, v := range versions {
		in.Etcd.Members[i].Version = v
	}
	return in
}

// The originals' versions against spec.version, before anything is
// recorded: a version etcdfed's members cannot join holds the adoption
// (Halted, so Degraded says it too), naming each original with what it
// runs, etcd's rule, and the spec.version to set.
func TestAdoptionVersions(t *testing.T) {
	run(t, []struct {
		name   string
		input  func() Input
		checks []check
	}{
		{"the same patch", func() Input { return found("3.6.16", "3.6.16", "3.6.16", "3.6.16") }, []check{action(ActFinishBootstrap)}},
		{"another patch of the same minor", func() Input { return found("3.6.16", "3.6.8", "3.6.8", "3.6.8") }, []check{action(ActFinishBootstrap)}},
		{"the next minor from a patch etcd upgrades from", func() Input { return found("3.6.16", "3.5.35", "3.5.32", "3.5.35") }, []check{action(ActFinishBootstrap)}},
		{"one original did not answer: the others judge", func() Input { return found("3.6.16", "3.6.16", "", "3.6.16") }, []check{action(ActFinishBootstrap)}},
		{"none answered: waits to check", func() Input { return found("3.6.16") }, []check{
			action(ActWait), halt(false), reason("no original member reported its etcd version yet"),
		}},
		{"the next minor from too old a patch", func() Input { return found("3.6.16", "3.5.35", "3.5.20", "3.5.35") }, []check{
			action(ActWait), halt(true), reason("adopting held: etcdfed's members on spec.version 3.6.16 cannot join the running cluster: orig-1 [101] runs 3.5.20 (moving to 3.6 needs every member on 3.5.32 or later"),
			reason("set spec.version to 3.5.35 (the newest 3.5 etcdfed runs)"),
		}},
		{"two minors up", func() Input { return found("3.7.3", "3.5.35", "3.5.35", "3.5.35") }, []check{
			action(ActWait), halt(true), reason("orig-0 [100] runs 3.5.35, orig-1 [101] runs 3.5.35, orig-2 [102] runs 3.5.35 (etcd upgrades one minor version at a time)"),
			reason("set spec.version to 3.5.35"),
		}},
		{"spec.version a minor below the originals", func() Input { return found("3.6.16", "3.7.3", "3.7.3", "3.7.3") }, []check{
			action(ActWait), halt(true), reason("spec.version 3.6.16 is an older minor version than 3.7, and etcd refuses a member older than its cluster version"),
			reason("set spec.version to 3.7.3"),
		}},
		{"the cluster version says so when the originals' own do not", func() Input {
			in := found("3.5.35", "3.6.16")
			in.Etcd.ClusterVersion = "3.6.0"
			return in
		}, []check{action(ActWait), halt(true), reason("orig-0 [100] runs 3.6.16, etcd's cluster version is 3.6.0"), reason("set spec.version to 3.6.16")}},
		{"a mixed cluster mid upgrade: the newest minor that every original accepts", func() Input { return found("3.5.35", "3.5.35", "3.6.16", "3.6.16") }, []check{
			action(ActWait), halt(true), reason("orig-1 [101] runs 3.6.16, orig-2 [102] runs 3.6.16"), reason("set spec.version to 3.6.16"),
		}},
		{"originals on a 3.6 patch that cannot replay a promotion", func() Input { return found("3.6.16", "3.6.16", "3.6.2", "3.6.16") }, []check{
			action(ActWait), halt(true), reason("orig-1 [101] runs 3.6.2 (a member before 3.6.4 that replays a learner's promotion fails to start (etcd #20387)"),
			reason("upgrade the originals (outside etcdfed) to 3.6.4 or later (3.6.16 is the newest 3.6 etcdfed runs) first"),
		}},
		{"3.6.4 replays it", func() Input { return found("3.6.16", "3.6.4", "3.6.4", "3.6.4") }, []check{action(ActFinishBootstrap)}},
		{"originals on a minor etcdfed does not know", func() Input { return found("3.7.3", "3.8.1", "3.8.1", "3.8.1") }, []check{
			action(ActWait), halt(true), reason("orig-0 [100] runs 3.8.1"), reason("etcdfed runs etcd up to 3.7 and cannot join originals on 3.8.1: adopt them with a newer etcdfed"),
		}},
		{"originals too old for any version etcdfed runs", func() Input { return found("3.5.35", "3.3.27", "3.3.27", "3.3.27") }, []check{
			action(ActWait), halt(true), reason("orig-0 [100] runs 3.3.27"), reason("upgrade the originals (outside etcdfed) to 3.5.35 first"),
		}},
	})
}
