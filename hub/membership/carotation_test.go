package membership

import (
	"testing"
)

// caIn is a ready ring (every object settled, nothing outdated) in CA
// rotation phase, the CA Secret holding next or previous as given, and
// the given members' objects outdated on their trust.
func caIn(phase string, next, previous bool, outdated ...string) Input {
	in := rolled(outdated...)
	for i := range in.Members {
		in.Members[i].Object.OutdatedTrust = in.Members[i].Object.Outdated
	}
	in.CA = CARotation{Phase: phase, HasNext: next, HasPrevious: previous}
	return in
}

func rotateCA(step Action) Operation {
	return Operation{Type: OpRotateCA, Reason: ReasonCARotation, Step: step, StartedAt: t0}
}

// A CA rotation: three changes of the CA Secret, each recorded as a
// RotateCA operation, each only once every member runs the previous one
// and every consumer holds it, the restarts between them Rolls of
// reason CARotation, one member at a time.
func TestCARotation(t *testing.T) {
	run(t, []struct {
		name   string
		input  func() Input
		checks []check
	}{
		{"no request: nothing", func() Input { return caIn("", false, false) }, []check{action(ActNone), noOperation}},
		{"requested on a ready ring: the new CA is added first", func() Input {
			in := caIn("", false, false)
			in.CA.Requested = true
			return in
		}, []check{action(ActBegin), opRecorded(OpRotateCA, ActAddCA), reason("generating a new CA")}},
		{"requested during a rollout: the rollout goes first", func() Input {
			in := caIn("", false, false, "main-1")
			in.CA.Requested = true
			in.Members[1].Object.OutdatedTrust = false
			return in
		}, []check{action(ActBegin), rollOf("main-1"), reason("to the new spec")}},
		{"requested with a member not ready: it waits", func() Input {
			in := caIn("", false, false)
			in.CA.Requested = true
			in.Members[2].Ready = false
			return in
		}, []check{action(ActWait), noOperation, reason("main-2 is not a ready voter")}},
		{"requested but refused: the refusal is recorded", func() Input {
			in := caIn("", false, false)
			in.CA.Requested, in.CA.Refusal = true, "spec.tls.caSecretName names a CA the user provides"
			return in
		}, []check{action(ActRefuseCARotation), noOperation, reason("caSecretName")}},
		{"membership goes first: a scale-up before the rotation", func() Input {
			in := caIn("", false, false)
			in.CA.Requested = true
			in.Replicas = 5
			in.Placement.Steps = scaleUpSteps()
			return in
		}, []check{action(ActBegin), opRecorded(OpAdd, ActCreateObjects)}},
		{"AddCA in flight, not stored yet: store it", func() Input {
			in := caIn(CAPhaseTrusting, false, false)
			op := rotateCA(ActAddCA)
			in.Operation = &op
			return in
		}, []check{action(ActAddCA), opRecorded(OpRotateCA, ActAddCA)}},
		{"AddCA stored: the operation ends", func() Input {
			in := caIn(CAPhaseTrusting, true, false)
			op := rotateCA(ActAddCA)
			in.Operation = &op
			return in
		}, []check{action(ActFinish), reason("trust both")}},
		{"trusting: members restart one at a time, a follower first, as Rolls of reason CARotation", func() Input {
			return caIn(CAPhaseTrusting, true, false, "main-0", "main-1", "main-2")
		}, []check{action(ActBegin), rollOf("main-1"), opReason(ReasonCARotation), reason("changed CA trust")}},
		{"trusting: the leader last", func() Input { return caIn(CAPhaseTrusting, true, false, "main-0") },
			[]check{action(ActBegin), rollOf("main-0"), opReason(ReasonCARotation), reason("leadership moves away first")}},
		{"trusting, every member restarted but a consumer lacks the bundle: no switch", func() Input {
			in := caIn(CAPhaseTrusting, true, false)
			in.CA.ConsumersPending = "client apiserver (c/kube-system/etcd): not written yet"
			return in
		}, []check{action(ActWait), noOperation, reason("apiserver")}},
		{"trusting, every member restarted, a member not ready: no switch", func() Input {
			in := caIn(CAPhaseTrusting, true, false)
			in.Members[0].Object.Settled = false
			return in
		}, []check{action(ActWait), noOperation, reason("main-0's pod is not ready")}},
		{"trusting, all done: the new CA issues", func() Input { return caIn(CAPhaseTrusting, true, false) },
			[]check{action(ActBegin), opRecorded(OpRotateCA, ActSwitchCA)}},
		{"trusting recorded but the new CA lost with its operation: stored again", func() Input { return caIn(CAPhaseTrusting, false, false) },
			[]check{action(ActBegin), opRecorded(OpRotateCA, ActAddCA)}},
		{"SwitchCA done: the operation ends", func() Input {
			in := caIn(CAPhaseReissuing, false, true, "main-0", "main-1", "main-2")
			op := rotateCA(ActSwitchCA)
			in.Operation = &op
			return in
		}, []check{action(ActFinish), reason("certificates of the new CA")}},
		{"reissuing recorded, switch not stored (its operation lost with the status): switch now, consumers not waited for", func() Input {
			in := caIn(CAPhaseReissuing, true, false)
			in.CA.ConsumersPending = "the hub's client certificate"
			return in
		}, []check{action(ActBegin), opRecorded(OpRotateCA, ActSwitchCA)}},
		{"reissuing: members restart one at a time", func() Input { return caIn(CAPhaseReissuing, false, true, "main-2") },
			[]check{action(ActBegin), rollOf("main-2"), opReason(ReasonCARotation)}},
		{"reissuing, all restarted, the hub's client certificate not yet reissued: no drop", func() Input {
			in := caIn(CAPhaseReissuing, false, true)
			in.CA.ConsumersPending = "the hub's client certificate"
			return in
		}, []check{action(ActWait), reason("the hub's client certificate")}},
		{"reissuing, all done: the old CA is dropped", func() Input { return caIn(CAPhaseReissuing, false, true) },
			[]check{action(ActBegin), opRecorded(OpRotateCA, ActDropCA), reason("dropping the old CA")}},
		{"DropCA done: the operation ends", func() Input {
			in := caIn(CAPhaseDropping, false, false, "main-0", "main-1", "main-2")
			op := rotateCA(ActDropCA)
			in.Operation = &op
			return in
		}, []check{action(ActFinish), reason("trust the new CA alone")}},
		{"dropping: members restart one at a time", func() Input { return caIn(CAPhaseDropping, false, false, "main-1", "main-2") },
			[]check{action(ActBegin), rollOf("main-1")}},
		{"dropping, all restarted and every consumer current: complete", func() Input { return caIn(CAPhaseDropping, false, false) },
			[]check{action(ActCompleteCARotation), noOperation}},
		{"a new request during a rotation changes nothing", func() Input {
			in := caIn(CAPhaseDropping, false, false, "main-1")
			in.CA.Requested = true
			return in
		}, []check{action(ActBegin), rollOf("main-1")}},
	})
}

func opReason(r string) check {
	return func(t *testing.T, d Decision) {
		t.Helper()
		if d.Operation == nil || d.Operation.Reason != r {
			t.Errorf("operation = %+v, want reason %s", d.Operation, r)
		}
	}
}
