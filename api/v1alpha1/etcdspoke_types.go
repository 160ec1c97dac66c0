package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// SpokeObjectName is the name of the one EtcdSpoke object in a member
// cluster's ring namespace, and of the spoke's liveness Lease.
const SpokeObjectName = "spoke"

// GossipPeer is another spoke's gossip address.
type GossipPeer struct {
	// cluster is the peer's member cluster name as registered with the hub.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Cluster string `json:"cluster"`

	// address is the peer's gossip host:port.
	// +required
	// +kubebuilder:validation:MinLength=3
	// +kubebuilder:validation:MaxLength=261
	Address string `json:"address"`
}

// EtcdSpokeSpec is written by the hub.
type EtcdSpokeSpec struct {
	// clusterName is this member cluster's name as registered with the hub.
	// The spoke uses it as its gossip node name.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	ClusterName string `json:"clusterName,omitempty"`

	// gossipPeers are the gossip addresses of the other spokes, so the ring
	// forms across clusters without manual seeding.
	// +optional
	// +listType=map
	// +listMapKey=cluster
	// +kubebuilder:validation:MaxItems=128
	GossipPeers []GossipPeer `json:"gossipPeers,omitempty"`
}

// GossipPeerStatus is one peer as this spoke's gossip sees it.
type GossipPeerStatus struct {
	// cluster is the peer's member cluster name.
	// +required
	// +kubebuilder:validation:MaxLength=253
	Cluster string `json:"cluster"`

	// alive is true when gossip sees the peer alive.
	// +required
	Alive bool `json:"alive"`

	// since is when alive last changed.
	// +optional
	Since *metav1.Time `json:"since,omitempty"`
}

// EtcdSpokeStatus is written by the spoke.
type EtcdSpokeStatus struct {
	// conditions: Ready.
	// +optional
	// +listType=map
	// +listMapKey=type
	// +kubebuilder:validation:MaxItems=16
	Conditions []metav1.Condition `json:"conditions,omitempty"`

	// version of the spoke.
	// +optional
	// +kubebuilder:validation:MaxLength=64
	Version string `json:"version,omitempty"`

	// zones of this member cluster, from the nodes'
	// topology.kubernetes.io/zone label. Empty for a cluster without zones.
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=64
	// +kubebuilder:validation:items:MaxLength=63
	Zones []string `json:"zones,omitempty"`

	// unschedulableZones are the zones (values of zones; the empty string
	// for a cluster without zones) in which no node takes new pods: every
	// node there is cordoned (spec.unschedulable) or not Ready. A member
	// whose pod fails in such a zone cannot start again in place, so the
	// hub places no new member there, and moves a member that failed there
	// beyond failurePolicy.memberGracePeriod to another zone instead of
	// replacing it in place. Taints are not read.
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=64
	// +kubebuilder:validation:items:MaxLength=63
	UnschedulableZones []string `json:"unschedulableZones,omitempty"`

	// dnsAddresses are the host:port addresses where this spoke serves the
	// ring's DNS zones.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=8
	// +kubebuilder:validation:items:MaxLength=261
	DNSAddresses []string `json:"dnsAddresses,omitempty"`

	// gossipAddress is the host:port other spokes reach this spoke's gossip
	// on.
	// +optional
	// +kubebuilder:validation:MaxLength=261
	GossipAddress string `json:"gossipAddress,omitempty"`

	// gossipView is which peers this spoke's gossip sees alive. A witness
	// for the hub; the spoke never acts on it.
	// +optional
	// +listType=map
	// +listMapKey=cluster
	// +kubebuilder:validation:MaxItems=128
	GossipView []GossipPeerStatus `json:"gossipView,omitempty"`

	// roundTrips are the round trips from this spoke to each peer spoke,
	// measured by gossip's probes (median and p99 over the last probes).
	// An entry is published again only when it changes enough to matter.
	// The hub validates them and keeps the ring's matrix (EtcdCluster
	// status.roundTrips).
	// +optional
	// +listType=map
	// +listMapKey=cluster
	// +kubebuilder:validation:MaxItems=128
	RoundTrips []PeerRoundTrip `json:"roundTrips,omitempty"`

	// gossipKeys are the gossip keys and the identity this spoke's gossip
	// has installed (fingerprints); absent while gossip does not run.
	// +optional
	GossipKeys *GossipKeysStatus `json:"gossipKeys,omitempty"`

	// observedAt is when the spoke wrote this status.
	// +optional
	ObservedAt *metav1.Time `json:"observedAt,omitempty"`
}

