package v1alpha1

import (
	"k8s.io/apimachinery/pkg/api/resource"
)

// StorageSpec configures data volumes.
type StorageSpec struct {
	// size of each member's data volume. Default 8Gi.
	// +optional
	Size *resource.Quantity `json:"size,omitempty"`

	// storageClassName of each member's PVC. Default: the member cluster's
	// default storage class.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	StorageClassName *string `json:"storageClassName,omitempty"`

	// clusterOverrides set size or storage class for one member cluster.
	// +optional
	// +listType=map
	// +listMapKey=cluster
	// +kubebuilder:validation:MaxItems=64
	ClusterOverrides []StorageOverride `json:"clusterOverrides,omitempty"`

	// volumeReclaimPolicy says what happens to the volume of a member
	// incarnation that is no longer used: Retain (default; kept and labelled
	// retired) or Delete.
	// +optional
	VolumeReclaimPolicy VolumeReclaimPolicy `json:"volumeReclaimPolicy,omitempty"`
}

// StorageOverride sets storage for the members of one member cluster.
type StorageOverride struct {
	// cluster is the member cluster's name.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Cluster string `json:"cluster"`

	// size of the data volume in that cluster.
	// +optional
	Size *resource.Quantity `json:"size,omitempty"`

	// storageClassName in that cluster.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	StorageClassName *string `json:"storageClassName,omitempty"`
}
