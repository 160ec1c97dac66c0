package v1alpha1

import (
	"encoding/json"
	"fmt"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// AnnotationRotateCA on an EtcdCluster asks the hub to rotate the ring's
// CA. Its value is a CARotationRequest in JSON; `etcdfed rotate-ca` writes
// it. The hub acts on a request made after the last rotation it started
// (status.caRotation.requestedAt), so a request left in place never starts
// a second rotation.
const AnnotationRotateCA = "etcdfed.dev/rotate-ca"

// CARotationRequest is the value of AnnotationRotateCA.
// +kubebuilder:object:generate=false
type CARotationRequest struct {
	// RequestedAt is when the request was made (the CLI's clock).
	RequestedAt time.Time `json:"requestedAt"`
	// HoldAfterTrusting asks the hub to hold the rotation after its
	// Trusting phase (every member trusts both CAs, every consumer Secret
	// holds both), as it does by itself while a consumer reads its CA only
	// at start (spec.clients[].caReload: AtStart), until ContinueHold
	// answers the hold (`etcdfed rotate-ca --hold-after-trusting`).
	HoldAfterTrusting bool `json:"holdAfterTrusting,omitempty"`
	// ContinueHold ends the hold that began at this time
	// (status.caRotation.heldSince, which `etcdfed rotate-ca --continue`
	// copies): an answer names the hold it answers, so it never ends a hold
	// its writer did not see.
	ContinueHold *time.Time `json:"continueHold,omitempty"`
}

// ParseCARotationRequest reads AnnotationRotateCA's value.
func ParseCARotationRequest(v string) (CARotationRequest, error) {
	var r CARotationRequest
	if err := json.Unmarshal([]byte(v), &r); err != nil {
		return r, fmt.Errorf("annotation %s: %w", AnnotationRotateCA, err)
	}
	if r.RequestedAt.IsZero() {
		return r, fmt.Errorf("annotation %s: requestedAt is missing", AnnotationRotateCA)
	}
	return r, nil
}

// String renders the request as the annotation's value.
func (r CARotationRequest) String() string {
	b, err := json.Marshal(r)
	if err != nil {
		panic(err) // a time always marshals
	}
	return string(b)
}

// CARotationPhase is where a CA rotation stands.
// +kubebuilder:validation:Enum=Trusting;Reissuing;Dropping;Completed;Refused
type CARotationPhase string

const (
	// CARotationTrusting: a new CA was generated beside the old one; every
	// member is restarted, one at a time, to trust both (ca.crt holds the
	// two), and every consumer's Secret gets both. Certificates are still
	// issued by the old CA.
	CARotationTrusting CARotationPhase = "Trusting"
	// CARotationReissuing: the new CA issues; every member is restarted,
	// one at a time, with a certificate of the new CA; the hub's and every
	// consumer's client certificate are reissued from it. Both CAs are
	// still trusted.
	CARotationReissuing CARotationPhase = "Reissuing"
	// CARotationDropping: the old CA was removed from the bundle; every
	// member is restarted, one at a time, to trust the new CA alone, and
	// every consumer's ca.crt holds the new CA alone.
	CARotationDropping CARotationPhase = "Dropping"
	// CARotationCompleted: the last rotation finished.
	CARotationCompleted CARotationPhase = "Completed"
	// CARotationRefused: the last request could not be acted on (message).
	CARotationRefused CARotationPhase = "Refused"
)

// InProgress reports whether a rotation is under way in phase p.
func (p CARotationPhase) InProgress() bool {
	return p == CARotationTrusting || p == CARotationReissuing || p == CARotationDropping
}

// OperationRotateCA changes the ring's CA Secret, one step of a CA
// rotation (reason CARotation): step AddCA generates the new CA beside the
// old one, SwitchCA makes it the issuer (the old one stays trusted),
// DropCA removes the old one. The members' restarts between the steps are
// Roll operations with reason CARotation.
const OperationRotateCA OperationType = "RotateCA"

// ReasonCARotation is the reason of the RotateCA and Roll operations of a
// CA rotation, and of Progressing=True while one is under way.
const ReasonCARotation = "CARotation"

// CARotationStatus reports the ring's CA rotation (AnnotationRotateCA).
type CARotationStatus struct {
	// phase is Trusting, Reissuing, Dropping, Completed or Refused.
	// +required
	Phase CARotationPhase `json:"phase"`

	// requestedAt is when the request the hub last acted on was made.
	// +optional
	RequestedAt *metav1.Time `json:"requestedAt,omitempty"`

	// startedAt is when the hub started the rotation.
	// +optional
	StartedAt *metav1.Time `json:"startedAt,omitempty"`

	// phaseStartedAt is when the current phase began.
	// +optional
	PhaseStartedAt *metav1.Time `json:"phaseStartedAt,omitempty"`

	// completedAt is when the rotation finished (phase Completed).
	// +optional
	CompletedAt *metav1.Time `json:"completedAt,omitempty"`

	// oldCA names the CA being replaced (subject and serial).
	// +optional
	// +kubebuilder:validation:MaxLength=512
	OldCA string `json:"oldCA,omitempty"`

	// newCA names the CA replacing it (subject and serial).
	// +optional
	// +kubebuilder:validation:MaxLength=512
	NewCA string `json:"newCA,omitempty"`

	// membersDone is how many members run what the phase needs (trust,
	// certificate).
	// +optional
	MembersDone int32 `json:"membersDone,omitempty"`

	// membersTotal is how many members the phase restarts.
	// +optional
	MembersTotal int32 `json:"membersTotal,omitempty"`

	// holdAfterTrusting is true when the rotation holds after its Trusting
	// phase until `etcdfed rotate-ca NAME --continue`: the request asked
	// for it (--hold-after-trusting), or a consumer reads its CA only at
	// start (spec.clients[].caReload: AtStart) and must be restarted while
	// its Secret holds both CAs and before the members present
	// certificates of the new CA.
	// +optional
	HoldAfterTrusting bool `json:"holdAfterTrusting,omitempty"`

	// heldSince is when the hold began: every member trusted both CAs and
	// every consumer's Secret held both. The rotation goes on when the
	// request's continueHold names this time (`etcdfed rotate-ca NAME
	// --continue` copies it).
	// +optional
	HeldSince *metav1.Time `json:"heldSince,omitempty"`

	// continuedAt is when the hub took the answer to the hold and started
	// the Reissuing phase.
	// +optional
	ContinuedAt *metav1.Time `json:"continuedAt,omitempty"`

	// message says what the rotation waits for.
	// +optional
	// +kubebuilder:validation:MaxLength=1024
	Message string `json:"message,omitempty"`
}
