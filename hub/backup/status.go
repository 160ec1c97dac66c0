package backup

import (
	"context"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"

	etcdfedv1 "github.com/etcdfed/etcdfed/api/v1alpha1"
	"github.com/etcdfed/etcdfed/internal/text"
)

// maxMessage bounds condition and failure messages (the API allows 4096
// for lastFailure.message).
const maxMessage = 4000

// record writes one backup's outcome into st, records events and metrics,
// and returns the BackupHealthy condition.
func (r *Reconciler) record(ctx context.Context, ec *etcdfedv1.EtcdCluster, st *etcdfedv1.BackupStatus, d Decision, out outcome) *metav1.Condition {
	log := ctrl.LoggerFrom(ctx)
	st.InProgress = nil
	if d.Trigger == etcdfedv1.BackupTriggerRequest {
		st.LastRequest = d.Request
	}
	prev := meta.FindStatusCondition(ec.Status.Conditions, etcdfedv1.ConditionBackupHealthy)
	if out.snapshot == nil {
		st.ConsecutiveFailures++
		msg := truncateTrimmed(out.err.Error(), maxMessage)
		st.LastFailure = &etcdfedv1.BackupFailure{Time: metav1.NewTime(r.now()), Reason: out.reason, Message: msg, Trigger: d.Trigger, Request: d.Request}
		log.Error(out.err, "Backup failed", "reason", out.reason, "consecutiveFailures", st.ConsecutiveFailures)
		observeFailure(ec, out.reason)
		// One event per change of the failure, not per retry.
		if prev == nil || prev.Status != metav1.ConditionFalse || prev.Reason != out.reason || d.Trigger == etcdfedv1.BackupTriggerRequest {
			r.event(ec, corev1.EventTypeWarning, etcdfedv1.EventBackupFailed, out.reason+": "+msg)
		}
		return condition(ec, metav1.ConditionFalse, out.reason, msg)
	}
	s := out.snapshot
	s.Request = d.Request
	st.LastSuccess = s
	st.ConsecutiveFailures = 0
	st.Retained = int32(out.retained)
	observeSuccess(ec, s, out.retained)
	var pruned []string
	for _, p := range out.pruned {
		pruned = append(pruned, p.Key)
	}
	log.Info("Backup stored", "location", s.Location, "revision", s.Revision, "bytes", s.SizeBytes, "member", s.Member,
		"duration", s.Duration.Duration, "retained", out.retained, "pruned", pruned)
	msg := fmt.Sprintf("snapshot at revision %d (%s) from %s stored at %s in %s; %d retained", s.Revision, bytesText(s.SizeBytes),
		s.Member, s.Location, s.Duration.Round(100*time.Millisecond), out.retained)
	if len(pruned) > 0 {
		msg += fmt.Sprintf(", %d pruned", len(pruned))
	}
	r.event(ec, corev1.EventTypeNormal, etcdfedv1.EventBackupSucceeded, msg)
	if out.pruneErr != nil {
		observeFailure(ec, etcdfedv1.BackupReasonPruneFailed)
		pmsg := truncateTrimmed("stored "+s.Location+" but could not apply retention: "+out.pruneErr.Error(), maxMessage)
		st.LastFailure = &etcdfedv1.BackupFailure{Time: metav1.NewTime(r.now()), Reason: etcdfedv1.BackupReasonPruneFailed, Message: pmsg, Trigger: d.Trigger, Request: d.Request}
		r.event(ec, corev1.EventTypeWarning, etcdfedv1.EventBackupPruneFailed, pmsg)
		return condition(ec, metav1.ConditionFalse, etcdfedv1.BackupReasonPruneFailed, pmsg)
	}
	return condition(ec, metav1.ConditionTrue, etcdfedv1.BackupReasonSucceeded, msg)
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
