package planner

import (
	"testing"
	"time"
)

// versions sets every etcd member's running version (the leader's raft
// index 100, the others' too) and spec.version.
func versions(in Input, target string, running ...string) Input {
	in.Version = target
	for i := range in.Etcd.Members {
		in.Etcd.Members[i].Version = running[i]
		in.Etcd.Members[i].RaftIndex = 100
	}
	return in
}

func halt(want bool) check {
	return func(t *testing.T, d Decision) {
		t.Helper()
		if d.Halted != want {
			t.Errorf("halted = %v (%s), want %v", d.Halted, d.Reason, want)
		}
	}
}

// A version change is a rollout: followers first, the leader last, with a
// snapshot first when backups are configured, etcd's downgrade enabled
// first for a downgrade, a halt on a member that does not come up, and
// each member caught up with the leader before the next.
func TestVersionChange(t *testing.T) {
	upgrade := func() Input {
		in := versions(rolling("main-1", "main-0", "main-1", "main-2"), "3.6.16", "3.5.35", "3.5.35", "3.5.35")
		in.Etcd.ClusterVersion = "3.5.0"
		return in
	}
	downgrade := func() Input {
		in := versions(rolling("main-1", "main-0", "main-1", "main-2"), "3.5.35", "3.6.16", "3.6.16", "3.6.16")
		in.Etcd.ClusterVersion = "3.6.0"
		for i := range in.Etcd.Members {
			in.Etcd.Members[i].StorageVersion = "3.6.0"
		}
		return in
	}
	withBackup := func(in Input) Input {
		in.Backup = Backup{Configured: true}
		return in
	}
	req := BackupRequest("3.6.16", t0)
	run(t, []struct {
		name   string
		input  func() Input
		checks []check
	}{
		{"upgrade, no backup configured: the first follower's spec is written", upgrade,
			[]check{action(ActUpdateObject), rollOf("main-1")}},
		{"upgrade, the leader last as for any rollout", func() Input {
			in := versions(rolled("main-0", "main-1", "main-2"), "3.6.16", "3.5.35", "3.5.35", "3.5.35")
			return in
		}, []check{action(ActBegin), rollOf("main-1")}},
		{"upgrade with backups: a snapshot is asked for first", func() Input { return withBackup(upgrade()) },
			[]check{action(ActRequestBackup), opRecorded(OpRoll, ActRequestBackup), func(t *testing.T, d Decision) {
				if d.BackupRequest != req {
					t.Errorf("backup request %q, want %q", d.BackupRequest, req)
				}
			}}},
		{"upgrade with backups: asked, not stored yet: wait", func() Input {
			in := withBackup(upgrade())
			in.Backup.Requested = req
			return in
		}, []check{action(ActWait), opRecorded(OpRoll, ActRequestBackup), reason("waiting for the snapshot"), halt(false)}},
		{"upgrade with backups: stored: the spec is written", func() Input {
			in := withBackup(upgrade())
			in.Backup.Requested, in.Backup.Succeeded = req, req
			return in
		}, []check{action(ActUpdateObject)}},
		{"upgrade with backups: the snapshot failed: halted, nothing restarted", func() Input {
			in := withBackup(upgrade())
			in.Backup.Requested, in.Backup.Failed, in.Backup.FailedMessage = req, req, "store unreachable"
			return in
		}, []check{action(ActWait), halt(true), reason("store unreachable")}},
		{"upgrade with backups, a member already upgraded: no second snapshot", func() Input {
			in := withBackup(upgrade())
			in.Etcd.Members[2].Version = "3.6.16"
			return in
		}, []check{action(ActUpdateObject)}},
		{"the rolled member's pod cannot run the new version: halted, no replacement after the grace period", func() Input {
			in := versions(rolling("main-1"), "3.6.99", "3.5.35", "", "3.5.35")
			in.Members[1].Ready, in.Members[1].ReadyChangedAt = false, t0.Add(-time.Hour)
			in.Etcd.Members[1].Healthy = false
			in.Members[1].Object.Failing = "container etcd: CreateContainerError: no etcd 3.6.99"
			return in
		}, []check{action(ActWait), halt(true), reason("rollout halted: main-1 does not come up on the new spec: container etcd: CreateContainerError"), opRecorded(OpRoll, ActUpdateObject)}},
		{"halted, then the spec set back: the old spec is written again", func() Input {
			in := versions(rolling("main-1", "main-1"), "3.5.35", "3.5.35", "", "3.5.35")
			in.Members[1].Ready = false
			in.Etcd.Members[1].Healthy = false
			in.Members[1].Object.Failing = "container etcd: CreateContainerError"
			return in
		}, []check{action(ActUpdateObject), halt(false)}},
		{"a rolled member ready but behind the leader: wait for it to catch up", func() Input {
			in := versions(rolling("main-1"), "3.6.16", "3.5.35", "3.6.16", "3.5.35")
			in.Etcd.Members[0].RaftIndex = 5000
			return in
		}, []check{action(ActWait), reason("catch up with the leader")}},
		{"a rolled member ready and caught up: the roll ends", func() Input {
			in := versions(rolling("main-1"), "3.6.16", "3.5.35", "3.6.16", "3.5.35")
			in.Etcd.Members[0].RaftIndex = 1050
			in.Etcd.Members[1].RaftIndex = 1000
			return in
		}, []check{action(ActFinish), reason("caught up with the leader")}},
		{"downgrade: etcd's downgrade is enabled first", downgrade,
			[]check{action(ActEnableDowngrade), opRecorded(OpRoll, ActEnableDowngrade), func(t *testing.T, d Decision) {
				if d.DowngradeTo != "3.5" {
					t.Errorf("downgrade to %q, want 3.5", d.DowngradeTo)
				}
			}}},
		{"downgrade: cluster version unknown: wait", func() Input {
			in := downgrade()
			in.Etcd.ClusterVersion = ""
			return in
		}, []check{action(ActWait), reason("cluster version")}},
		{"downgrade enabled, storage versions not migrated yet: wait", func() Input {
			in := downgrade()
			in.Etcd.Downgrade = Downgrade{Enabled: true, Target: "3.5.0"}
			in.Etcd.ClusterVersion = "3.5.0"
			return in
		}, []check{action(ActWait), reason("migrate the storage version")}},
		{"downgrade enabled and migrated: the spec is written", func() Input {
			in := downgrade()
			in.Etcd.Downgrade = Downgrade{Enabled: true, Target: "3.5.0"}
			in.Etcd.ClusterVersion = "3.5.0"
			for i := range in.Etcd.Members {
				in.Etcd.Members[i].StorageVersion = "3.5.0"
			}
			return in
		}, []check{action(ActUpdateObject)}},
		{"downgrade given up before any member restarted: the Roll in flight cancels etcd's downgrade", func() Input {
			in := versions(rolling("main-1"), "3.6.16", "3.6.16", "3.6.16", "3.6.16")
			in.Etcd.Downgrade = Downgrade{Enabled: true, Target: "3.5.0"}
			in.Etcd.ClusterVersion = "3.5.0"
			return in
		}, []check{action(ActCancelDowngrade), opRecorded(OpRoll, ActCancelDowngrade), reason("no longer asks for it")}},
		{"downgrade given up after a member ran 3.5: cancelled before that member rolls back", func() Input {
			in := versions(rolling("main-1", "main-1"), "3.6.16", "3.6.16", "3.5.35", "3.6.16")
			in.Etcd.Downgrade = Downgrade{Enabled: true, Target: "3.5.0"}
			in.Etcd.ClusterVersion = "3.5.0"
			return in
		}, []check{action(ActCancelDowngrade), rollOf("main-1")}},
		{"downgrade given up and cancelled: the member rolls back", func() Input {
			in := versions(rolling("main-1", "main-1"), "3.6.16", "3.6.16", "3.5.35", "3.6.16")
			in.Etcd.ClusterVersion = "3.5.0"
			return in
		}, []check{action(ActUpdateObject), rollOf("main-1")}},
		{"downgrade under way (spec at its target): never cancelled", func() Input {
			in := versions(rolling("main-1", "main-1"), "3.5.35", "3.6.16", "3.6.16", "3.5.35")
			in.Etcd.Downgrade = Downgrade{Enabled: true, Target: "3.5.0"}
			in.Etcd.ClusterVersion = "3.5.0"
			for i := range in.Etcd.Members {
				in.Etcd.Members[i].StorageVersion = "3.5.0"
			}
			return in
		}, []check{action(ActUpdateObject)}},
		{"a patch downgrade within a minor: no etcd downgrade", func() Input {
			in := versions(rolling("main-1", "main-1"), "3.6.8", "3.6.16", "3.6.16", "3.6.16")
			in.Etcd.ClusterVersion = "3.6.0"
			return in
		}, []check{action(ActUpdateObject)}},
	})
}

