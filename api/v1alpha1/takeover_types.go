package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// TakeOverPhase is where the take-over of a running ring by a rebuilt hub
// stands.
// +kubebuilder:validation:Enum=Held;TakingOver;Complete
type TakeOverPhase string

const (
	// TakeOverHeld: objects of a running ring of this namespace and name
	// were found in the member clusters, but the hub may not take it over
	// yet (a member cluster not read, the ring's CA missing, objects of
	// two rings): nothing is founded, written or changed meanwhile;
	// message says why.
	TakeOverHeld TakeOverPhase = "Held"
	// TakeOverTakingOver: the ring is recorded as this EtcdCluster's
	// (ringUID); the hub reads its members from the member clusters and
	// etcd's member list, and founds nothing.
	TakeOverTakingOver TakeOverPhase = "TakingOver"
	// TakeOverComplete: etcd answered with the ring's cluster ID and every
	// member found is recorded in status.members: the hub manages the
	// ring as if it had founded it.
	TakeOverComplete TakeOverPhase = "Complete"
)

// TakeOverStatus reports a running ring this EtcdCluster took over from
// what the member clusters hold (its EtcdMember and EtcdDNSZone objects,
// etcd's own member list) rather than founding a new one: the hub
// cluster that founded the ring was lost and rebuilt, and the same
// manifest applied again (docs/disaster-recovery.md). The ring is
// matched by its identity (this namespace and name, spec.dns.domain and
// the etcd cluster ID its objects carry), not by this EtcdCluster's UID:
// the objects keep the UID of the EtcdCluster that founded the ring
// (ringUID), so no member object, pod or volume changes.
type TakeOverStatus struct {
	// phase: Held, TakingOver or Complete.
	// +required
	Phase TakeOverPhase `json:"phase"`

	// ringUID is the UID of the EtcdCluster that founded the ring, which
	// every object of the ring in the member clusters carries (label
	// etcdfed.dev/cluster-uid, spec.cluster.uid); the hub writes and
	// selects the ring's objects under it from now on. Empty while Held.
	// +optional
	// +kubebuilder:validation:MaxLength=128
	RingUID string `json:"ringUID,omitempty"`

	// clusterID is the etcd cluster ID (hex) the ring's objects carry,
	// which etcd must answer with before the take-over completes.
	// +optional
	// +kubebuilder:validation:MaxLength=16
	ClusterID string `json:"clusterID,omitempty"`

	// foundAt is when the hub found the ring and recorded it as this
	// EtcdCluster's; completedAt when the take-over completed.
	// +optional
	FoundAt *metav1.Time `json:"foundAt,omitempty"`
	// +optional
	CompletedAt *metav1.Time `json:"completedAt,omitempty"`

	// members are the members taken over as they were running: name,
	// member cluster and etcd ID, such as "main-0@member-1 (8e9e05c52164694d)".
	// None of them was restarted, replaced or renamed.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=32
	// +kubebuilder:validation:items:MaxLength=256
	Members []string `json:"members,omitempty"`

	// reissued lists what the new hub issued anew because the lost hub
	// cluster held it and the escrow does not: the hub's own etcd client
	// certificate, and each spec.clients entry's Secret (reissued by the
	// hub from the ring's CA as for a new ring).
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=72
	// +kubebuilder:validation:items:MaxLength=256
	Reissued []string `json:"reissued,omitempty"`

	// message says where the take-over stands and, while Held, why.
	// +optional
	// +kubebuilder:validation:MaxLength=1024
	Message string `json:"message,omitempty"`
}

// RingUID is the UID the ring's objects in member clusters carry (label
// etcdfed.dev/cluster-uid, spec.cluster.uid): this EtcdCluster's UID, or,
// for a ring a rebuilt hub took over (status.takeOver), the UID of the
// EtcdCluster that founded it.
func (ec *EtcdCluster) RingUID() types.UID {
	if t := ec.Status.TakeOver; t != nil && t.RingUID != "" && t.Phase != TakeOverHeld {
		return types.UID(t.RingUID)
	}
	return ec.UID
}
