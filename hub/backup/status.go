package backup

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	etcdfedv1 "github.com/etcdfed/etcdfed/api/v1alpha1"
	"github.com/etcdfed/etcdfed/internal/text"
)

// maxMessage bounds condition and failure messages (the API allows 4096
// for lastFailure.message).
const maxMessage = 4000

// passStatus is what one pass writes of the EtcdCluster, and what it
// returns.
type passStatus struct {
	backup etcdfedv1.BackupStatus
	// cond is BackupHealthy; nil leaves it as it is.
	cond *metav1.Condition
	// requeueAfter is the next pass (0: on the next change).
	requeueAfter time.Duration
	// terminal, when set, is returned: the spec cannot work.
	terminal error
}

// computeStatus is the status of one pass, computed once from the
// snapshot, the decision and the outcome of the backup it ran (nil when
// it ran none), at now: status.backup, BackupHealthy and the next pass.
// After a backup the schedule is decided again on the new status.
func computeStatus(s *snapshot, d Decision, out *outcome, now time.Time) passStatus {
	p := passStatus{backup: *s.status.DeepCopy()}
	st := &p.backup
	switch d.Action {
	case ActInvalid:
		p.cond = condition(s.ec, metav1.ConditionFalse, d.Reason, d.Message)
		st.NextScheduleTime = nil
		p.terminal = reconcile.TerminalError(errors.New(d.Message))
	case ActWait:
		st.NextScheduleTime = timePtr(d.Next)
		if c := s.healthy; c == nil || c.Status == metav1.ConditionUnknown || c.Reason == etcdfedv1.BackupReasonInvalidSpec {
			p.cond = condition(s.ec, metav1.ConditionUnknown, d.Reason, d.Message)
		}
		p.requeueAfter = d.RequeueAfter
	case ActStart:
		st.InProgress = &etcdfedv1.BackupInProgress{StartedAt: metav1.NewTime(now), Trigger: d.Trigger, Request: d.Request}
		st.NextScheduleTime = timePtr(d.Next)
		p.requeueAfter = runNow
	case ActRun:
		p.cond = recordOutcome(s.ec, st, d, *out, now)
		in := s.input
		in.Now, in.Status = now, *st.DeepCopy()
		after := Decide(in)
		st.NextScheduleTime = timePtr(after.Next)
		switch after.Action {
		case ActWait:
			p.requeueAfter = after.RequeueAfter
		case ActStart, ActRun:
			p.requeueAfter = runNow
		}
	}
	return p
}

// recordOutcome writes one backup's outcome into st and returns the
// BackupHealthy condition it gives: a failure, a snapshot stored, or one
// stored whose retention could not be applied.
func recordOutcome(ec *etcdfedv1.EtcdCluster, st *etcdfedv1.BackupStatus, d Decision, out outcome, now time.Time) *metav1.Condition {
	st.InProgress = nil
	if d.Trigger == etcdfedv1.BackupTriggerRequest {
		st.LastRequest = d.Request
	}
	if out.snapshot == nil {
		st.ConsecutiveFailures++
		msg := truncateTrimmed(out.err.Error(), maxMessage)
		st.LastFailure = &etcdfedv1.BackupFailure{Time: metav1.NewTime(now), Reason: out.reason, Message: msg, Trigger: d.Trigger, Request: d.Request}
		return condition(ec, metav1.ConditionFalse, out.reason, msg)
	}
	s := out.snapshot.DeepCopy()
	s.Request = d.Request
	st.LastSuccess = s
	st.ConsecutiveFailures = 0
	st.Retained = int32(out.retained)
	if out.pruneErr != nil {
		pmsg := truncateTrimmed("stored "+s.Location+" but could not apply retention: "+out.pruneErr.Error(), maxMessage)
		st.LastFailure = &etcdfedv1.BackupFailure{Time: metav1.NewTime(now), Reason: etcdfedv1.BackupReasonPruneFailed, Message: pmsg, Trigger: d.Trigger, Request: d.Request}
		return condition(ec, metav1.ConditionFalse, etcdfedv1.BackupReasonPruneFailed, pmsg)
	}
	return condition(ec, metav1.ConditionTrue, etcdfedv1.BackupReasonSucceeded, storedMessage(s, out))
}

