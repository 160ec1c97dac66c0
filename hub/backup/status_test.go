package backup

import (
	"errors"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	etcdfedv1 "github.com/etcdfed/etcdfed/api/v1alpha1"
)

// One pass's status, computed once from what was observed, decided and
// taken: status.backup, BackupHealthy and the next pass.
func TestComputeStatus(t *testing.T) {
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	hourly := "0 * * * *"
	ec := &etcdfedv1.EtcdCluster{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "main", Generation: 2}}
	stored := &etcdfedv1.BackupSnapshot{Time: metav1.NewTime(now), Revision: 42, SizeBytes: 2048, Location: "s3://b/main/1.db", Member: "main-1"}
	failedRun := &outcome{reason: etcdfedv1.BackupReasonStoreUnreachable, err: errors.New("dial tcp: refused")}
	okRun := &outcome{snapshot: stored, retained: 3}
	pruneFailed := &outcome{snapshot: stored, retained: 3, pruneErr: errors.New("list: timeout")}
	cond := func(s metav1.ConditionStatus, reason string) *metav1.Condition {
		return &metav1.Condition{Type: etcdfedv1.ConditionBackupHealthy, Status: s, Reason: reason}
	}
	inProgress := etcdfedv1.BackupStatus{InProgress: &etcdfedv1.BackupInProgress{Trigger: etcdfedv1.BackupTriggerRequest, Request: "r1"}, ConsecutiveFailures: 1}
	for _, tc := range []struct {
		name    string
		status  etcdfedv1.BackupStatus
		healthy *metav1.Condition // as read
		request string            // the annotation as read
		d       Decision
		out     *outcome
		check   func(t *testing.T, p passStatus)
	}{
		{name: "wait, first pass: Unknown with why", d: Decision{Action: ActWait, RequeueAfter: time.Hour, Reason: etcdfedv1.BackupReasonPending, Message: "next"},
			check: func(t *testing.T, p passStatus) {
				wantCond(t, p, metav1.ConditionUnknown, etcdfedv1.BackupReasonPending)
				wantNext(t, p, time.Hour)
			}},
		{name: "wait after a failure: the failure stays", healthy: cond(metav1.ConditionFalse, etcdfedv1.BackupReasonStoreUnreachable),
			d: Decision{Action: ActWait, RequeueAfter: time.Minute, Reason: etcdfedv1.BackupReasonPending},
			check: func(t *testing.T, p passStatus) {
				if p.cond != nil {
					t.Errorf("BackupHealthy %+v replaces the failure", p.cond)
				}
			}},
		{name: "wait after an invalid spec was fixed: Unknown again", healthy: cond(metav1.ConditionFalse, etcdfedv1.BackupReasonInvalidSpec),
			d: Decision{Action: ActWait, Reason: etcdfedv1.BackupReasonPending},
			check: func(t *testing.T, p passStatus) {
				wantCond(t, p, metav1.ConditionUnknown, etcdfedv1.BackupReasonPending)
			}},
		{name: "invalid: terminal, no next run", status: etcdfedv1.BackupStatus{NextScheduleTime: &metav1.Time{Time: now}},
			d: Decision{Action: ActInvalid, Reason: etcdfedv1.BackupReasonInvalidSpec, Message: "schedule"},
			check: func(t *testing.T, p passStatus) {
				wantCond(t, p, metav1.ConditionFalse, etcdfedv1.BackupReasonInvalidSpec)
				if p.terminal == nil || p.backup.NextScheduleTime != nil {
					t.Errorf("terminal %v, next %v", p.terminal, p.backup.NextScheduleTime)
				}
			}},
		{name: "start: recorded in progress, run at once", d: Decision{Action: ActStart, Trigger: etcdfedv1.BackupTriggerRequest, Request: "r1"},
			check: func(t *testing.T, p passStatus) {
				if ip := p.backup.InProgress; ip == nil || ip.Request != "r1" || !ip.StartedAt.Time.Equal(now) {
					t.Errorf("inProgress %+v", ip)
				}
				wantNext(t, p, runNow)
			}},
		{name: "run failed: counted, retried after the backoff", status: inProgress, request: "r1", out: failedRun,
			d: Decision{Action: ActRun, Trigger: etcdfedv1.BackupTriggerRequest, Request: "r1"},
			check: func(t *testing.T, p passStatus) {
				wantCond(t, p, metav1.ConditionFalse, etcdfedv1.BackupReasonStoreUnreachable)
				st := p.backup
				if st.InProgress != nil || st.ConsecutiveFailures != 2 || st.LastFailure == nil || st.LastFailure.Reason != etcdfedv1.BackupReasonStoreUnreachable || st.LastRequest != "r1" {
					t.Errorf("status.backup %+v", st)
				}
				wantNext(t, p, Backoff(2))
			}},
		{name: "run stored: failures reset, next on the schedule", status: inProgress, request: "r1", out: okRun,
			d: Decision{Action: ActRun, Trigger: etcdfedv1.BackupTriggerRequest, Request: "r1"},
			check: func(t *testing.T, p passStatus) {
				wantCond(t, p, metav1.ConditionTrue, etcdfedv1.BackupReasonSucceeded)
				st := p.backup
				if st.ConsecutiveFailures != 0 || st.LastSuccess == nil || st.LastSuccess.Request != "r1" || st.Retained != 3 || st.InProgress != nil {
					t.Errorf("status.backup %+v", st)
				}
				if stored.Request != "" {
					t.Error("the outcome's snapshot was changed")
				}
				wantNext(t, p, time.Hour) // 13:00, from the success at 12:00
			}},
		{name: "run stored, retention failed: stored, and said", status: inProgress, request: "r1", out: pruneFailed,
			d: Decision{Action: ActRun, Trigger: etcdfedv1.BackupTriggerRequest, Request: "r1"},
			check: func(t *testing.T, p passStatus) {
				wantCond(t, p, metav1.ConditionFalse, etcdfedv1.BackupReasonPruneFailed)
				st := p.backup
				if st.LastSuccess == nil || st.ConsecutiveFailures != 0 || st.LastFailure == nil || st.LastFailure.Reason != etcdfedv1.BackupReasonPruneFailed {
					t.Errorf("status.backup %+v", st)
				}
			}},
		{name: "a new request came during the run: started at once", status: inProgress, request: "r2", out: okRun,
			d:     Decision{Action: ActRun, Trigger: etcdfedv1.BackupTriggerRequest, Request: "r1"},
			check: func(t *testing.T, p passStatus) { wantNext(t, p, runNow) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := &snapshot{ec: ec, status: tc.status, healthy: tc.healthy,
				input: Input{Now: now.Add(-time.Minute), Schedule: hourly, Status: tc.status, Request: tc.request, Formed: true}}
			tc.check(t, computeStatus(s, tc.d, tc.out, now))
		})
	}
}

func wantCond(t *testing.T, p passStatus, s metav1.ConditionStatus, reason string) {
	t.Helper()
	if p.cond == nil || p.cond.Status != s || p.cond.Reason != reason {
		t.Errorf("BackupHealthy %+v, want %s %s", p.cond, s, reason)
	}
}

func wantNext(t *testing.T, p passStatus, d time.Duration) {
	t.Helper()
	if p.requeueAfter != d {
		t.Errorf("next pass after %s, want %s", p.requeueAfter, d)
	}
}
