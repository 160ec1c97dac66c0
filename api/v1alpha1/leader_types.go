package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// LeaderPlacement says how the hub places the ring's leader (rule 16).
// +kubebuilder:validation:Enum=None;Preferred;Auto
type LeaderPlacement string

const (
	// LeaderPlacementNone leaves leadership where etcd's elections put it
	// (the behaviour without spec.leader).
	LeaderPlacementNone LeaderPlacement = "None"
	// LeaderPlacementPreferred moves leadership to the first entry of
	// spec.leader.preferred that holds a ready voter.
	LeaderPlacementPreferred LeaderPlacement = "Preferred"
	// LeaderPlacementAuto moves leadership to the zone whose nearest
	// quorum is closest, by the round trips the spokes measure between
	// member clusters.
	LeaderPlacementAuto LeaderPlacement = "Auto"
)

// LeaderSpec says where the ring's leader should be: near its clients. The
// hub moves leadership there with etcd's MoveLeader (never by stopping a
// member), only while every member is a ready voter and no other
// operation is in flight, and with hysteresis: the leader must have been
// outside the wanted place on a healthy ring for settleSeconds, and
// leadership is moved at most once per minIntervalSeconds.
//
// +kubebuilder:validation:XValidation:rule="!has(self.preferred) || size(self.preferred) == 0 || !has(self.placement) || self.placement == 'Preferred'",message="spec.leader.preferred is only used with placement Preferred (or placement unset): remove it, or set placement to Preferred"
// +kubebuilder:validation:XValidation:rule="!has(self.placement) || self.placement != 'Preferred' || (has(self.preferred) && size(self.preferred) > 0)",message="spec.leader.placement Preferred needs at least one spec.leader.preferred entry (a cluster, a zone, or both)"
type LeaderSpec struct {
	// placement is None (leadership stays where elections put it),
	// Preferred (the first entry of preferred that holds a ready voter)
	// or Auto (the zone whose nearest quorum is closest by the measured
	// round trips between member clusters; with no measurements Auto
	// moves nothing and status.leaderPlacement says so). Unset: Preferred
	// when preferred is set, else None.
	// +optional
	Placement LeaderPlacement `json:"placement,omitempty"`

	// preferred lists the places for the leader, most wanted first. Each
	// entry names a member cluster, a zone (topology.kubernetes.io/zone),
	// or both; an empty field matches any. The leader is wanted in the
	// first entry that holds a ready voter; within it, in the zone that
	// holds the most voters (with 5 members over 3 zones, one of the two
	// zones of 2, so that a write needs one vote from another zone). The
	// placement of members favours the first entries too, when it has a
	// free choice (it never moves a member for it).
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=8
	// +kubebuilder:validation:XValidation:rule="self.all(p, self.exists_one(q, q == p))",message="spec.leader.preferred lists an entry twice"
	Preferred []LeaderPreference `json:"preferred,omitempty"`

	// settleSeconds is how long the leader must have been outside the
	// wanted place, with every member a ready voter, before leadership is
	// moved: a flapping link does not move it back and forth. Default 30.
	// +optional
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=3600
	SettleSeconds *int32 `json:"settleSeconds,omitempty"`

	// minIntervalSeconds is the least time between two moves of
	// leadership for its placement. Default 300.
	// +optional
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=86400
	MinIntervalSeconds *int32 `json:"minIntervalSeconds,omitempty"`
}

// LeaderPreference is one place for the leader: a member cluster, a zone,
// or a zone of one member cluster.
// +kubebuilder:validation:XValidation:rule="(has(self.cluster) && size(self.cluster) > 0) || (has(self.zone) && size(self.zone) > 0)",message="a spec.leader.preferred entry names a cluster, a zone, or both"
type LeaderPreference struct {
	// cluster is the name of a member cluster; empty matches any.
	// +optional
	// +kubebuilder:validation:MaxLength=63
	Cluster string `json:"cluster,omitempty"`
	// zone is a zone (the topology.kubernetes.io/zone label of nodes);
	// empty matches any.
	// +optional
	// +kubebuilder:validation:MaxLength=63
	Zone string `json:"zone,omitempty"`
}

// Reasons of status.leaderPlacement: why the leader is or is not moved.
const (
	// LeaderReasonNotWanted: placement None.
	LeaderReasonNotWanted = "NotWanted"
	// LeaderReasonInPlace: the leader is where it is wanted.
	LeaderReasonInPlace = "InPlace"
	// LeaderReasonUnknown: no leader is known (etcd does not answer).
	LeaderReasonUnknown = "LeaderUnknown"
	// LeaderReasonNoMeasurements: placement Auto without the round trips
	// it needs; nothing is moved.
	LeaderReasonNoMeasurements = "NoMeasurements"
	// LeaderReasonNoCandidate: no ready voter in any wanted place.
	LeaderReasonNoCandidate = "NoCandidate"
	// LeaderReasonRingUnhealthy: not every member is a ready voter; the
	// leader is not moved (and the settle time starts again).
	LeaderReasonRingUnhealthy = "RingUnhealthy"
	// LeaderReasonOperationInFlight: another operation needs a stable
	// leader, or is due first.
	LeaderReasonOperationInFlight = "OperationInFlight"
	// LeaderReasonSettling: outside the wanted place for less than
	// settleSeconds.
	LeaderReasonSettling = "Settling"
	// LeaderReasonRateLimited: moved less than minIntervalSeconds ago.
	LeaderReasonRateLimited = "RateLimited"
	// LeaderReasonMoving: a MoveLeader operation takes leadership there.
	LeaderReasonMoving = "Moving"
)

// LeaderPlacementStatus says where the leader is, where it is wanted, and
// why it is or is not moved.
type LeaderPlacementStatus struct {
	// placement is spec.leader's placement, resolved (None, Preferred,
	// Auto).
	// +optional
	Placement LeaderPlacement `json:"placement,omitempty"`
	// leader is the leader member, and cluster and zone where it runs.
	// +optional
	// +kubebuilder:validation:MaxLength=63
	Leader string `json:"leader,omitempty"`
	// +optional
	// +kubebuilder:validation:MaxLength=63
	Cluster string `json:"cluster,omitempty"`
	// +optional
	// +kubebuilder:validation:MaxLength=63
	Zone string `json:"zone,omitempty"`
	// wanted describes where the leader is wanted, such as
	// "preferred[0] (zone b): c1/b", "" when nowhere in particular.
	// +optional
	// +kubebuilder:validation:MaxLength=512
	Wanted string `json:"wanted,omitempty"`
	// inPlace is true when the leader is where it is wanted.
	// +optional
	InPlace bool `json:"inPlace,omitempty"`
	// reason is why the leader is or is not moved (LeaderReason*).
	// +optional
	// +kubebuilder:validation:MaxLength=64
	Reason string `json:"reason,omitempty"`
	// message says it in words.
	// +optional
	// +kubebuilder:validation:MaxLength=1024
	Message string `json:"message,omitempty"`
	// outsideSince is when the leader was first seen outside the wanted
	// place while every member was a ready voter (the settle time counts
	// from it); unset when in place, or while the ring is not healthy.
	// +optional
	OutsideSince *metav1.Time `json:"outsideSince,omitempty"`
	// lastMoveTime is when the hub last began moving leadership for its
	// placement.
	// +optional
	LastMoveTime *metav1.Time `json:"lastMoveTime,omitempty"`
	// moves counts the moves of leadership begun for its placement.
	// +optional
	Moves int64 `json:"moves,omitempty"`
}
