package planner

import (
	"testing"
	"time"
)

// Issue 35: a member that answers but names no leader after a partition
// healed (its peer streams on half-open connections) is restarted in
// place, once, and replaced only when its grace, counted from when it
// was first seen answering so, runs out. Before, the hub replaced a
// member cut off with it as soon as it saw the ring again: its grace had
// counted from the cut.
func TestRejoiningMember(t *testing.T) {
	// main-2 went unready an hour ago (cut off with the hub), answers
	// without a leader since leaderless ago; main-0 leads.
	rejoining := func(leaderless time.Duration, mut func(in *Input)) func() Input {
		return func() Input {
			in := steady()
			in.Etcd.Members[2].Healthy = false
			in.Etcd.Members[2].LeaderlessSince = t0.Add(-leaderless)
			in.Members[2].Ready = false
			in.Members[2].ReadyChangedAt = t0.Add(-time.Hour)
			mut(&in)
			return in
		}
	}
	member := func(name string) check {
		return func(t *testing.T, d Decision) {
			t.Helper()
			if d.Member != name {
				t.Errorf("member = %q, want %q", d.Member, name)
			}
		}
	}
	requeue := func(want time.Duration) check {
		return func(t *testing.T, d Decision) {
			t.Helper()
			if d.RequeueAfter != want {
				t.Errorf("requeue after %s, want %s", d.RequeueAfter, want)
			}
		}
	}
	run(t, []struct {
		name   string
		input  func() Input
		checks []check
	}{
		{"just answered without a leader: nothing yet, back when a restart is due", rejoining(time.Second, func(*Input) {}), []check{action(ActNone), requeue(RejoinRestartAfter - time.Second)}},
		{"leaderless for a while: restarted in place, not replaced", rejoining(RejoinRestartAfter, func(*Input) {}), []check{action(ActRestartMember), member("main-2"), reason("named no leader"), reason("in place")}},
		{"asked to restart in this episode: left to come back", rejoining(10*time.Second, func(in *Input) {
			in.Members[2].Object.RestartRequestedAt = t0.Add(-5 * time.Second)
		}), []check{action(ActNone)}},
		{"asked in an earlier episode, too recently: not again", rejoining(10*time.Second, func(in *Input) {
			in.Members[2].Object.RestartRequestedAt = t0.Add(-time.Minute)
		}), []check{action(ActNone)}},
		{"asked long before: restarted again", rejoining(10*time.Second, func(in *Input) {
			in.Members[2].Object.RestartRequestedAt = t0.Add(-time.Hour)
		}), []check{action(ActRestartMember)}},
		{"its grace counts from when it answered so: not replaced within it", rejoining(time.Minute, func(in *Input) {
			in.Members[2].Object.RestartRequestedAt = t0.Add(-2 * time.Minute)
		}), []check{action(ActNone), requeue(4 * time.Minute)}},
		{"its grace counts from the restart asked after that: not replaced within it", rejoining(time.Minute, func(in *Input) {
			in.Members[2].Object.RestartRequestedAt = t0.Add(-50 * time.Second)
		}), []check{action(ActNone), requeue(4*time.Minute + 10*time.Second)}},
		{"restarted, out of sight while it starts: its grace counts from the restart, not from the cut", rejoining(10*time.Minute, func(in *Input) {
			in.Etcd.Members[2].LeaderlessSince = time.Time{}
			in.Members[2].Object.RestartRequestedAt = t0.Add(-10 * time.Second)
		}), []check{action(ActNone)}},
		{"still leaderless a grace after: replaced", rejoining(10*time.Minute, func(in *Input) {
			in.Members[2].Object.RestartRequestedAt = t0.Add(-9 * time.Minute)
		}), []check{action(ActBegin), opRecorded(OpReplace, ActCreateObjects), reason("answers but has named no leader since")}},
		{"the ring has no leader: nothing to rejoin", rejoining(time.Minute, func(in *Input) { in.Etcd.LeaderID = 0 }), []check{action(ActNone)}},
		{"its cluster out of sight: unknown", rejoining(time.Minute, func(in *Input) { in.Members[2].ClusterVisible = false }), []check{action(ActNone)}},
		{"automatic off: nothing", rejoining(time.Minute, func(in *Input) { in.Automatic = false }), []check{action(ActNone)}},
		{"not answering (dead, not cut off): replaced from when it went unready", rejoining(0, func(in *Input) {
			in.Etcd.Members[2].LeaderlessSince = time.Time{}
		}), []check{action(ActBegin), opRecorded(OpReplace, ActCreateObjects)}},
	})
}
