package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// OperationType is the kind of operation the hub's planner records before
// taking it: a membership change (Bootstrap, Add, Remove, Replace, Move),
// a leadership move (MoveLeader), a member's restart on a changed spec
// (Roll), a defragmentation (Defrag), a granted disruption (Disrupt,
// disruption_types.go), a recovery (Recover, recovery_types.go), a CA
// rotation (RotateCA, carotation_types.go) or an adopted original's
// retirement (Retire, adopt_types.go).
// +kubebuilder:validation:Enum=Bootstrap;Add;Remove;Replace;Move;MoveLeader;Roll;Defrag;Disrupt;Recover;RotateCA;Retire
type OperationType string

const (
	OperationBootstrap OperationType = "Bootstrap"
	OperationAdd       OperationType = "Add"
	OperationRemove    OperationType = "Remove"
	OperationReplace   OperationType = "Replace"
	// OperationMove moves a live member make-before-break: its new
	// incarnation joins as a learner beside the old one and is promoted
	// (the ring has one voter more than replicas for a while), then
	// leadership leaves the old incarnation, its ID is removed and its
	// objects deleted. A move whose old incarnation is already dead is a
	// Replace (break-before-make).
	OperationMove       OperationType = "Move"
	OperationMoveLeader OperationType = "MoveLeader"
	// OperationRoll restarts one member on the EtcdCluster's current spec
	// (image, version, etcd flags, pod template) on its own volume,
	// leadership moved away first. A rollout is one Roll per member,
	// followers first, the leader last.
	OperationRoll OperationType = "Roll"
	// OperationDefrag defragments members' databases one at a time
	// (reason Fragmented: one member; reason NoSpace: compaction, every
	// member, then the NOSPACE alarm disarmed).
	OperationDefrag OperationType = "Defrag"
)

// MembershipOperation is the one operation in flight on the ring, of any
// OperationType. It is written before the change is made, so a restarted
// hub resumes it.
type MembershipOperation struct {
	// type of the change.
	// +required
	Type OperationType `json:"type"`

	// member is the member being added, removed, replaced or rolled.
	// +optional
	// +kubebuilder:validation:MaxLength=63
	Member string `json:"member,omitempty"`

	// memberID is the etcd ID being removed: the removed member's (Remove)
	// or the replaced incarnation's (Replace).
	// +optional
	// +kubebuilder:validation:MaxLength=16
	MemberID string `json:"memberID,omitempty"`

	// newMemberID is the etcd ID of the member being added (Add, Replace),
	// once etcd has assigned it.
	// +optional
	// +kubebuilder:validation:MaxLength=16
	NewMemberID string `json:"newMemberID,omitempty"`

	// incarnation of the member being added.
	// +optional
	Incarnation int64 `json:"incarnation,omitempty"`

	// fromIncarnation is the incarnation a Move retires (and keeps, should
	// the new one never start).
	// +optional
	FromIncarnation int64 `json:"fromIncarnation,omitempty"`

	// fromAddress is the address of the incarnation a Move retires: the
	// member's stable DNS name keeps pointing at it until its etcd ID is
	// removed.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	FromAddress string `json:"fromAddress,omitempty"`

	// fromDNSName is the DNS name the retired incarnation runs under when
	// it is its own (status.members[].dnsName of an incarnation a Move
	// added): its record stays, at fromAddress, while etcd lists the
	// retired ID, since its peers and its client URL use that name.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	FromDNSName string `json:"fromDNSName,omitempty"`

	// from is the failure domain a member leaves.
	// +optional
	From *FailureDomain `json:"from,omitempty"`

	// to is the failure domain a member joins.
	// +optional
	To *FailureDomain `json:"to,omitempty"`

	// reason says why: ScaleUp, ScaleDown, Evacuate, Rebalance, Spread,
	// Replace, Bootstrap, SpecChanged, Fragmented, NoSpace, CARotation. For
	// a placement move the type says how: Move (make before break) or
	// Replace (break before make: the old incarnation was already dead,
	// which the message says).
	// +optional
	// +kubebuilder:validation:MaxLength=64
	Reason string `json:"reason,omitempty"`

	// step is the step in progress, such as AddLearner, Promote or
	// UpdateObject.
	// +optional
	// +kubebuilder:validation:MaxLength=64
	Step string `json:"step,omitempty"`

	// message explains what the operation waits for.
	// +optional
	// +kubebuilder:validation:MaxLength=1024
	Message string `json:"message,omitempty"`

	// startedAt is when the operation was recorded.
	// +required
	StartedAt metav1.Time `json:"startedAt"`

	// stepStartedAt is when the hub first recorded the step in progress:
	// how long a step has waited (a MoveLeader the leader does not take,
	// a learner that does not start) counts from here. Absent on an
	// operation recorded by a hub older than the field, until its next
	// step.
	// +optional
	StepStartedAt *metav1.Time `json:"stepStartedAt,omitempty"`
}
