package etcdcluster

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"

	etcdfedv1 "github.com/etcdfed/etcdfed/api/v1alpha1"
	"github.com/etcdfed/etcdfed/hub/pki"
	"github.com/etcdfed/etcdfed/hub/planner"
)

// CA rotation (membership/carotation.go plans it): the CA Secret holds the
// issuing CA and, during a rotation, the CA trusted beside it (pki.
// Authority); every member's Secret and every consumer's gets the bundle
// in ca.crt; members' objects carry spec.tls.caHash, whose change makes
// them outdated so that the planner restarts them one at a time (Rolls).
// status.caRotation records the phase.

// caRotationInput is what the planner needs of a CA rotation.
func caRotationInput(s *snapshot, st *etcdfedv1.EtcdClusterStatus) planner.CARotation {
	var in planner.CARotation
	cr := st.CARotation
	if cr != nil && cr.Phase.InProgress() {
		in.Phase = string(cr.Phase)
	}
	if in.Phase == "" {
		if req, ok := caRotationRequest(s.requests()); ok && (cr == nil || cr.RequestedAt == nil || req.After(cr.RequestedAt.Time)) {
			in.Requested = true
			in.Refusal = caRotationRefusal(s)
		}
	}
	if a := s.pki.authority(); a != nil {
		in.HasNext, in.HasPrevious = a.Next != nil, a.Previous != nil
	}
	if in.Phase != "" {
		in.ConsumersPending = consumersPending(s, st)
		in.HoldRequested, in.Continued = caHoldRequest(s.requests(), cr)
		in.Consumers, in.AtStart = consumersToRestart(s.ec, st)
		in.ContinueCommand = fmt.Sprintf("etcdfed rotate-ca %s -n %s --continue", s.ec.Name, s.ec.Namespace)
	}
	return in
}

// caHoldRequest reads the request of the rotation under way cr (the
// annotation whose requestedAt is cr's): whether it asks to hold after
// Trusting, and whether it answers the hold under way (its continueHold
// is cr.heldSince). A request that is not cr's, or does not parse, asks
// nothing.
func caHoldRequest(q *requests, cr *etcdfedv1.CARotationStatus) (hold, continued bool) {
	req := q.rotateCA
	if req == nil || cr == nil || cr.RequestedAt == nil || !req.RequestedAt.UTC().Truncate(time.Second).Equal(cr.RequestedAt.Time) {
		return false, false
	}
	continued = req.ContinueHold != nil && cr.HeldSince != nil && req.ContinueHold.UTC().Truncate(time.Second).Equal(cr.HeldSince.Time.UTC().Truncate(time.Second))
	return req.HoldAfterTrusting, continued
}

// consumersToRestart names every spec.clients consumer with where its
// Secret is, and those of them that read their CA only at start.
func consumersToRestart(ec *etcdfedv1.EtcdCluster, st *etcdfedv1.EtcdClusterStatus) (all, atStart []string) {
	for _, c := range ec.Spec.Clients {
		where := clientWhere(etcdfedv1.ClientStatus{Cluster: c.Cluster, Namespace: c.Namespace, SecretName: c.SecretName})
		if i := slices.IndexFunc(st.Clients, func(cs etcdfedv1.ClientStatus) bool { return cs.Name == c.Name }); i >= 0 && st.Clients[i].SecretName != "" {
			where = clientWhere(st.Clients[i])
		}
		name := fmt.Sprintf("%s (%s)", c.Name, where)
		all = append(all, name)
		if c.CAReload == etcdfedv1.CAReloadAtStart {
			atStart = append(atStart, name)
		}
	}
	return all, atStart
}

// caRotationRequest is the time of the rotation request q holds, if any
// (a value that does not parse is no request: the CLI writes it).
func caRotationRequest(q *requests) (time.Time, bool) {
	if q.rotateCA == nil {
		return time.Time{}, false
	}
	return q.rotateCA.RequestedAt.UTC().Truncate(time.Second), true
}

// caRotationRefusal says why a rotation cannot be done, "" when it can.
func caRotationRefusal(s *snapshot) string {
	switch {
	case !s.ec.Spec.TLS.Mode.Enabled():
		return "the ring runs without TLS (spec.tls.mode: Disabled): there is no CA to rotate"
	case s.ec.Spec.TLS.CASecretName != "":
		return fmt.Sprintf("the CA is the one you provide in Secret %s (spec.tls.caSecretName): etcdfed rotates only a CA it generated", s.ec.Spec.TLS.CASecretName)
	case s.pki.ca == nil:
		return "the ring has no CA yet"
	}
	return ""
}