// EtcdSpoke describes the spoke agent of one member cluster: the hub writes
// the gossip peers, the spoke reports zones, DNS and gossip addresses and its
// gossip view. Liveness is the Lease of the same name.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:categories=etcdfed
// +kubebuilder:printcolumn:name="Cluster",type=string,JSONPath=`.spec.clusterName`
// +kubebuilder:printcolumn:name="Zones",type=string,JSONPath=`.status.zones`
// +kubebuilder:printcolumn:name="DNS",type=string,JSONPath=`.status.dnsAddresses`
// +kubebuilder:printcolumn:name="Gossip",type=string,JSONPath=`.status.gossipAddress`
// +kubebuilder:printcolumn:name="Version",type=string,JSONPath=`.status.version`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type EtcdSpoke struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec is written by the hub.
	// +optional
	Spec EtcdSpokeSpec `json:"spec,omitempty"`

	// status is written by the spoke.
	// +optional
	Status EtcdSpokeStatus `json:"status,omitempty"`
}

// +kubebuilder:object:root=true

// EtcdSpokeList is a list of EtcdSpoke.
type EtcdSpokeList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []EtcdSpoke `json:"items"`
}

func init() {
	register(&EtcdSpoke{}, &EtcdSpokeList{})
}

// GetConditions returns the status conditions.
func (s *EtcdSpoke) GetConditions() []metav1.Condition { return s.Status.Conditions }

// SetConditions replaces the status conditions.
func (s *EtcdSpoke) SetConditions(conds []metav1.Condition) { s.Status.Conditions = conds }

// The gossip key Secret: the hub generates the key of its ring of spokes
// (a Secret GossipSecretName in the hub's namespace) and writes a copy of
// it into every member cluster's ring namespace, where each spoke reads it.
const (
	// GossipSecretName names the Secret in the hub and in every member
	// cluster.
	GossipSecretName = "etcdfed-gossip"
	// GossipSecretKey holds the key that encrypts (32 bytes).
	GossipSecretKey = "key"
	// GossipSecretAccept holds further keys accepted on receipt, one after
	// the other: a rotation's new key before it encrypts, or its old key
	// until every spoke encrypts with the new one.
	GossipSecretAccept = "accept"
	// GossipSecretPeers holds the table of gossip identities: one line per
	// registered member cluster, "name base64-ed25519-public-key". In the
	// hub's Secret it is the table the hub keeps; every copy holds it, and
	// a spoke refuses gossip from a name not in it or not signed with its
	// key (spoke/gossip, docs/certificates.md "Gossip identities").
	GossipSecretPeers = "peers"
	// GossipSecretIdentity holds, in a member cluster's copy only, that
	// cluster's ed25519 private key (the 32-byte seed): the spoke signs
	// its gossip node metadata with it. The hub issues it and keeps only
	// its public key (GossipSecretPeers).
	GossipSecretIdentity = "identity"
	// ComponentGossipKey is the etcdfed.dev/component label of the hub's
	// copies of the gossip Secret in member clusters.
	ComponentGossipKey = "gossip-key"
)

// Annotations on the hub's gossip Secret: the key rotation the hub runs
// when a member cluster leaves (hub/spokes).
const (
	// AnnotationGossipRotationPending names why a rotation is due (the
	// clusters removed since the last one), while none runs yet.
	AnnotationGossipRotationPending = "etcdfed.dev/gossip-rotation-pending"
	// AnnotationGossipRotationPhase is the running rotation's phase:
	// GossipRotationAccepting or GossipRotationSwitching.
	AnnotationGossipRotationPhase = "etcdfed.dev/gossip-rotation-phase"
	// AnnotationGossipRotationReason is why the running rotation started.
	AnnotationGossipRotationReason = "etcdfed.dev/gossip-rotation-reason"
)

// Phases of a gossip key rotation.
const (
	// GossipRotationAccepting: the hub's Secret encrypts with the old key
	// and accepts the new one; the hub waits until every registered
	// spoke reports the new key accepted.
	GossipRotationAccepting = "Accepting"
	// GossipRotationSwitching: the new key encrypts, the old one is still
	// accepted; the hub waits until every registered spoke encrypts with
	// the new key, then drops the old one.
	GossipRotationSwitching = "Switching"
)

// GossipKeysStatus is what a spoke's gossip has installed, by fingerprint
// (the first 8 hex digits of a key's sha256): the hub steps a key
// rotation on it.
type GossipKeysStatus struct {
	// encrypts is the fingerprint of the key gossip encrypts with; empty
	// when gossip runs unencrypted.
	// +optional
	// +kubebuilder:validation:MaxLength=8
	Encrypts string `json:"encrypts,omitempty"`

	// accepts are the fingerprints of the further keys accepted on
	// receipt.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=16
	// +kubebuilder:validation:items:MaxLength=8
	Accepts []string `json:"accepts,omitempty"`

	// identity is the fingerprint of the public key this spoke signs its
	// gossip name with; empty when it has no identity (names unchecked).
	// +optional
	// +kubebuilder:validation:MaxLength=8
	Identity string `json:"identity,omitempty"`

	// identities is how many clusters' identities this spoke checks its
	// peers against.
	// +optional
	// +kubebuilder:validation:Minimum=0
	Identities int32 `json:"identities,omitempty"`
}