// storedMessage says what a backup stored.
func storedMessage(s *etcdfedv1.BackupSnapshot, out outcome) string {
	msg := fmt.Sprintf("snapshot at revision %d (%s) from %s stored at %s in %s; %d retained", s.Revision, bytesText(s.SizeBytes),
		s.Member, s.Location, s.Duration.Round(100*time.Millisecond), out.retained)
	if len(out.pruned) > 0 {
		msg += fmt.Sprintf(", %d pruned", len(out.pruned))
	}
	return msg
}

// report logs a backup started or taken, records its metrics and its
// events: one per change of the failure (or per request), not per retry.
func (r *Reconciler) report(ctx context.Context, s *snapshot, d Decision, out *outcome, p passStatus) {
	log := ctrl.LoggerFrom(ctx)
	ec, st := s.ec, p.backup
	switch {
	case d.Action == ActStart:
		log.Info("Starting backup", "trigger", d.Trigger, "request", d.Request)
		return
	case out == nil:
		return
	case out.snapshot == nil:
		log.Error(out.err, "Backup failed", "reason", out.reason, "consecutiveFailures", st.ConsecutiveFailures)
		observeFailure(ec, out.reason)
		if prev := s.healthy; prev == nil || prev.Status != metav1.ConditionFalse || prev.Reason != out.reason || d.Trigger == etcdfedv1.BackupTriggerRequest {
			r.event(ec, corev1.EventTypeWarning, etcdfedv1.EventBackupFailed, out.reason+": "+st.LastFailure.Message)
		}
		return
	}
	sn := st.LastSuccess
	observeSuccess(ec, sn, out.retained)
	var pruned []string
	for _, p := range out.pruned {
		pruned = append(pruned, p.Key)
	}
	log.Info("Backup stored", "location", sn.Location, "revision", sn.Revision, "bytes", sn.SizeBytes, "member", sn.Member,
		"duration", sn.Duration.Duration, "retained", out.retained, "pruned", pruned)
	r.event(ec, corev1.EventTypeNormal, etcdfedv1.EventBackupSucceeded, storedMessage(sn, *out))
	if out.pruneErr != nil {
		observeFailure(ec, etcdfedv1.BackupReasonPruneFailed)
		r.event(ec, corev1.EventTypeWarning, etcdfedv1.EventBackupPruneFailed, st.LastFailure.Message)
	}
}

func condition(ec *etcdfedv1.EtcdCluster, status metav1.ConditionStatus, reason, msg string) *metav1.Condition {
	return &metav1.Condition{Type: etcdfedv1.ConditionBackupHealthy, Status: status, Reason: reason, Message: truncateTrimmed(msg, maxMessage), ObservedGeneration: ec.Generation}
}

func (r *Reconciler) event(ec *etcdfedv1.EtcdCluster, typ, reason, note string) {
	if r.Recorder != nil {
		r.Recorder.Eventf(ec, nil, typ, reason, "Backup", "%s", truncateTrimmed(note, 1000))
	}
}

func equalStatus(a, b *etcdfedv1.EtcdCluster) bool {
	return equality.Semantic.DeepEqual(a.Status, b.Status)
}

func metav1Time(t time.Time) metav1.Time { return metav1.NewTime(t.UTC()) }

// truncateTrimmed is s without surrounding space, cut to n bytes.
func truncateTrimmed(s string, n int) string { return text.Truncate(strings.TrimSpace(s), n) }

// bytesText is a size for humans, such as 1.5 GiB.
func bytesText(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	div, exp := int64(unit), 0
	for m := n / unit; m >= unit; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB", float64(n)/float64(div), "KMGTPE"[exp])
}
