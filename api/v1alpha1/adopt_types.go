package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// AdoptSpec takes over an etcd cluster that runs outside etcdfed (static
// pods, a StatefulSet, plain processes): instead of founding a new
// cluster, the hub joins etcdfed's members to the running one, one at a
// time as learners promoted once caught up, until spec.replicas of them
// are voters; then, once retire is true, it removes the original members
// one at a time, the leader last. The data, the cluster ID and the
// revision stay; clients of the old endpoints keep working until the
// member behind each endpoint is retired (docs/adoption.md).
//
// The existing cluster's CA, certificate and key, is the ring's CA: name
// its Secret (tls.crt, tls.key) in spec.tls.caSecretName. The new
// members' peer and server certificates are issued from it, so the
// original members trust them, and the hub's client certificate too.
type AdoptSpec struct {
	// endpoints are client URLs of the existing cluster's members as the
	// hub reaches them, such as https://10.0.0.5:2379: every original
	// member's, so that the hub keeps reaching the cluster while the
	// originals are retired one by one. Each endpoint is left out once
	// the member that advertises it is retired. At least one, at most 9,
	// https:// (TLS is required: the hub authenticates with a client
	// certificate of the CA).
	// +required
	// +listType=set
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=9
	// +kubebuilder:validation:items:MaxLength=256
	// +kubebuilder:validation:XValidation:rule="self.all(e, e.matches('^https://[^/?#@ ]+(:[0-9]{1,5})?/?$'))",message="every adopt endpoint must be an https:// URL of a member's client port, such as https://10.0.0.5:2379 (no path, no user)"
	Endpoints []string `json:"endpoints"`

	// clientSecretName names a Secret in the EtcdCluster's namespace with
	// tls.crt and tls.key: the client certificate of the CA the hub uses
	// on this ring instead of one it issues itself, for every call to etcd
	// (membership, consumers' users and roles, backups) while it is set.
	// Set it when the existing cluster has etcd authentication on and the
	// hub's own user (etcdfed-hub) does not exist there: the certificate's
	// common name must be a user with the root role (such as root); with
	// spec.tls.auth Enabled the hub then adds etcdfed-hub as root itself.
	// Unset: the hub issues its own from the CA. etcdfed adopt
	// --client-cert writes it.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	ClientSecretName string `json:"clientSecretName,omitempty"`

	// retire removes the original members once every one of the
	// spec.replicas etcdfed members is a ready voter: one at a time, never
	// one whose removal would leave the remaining healthy voters short of
	// a quorum, the leader last (leadership handed to an etcdfed member
	// first). False (the default) keeps the originals as voters beside
	// etcdfed's members until you set it: retirement ends the old
	// endpoints, so move your clients to status.endpoints first.
	// +optional
	Retire bool `json:"retire,omitempty"`
}

// OperationRetire removes one original member of an adopted cluster
// (spec.adopt.retire): leadership moved to an etcdfed member first when
// it leads, then its ID removed from etcd. It has no objects: etcdfed
// never ran it.
const OperationRetire OperationType = "Retire"

// AdoptionPhase is where an adoption stands.
// +kubebuilder:validation:Enum=Connecting;Joining;Joined;Retiring;Complete
type AdoptionPhase string

const (
	// AdoptionConnecting: the existing cluster has not answered yet;
	// nothing is founded or changed meanwhile.
	AdoptionConnecting AdoptionPhase = "Connecting"
	// AdoptionJoining: etcdfed's members join the existing cluster, one at
	// a time.
	AdoptionJoining AdoptionPhase = "Joining"
	// AdoptionJoined: spec.replicas etcdfed members are voters beside the
	// originals; retirement waits for spec.adopt.retire.
	AdoptionJoined AdoptionPhase = "Joined"
	// AdoptionRetiring: the originals are removed, one at a time.
	AdoptionRetiring AdoptionPhase = "Retiring"
	// AdoptionComplete: every original is retired; etcdfed manages the
	// whole ring.
	AdoptionComplete AdoptionPhase = "Complete"
)

// AdoptionStatus reports an adoption's progress (spec.adopt).
type AdoptionStatus struct {
	// phase is Connecting, Joining, Joined, Retiring or Complete.
	// +optional
	Phase AdoptionPhase `json:"phase,omitempty"`

	// message says what the adoption waits for, or did last.
	// +optional
	// +kubebuilder:validation:MaxLength=1024
	Message string `json:"message,omitempty"`

	// originals are the members the existing cluster had when the hub
	// first reached it, recorded once: only these are ever retired, and no
	// other member etcdfed does not manage is accepted.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=16
	Originals []AdoptedMember `json:"originals,omitempty"`

	// summary is "<retired>/<originals> retired, <voters>/<replicas>
	// joined" for the ADOPTION column.
	// +optional
	// +kubebuilder:validation:MaxLength=64
	Summary string `json:"summary,omitempty"`
}

// AdoptedMember is one original member of an adopted cluster.
type AdoptedMember struct {
	// name is the member's etcd name ("" if it never started).
	// +optional
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name,omitempty"`
	// id is its etcd member ID in hex.
	// +required
	// +kubebuilder:validation:MaxLength=16
	ID string `json:"id"`
	// clientURLs are the client URLs it advertised.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=8
	// +kubebuilder:validation:items:MaxLength=512
	ClientURLs []string `json:"clientURLs,omitempty"`
	// retired is when the hub saw it gone from etcd's member list.
	// +optional
	Retired *metav1.Time `json:"retired,omitempty"`
}