// consumersPending names the holders of client certificates whose Secret
// does not hold yet what the CA Secret wants (its bundle, a certificate of
// its issuing CA): the hub's own, and every spec.clients[] entry's as the
// clients controller reports it (status.clients[].caHash).
func consumersPending(s *snapshot, st *etcdfedv1.EtcdClusterStatus) string {
	a := s.pki.authority()
	if a == nil {
		return "the ring has no CA yet"
	}
	if a.Keyless() {
		// Nothing was issued from the CA the ring was taken over on, and
		// nothing can be: the hub's and every consumer's certificate come
		// from the new CA once it issues (Reissuing waits for them).
		return ""
	}
	var out []string
	if w := pkiDue(s); w.issueHubClient {
		out = append(out, "the hub's client certificate")
	}
	want := a.Trust()
	for _, c := range s.ec.Spec.Clients {
		i := slices.IndexFunc(st.Clients, func(cs etcdfedv1.ClientStatus) bool { return cs.Name == c.Name })
		switch {
		case i < 0:
			out = append(out, fmt.Sprintf("client %s: no Secret reported yet", c.Name))
		case st.Clients[i].CAHash != want:
			msg := "not yet rewritten"
			if m := st.Clients[i].Message; m != "" {
				msg = m
			}
			out = append(out, fmt.Sprintf("client %s (%s): %s", c.Name, clientWhere(st.Clients[i]), msg))
		}
	}
	return strings.Join(out, "; ")
}

func clientWhere(c etcdfedv1.ClientStatus) string {
	cl := c.Cluster
	if cl == "" {
		cl = "hub"
	}
	return cl + "/" + c.Namespace + "/" + c.SecretName
}

// recordCARotation records the rotation's phase in status.caRotation: a
// RotateCA operation's start changes the phase (before the CA Secret is
// written: rule 3), the planner completes or refuses it, and every pass
// counts the members that run what the phase needs.
func recordCARotation(s *snapshot, st *etcdfedv1.EtcdClusterStatus, d planner.Decision) {
	now := metav1.NewTime(s.now)
	a := s.pki.authority()
	switch {
	case d.Action == planner.ActBegin && d.Operation != nil && d.Operation.Type == planner.OpRotateCA:
		cr := st.CARotation
		if cr == nil || !cr.Phase.InProgress() {
			cr = &etcdfedv1.CARotationStatus{StartedAt: &now}
			if req, ok := caRotationRequest(s.requests()); ok {
				cr.RequestedAt = &metav1.Time{Time: req}
			}
			if a != nil {
				cr.OldCA = pki.Describe(a.Signer.Cert)
			}
			st.CARotation = cr
		}
		phase := map[planner.Action]etcdfedv1.CARotationPhase{
			planner.ActAddCA:    etcdfedv1.CARotationTrusting,
			planner.ActSwitchCA: etcdfedv1.CARotationReissuing,
			planner.ActDropCA:   etcdfedv1.CARotationDropping,
		}[d.Operation.Step]
		if cr.Phase != phase {
			cr.Phase, cr.PhaseStartedAt = phase, &now
			if phase == etcdfedv1.CARotationReissuing && cr.HeldSince != nil && cr.ContinuedAt == nil {
				cr.ContinuedAt = &now
			}
		}
	case d.Action == planner.ActHoldCARotation && st.CARotation != nil:
		if st.CARotation.HeldSince == nil {
			st.CARotation.HeldSince = &now
		}
	case d.Action == planner.ActRefuseCARotation:
		st.CARotation = &etcdfedv1.CARotationStatus{Phase: etcdfedv1.CARotationRefused, Message: truncate(d.Reason, 1024)}
		if req, ok := caRotationRequest(s.requests()); ok {
			st.CARotation.RequestedAt = &metav1.Time{Time: req}
		}
	case d.Action == planner.ActCompleteCARotation && st.CARotation != nil:
		st.CARotation.Phase, st.CARotation.CompletedAt, st.CARotation.PhaseStartedAt = etcdfedv1.CARotationCompleted, &now, &now
		st.CARotation.Message = truncate(d.Reason, 1024)
	}
	cr := st.CARotation
	if cr == nil || !cr.Phase.InProgress() {
		return
	}
	if a != nil {
		switch {
		case a.Next != nil:
			cr.NewCA = pki.Describe(a.Next.Cert)
		case cr.Phase != etcdfedv1.CARotationTrusting:
			cr.NewCA = pki.Describe(a.Signer.Cert)
		}
	}
	if cr.Phase == etcdfedv1.CARotationTrusting {
		hold, _ := caHoldRequest(s.requests(), cr)
		_, atStart := consumersToRestart(s.ec, st)
		cr.HoldAfterTrusting = hold || len(atStart) > 0
	}
	done, total := int32(0), int32(0)
	for i := range st.Members {
		m := &st.Members[i]
		total++
		if obj := s.currentObject(st, m.Name); obj != nil && obj.Spec.Incarnation == m.Incarnation && !restarts(obj, desiredMember(s, st, m, obj)) &&
			obj.Status.ObservedGeneration == obj.Generation {
			done++
		}
	}
	cr.MembersDone, cr.MembersTotal = done, total
	cr.Message = truncate(d.Reason, 1024)
}

