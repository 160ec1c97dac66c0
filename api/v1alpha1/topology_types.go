package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TopologySpec selects the member clusters that may host members.
type TopologySpec struct {
	// clusters lists member clusters by name (the name of their kubeconfig
	// Secret on the hub). A member cluster is eligible when it is listed here
	// or matches clusterSelector; when both are empty, every registered member
	// cluster is eligible. The ring's DNS zone is served by the member
	// clusters that host its members and by those listed or selected here:
	// list every cluster whose pods resolve the ring's names through their
	// own spoke.
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=64
	// +kubebuilder:validation:items:MaxLength=253
	Clusters []string `json:"clusters,omitempty"`

	// clusterSelector selects member clusters by the labels of their
	// kubeconfig Secret on the hub.
	// +optional
	ClusterSelector *metav1.LabelSelector `json:"clusterSelector,omitempty"`

	// cordonedZones get no new members and their members are moved away, one
	// at a time. An entry is a zone name ("eu-west-1a", every member cluster's
	// zone of that name) or a "cluster/zone" pair (that zone of one member
	// cluster only).
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=32
	// +kubebuilder:validation:items:MaxLength=317
	// +kubebuilder:validation:items:Pattern=`^([a-z0-9]([-a-z0-9.]*[a-z0-9])?/)?[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$`
	CordonedZones []string `json:"cordonedZones,omitempty"`

	// cordonedClusters get no new members and their members are moved away,
	// one at a time.
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=32
	// +kubebuilder:validation:items:MaxLength=253
	CordonedClusters []string `json:"cordonedClusters,omitempty"`

	// pauseMoves holds the placement's moves of live members (a migration
	// to other clusters, a cordon, a rebalance): no new Move begins while
	// it is true, and the one in flight finishes (stopping one half-way
	// would leave the ring with a voter more, or a learner, for as long as
	// the pause lasts). Replacing a dead member, scaling, rollouts and
	// evacuating a failed domain are not held. status.pendingMoves says
	// how many moves wait.
	// +optional
	PauseMoves bool `json:"pauseMoves,omitempty"`
}
