package backup

import (
	"fmt"
	"time"

	"github.com/robfig/cron/v3"

	etcdfedv1 "github.com/etcdfed/etcdfed/api/v1alpha1"
)

// Action is what a reconcile does next.
type Action string

const (
	// ActWait: nothing is due; come back after RequeueAfter (0: on the next
	// change of the EtcdCluster).
	ActWait Action = "Wait"
	// ActStart: a backup is due; record it in status.backup.inProgress.
	ActStart Action = "Start"
	// ActRun: a backup is recorded as in progress; take it.
	ActRun Action = "Run"
	// ActInvalid: the hub's tenancy policy refuses the store, or the
	// schedule cannot be parsed or never fires; nothing runs until the spec
	// (or the policy) changes.
	ActInvalid Action = "Invalid"
)

// Retry backoff after a failed backup: RetryBase doubling up to RetryMax.
const (
	RetryBase = 30 * time.Second
	RetryMax  = 10 * time.Minute
	// notFormedPoll: how often an EtcdCluster whose etcd has not formed is
	// looked at again (its status changes do not wake this controller).
	notFormedPoll = 30 * time.Second
)

// Input is what Decide looks at.
type Input struct {
	Now      time.Time
	Schedule string
	Suspend  bool
	Status   etcdfedv1.BackupStatus
	// Request is the etcdfed.dev/backup-requested value (normalized).
	Request string
	// Formed: etcd has formed (status.clusterID is set).
	Formed bool
	// Refused says why the hub's tenancy policy refuses the store (nil:
	// allowed): nothing is taken, requested or scheduled, until the spec
	// or the policy changes.
	Refused error
}

// Decision is what to do.
type Decision struct {
	Action  Action
	Trigger etcdfedv1.BackupTrigger
	// Request is the annotation value a Request-triggered backup handles.
	Request string
	// RequeueAfter for ActWait (and ActStart, ActRun: come back at once).
	RequeueAfter time.Duration
	// Next is when the next scheduled backup is due, nil when none is
	// (suspended, invalid, not formed).
	Next *time.Time
	// Reason and Message say why, for the condition when nothing was tried
	// yet.
	Reason, Message string
}

// Decide says what a reconcile does. Order: a store the tenancy policy
// refuses stops everything; a backup in progress is run (a restarted hub
// takes it again); a new request is started whatever the
// schedule says; otherwise the schedule (anchored on the last success, so
// missed runs are one backup, not many) and the retry backoff after a
// failure decide.
func Decide(in Input) Decision {
	st := in.Status
	if in.Refused != nil {
		return Decision{Action: ActInvalid, Reason: etcdfedv1.BackupReasonForbidden, Message: in.Refused.Error()}
	}
	if p := st.InProgress; p != nil {
		return Decision{Action: ActRun, Trigger: p.Trigger, Request: p.Request}
	}
	if in.Request != "" && in.Request != st.LastRequest {
		return Decision{Action: ActStart, Trigger: etcdfedv1.BackupTriggerRequest, Request: in.Request}
	}
	sched, err := cron.ParseStandard(in.Schedule)
	if err != nil {
		return Decision{Action: ActInvalid, Reason: etcdfedv1.BackupReasonInvalidSpec, Message: fmt.Sprintf("spec.backup.schedule %q: %v", in.Schedule, err)}
	}
	if never(sched, in.Now) {
		// robfig/cron's Next gives the zero time for a schedule with no
		// date in the next five years (such as "0 0 31 2 *", February
		// 31st), which was due at once, every time: backups back to back.
		return Decision{Action: ActInvalid, Reason: etcdfedv1.BackupReasonInvalidSpec,
			Message: fmt.Sprintf("spec.backup.schedule %q never fires: no date within five years matches it (a day of month that none of its months has, such as February 31st); no scheduled backup is taken", in.Schedule)}
	}
	if in.Suspend {
		return Decision{Action: ActWait, Reason: etcdfedv1.BackupReasonSuspended, Message: "scheduled backups are suspended (spec.backup.suspend)"}
	}
	if !in.Formed {
		return Decision{Action: ActWait, RequeueAfter: notFormedPoll, Reason: etcdfedv1.BackupReasonPending, Message: "waiting for etcd to form"}
	}
	// Schedules are in UTC whatever the hub's local time zone (robfig/cron
	// computes in the location of the time it is given).
	now := in.Now.UTC()
	due := now
	if st.LastSuccess != nil {
		due = sched.Next(st.LastSuccess.Time.UTC())
	}
	if st.ConsecutiveFailures > 0 && st.LastFailure != nil {
		if retry := st.LastFailure.Time.Add(Backoff(st.ConsecutiveFailures)); retry.After(due) {
			due = retry
		}
	}
	if !due.After(now) {
		return Decision{Action: ActStart, Trigger: etcdfedv1.BackupTriggerSchedule, Next: &due}
	}
	return Decision{Action: ActWait, RequeueAfter: due.Sub(now), Next: &due, Reason: etcdfedv1.BackupReasonPending,
		Message: "next backup due at " + due.UTC().Format(time.RFC3339)}
}

// Backoff is the wait after n consecutive failures.
func Backoff(n int32) time.Duration {
	d := RetryBase
	for i := int32(1); i < n && d < RetryMax; i++ {
		d *= 2
	}
	return min(d, RetryMax)
}

// never reports whether sched has no time after now (robfig/cron looks five
// years ahead).
func never(sched cron.Schedule, now time.Time) bool {
	return sched.Next(now.UTC()).IsZero()
}