// The version policy (pkg/etcdversion) against the versions the members
// run: a change the API server let through because it checks the spec
// alone (3.5 to 3.6, then 3.7 while members still run 3.5) halts before
// any member restarts, naming the step to take first; a minor step up
// waits for etcd's cluster version.
func TestVersionChangeFollowsThePolicy(t *testing.T) {
	run(t, []struct {
		name   string
		input  func() Input
		checks []check
	}{
		{"3.7 asked while members still run 3.5: halted, 3.6 named first", func() Input {
			in := versions(rolling("main-1", "main-1"), "3.7.3", "3.5.35", "3.6.16", "3.6.16")
			in.Etcd.ClusterVersion = "3.5.0"
			return in
		}, []check{action(ActWait), halt(true), reason("runs 3.5.35, and 3.5.35 to 3.7.3 is not one step: etcd upgrades one minor version at a time: change spec.version to 3.6.16 first")}},
		{"3.7 from a 3.6 patch before 3.6.11: halted, 3.6.16 named first", func() Input {
			in := versions(rolling("main-1", "main-1"), "3.7.3", "3.6.8", "3.6.8", "3.6.8")
			in.Etcd.ClusterVersion = "3.6.0"
			return in
		}, []check{action(ActWait), halt(true), reason("moving to 3.7 needs every member on 3.6.11 or later"), reason("change spec.version to 3.6.16 first")}},
		{"every member on 3.6, cluster version still 3.5: wait for etcd to raise it, no halt", func() Input {
			in := versions(rolling("main-1", "main-1"), "3.7.3", "3.6.16", "3.6.16", "3.6.16")
			in.Etcd.ClusterVersion = "3.5.0"
			return in
		}, []check{action(ActWait), halt(false), reason("waiting for etcd to raise its cluster version from 3.5.0 to 3.6")}},
		{"3.6 to 3.7 from 3.6.16, cluster version 3.6: the first follower rolls", func() Input {
			in := versions(rolling("main-1", "main-1"), "3.7.3", "3.6.16", "3.6.16", "3.6.16")
			in.Etcd.ClusterVersion = "3.6.0"
			return in
		}, []check{action(ActUpdateObject), rollOf("main-1"), halt(false)}},
		{"a known-bad target (a CRD older than the policy let it through): halted with the fix", func() Input {
			in := versions(rolling("main-1", "main-1"), "3.6.3", "3.6.16", "3.6.16", "3.6.16")
			in.Etcd.ClusterVersion = "3.6.0"
			return in
		}, []check{action(ActWait), halt(true), reason("etcd 3.6.0 to 3.6.4 are refused"), reason("fixed in 3.6.5")}},
		{"3.7 to 3.6: a downgrade etcd supports, enabled first", func() Input {
			in := versions(rolling("main-1", "main-1"), "3.6.16", "3.7.3", "3.7.3", "3.7.3")
			in.Etcd.ClusterVersion = "3.7.0"
			return in
		}, []check{action(ActEnableDowngrade), func(t *testing.T, d Decision) {
			if d.DowngradeTo != "3.6" {
				t.Errorf("downgrade to %q, want 3.6", d.DowngradeTo)
			}
		}}},
	})
}

