package clients

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	etcdfedv1 "github.com/etcdfed/etcdfed/api/v1alpha1"
	"github.com/etcdfed/etcdfed/internal/text"
)

// passStatus is what one pass writes of the EtcdCluster, and when the
// next pass comes.
type passStatus struct {
	clients []etcdfedv1.ClientStatus
	// cond is ClientsReady; nil removes it.
	cond *metav1.Condition
	// next is when the next pass is due: the earliest renewal, sooner
	// after a failure or a wait, at the latest Resync.
	next time.Time
}

// after is the RequeueAfter of next, seen at now: at least a second.
func (p passStatus) after(now time.Time) time.Duration {
	return max(p.next.Sub(now), time.Second)
}

// consumerResult is one consumer's outcome of the pass.
type consumerResult struct {
	t       Target
	status  etcdfedv1.ClientStatus
	renewAt time.Time
}

// computeStatus is the status of one pass, computed once from what was
// observed, decided and applied: status.clients, ClientsReady
// (clientsReady) and the next pass (nextPass).
func computeStatus(s *snapshot, d *decision, a applied) passStatus {
	ec := s.ec
	var out passStatus
	var removeErrs []string
	for i, rm := range d.removed {
		if err := removalError(rm, a.removed[i]); err != nil {
			removeErrs = append(removeErrs, err.Error())
			out.clients = append(out.clients, rm.status)
		}
	}
	acc := accessVerdictOf(s, d, a)
	var results []consumerResult
	switch {
	case len(ec.Spec.Clients) == 0, !ec.Spec.TLS.Mode.Enabled():
	case s.waiting != "":
		for _, c := range ec.Spec.Clients {
			t := TargetOf(ec, c)
			results = append(results, consumerResult{t: t, status: keepStatus(ec, t, s.waiting)})
		}
	default:
		for i, c := range d.consumers {
			results = append(results, consumerResultOf(s, c, a.consumers[i], acc.refused))
		}
	}
	var failed []string
	for _, res := range results {
		out.clients = append(out.clients, res.status)
		if st := res.status; !st.Ready && s.waiting == "" {
			failed = append(failed, fmt.Sprintf("%s (%s): %s", st.Name, res.t, st.Message))
		}
	}
	out.cond = clientsReady(s, removeErrs, failed, acc, len(out.clients))
	out.next = nextPass(s, len(removeErrs) > 0, acc.retry, results)
	return out
}

// consumerResultOf is one consumer's status after its step: ready with
// what its Secret holds, or not with why. A consumer whose etcd user is a
// human's (PlanAccess refused it) is not ready whatever its Secret holds.
func consumerResultOf(s *snapshot, c consumerStep, w written, refused map[string]string) consumerResult {
	st := keepStatus(s.ec, c.t, "")
	msg := c.fail
	if msg == "" && w.err != nil {
		msg = w.err.Error()
	}
	if msg != "" {
		st.Ready, st.Message = false, text.Truncate(msg, maxMessage)
		return consumerResult{t: c.t, status: st}
	}
	cert := w.data[etcdfedv1.ClientSecretKeyCert]
	st.Ready, st.Message = true, ""
	st.CAHash = CAHash(w.data)
	st.NotAfter = ptrTime(expiry(cert))
	if c.plan.Action == ActIssue {
		st.IssuedAt = ptrTime(s.now)
	}
	if why, ok := refused[c.t.Name]; ok {
		st.Ready, st.Message = false, text.Truncate(why, maxMessage)
	}
	return consumerResult{t: c.t, status: st, renewAt: RenewAt(cert)}
}

// accessVerdict is what etcd's authentication adds to ClientsReady.
type accessVerdict struct {
	// cond, when set, is the ClientsReady condition access asks for (it
	// could not be brought in line); nil when it is.
	cond *metav1.Condition
	// refused consumers (their user is a human's), by spec.clients name.
	refused map[string]string
	// summary is appended to a True condition's message.
	summary string
	// retry asks for the next pass soon.
	retry bool
}

