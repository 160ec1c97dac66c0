package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// OperationDisrupt is the disruption grant of one member (rule 12, the
// ring's one disruption budget): the member's PodDisruptionBudget lets one
// eviction through while every other member is a ready voter and no other
// operation is in flight; the grant closes once the member is back as a
// ready voter (or the ring degrades before it was evicted).
const OperationDisrupt OperationType = "Disrupt"

// MemberDisruption is the hub's grant on one member's
// PodDisruptionBudget. Changing it restarts nothing.
type MemberDisruption struct {
	// allowed lets one voluntary eviction of the member's pod through its
	// PodDisruptionBudget (minAvailable 0). False (the default): the
	// budget blocks every eviction of the ready pod (minAvailable 1).
	// +optional
	Allowed bool `json:"allowed,omitempty"`
}

// MemberDisruptionStatus is the spoke's report on the member's budget and
// on whether someone wants to disrupt the member.
type MemberDisruptionStatus struct {
	// requested is true while the node of the member's pod is cordoned
	// (spec.unschedulable, the first step of kubectl drain): a node's
	// maintenance waits for the hub's grant.
	// +optional
	Requested bool `json:"requested,omitempty"`

	// reason says who asks, such as "node n1 is cordoned".
	// +optional
	// +kubebuilder:validation:MaxLength=512
	Reason string `json:"reason,omitempty"`

	// since is when the spoke first saw the request.
	// +optional
	Since *metav1.Time `json:"since,omitempty"`

	// budget is the name of the member's PodDisruptionBudget.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	Budget string `json:"budget,omitempty"`

	// disruptionsAllowed is the budget's status.disruptionsAllowed as the
	// spoke last read it (what an eviction is checked against).
	// +optional
	DisruptionsAllowed int32 `json:"disruptionsAllowed,omitempty"`
}

// Reasons of the hub's Disrupt operation (status.operation.reason).
const (
	// ReasonNodeMaintenance: the node of the member's pod is cordoned.
	ReasonNodeMaintenance = "NodeMaintenance"
)
