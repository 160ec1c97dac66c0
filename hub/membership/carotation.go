package membership

import (
	"fmt"
	"time"
)

// A CA rotation replaces the ring's CA without a moment where two members
// distrust each other. etcd reads its trusted CA file only when it starts
// (it re-reads its own certificate on every handshake), so every change of
// trust is a restart, and restarts are Rolls, one member at a time, the
// leader last (rollout.go). The rotation is three changes of the CA
// Secret, each a RotateCA operation recorded before it is made, each
// followed by a rollout:
//
//  1. AddCA: a new CA is stored beside the old one, which still issues.
//     Every member restarts trusting both; consumers get both in ca.crt.
//  2. SwitchCA: the new CA issues, the old one is kept as trusted. Every
//     member restarts with a certificate of the new CA, which every other
//     member already trusts (step 1); the hub's and consumers' client
//     certificates are reissued from it.
//  3. DropCA: the old CA is removed. Every member restarts trusting the
//     new CA alone; every certificate it can meet is of the new CA
//     (step 2).
//
// Each change waits until every member runs the previous one (no member
// outdated), every member is a ready voter, and every consumer's Secret
// and the hub's own client certificate hold what the previous change
// wants (CARotation.ConsumersPending). The phase is recorded in
// status.caRotation; what the CA Secret holds (Next, Previous) is
// inspected, so a restarted hub resumes where it was.

// Phases of a CA rotation, the API's strings.
const (
	CAPhaseTrusting  = "Trusting"
	CAPhaseReissuing = "Reissuing"
	CAPhaseDropping  = "Dropping"
)

// CARotation is what the planner needs of a CA rotation.
type CARotation struct {
	// Phase is status.caRotation.phase when a rotation is under way
	// (Trusting, Reissuing, Dropping), "" otherwise.
	Phase string
	// Requested is true when a rotation request newer than the last one
	// acted on is pending; Refusal says why it cannot be acted on ("" when
	// it can).
	Requested bool
	Refusal   string
	// HasNext and HasPrevious say what the CA Secret holds besides the
	// issuing CA: the new CA (after AddCA) or the old one (after SwitchCA).
	HasNext, HasPrevious bool
	// ConsumersPending names the holders of client certificates (the hub,
	// spec.clients Secrets) whose Secret does not hold yet what the CA
	// Secret wants (bundle and issuer), "" when all do.
	ConsumersPending string
}

// caRotationStep takes the next step of a CA rotation when the ring is
// ready for it, or returns otherwise: the step after it in the planner's
// order (rollStep's decision, which carries on the rollouts the rotation
// causes).
func caRotationStep(in Input, otherwise Decision) Decision {
	ca := in.CA
	if ca.Phase == "" && !ca.Requested {
		return otherwise
	}
	if otherwise.Action != ActNone && otherwise.Action != ActWait {
		return otherwise // a membership step or a member's roll goes first
	}
	if ca.Phase == "" && ca.Refusal != "" {
		return Decision{Action: ActRefuseCARotation, Reason: ca.Refusal}
	}
	// What the next change needs, in order.
	var next Action
	var why string
	switch ca.Phase {
	case "":
		next, why = ActAddCA, "rotating the CA: generating a new CA and storing it beside the old one"
	case CAPhaseTrusting:
		if !ca.HasNext && !ca.HasPrevious {
			// Recorded, but the new CA was never stored (its operation was
			// lost with the status): store it now.
			next, why = ActAddCA, "rotating the CA: storing the new CA beside the old one"
		} else {
			next, why = ActSwitchCA, "every member and consumer trusts both CAs: the new CA issues from now on"
		}
	case CAPhaseReissuing:
		if ca.HasNext {
			next, why = ActSwitchCA, "the new CA issues from now on"
		} else {
			next, why = ActDropCA, "every member and consumer holds a certificate of the new CA: dropping the old CA"
		}
	case CAPhaseDropping:
		if ca.HasPrevious || ca.HasNext {
			next, why = ActDropCA, "dropping the old CA"
		} else {
			next, why = ActCompleteCARotation, "every member and consumer trusts the new CA alone: the CA rotation is complete"
		}
	default:
		return otherwise
	}
	// A change that only stores what was decided before needs no waiting;
	// any other waits for the rollout of the previous one.
	resume := (ca.Phase == CAPhaseTrusting && next == ActAddCA) || (ca.Phase == CAPhaseReissuing && next == ActSwitchCA) ||
		(ca.Phase == CAPhaseDropping && next == ActDropCA)
	if !resume {
		if n := outdatedMembers(in); n > 0 {
			return waitOr(otherwise, pollSlow, "CA rotation (%s): %d member(s) still to restart", phaseName(ca.Phase), n)
		}
		if w := notReadyToRoll(in); w != "" {
			return waitOr(otherwise, pollSlow, "CA rotation (%s) waits until every member is a ready voter: %s", phaseName(ca.Phase), w)
		}
		if ca.Phase != "" && ca.ConsumersPending != "" {
			return waitOr(otherwise, pollFast, "CA rotation (%s) waits for client certificates: %s", phaseName(ca.Phase), ca.ConsumersPending)
		}
	}
	if next == ActCompleteCARotation {
		return Decision{Action: ActCompleteCARotation, Reason: why}
	}
	return begin(in, Operation{Type: OpRotateCA, Reason: ReasonCARotation, Step: next}, why)
}

// continueRotateCA carries out one change of the CA Secret, done once the
// Secret shows it.
func continueRotateCA(in Input, op Operation) Decision {
	ca := in.CA
	var done bool
	var why string
	switch op.Step {
	case ActAddCA:
		done, why = ca.HasNext || ca.HasPrevious, "the new CA is stored beside the old one: members restart one at a time to trust both"
	case ActSwitchCA:
		done, why = !ca.HasNext, "the new CA issues: members restart one at a time with certificates of the new CA"
	case ActDropCA:
		done, why = !ca.HasNext && !ca.HasPrevious, "the old CA is dropped: members restart one at a time to trust the new CA alone"
	default:
		return Decision{Action: ActFinish, Reason: fmt.Sprintf("unknown CA rotation step %q dropped", op.Step)}
	}
	if done {
		return Decision{Action: ActFinish, Reason: why}
	}
	return step(op, op.Step, Decision{RequeueAfter: pollFast, Reason: fmt.Sprintf("writing the CA Secret (%s)", op.Step)})
}

func outdatedMembers(in Input) int {
	n := 0
	for _, m := range in.Members {
		if m.Object != nil && m.Object.Outdated {
			n++
		}
	}
	return n
}

// waitOr keeps otherwise when it already waits (its reason is the more
// precise), else waits with the reason given.
func waitOr(otherwise Decision, after time.Duration, format string, args ...any) Decision {
	if otherwise.Action == ActWait {
		return otherwise
	}
	return wait(after, format, args...)
}

func phaseName(p string) string {
	if p == "" {
		return "requested"
	}
	return p
}