// applyCAChange writes one change of the CA Secret (a RotateCA step),
// with the Secret's resourceVersion as read: two writers never both store
// a new CA. A change already made is not made again.
func (r *Reconciler) applyCAChange(ctx context.Context, t *taking) error {
	s, step := t.s, t.d.plan.Action
	a, sec := s.pki.auth, s.pki.caSecret
	if a == nil || sec == nil {
		return fmt.Errorf("CA rotation: no CA Secret read")
	}
	var next *pki.Authority
	switch {
	case step == planner.ActAddCA && !a.Rotating():
		ca, err := pki.NewCA(fmt.Sprintf("etcdfed %s/%s CA %s", s.ec.Namespace, s.ec.Name, s.now.UTC().Format("2006-01-02")), r.now())
		if err != nil {
			return fmt.Errorf("CA rotation: create the new CA: %w", err)
		}
		next = a.BeginRotation(ca)
	case step == planner.ActSwitchCA && a.Next != nil:
		var err error
		if next, err = a.SwitchSigner(); err != nil {
			return err
		}
	case step == planner.ActDropCA && a.Rotating() && a.Next == nil:
		next = a.DropPrevious()
	default:
		return nil
	}
	upd := sec.DeepCopy()
	upd.Data = next.Data()
	ctrl.LoggerFrom(ctx).Info("Writing the CA Secret", "step", step, "signer", pki.Describe(next.Signer.Cert))
	if err := r.hub().Update(ctx, upd); err != nil {
		return fmt.Errorf("CA rotation (%s): update CA Secret %s: %w", step, sec.Name, err)
	}
	reason, msg := caChangeEvent(step, a, next)
	r.event(s.ec, corev1.EventTypeNormal, reason, string(step), "%s", msg)
	return nil
}

// caChangeEvent is the event of a change of the CA Secret: its reason and
// message.
func caChangeEvent(step planner.Action, before, after *pki.Authority) (string, string) {
	switch step {
	case planner.ActAddCA:
		return etcdfedv1.EventCARotationAddCA, fmt.Sprintf("Stored the new CA %s beside %s; members restart one at a time to trust both", pki.Describe(after.Next.Cert), pki.Describe(before.Signer.Cert))
	case planner.ActSwitchCA:
		return etcdfedv1.EventCARotationSwitchCA, fmt.Sprintf("The new CA %s issues; members restart one at a time with its certificates, %s stays trusted", pki.Describe(after.Signer.Cert), pki.Describe(before.Signer.Cert))
	}
	return etcdfedv1.EventCARotationDropCA, fmt.Sprintf("Dropped the old CA %s; members restart one at a time to trust %s alone", pki.Describe(before.Previous), pki.Describe(after.Signer.Cert))
}

// caRotationProgress: while a CA rotation is under way, Progressing says
// so (reason CARotation) with its phase and progress (ok).
func caRotationProgress(st *etcdfedv1.EtcdClusterStatus) (conditionValue, bool) {
	cr := st.CARotation
	if cr == nil || !cr.Phase.InProgress() {
		return conditionValue{}, false
	}
	msg := fmt.Sprintf("CA rotation, phase %s: %d of %d members done", cr.Phase, cr.MembersDone, cr.MembersTotal)
	if cr.HeldSince != nil && cr.ContinuedAt == nil {
		msg += fmt.Sprintf(", held since %s", cr.HeldSince.UTC().Format(time.RFC3339))
	}
	if op := st.Operation; op != nil {
		msg += fmt.Sprintf("; %s %s step %s: %s", op.Type, op.Member, op.Step, op.Message)
	} else if cr.Message != "" {
		msg += "; " + cr.Message
	}
	return conditionValue{true, etcdfedv1.ReasonCARotation, msg}, true
}

// caRotation is the feature of a CA rotation (etcdfed.dev/rotate-ca):
// the planner's CARotation input, status.caRotation recorded, and
// Progressing's CARotation (caRotationProgress).
type caRotation struct{ s *snapshot }

func (f *caRotation) observe(*etcdfedv1.EtcdClusterStatus, *decision) {}

func (f *caRotation) input(in *planner.Input, st *etcdfedv1.EtcdClusterStatus) {
	in.CA = caRotationInput(f.s, st)
}

func (f *caRotation) record(st *etcdfedv1.EtcdClusterStatus, d *decision) {
	recordCARotation(f.s, st, d.plan)
}

func (f *caRotation) status(*etcdfedv1.EtcdClusterStatus, *decision, applyResult) {}
