package etcdcluster

import (
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	etcdfedv1 "github.com/etcdfed/etcdfed/api/v1alpha1"
	"github.com/etcdfed/etcdfed/hub/pki"
	"github.com/etcdfed/etcdfed/hub/planner"
)

// rotating puts a TLS ring in a CA rotation: the CA Secret holds auth,
// status.caRotation is at phase, and when caughtUp every member's object
// and Secret and the hub's client certificate already hold what auth
// wants (the phase's rollout is done).
func rotating(t *testing.T, s *snapshot, phase etcdfedv1.CARotationPhase, step func(old, next *pki.CA) *pki.Authority, caughtUp bool) *pki.Authority {
	t.Helper()
	old := withTLS(t, s)
	next, err := pki.NewCA("next CA", now.Add(-time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	a := step(old, next)
	s.pki.auth, s.pki.ca = a, a.Signer
	s.ec.Status.CARotation = &etcdfedv1.CARotationStatus{Phase: phase}
	if !caughtUp {
		return a
	}
	hub, err := a.Signer.IssueClient("etcdfed-hub", now)
	if err != nil {
		t.Fatal(err)
	}
	s.pki.hubClient = certSecret(s.ec.Namespace, pki.HubClientSecretName(s.ec), ownerLabels(s.ec), a.Bundle(), hub)
	for _, m := range s.ec.Status.Members {
		leaf, err := a.Signer.IssueMember(pki.MemberRequest{Member: m.Name, DNSNames: []string{memberDNSName(s.ec, m.Name)}}, now)
		if err != nil {
			t.Fatal(err)
		}
		cs := s.cluster(m.Cluster)
		cs.secrets[pki.MemberSecretName(m.Name)] = certSecret(s.ringNamespace, pki.MemberSecretName(m.Name), memberCertLabels(s.ec, m.Name), a.Bundle(), leaf)
		if a.Rotating() {
			cs.members[m.Name].Spec.TLS.CAHash = a.Trust()
		}
	}
	return a
}

func trusting(old, next *pki.CA) *pki.Authority {
	return (&pki.Authority{Signer: old}).BeginRotation(next)
}
func reissuing(old, next *pki.CA) *pki.Authority {
	a, _ := trusting(old, next).SwitchSigner()
	return a
}
func dropped(old, next *pki.CA) *pki.Authority { return reissuing(old, next).DropPrevious() }

// One pass's decision during a CA rotation.
func TestDecideCARotation(t *testing.T) {
	type outcome struct {
		s  *snapshot
		a  *pki.Authority
		d  *decision
		st etcdfedv1.EtcdClusterStatus
	}
	cases := []struct {
		name  string
		given func(t *testing.T, s *snapshot) *pki.Authority
		check func(t *testing.T, o outcome)
	}{
		{
			name: "a request on a steady ring: the AddCA operation and the phase Trusting are recorded before the CA Secret is written",
			given: func(t *testing.T, s *snapshot) *pki.Authority {
				withTLS(t, s)
				s.ec.Annotations = map[string]string{etcdfedv1.AnnotationRotateCA: etcdfedv1.CARotationRequest{RequestedAt: now.Add(-time.Minute)}.String()}
				return nil
			},
			check: func(t *testing.T, o outcome) {
				op := o.st.Operation
				if o.d.plan.Action != planner.ActBegin || op == nil || op.Type != etcdfedv1.OperationRotateCA || op.Step != string(planner.ActAddCA) {
					t.Fatalf("plan %s (%s), operation %+v; want RotateCA at AddCA", o.d.plan.Action, o.d.plan.Reason, op)
				}
				cr := o.st.CARotation
				if cr == nil || cr.Phase != etcdfedv1.CARotationTrusting || cr.RequestedAt == nil || !cr.RequestedAt.Equal(&metav1.Time{Time: now.Add(-time.Minute)}) || cr.OldCA == "" {
					t.Errorf("caRotation %+v; want phase Trusting, the request's time and the old CA", cr)
				}
				if c := condition(o.st, etcdfedv1.ConditionProgressing); c.Reason != etcdfedv1.ReasonCARotation || !strings.Contains(c.Message, "phase Trusting") {
					t.Errorf("Progressing %s %s: %s", c.Status, c.Reason, c.Message)
				}
			},
		},
		{
			name: "a request already acted on starts nothing",
			given: func(t *testing.T, s *snapshot) *pki.Authority {
				withTLS(t, s)
				s.ec.Annotations = map[string]string{etcdfedv1.AnnotationRotateCA: etcdfedv1.CARotationRequest{RequestedAt: now.Add(-time.Hour)}.String()}
				s.ec.Status.CARotation = &etcdfedv1.CARotationStatus{Phase: etcdfedv1.CARotationCompleted, RequestedAt: &metav1.Time{Time: now.Add(-time.Hour)}}
				return nil
			},
			check: func(t *testing.T, o outcome) {
				if o.d.plan.Action != planner.ActNone || o.st.Operation != nil {
					t.Errorf("plan %s (%s); want nothing", o.d.plan.Action, o.d.plan.Reason)
				}
			},
		},
		{
			name: "a request for a CA the user provides is refused with the reason",
			given: func(t *testing.T, s *snapshot) *pki.Authority {
				withTLS(t, s)
				s.ec.Spec.TLS.CASecretName = "my-ca"
				s.ec.Annotations = map[string]string{etcdfedv1.AnnotationRotateCA: etcdfedv1.CARotationRequest{RequestedAt: now}.String()}
				return nil
			},
			check: func(t *testing.T, o outcome) {
				if cr := o.st.CARotation; cr == nil || cr.Phase != etcdfedv1.CARotationRefused || !strings.Contains(cr.Message, "my-ca") || o.st.Operation != nil {
					t.Errorf("caRotation %+v, operation %+v; want Refused naming my-ca", cr, o.st.Operation)
				}
			},
		},
		{
			name: "the new CA stored: the hub's certificate gets the bundle at once, members' Secrets wait for their Rolls, a follower's Roll begins",
			given: func(t *testing.T, s *snapshot) *pki.Authority {
				return rotating(t, s, etcdfedv1.CARotationTrusting, trusting, false)
			},
			check: func(t *testing.T, o outcome) {
				if !o.d.pki.issueHubClient {
					t.Error("the hub's client certificate is not reissued with the bundle")
				}
				if len(o.d.certs) != 0 {
					t.Errorf("%d member certificates rewritten by the upkeep; want none (each Roll writes its member's)", len(o.d.certs))
				}
				op := o.st.Operation
				if o.d.plan.Action != planner.ActBegin || op == nil || op.Type != etcdfedv1.OperationRoll || op.Member != "main-1" || op.Reason != etcdfedv1.ReasonCARotation {
					t.Fatalf("plan %s (%s), operation %+v; want a Roll of main-1, reason CARotation", o.d.plan.Action, o.d.plan.Reason, op)
				}
				if cr := o.st.CARotation; cr.MembersDone != 0 || cr.MembersTotal != 3 || cr.NewCA == "" {
					t.Errorf("caRotation %+v; want 0 of 3 done and the new CA named", cr)
				}
			},
		},
		{
			name: "a Roll of the rotation writes the member's certificate (bundle in ca.crt) before its object (the new caHash)",
			given: func(t *testing.T, s *snapshot) *pki.Authority {
				a := rotating(t, s, etcdfedv1.CARotationTrusting, trusting, false)
				inFlight(s, etcdfedv1.MembershipOperation{Type: etcdfedv1.OperationRoll, Member: "main-1", Reason: etcdfedv1.ReasonCARotation, Step: string(planner.ActUpdateObject)})
				return a
			},
			check: func(t *testing.T, o outcome) {
				if o.d.plan.Action != planner.ActUpdateObject || len(o.d.step.writes) != 1 {
					t.Fatalf("plan %s (%s), %d writes; want UpdateObject of main-1", o.d.plan.Action, o.d.plan.Reason, len(o.d.step.writes))
				}
				w := o.d.step.writes[0]
				if w.want.Spec.MemberName != "main-1" || !w.cert || w.want.Spec.TLS.CAHash != o.a.Trust() {
					t.Errorf("write %s cert=%v caHash %q; want main-1 with its certificate first and caHash %q", w.want.Spec.MemberName, w.cert, w.want.Spec.TLS.CAHash, o.a.Trust())
				}
			},
		},
		{
			name: "every member trusts both but a consumer's Secret lacks the bundle: the switch waits and says for whom",
			given: func(t *testing.T, s *snapshot) *pki.Authority {
				a := rotating(t, s, etcdfedv1.CARotationTrusting, trusting, true)
				s.ec.Spec.Clients = []etcdfedv1.ClientSpec{{Name: "apiserver", Cluster: "member-1", Namespace: "kube-system"}}
				s.ec.Status.Clients = []etcdfedv1.ClientStatus{{Name: "apiserver", Cluster: "member-1", Namespace: "kube-system", SecretName: "main-apiserver-etcd-client", Ready: true, CAHash: "stale"}}
				return a
			},
			check: func(t *testing.T, o outcome) {
				if o.d.plan.Action != planner.ActWait || !strings.Contains(o.d.plan.Reason, "client apiserver (member-1/kube-system/main-apiserver-etcd-client)") {
					t.Errorf("plan %s (%s); want a wait naming the consumer", o.d.plan.Action, o.d.plan.Reason)
				}
				if cr := o.st.CARotation; cr.MembersDone != 3 {
					t.Errorf("caRotation %+v; want 3 of 3 done", cr)
				}
			},
		},
		{
			name: "every member and consumer trusts both: SwitchCA is recorded, phase Reissuing",
			given: func(t *testing.T, s *snapshot) *pki.Authority {
				a := rotating(t, s, etcdfedv1.CARotationTrusting, trusting, true)
				s.ec.Spec.Clients = []etcdfedv1.ClientSpec{{Name: "apiserver", Cluster: "member-1", Namespace: "kube-system"}}
				s.ec.Status.Clients = []etcdfedv1.ClientStatus{{Name: "apiserver", Ready: true, CAHash: a.Trust()}}
				return a
			},
			check: func(t *testing.T, o outcome) {
				if op := o.st.Operation; op == nil || op.Type != etcdfedv1.OperationRotateCA || op.Step != string(planner.ActSwitchCA) || o.st.CARotation.Phase != etcdfedv1.CARotationReissuing {
					t.Errorf("operation %+v, caRotation %+v; want SwitchCA, phase Reissuing", op, o.st.CARotation)
				}
			},
		},
		{
			name: "the new CA issues: members restart one at a time with its certificates, the hub's is reissued at once",
			given: func(t *testing.T, s *snapshot) *pki.Authority {
				a := rotating(t, s, etcdfedv1.CARotationReissuing, trusting, true)
				// The switch stored; objects and Secrets are the Trusting ones.
				b, err := a.SwitchSigner()
				if err != nil {
					t.Fatal(err)
				}
				s.pki.auth, s.pki.ca = b, b.Signer
				return b
			},
			check: func(t *testing.T, o outcome) {
				if !o.d.pki.issueHubClient || len(o.d.certs) != 0 {
					t.Errorf("hub reissued %v, %d member certificates in the upkeep; want the hub's at once and no member's", o.d.pki.issueHubClient, len(o.d.certs))
				}
				if op := o.st.Operation; op == nil || op.Type != etcdfedv1.OperationRoll || op.Member != "main-1" || op.Reason != etcdfedv1.ReasonCARotation {
					t.Errorf("operation %+v; want the Roll of main-1", op)
				}
			},
		},
		{
			name: "the old CA dropped and every member restarted on the new CA alone: the rotation completes",
			given: func(t *testing.T, s *snapshot) *pki.Authority {
				return rotating(t, s, etcdfedv1.CARotationDropping, dropped, true)
			},
			check: func(t *testing.T, o outcome) {
				if o.d.plan.Action != planner.ActCompleteCARotation || o.st.CARotation.Phase != etcdfedv1.CARotationCompleted || o.st.CARotation.CompletedAt == nil {
					t.Errorf("plan %s (%s), caRotation %+v; want Completed", o.d.plan.Action, o.d.plan.Reason, o.st.CARotation)
				}
				if c := condition(o.st, etcdfedv1.ConditionProgressing); c.Reason == etcdfedv1.ReasonCARotation {
					t.Errorf("Progressing still says %s: %s", c.Reason, c.Message)
				}
			},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := ring()
			a := tc.given(t, s)
			d := decide(s)
			st := computeStatus(s, d, applyResult{}, "")
			tc.check(t, outcome{s: s, a: a, d: d, st: st})
		})
	}
}

// The hold after Trusting, one pass at a time: recorded in
// status.caRotation (heldSince), said in Progressing, answered by the
// request's continueHold naming that hold and nothing else.
func TestDecideCARotationHold(t *testing.T) {
	requested := now.Add(-10 * time.Minute).Truncate(time.Second)
	heldSince := now.Add(-5 * time.Minute).Truncate(time.Second)
	// atHold: Trusting done, the request and the consumers as given.
	atHold := func(t *testing.T, s *snapshot, req etcdfedv1.CARotationRequest, reload etcdfedv1.CAReload, held bool) *pki.Authority {
		a := rotating(t, s, etcdfedv1.CARotationTrusting, trusting, true)
		s.ec.Annotations = map[string]string{etcdfedv1.AnnotationRotateCA: req.String()}
		s.ec.Status.CARotation.RequestedAt = &metav1.Time{Time: requested}
		if held {
			s.ec.Status.CARotation.HeldSince = &metav1.Time{Time: heldSince}
		}
		s.ec.Spec.Clients = []etcdfedv1.ClientSpec{
			{Name: "kube-apiserver", Cluster: "member-1", Namespace: "control-plane-a", SecretName: "etcd-client", CAReload: reload},
			{Name: "app"},
		}
		s.ec.Status.Clients = []etcdfedv1.ClientStatus{
			{Name: "kube-apiserver", Cluster: "member-1", Namespace: "control-plane-a", SecretName: "etcd-client", Ready: true, CAHash: a.Trust()},
			{Name: "app", Namespace: s.ec.Namespace, SecretName: "main-app-etcd-client", Ready: true, CAHash: a.Trust()},
		}
		return a
	}
	answer := func(at time.Time) *time.Time { return &at }
	heldCheck := func(t *testing.T, o outcome2, since time.Time) {
		t.Helper()
		cr := o.st.CARotation
		if o.d.plan.Action != planner.ActHoldCARotation || o.st.Operation != nil {
			t.Fatalf("plan %s (%s), operation %+v; want the hold", o.d.plan.Action, o.d.plan.Reason, o.st.Operation)
		}
		if cr.Phase != etcdfedv1.CARotationTrusting || !cr.HoldAfterTrusting || cr.HeldSince == nil || !cr.HeldSince.Time.Equal(since) || cr.ContinuedAt != nil {
			t.Errorf("caRotation %+v; want Trusting, holdAfterTrusting, held since %s", cr, since)
		}
		c := condition(o.st, etcdfedv1.ConditionProgressing)
		for _, want := range []string{"held since " + since.UTC().Format(time.RFC3339), "the Secrets of consumers kube-apiserver (member-1/control-plane-a/etcd-client), app (hub/" + o.s.ec.Namespace + "/main-app-etcd-client) hold both",
			"then run `etcdfed rotate-ca main -n " + o.s.ec.Namespace + " --continue`"} {
			if c.Status != metav1.ConditionTrue || c.Reason != etcdfedv1.ReasonCARotation || !strings.Contains(c.Message, want) {
				t.Errorf("Progressing %s %s: %q; want it to say %q", c.Status, c.Reason, c.Message, want)
			}
		}
	}
	cases := []struct {
		name  string
		given func(t *testing.T, s *snapshot)
		check func(t *testing.T, o outcome2)
	}{
		{
			name: "a consumer reads its CA only at start: the rotation holds after Trusting, heldSince recorded, Progressing names whom to restart and how to go on",
			given: func(t *testing.T, s *snapshot) {
				atHold(t, s, etcdfedv1.CARotationRequest{RequestedAt: requested}, etcdfedv1.CAReloadAtStart, false)
			},
			check: func(t *testing.T, o outcome2) {
				heldCheck(t, o, now)
				if c := condition(o.st, etcdfedv1.ConditionProgressing); !strings.Contains(c.Message, "restart kube-apiserver (member-1/control-plane-a/etcd-client) (caReload: AtStart") {
					t.Errorf("Progressing %q does not name the consumer to restart", c.Message)
				}
			},
		},
		{
			name: "held on request (--hold-after-trusting), every consumer re-reading its CA: held all the same",
			given: func(t *testing.T, s *snapshot) {
				atHold(t, s, etcdfedv1.CARotationRequest{RequestedAt: requested, HoldAfterTrusting: true}, "", false)
			},
			check: func(t *testing.T, o outcome2) {
				heldCheck(t, o, now)
				if c := condition(o.st, etcdfedv1.ConditionProgressing); !strings.Contains(c.Message, "held on request") {
					t.Errorf("Progressing %q does not say the hold was requested", c.Message)
				}
			},
		},
		{
			name: "a hub restarted during the hold: heldSince kept from the status, not moved",
			given: func(t *testing.T, s *snapshot) {
				atHold(t, s, etcdfedv1.CARotationRequest{RequestedAt: requested}, etcdfedv1.CAReloadAtStart, true)
			},
			check: func(t *testing.T, o outcome2) { heldCheck(t, o, heldSince) },
		},
		{
			name: "the request answers this hold: SwitchCA recorded, phase Reissuing, continuedAt set",
			given: func(t *testing.T, s *snapshot) {
				atHold(t, s, etcdfedv1.CARotationRequest{RequestedAt: requested, ContinueHold: answer(heldSince)}, etcdfedv1.CAReloadAtStart, true)
			},
			check: func(t *testing.T, o outcome2) {
				op, cr := o.st.Operation, o.st.CARotation
				if op == nil || op.Type != etcdfedv1.OperationRotateCA || op.Step != string(planner.ActSwitchCA) {
					t.Fatalf("plan %s (%s), operation %+v; want SwitchCA", o.d.plan.Action, o.d.plan.Reason, op)
				}
				if cr.Phase != etcdfedv1.CARotationReissuing || cr.ContinuedAt == nil || cr.HeldSince == nil {
					t.Errorf("caRotation %+v; want Reissuing with heldSince kept and continuedAt set", cr)
				}
			},
		},
		{
			name: "an answer to another hold (an earlier heldSince, the status since rewritten) does not end this one",
			given: func(t *testing.T, s *snapshot) {
				atHold(t, s, etcdfedv1.CARotationRequest{RequestedAt: requested, ContinueHold: answer(heldSince.Add(-time.Hour))}, etcdfedv1.CAReloadAtStart, true)
			},
			check: func(t *testing.T, o outcome2) { heldCheck(t, o, heldSince) },
		},
		{
			name: "an answer written before any hold began (no heldSince) does not skip it",
			given: func(t *testing.T, s *snapshot) {
				atHold(t, s, etcdfedv1.CARotationRequest{RequestedAt: requested, ContinueHold: answer(now)}, etcdfedv1.CAReloadAtStart, false)
			},
			check: func(t *testing.T, o outcome2) { heldCheck(t, o, now) },
		},
		{
			name: "the annotation is another request than the rotation's: its hold is not this rotation's",
			given: func(t *testing.T, s *snapshot) {
				atHold(t, s, etcdfedv1.CARotationRequest{RequestedAt: requested.Add(time.Minute), HoldAfterTrusting: true}, "", false)
			},
			check: func(t *testing.T, o outcome2) {
				if op := o.st.Operation; op == nil || op.Step != string(planner.ActSwitchCA) || o.st.CARotation.HoldAfterTrusting || o.st.CARotation.HeldSince != nil {
					t.Errorf("operation %+v, caRotation %+v; want SwitchCA, no hold", op, o.st.CARotation)
				}
			},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := ring()
			tc.given(t, s)
			d := decide(s)
			st := computeStatus(s, d, applyResult{}, "")
			tc.check(t, outcome2{s: s, d: d, st: st})
		})
	}
}

type outcome2 struct {
	s  *snapshot
	d  *decision
	st etcdfedv1.EtcdClusterStatus
}