func TestVersions(t *testing.T) {
	for _, tc := range []struct {
		target   string
		running  []string
		changing bool
		down     bool
		done     int
	}{
		{"3.6.16", []string{"3.6.16", "3.6.16", "3.6.16"}, false, false, 3},
		{"3.6.16", []string{"3.5.35", "3.6.16", ""}, true, false, 1},
		{"3.5.35", []string{"3.6.16", "3.5.35", "3.6.16"}, true, true, 1},
		{"3.6.16", []string{"", "", ""}, false, false, 0},
	} {
		in := versions(steady(), tc.target, tc.running...)
		c, changing := Versions(in)
		if changing != tc.changing || c.Down != tc.down || c.Done != tc.done {
			t.Errorf("%s over %v: %+v changing=%v, want changing=%v down=%v done=%d", tc.target, tc.running, c, changing, tc.changing, tc.down, tc.done)
		}
	}
	if compareVersions("3.5.35", "3.6.0") >= 0 || compareVersions("3.10.0", "3.9.9") <= 0 || compareVersions("3.5", "3.5.0") != 0 {
		t.Error("compareVersions orders numbers, not strings")
	}
}

// After the last member of a version change restarts, etcd moves its
// cluster version seconds later and nothing wakes the ring to read it:
// a decision that takes no step comes back within pollFast until the
// cluster version is of spec.version's minor (status.clusterVersion
// stayed on the old minor for up to five minutes after a roll).
func TestClusterVersionWake(t *testing.T) {
	after := func(within time.Duration) check {
		return func(t *testing.T, d Decision) {
			t.Helper()
			if d.RequeueAfter <= 0 || d.RequeueAfter > within {
				t.Errorf("requeue after %s (%s %s), want within %s", d.RequeueAfter, d.Action, d.Reason, within)
			}
		}
	}
	noWake := func(t *testing.T, d Decision) {
		t.Helper()
		if d.RequeueAfter > 0 && d.RequeueAfter <= pollFast {
			t.Errorf("requeue after %s (%s %s): a ring at rest polled", d.RequeueAfter, d.Action, d.Reason)
		}
	}
	upgraded := func(cluster string) func() Input {
		return func() Input {
			in := versions(rolled(), "3.7.3", "3.7.3", "3.7.3", "3.7.3")
			in.Etcd.ClusterVersion = cluster
			return in
		}
	}
	run(t, []struct {
		name   string
		input  func() Input
		checks []check
	}{
		{"every member on 3.7, cluster version still 3.6", upgraded("3.6.0"), []check{action(ActNone), after(pollFast)}},
		{"every member on 3.7, cluster version 3.7", upgraded("3.7.0"), []check{action(ActNone), noWake}},
		{"downgraded to 3.5, cluster version still 3.6", func() Input {
			in := versions(rolled(), "3.5.35", "3.5.35", "3.5.35", "3.5.35")
			in.Etcd.ClusterVersion = "3.6.0"
			return in
		}, []check{action(ActNone), after(pollFast)}},
		{"cluster version unknown", upgraded(""), []check{action(ActNone), noWake}},
	})
}
