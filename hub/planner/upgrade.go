package planner

import (
	"fmt"
	"strings"
	"time"

	"github.com/etcdfed/etcdfed/pkg/etcdversion"
)

// A change of spec.version is a rollout like any other (rollout.go), with
// these additions, each a step of the first Roll that needs it:
//
//   - the change must be one step of etcd's from every version a member
//     runs (pkg/etcdversion.Step: one minor at a time, from a recent
//     enough patch, to a patch etcdfed runs). The API server checks the
//     spec's change alone, which passes a second change made while the
//     first still rolls out (3.5 to 3.6, then 3.7 before every member runs
//     3.6); the rollout halts on such a change, naming the step to take
//     first, before any member restarts on it. A minor step up also waits
//     until etcd's cluster version is the minor just below the target
//     (etcd raises it seconds after every member runs that minor);
//   - when backups are configured, an on-demand snapshot is asked for and
//     waited for before the first member restarts on the new version (a
//     failed snapshot halts the rollout);
//   - a downgrade (spec.version's minor below etcd's cluster version)
//     follows etcd's procedure: downgrade validate and enable through the
//     maintenance API, then wait until every member's storage version is
//     the target minor, then roll; once every member runs the lower
//     version etcd ends the downgrade and its cluster version drops;
//   - a downgrade given up (spec.version set back above the target of the
//     downgrade etcd has enabled, before every member ran the lower
//     version) is cancelled with etcd's downgrade cancel, the first step
//     of the Roll in flight, whether its member still has to roll or not:
//     etcd ends a downgrade by itself only once every member runs its
//     target, and until then keeps the cluster version at the target,
//     whatever the members run;
//   - a member rolled to the new spec whose pod cannot run it (the spoke
//     reports why: no such image, a crash) halts the rollout: the Roll
//     waits on it, Halted, and is never handed to a replacement; nothing
//     else is restarted until the spec changes.
//
// And every Roll ends only when its member is a ready voter caught up with
// the leader (raft index within catchUpEntries of the leader's).

// catchUpEntries is how far a rolled member's raft index may trail the
// leader's (both read in the same pass) for it to count as caught up.
const catchUpEntries = 1000

// Backup is what the planner needs of spec.backup for the snapshot before
// a version change.
type Backup struct {
	// Configured is true when spec.backup is set and not suspended.
	Configured bool
	// Requested is the etcdfed.dev/backup-requested annotation's value.
	Requested string
	// Succeeded and Failed are the requests of the last stored snapshot
	// and of the last failure; FailedMessage says why that one failed.
	Succeeded     string
	Failed        string
	FailedMessage string
}

// Downgrade is etcd's downgrade state (etcd 3.6 status call).
type Downgrade struct {
	Enabled bool
	// Target is the version etcd downgrades to, such as 3.5.0.
	Target string
}

// VersionChange describes a change of spec.version under way.
type VersionChange struct {
	// Down is true for a downgrade.
	Down bool
	// Done and Total count the members running the target version.
	Done, Total int
}

// Versions says whether the members' running versions differ from
// spec.version (ok false when they all run it, or none reported one).
func Versions(in Input) (VersionChange, bool) {
	var c VersionChange
	changing := false
	for _, em := range in.Etcd.Members {
		if em.Version == "" {
			continue
		}
		c.Total++
		switch cmp := compareVersions(em.Version, in.Version); {
		case cmp == 0:
			c.Done++
		case cmp > 0:
			c.Down, changing = true, true
		default:
			changing = true
		}
	}
	return c, changing
}

// versionSteps are the steps a Roll of member m takes before its restart
// when spec.version changes; pending is false when there are none (left).
func versionSteps(in Input, op Operation, m Member) (Decision, bool) {
	change, changing := Versions(in)
	if !changing || in.Version == "" {
		return Decision{}, false
	}
	if d, stop := notOneStep(in, op); stop {
		return d, true
	}
	if change.Done == 0 && in.Backup.Configured {
		req := BackupRequest(in.Version, op.StartedAt)
		switch {
		case in.Backup.Succeeded == req:
		case in.Backup.Failed == req:
			d := waitStep(op, ActRequestBackup, pollSlow, "rollout halted: the snapshot before the change to version %s failed (%s); no member is restarted. Fix the backup (or suspend spec.backup) and ask again with the etcdfed.dev/backup-requested annotation set to %s",
				in.Version, orUnknown(in.Backup.FailedMessage), req)
			d.Halted = true
			return d, true
		case in.Backup.Requested != req:
			return step(op, ActRequestBackup, Decision{Member: m.Name, BackupRequest: req, RequeueAfter: pollFast,
				Reason: fmt.Sprintf("asking for a snapshot (%s) before the first member restarts on version %s", req, in.Version)}), true
		default:
			return waitStep(op, ActRequestBackup, pollFast, "waiting for the snapshot %s before the first member restarts on version %s", req, in.Version), true
		}
	}
	target := minorOf(in.Version)
	if !change.Down || target == "" {
		return Decision{}, false
	}
	cluster := minorOf(in.Etcd.ClusterVersion)
	if cluster == "" {
		return waitStep(op, ActEnableDowngrade, pollFast, "downgrade to %s: waiting to read etcd's cluster version", in.Version), true
	}
	if compareVersions(cluster, target) > 0 && (!in.Etcd.Downgrade.Enabled || minorOf(in.Etcd.Downgrade.Target) != target) {
		return step(op, ActEnableDowngrade, Decision{Member: m.Name, DowngradeTo: target, RequeueAfter: pollFast,
			Reason: fmt.Sprintf("enabling etcd's downgrade from cluster version %s to %s (downgrade validate, then enable) before restarting %s", in.Etcd.ClusterVersion, target, m.Name)}), true
	}
	var behind []string
	for _, em := range in.Etcd.Members {
		if em.StorageVersion != "" && compareVersions(minorOf(em.StorageVersion), target) > 0 {
			behind = append(behind, fmt.Sprintf("%s (%s)", describe(em), em.StorageVersion))
		}
	}
	if len(behind) > 0 {
		return waitStep(op, ActEnableDowngrade, pollFast, "downgrade to %s enabled; waiting for etcd to migrate the storage version of %s", target, strings.Join(behind, ", ")), true
	}
	return Decision{}, false
}

