package planner

import (
	"testing"
	"time"
)

func fromBackup(in Input, at time.Time, verified bool) Input {
	in.Quorum.Request = &RecoveryRequest{FromBackup: "latest", RequestedAt: at, UID: "req-b"}
	in.Restore = Restore{Wanted: true, Verified: verified, Message: "Pending: resolving"}
	return in
}

// restoringFromBackup is lostQuorum() with a Recover from a backup in
// flight into main-0, assigned incarnation 4, at step.
func restoringFromBackup(step Action, mut func(in *Input)) func() Input {
	return func() Input {
		in := fromBackup(lostQuorum(), t0, true)
		in.Members[0].Incarnation, in.Members[0].ID, in.LastIncarnation = 4, 0, 4
		in.Operation = &Operation{Type: OpRecover, Member: "main-0", Incarnation: 4, To: &dA, Reason: ReasonFromBackup, Step: step, StartedAt: t0}
		mut(&in)
		return in
	}
}

// Recovery from a backup: only once a majority is declared gone (a
// survivor or not) and the snapshot is checked; one seed member restored
// as a new one-member cluster with a new incarnation, step by step; done
// when it answers alone.
func TestRecoveryFromBackup(t *testing.T) {
	newObject := func(in *Input) {
		o := in.Members[0].Object
		o.Incarnation, o.StatusIncarnation, o.Bootstrap = 4, 4, ""
	}
	started := func(in *Input) {
		newObject(in)
		in.Members[0].Object.Bootstrap = "new"
	}
	run(t, []struct {
		name   string
		input  func() Input
		checks []check
	}{
		{"snapshot not checked yet: wait, nothing recorded", func() Input { return fromBackup(lostQuorum(), t0, false) }, []check{
			action(ActWait), reason("waiting for the snapshot to be resolved and checked: Pending: resolving"),
			func(t *testing.T, d Decision) {
				if d.Operation != nil {
					t.Errorf("recorded %+v before the snapshot was checked", d.Operation)
				}
			},
		}},
		{"no survivor at all: still recovered from the backup", func() Input {
			in := fromBackup(lostQuorum(), t0, true)
			in.Members[0].Object.Etcd = nil // main-0's etcd does not answer either
			return in
		}, []check{action(ActBegin), opRecorded(OpRecover, ActBegin), memberNamed("main-0")}},
		{"checked: Recover recorded, main-0 the seed with a new incarnation", func() Input { return fromBackup(lostQuorum(), t0, true) }, []check{
			action(ActBegin), opRecorded(OpRecover, ActBegin), memberNamed("main-0"), reason("restarts as incarnation 4 restored from the snapshot"),
			func(t *testing.T, d Decision) {
				if d.Operation.Reason != ReasonFromBackup || len(d.Assign) != 1 || d.Assign[0].Incarnation != 4 || d.Assign[0].Domain != dA {
					t.Errorf("operation %+v, assignments %+v", d.Operation, d.Assign)
				}
			},
		}},
		{"a lost voter not fenced: refused, naming it", func() Input {
			in := fromBackup(lostQuorum(), t0, true)
			in.Members[2].Fenced = "" // out of sight, not known gone
			return in
		}, []check{action(ActWait), reason("a lost voter may still serve"), reason("--confirm-fenced main-2")}},
		{"within the grace: wait", func() Input {
			in := fromBackup(lostQuorum(), t0, true)
			in.Quorum.LostSince = t0.Add(-time.Minute)
			return in
		}, []check{action(ActWait), reason("declared after 5m0s")}},
		{"a request from before the loss is not taken", func() Input { return fromBackup(lostQuorum(), t0.Add(-time.Hour), true) }, []check{
			action(ActWait), reason("recover with `etcdfed recover`"),
		}},
		{"the seed's new object first", restoringFromBackup(ActBegin, func(*Input) {}), []check{
			action(ActCreateObjects), opRecorded(OpRecover, ActCreateObjects),
			func(t *testing.T, d Decision) {
				if len(d.Members) != 1 || d.Members[0] != "main-0" {
					t.Errorf("members %v", d.Members)
				}
			},
		}},
		{"then its exposure", restoringFromBackup(ActCreateObjects, func(in *Input) { newObject(in); in.Members[0].Object.PeerURL = "" }), []check{
			action(ActWait), reason("expose main-0's incarnation 4"),
		}},
		{"then the seed alone as a new cluster, restored", restoringFromBackup(ActCreateObjects, newObject), []check{
			action(ActStartBootstrap), opRecorded(OpRecover, ActStartBootstrap),
			func(t *testing.T, d Decision) {
				if len(d.Members) != 1 || d.Members[0] != "main-0" {
					t.Errorf("initial cluster of %v, want main-0 alone", d.Members)
				}
			},
		}},
		{"a failing restore is named", restoringFromBackup(ActStartBootstrap, func(in *Input) {
			started(in)
			in.Members[0].Object.Failing = "container restore of pod main-0: CrashLoopBackOff"
		}), []check{action(ActWait), reason("main-0 cannot start: container restore of pod main-0: CrashLoopBackOff")}},
		{"the old cluster still answering is not the restored one", restoringFromBackup(ActStartBootstrap, func(in *Input) {
			started(in)
			in.Etcd = Etcd{Reachable: true, Members: []ListEntry{voter("main-0", 1), voter("main-1", 2), voter("main-2", 3)}}
		}), []check{action(ActWait), reason("waiting for main-0 to come up restored")}},
		{"done once it answers alone", restoringFromBackup(ActStartBootstrap, func(in *Input) {
			started(in)
			in.Etcd = Etcd{Reachable: true, LeaderID: 77, Members: []ListEntry{voter("main-0", 77)}}
		}), []check{action(ActFinish), memberNamed("main-0"), func(t *testing.T, d Decision) {
			if d.MemberID != 77 {
				t.Errorf("member ID %x, want the restored member's 77", d.MemberID)
			}
		}}},
	})
}
