package planner

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

// heldIn is a ring whose Trusting phase is done (every member restarted
// on the bundle, every consumer's Secret holding it) with a consumer that
// reads its CA only at start: the rotation stands at its hold.
func heldIn(outdated ...string) Input {
	in := caIn(CAPhaseTrusting, true, false, outdated...)
	in.CA.Consumers = []string{"kube-apiserver (member-1/control-plane-a/etcd-client)", "app (hub/team-a/main-app-etcd-client)"}
	in.CA.AtStart = []string{"kube-apiserver (member-1/control-plane-a/etcd-client)"}
	in.CA.ContinueCommand = "etcdfed rotate-ca main -n team-a --continue"
	return in
}

// The hold after Trusting (spec.clients[].caReload: AtStart, or the
// request's holdAfterTrusting): the switch to the new CA waits until the
// request answers the hold; the hold is said only when nothing else is to
// do, and is in the way of nothing else (a drain, a replacement); it
// never holds another phase.
func TestCARotationHold(t *testing.T) {
	run(t, []struct {
		name   string
		input  func() Input
		checks []check
	}{
		{"Trusting done, a consumer reads its CA only at start: held, naming it, every consumer and the command", func() Input { return heldIn() },
			[]check{action(ActHoldCARotation), noOperation, reason("held after Trusting"),
				reason("the Secrets of consumers kube-apiserver (member-1/control-plane-a/etcd-client), app (hub/team-a/main-app-etcd-client) hold both"),
				reason("restart kube-apiserver (member-1/control-plane-a/etcd-client) (caReload: AtStart"),
				reason("then run `etcdfed rotate-ca main -n team-a --continue`")}},
		{"held on request alone (no consumer declared AtStart): says so", func() Input {
			in := caIn(CAPhaseTrusting, true, false)
			in.CA.HoldRequested = true
			return in
		}, []check{action(ActHoldCARotation), reason("held on request (--hold-after-trusting)"), reason("etcdfed rotate-ca NAME --continue")}},
		{"held and answered: the new CA issues", func() Input {
			in := heldIn()
			in.CA.Continued = true
			return in
		}, []check{action(ActBegin), opRecorded(OpRotateCA, ActSwitchCA), reason("the hold after Trusting was answered")}},
		{"no hold wanted: the switch follows at once", func() Input {
			in := heldIn()
			in.CA.AtStart = nil
			return in
		}, []check{action(ActBegin), opRecorded(OpRotateCA, ActSwitchCA)}},
		{"a hold wanted but members still to restart: the Rolls go on, no hold yet", func() Input { return heldIn("main-1", "main-2") },
			[]check{action(ActBegin), rollOf("main-1"), opReason(ReasonCARotation)}},
		{"a hold wanted but a consumer's Secret lacks the bundle: waits for the Secret, not held yet", func() Input {
			in := heldIn()
			in.CA.ConsumersPending = "client kube-apiserver (member-1/control-plane-a/etcd-client): forbidden"
			return in
		}, []check{action(ActWait), noOperation, reason("waits for client certificates: client kube-apiserver")}},
		{"a hold wanted but a member is not ready: waits for it, not held", func() Input {
			in := heldIn()
			in.Members[2].Ready = false
			return in
		}, []check{action(ActWait), reason("main-2 is not a ready voter")}},
		{"held, a node drained meanwhile: the grant goes first (a hold may last hours)", func() Input {
			in := heldIn()
			in.Members[1].Object.DisruptionRequested = true
			in.Members[1].Object.DisruptionRequestedSince = t0
			in.Members[1].Object.DisruptionReason = "node of main-1 is cordoned"
			return in
		}, []check{action(ActBegin), disruptionOf("main-1")}},
		{"held, a drain in flight: the drain's step, not the hold", func() Input {
			in := heldIn()
			op := Operation{Type: OpDisrupt, Member: "main-1", Reason: ReasonNodeMaintenance, Step: ActGrantDisruption, StartedAt: t0}
			in.Operation = &op
			in.Members[1].Object.DisruptionRequested = true
			return in
		}, []check{func(t *testing.T, d Decision) {
			t.Helper()
			if d.Action == ActHoldCARotation || d.Operation == nil || d.Operation.Type != OpDisrupt {
				t.Errorf("decision %s (%s), operation %+v; want the Disrupt's step", d.Action, d.Reason, d.Operation)
			}
		}}},
		{"held, a scale-up asked: the membership change goes first", func() Input {
			in := heldIn()
			in.Replicas = 5
			in.Placement.Steps = scaleUpSteps()
			return in
		}, []check{action(ActBegin), opRecorded(OpAdd, ActCreateObjects)}},
		{"a rotation requested with a hold: the new CA is added first, no hold before Trusting", func() Input {
			in := caIn("", false, false)
			in.CA.Requested, in.CA.HoldRequested = true, true
			return in
		}, []check{action(ActBegin), opRecorded(OpRotateCA, ActAddCA)}},
		{"Trusting recorded but the new CA not stored: stored first, no hold", func() Input {
			in := heldIn()
			in.CA.HasNext = false
			return in
		}, []check{action(ActBegin), opRecorded(OpRotateCA, ActAddCA)}},
		{"Reissuing with a consumer AtStart: no second hold, the old CA is dropped", func() Input {
			in := heldIn()
			in.CA.Phase, in.CA.HasNext, in.CA.HasPrevious = CAPhaseReissuing, false, true
			return in
		}, []check{action(ActBegin), opRecorded(OpRotateCA, ActDropCA)}},
		{"Dropping with a consumer AtStart: completes", func() Input {
			in := heldIn()
			in.CA.Phase, in.CA.HasNext = CAPhaseDropping, false
			return in
		}, []check{action(ActCompleteCARotation)}},
	})
}
