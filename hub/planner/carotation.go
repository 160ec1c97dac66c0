package planner

import (
	"fmt"
	"strings"
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
//
// A consumer that reads its CA file only at start (kube-apiserver's
// --etcd-cafile) must be restarted after its Secret holds both CAs and
// before the members present certificates of the new CA, that is between
// steps 1 and 2. When one is declared (spec.clients[].caReload: AtStart),
// or the request asks for it, the rotation holds there: SwitchCA waits
// until the request answers the hold (its continueHold names
// status.caRotation.heldSince). The hold is not an operation in flight:
// it may last hours, so a failed member's replacement, a drain's grant or
// a defragmentation go first; the planner says "held" (ActHoldCARotation)
// only when nothing else is to do.

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

	// HoldRequested is true when the request asks to hold after Trusting
	// (`etcdfed rotate-ca --hold-after-trusting`).
	HoldRequested bool
	// AtStart names the consumers that read their CA only at start
	// (spec.clients[].caReload: AtStart), each with where its Secret is;
	// the rotation holds for them.
	AtStart []string
	// Consumers names every spec.clients consumer with where its Secret
	// is, for the hold's message.
	Consumers []string
	// Continued is true when the request answers the hold under way (its
	// continueHold is status.caRotation.heldSince).
	Continued bool
	// ContinueCommand is the command that answers the hold.
	ContinueCommand string
}

// Holds reports whether the rotation holds after Trusting.
func (c CARotation) Holds() bool { return c.HoldRequested || len(c.AtStart) > 0 }

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
	if held(ca) {
		// Every member and consumer trusts both CAs; the switch waits for
		// the answer. caHoldStep says so once nothing else is to do.
		return otherwise
	}
	if ca.Phase == CAPhaseTrusting && next == ActSwitchCA && ca.Holds() {
		why = "the hold after Trusting was answered: " + why
	}
	return begin(in, Operation{Type: OpRotateCA, Reason: ReasonCARotation, Step: next}, why)
}

// held reports whether the rotation stands at its hold: Trusting done (the
// new CA stored beside the old, which still issues), a hold wanted and
// not answered. Whether every member and consumer is ready for the switch
// is caRotationStep's to check.
func held(ca CARotation) bool {
	return ca.Phase == CAPhaseTrusting && ca.HasNext && !ca.HasPrevious && ca.Holds() && !ca.Continued
}

// caHoldStep says the rotation is held, when it is and the planner has
// nothing else to do (d is ActNone, or a wait outside an operation, whose
// reason is kept): the hold is the last word, never in the way of another
// step.
func caHoldStep(in Input, d Decision) Decision {
	ca := in.CA
	if !held(ca) || outdatedMembers(in) > 0 || notReadyToRoll(in) != "" || ca.ConsumersPending != "" {
		return d
	}
	switch {
	case d.Action == ActNone:
		return Decision{Action: ActHoldCARotation, Reason: holdMessage(ca), RequeueAfter: pollSlow}
	case d.Action == ActWait && d.Operation == nil:
		return Decision{Action: ActHoldCARotation, Reason: holdMessage(ca) + "; meanwhile " + d.Reason, RequeueAfter: min(d.RequeueAfter, pollSlow)}
	}
	return d
}

// holdMessage says what the hold waits for: which consumers to restart and
// how to answer.
func holdMessage(ca CARotation) string {
	var b strings.Builder
	b.WriteString("CA rotation held after Trusting: every member trusts both CAs")
	if len(ca.Consumers) > 0 {
		fmt.Fprintf(&b, " and the Secrets of consumers %s hold both", strings.Join(ca.Consumers, ", "))
	}
	if len(ca.AtStart) > 0 {
		fmt.Fprintf(&b, "; restart %s (caReload: AtStart, reads its CA only at start)", strings.Join(ca.AtStart, ", "))
		if ca.HoldRequested {
			b.WriteString(" and any other consumer that reads its CA only at start")
		}
	} else {
		b.WriteString("; held on request (--hold-after-trusting): restart the consumers that read their CA only at start")
	}
	cmd := ca.ContinueCommand
	if cmd == "" {
		cmd = "etcdfed rotate-ca NAME --continue"
	}
	fmt.Fprintf(&b, ", then run `%s`", cmd)
	return b.String()
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