// notOneStep halts the Roll when spec.version is not one step of etcd's
// from a version a member runs, and waits while etcd's cluster version is
// more than one minor below it; stop is false when neither.
func notOneStep(in Input, op Operation) (Decision, bool) {
	target, err := etcdversion.Parse(in.Version)
	if err != nil {
		d := waitStep(op, ActUpdateObject, pollSlow, "rollout halted: spec.version %q is not an etcd release; no member is restarted", in.Version)
		d.Halted = true
		return d, true
	}
	for _, em := range in.Etcd.Members {
		running, ok := etcdversion.ParseLoose(em.Version)
		if !ok || running == target {
			continue
		}
		if err := etcdversion.Step(running, target); err != nil {
			d := waitStep(op, ActUpdateObject, pollSlow, "rollout halted: %s runs %s, and %s to %s is not one step: %s; no member is restarted on %s until spec.version changes",
				describe(em), em.Version, em.Version, in.Version, strings.TrimPrefix(err.Error(), etcdversion.ErrUnsupported.Error()+": "), in.Version)
			d.Halted = true
			return d, true
		}
	}
	if cluster, ok := etcdversion.ParseLoose(in.Etcd.ClusterVersion); ok && cluster.Major == target.Major && target.Minor > cluster.Minor+1 {
		return waitStep(op, ActUpdateObject, pollFast, "waiting for etcd to raise its cluster version from %s to %d.%d (it does once every member runs %d.%d) before a member restarts on %s",
			in.Etcd.ClusterVersion, target.Major, target.Minor-1, target.Major, target.Minor-1, in.Version), true
	}
	return Decision{}, false
}

// cancelDowngrade is the step of a Roll that cancels etcd's downgrade when
// spec.version no longer asks for it; ok is false when there is none.
func cancelDowngrade(in Input, op Operation, m Member) (Decision, bool) {
	d := in.Etcd.Downgrade
	target := minorOf(d.Target)
	if !d.Enabled || target == "" || minorOf(in.Version) == "" || compareVersions(minorOf(in.Version), target) <= 0 {
		return Decision{}, false
	}
	return step(op, ActCancelDowngrade, Decision{Member: m.Name, RequeueAfter: pollFast,
		Reason: fmt.Sprintf("cancelling etcd's downgrade to %s (downgrade cancel): spec.version %s no longer asks for it, and etcd keeps the cluster version at %s until it is cancelled", target, in.Version, orUnknown(in.Etcd.ClusterVersion))}), true
}

// halted is the wait of a Roll whose member does not come up on the new
// spec, "" when it does or may yet.
func halted(op Operation, m Member) (Decision, bool) {
	if m.Object == nil || m.Object.Outdated || m.Object.Failing == "" {
		return Decision{}, false
	}
	d := waitStep(op, ActUpdateObject, pollSlow, "rollout halted: %s does not come up on the new spec: %s; nothing else is restarted until it does (change the spec, for example set spec.version back)", m.Name, m.Object.Failing)
	d.Halted = true
	return d, true
}

// caughtUp: em's raft index is within catchUpEntries of the leader's, as
// both answered in this pass. A leader that did not report an index holds
// it back.
func caughtUp(e Etcd, em ListEntry) bool {
	if em.ID == e.LeaderID {
		return true
	}
	l, ok := byID(e, e.LeaderID)
	if !ok {
		return false
	}
	return em.RaftIndex+catchUpEntries >= l.RaftIndex
}

// BackupRequest is the etcdfed.dev/backup-requested value that asks for the
// snapshot before the change to version that began at started.
func BackupRequest(version string, started time.Time) string {
	return fmt.Sprintf("before-version-%s-%d", version, started.Unix())
}

// minorOf is "3.5" of "3.5.21" (and of etcd's cluster version 3.5.0), ""
// when v is not a version.
func minorOf(v string) string { return etcdversion.MinorOf(v) }

// compareVersions compares versions as etcd reports them (3.5.21 < 3.6.0;
// 3.5 == 3.5.0); one that is not a version counts as 0.0.0.
func compareVersions(a, b string) int {
	x, _ := etcdversion.ParseLoose(a)
	y, _ := etcdversion.ParseLoose(b)
	return x.Compare(y)
}