// accessVerdictOf says how etcd's authentication stands after the pass.
func accessVerdictOf(s *snapshot, d *decision, a applied) accessVerdict {
	ec := s.ec
	if !ec.Spec.TLS.Mode.Enabled() {
		return accessVerdict{}
	}
	if s.auth.waiting != "" {
		return accessVerdict{retry: true, cond: condition(ec, metav1.ConditionUnknown, etcdfedv1.ClientReasonPending, s.auth.waiting)}
	}
	p := d.access
	if a.access != nil {
		return accessVerdict{retry: true, refused: p.Refused,
			cond: condition(ec, metav1.ConditionFalse, etcdfedv1.ClientReasonAccessFailed, fmt.Sprintf("etcd's authentication not in line with spec.clients: %v", a.access))}
	}
	v := accessVerdict{refused: p.Refused}
	if !ec.Spec.TLS.AuthOn() {
		v.summary = "; etcd authentication is off (spec.tls.auth: Disabled)"
		return v
	}
	v.summary = "; etcd authentication is on, each consumer with its role"
	for _, m := range slices.Sorted(maps.Keys(p.MembersLeftAlone)) {
		v.summary += "; member " + m + ": " + p.MembersLeftAlone[m]
	}
	if len(p.Refused) > 0 {
		var msgs []string
		for _, name := range slices.Sorted(maps.Keys(p.Refused)) {
			msgs = append(msgs, name+": "+p.Refused[name])
		}
		enabled := "on"
		if !s.auth.have.Enabled {
			enabled = "not turned on while a consumer would lose its access"
		}
		v.cond = condition(ec, metav1.ConditionFalse, etcdfedv1.ClientReasonAccessFailed, fmt.Sprintf("etcd authentication %s; %s", enabled, strings.Join(msgs, "; ")))
		v.retry = true
	}
	return v
}

// clientsReady is the ClientsReady condition; nil removes it (no
// consumer, and nothing went wrong).
func clientsReady(s *snapshot, removeErrs, failed []string, acc accessVerdict, n int) *metav1.Condition {
	ec := s.ec
	switch {
	case len(ec.Spec.Clients) == 0:
		// Without consumers ClientsReady only says what went wrong.
		switch {
		case len(removeErrs) > 0:
			return condition(ec, metav1.ConditionFalse, etcdfedv1.ClientReasonFailed, strings.Join(removeErrs, "; "))
		case acc.cond != nil && acc.cond.Status == metav1.ConditionFalse:
			return acc.cond
		}
		return nil
	case !ec.Spec.TLS.Mode.Enabled():
		return condition(ec, metav1.ConditionFalse, etcdfedv1.ClientReasonTLSDisabled, "the ring runs without TLS (spec.tls.mode: Disabled): consumers need no certificate; no Secret is written")
	case s.waiting != "":
		return condition(ec, metav1.ConditionUnknown, etcdfedv1.ClientReasonPending, s.waiting)
	case len(failed)+len(removeErrs) > 0:
		return condition(ec, metav1.ConditionFalse, etcdfedv1.ClientReasonFailed, strings.Join(append(failed, removeErrs...), "; "))
	case acc.cond != nil:
		return acc.cond
	}
	return condition(ec, metav1.ConditionTrue, etcdfedv1.ClientReasonReady, fmt.Sprintf("%d client Secret(s) hold a valid certificate of the ring's CA and the current endpoints%s", n, acc.summary))
}

// nextPass is when the next pass is due: Resync; retryAfter after a
// failure or a wait (except without TLS, where nothing is written); the
// earliest renewal of a ready consumer's certificate; rotationPoll while
// the ring's CA is rotated (the CA Secret changes without an event here,
// and the rotation waits for every consumer's Secret).
func nextPass(s *snapshot, removeFailed, accessRetry bool, results []consumerResult) time.Time {
	soon := removeFailed || accessRetry || s.waiting != ""
	next := s.now.Add(Resync)
	for _, res := range results {
		if !res.status.Ready {
			soon = true
		} else if !res.renewAt.IsZero() {
			next = minTime(next, res.renewAt)
		}
	}
	if len(s.ec.Spec.Clients) > 0 && !s.ec.Spec.TLS.Mode.Enabled() {
		soon = false
	}
	if soon {
		next = minTime(next, s.now.Add(retryAfter))
	}
	if caPhase(s.ec).InProgress() {
		next = minTime(next, s.now.Add(rotationPoll))
	}
	return next
}

// keepStatus is a consumer's status carried over while nothing can be
// checked.
func keepStatus(ec *etcdfedv1.EtcdCluster, t Target, why string) etcdfedv1.ClientStatus {
	st := etcdfedv1.ClientStatus{Name: t.Name, Cluster: t.Cluster, Namespace: t.Namespace, SecretName: t.SecretName, Message: why}
	for _, old := range ec.Status.Clients {
		if old.Name == t.Name && old.Cluster == t.Cluster && old.Namespace == t.Namespace && old.SecretName == t.SecretName {
			st.NotAfter, st.IssuedAt = old.NotAfter, old.IssuedAt
		}
	}
	return st
}

func condition(ec *etcdfedv1.EtcdCluster, s metav1.ConditionStatus, reason, msg string) *metav1.Condition {
	return &metav1.Condition{Type: etcdfedv1.ConditionClientsReady, Status: s, Reason: reason, Message: text.Truncate(msg, maxMessage), ObservedGeneration: ec.Generation}
}

// maxMessage bounds a client's status message.
const maxMessage = 1024

func ptrTime(t time.Time) *metav1.Time {
	mt := metav1.NewTime(t.UTC().Truncate(time.Second))
	return &mt
}

func minTime(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}
