package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// MemberRole is a member's role in etcd.
// +kubebuilder:validation:Enum=Leader;Follower;Learner;Unknown
type MemberRole string

const (
	RoleLeader   MemberRole = "Leader"
	RoleFollower MemberRole = "Follower"
	RoleLearner  MemberRole = "Learner"
	RoleUnknown  MemberRole = "Unknown"
)

// NotStartingCluster is a member cluster that did not start a member's pod
// on a spec another member ran (status.notStarting).
type NotStartingCluster struct {
	// cluster is the member cluster's name.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Cluster string `json:"cluster"`
	// generation is the EtcdCluster's metadata.generation when the member
	// did not start: the entry holds while the spec is that one.
	// +required
	// +kubebuilder:validation:Minimum=0
	Generation int64 `json:"generation"`
	// since is when the hub found the member not starting there.
	// +required
	Since metav1.Time `json:"since"`
	// message names the member, its pod's state as its spoke reported it,
	// and the member that runs the same spec.
	// +optional
	// +kubebuilder:validation:MaxLength=1024
	Message string `json:"message,omitempty"`
}

// MemberStatus is one member as the hub sees it.
type MemberStatus struct {
	// name of the member, <etcdcluster>-<ordinal>.
	// +required
	// +kubebuilder:validation:MaxLength=63
	Name string `json:"name"`

	// id is the etcd member ID in hex, empty until the member is in etcd.
	// +optional
	// +kubebuilder:validation:MaxLength=16
	ID string `json:"id,omitempty"`

	// cluster is the member cluster that runs the member.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	Cluster string `json:"cluster,omitempty"`

	// zone is the member's zone.
	// +optional
	// +kubebuilder:validation:MaxLength=63
	Zone string `json:"zone,omitempty"`

	// incarnation counts the lives of this member's data.
	// +optional
	Incarnation int64 `json:"incarnation,omitempty"`

	// role in etcd: Leader, Follower, Learner, or Unknown.
	// +optional
	Role MemberRole `json:"role,omitempty"`

	// ready is true when the member answers its health endpoint.
	// +optional
	Ready bool `json:"ready,omitempty"`

	// address is the member's exposed address (IP or hostname), the one its
	// DNS name resolves to. While a member is moved or replaced, it stays
	// the old incarnation's address until the new incarnation reports one
	// (a Move keeps the old one's in operation.fromAddress for the stable
	// name until the old incarnation is removed).
	// +optional
	// +kubebuilder:validation:MaxLength=253
	Address string `json:"address,omitempty"`

	// dnsName is the DNS name this incarnation was started under, when it
	// is not the member's stable name <member>.<domain>: an incarnation
	// added beside the live old one by a Move is <member>-i<incarnation>.<domain>
	// for its whole life (its peer URL, its advertised client URL). Clients
	// keep using the stable name, which points at this incarnation once the
	// old one is removed; its certificate carries both names.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	DNSName string `json:"dnsName,omitempty"`

	// object is the name of the EtcdMember that runs this incarnation in
	// its member cluster (its pod, Service and certificate Secret are named
	// after it): <namespace>-<member>-<hash>, or
	// <namespace>-<member>-i<incarnation>-<hash> for an incarnation a Move
	// added beside the old one in the same member cluster, or the member's
	// name alone for an object written before that scheme. Empty until the
	// object exists.
	// +optional
	// +kubebuilder:validation:MaxLength=63
	Object string `json:"object,omitempty"`

	// since is when the member took its current failure domain and
	// incarnation.
	// +optional
	Since *metav1.Time `json:"since,omitempty"`

	// lastTransitionTime is when ready last changed, on the hub's clock. A
	// member not ready for longer than failurePolicy.memberGracePeriod is
	// replaced.
	// +optional
	LastTransitionTime *metav1.Time `json:"lastTransitionTime,omitempty"`

	// version is the etcd server version the member runs, as its own etcd
	// reports it (status call); empty while it does not answer.
	// +optional
	// +kubebuilder:validation:MaxLength=32
	Version string `json:"version,omitempty"`
	// dbSize is the size of the member's database file in bytes, as etcd
	// last reported it to the hub.
	// +optional
	DBSize int64 `json:"dbSize,omitempty"`

	// dbSizeInUse is the part of dbSize that holds data; the rest is free
	// pages that defragmentation gives back.
	// +optional
	DBSizeInUse int64 `json:"dbSizeInUse,omitempty"`
}

// EtcdClusterStatus is the observed state of a global etcd cluster.
type EtcdClusterStatus struct {
	// conditions: Available (quorate and serving), AllMembersReady,
	// Progressing, Degraded, FailureTolerant (today's placement survives the
	// loss of any one zone).
	// +optional
	// +listType=map
	// +listMapKey=type
	// +kubebuilder:validation:MaxItems=16
	Conditions []metav1.Condition `json:"conditions,omitempty"`

	// observedGeneration is the generation last reconciled successfully.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// clusterID is the etcd cluster ID in hex, set once bootstrapped.
	// +optional
	// +kubebuilder:validation:MaxLength=16
	ClusterID string `json:"clusterID,omitempty"`

	// members as the hub sees them.
	// +optional
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=32
	Members []MemberStatus `json:"members,omitempty"`

	// endpoints are the client URLs of the members, all DNS names.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=32
	// +kubebuilder:validation:items:MaxLength=512
	Endpoints []string `json:"endpoints,omitempty"`

	// operation is the operation in flight (a membership change or a
	// member's roll), if any.
	// +optional
	Operation *MembershipOperation `json:"operation,omitempty"`

	// failuresTolerated is how many voting members etcd's own member list
	// can lose, as of the last pass, and keep its quorum: healthy voters
	// minus the quorum of all voters, never below 0. During a Move it
	// counts the extra voter. Unset when etcd did not answer.
	// +optional
	FailuresTolerated *int32 `json:"failuresTolerated,omitempty"`

	// pendingMoves is how many members the placement still wants moved
	// (a migration's progress: every member of a cluster no longer
	// allowed, one at a time), the one in flight included.
	// +optional
	PendingMoves int32 `json:"pendingMoves,omitempty"`

	// notStarting lists the member clusters that did not start a member's
	// pod on a spec another member ran (the pod Pending there for the
	// member grace): the spec starts, so the cluster is at fault. Such a
	// cluster takes no new member of the ring, and the member that did
	// not start is moved out of it, until the spec changes
	// (metadata.generation differs from the entry's). Without it a
	// cluster that keeps its pod Pending would hold every roll of the
	// ring halted.
	// +optional
	// +listType=map
	// +listMapKey=cluster
	// +kubebuilder:validation:MaxItems=64
	NotStarting []NotStartingCluster `json:"notStarting,omitempty"`

	// roundTrips is the matrix of round trips between the ring's member
	// clusters, from their spokes' reports (EtcdSpoke status.roundTrips),
	// sorted by from and to. A pair is recorded when first reported; it
	// is recorded again only when its change matters to what the ring
	// derives from it: the heartbeat it asks for (with spec.etcd.timing
	// Auto) moved by 25 ms and an eighth, or its median moved by a
	// quarter and 10 ms (with spec.leader.placement Auto). A ring that
	// derives neither keeps each pair's first measurement; its spokes'
	// EtcdSpoke status carries what they measure now.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=1024
	RoundTrips []RoundTrip `json:"roundTrips,omitempty"`

	// timing is the heartbeat interval and election timeout etcd runs with
	// (spec.etcd.timing), and why.
	// +optional
	Timing *TimingStatus `json:"timing,omitempty"`

	// lastIncarnation is the highest incarnation number handed out. Each new
	// incarnation of any member takes the next number, so a retained volume
	// of an earlier life is never mistaken for a new one.
	// +optional
	LastIncarnation int64 `json:"lastIncarnation,omitempty"`

	// readyMembers is the number of ready voting members.
	// +optional
	ReadyMembers int32 `json:"readyMembers,omitempty"`

	// memberSummary is "<ready>/<replicas>" for the MEMBERS column.
	// +optional
	// +kubebuilder:validation:MaxLength=16
	MemberSummary string `json:"memberSummary,omitempty"`

	// zoneSummary is the count of zones and members per zone, such as
	// "3 (2/2/1)", for the ZONES column.
	// +optional
	// +kubebuilder:validation:MaxLength=128
	ZoneSummary string `json:"zoneSummary,omitempty"`

	// leader is the name of the leader member.
	// +optional
	// +kubebuilder:validation:MaxLength=63
	Leader string `json:"leader,omitempty"`

	// restore is the snapshot spec.bootstrap.fromSnapshot (or the last
	// recovery from a backup) resolved to, checked and recorded before any
	// member restored it.
	// +optional
	Restore *RestoreStatus `json:"restore,omitempty"`

	// backup reports scheduled and on-demand snapshots (spec.backup).
	// +optional
	Backup *BackupStatus `json:"backup,omitempty"`

	// clusterVersion is the cluster version etcd reports (such as 3.6.0):
	// the version every member agrees to speak. It rises once every member
	// runs a higher minor version, and drops once a downgrade completes.
	// +optional
	// +kubebuilder:validation:MaxLength=32
	ClusterVersion string `json:"clusterVersion,omitempty"`
	// alarms are the alarms etcd has raised (NOSPACE, CORRUPT), with the
	// member and since when.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=32
	Alarms []AlarmStatus `json:"alarms,omitempty"`
	// defragmentation reports scheduled defragmentation.
	// +optional
	Defragmentation *DefragmentationStatus `json:"defragmentation,omitempty"`
	// clients reports each spec.clients[] entry's Secret.
	// +optional
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=64
	Clients []ClientStatus `json:"clients,omitempty"`
	// caRotation reports the last CA rotation (etcdfed rotate-ca).
	// +optional
	CARotation *CARotationStatus `json:"caRotation,omitempty"`
	// revocation reports the revocation list of spec.tls.revokedCertificates
	// the members run with.
	// +optional
	Revocation *RevocationStatus `json:"revocation,omitempty"`
	// quorumLoss is set while etcd does not answer and a majority of the
	// voters is not known to serve: which members survive, which are known
	// gone, and which must be fenced before a new cluster may be forced.
	// +optional
	QuorumLoss *QuorumLossStatus `json:"quorumLoss,omitempty"`
	// lastRecoveryRequest is the last recovery request the hub consumed
	// (etcdfed recover): accepted (a recovery began from it) or refused.
	// A consumed request is never acted on again.
	// +optional
	LastRecoveryRequest *RecoveryRequestStatus `json:"lastRecoveryRequest,omitempty"`
	// adoption reports the adoption of an existing cluster (spec.adopt).
	// +optional
	Adoption *AdoptionStatus `json:"adoption,omitempty"`
	// takeOver reports a running ring taken over from the member
	// clusters by a rebuilt hub (the same manifest applied to a new hub
	// cluster): the ring's identity found there, the members taken over,
	// and what was reissued.
	// +optional
	TakeOver *TakeOverStatus `json:"takeOver,omitempty"`
	// leaderPlacement says where the leader is, where spec.leader wants
	// it, and why it is or is not moved.
	// +optional
	LeaderPlacement *LeaderPlacementStatus `json:"leaderPlacement,omitempty"`

	// caFingerprint is the SHA-256 (hex) of the public key of the CA
	// named in spec.tls.caSecretName, as the hub last read it. The hub
	// refuses a ring of another namespace whose CA has the same key,
	// unless its operator allows shared CAs: the hub issues certificates
	// from a ring's CA (the members', its own root client, spec.clients),
	// and a CA shared across namespaces would make each namespace's
	// certificates trusted by the other's rings.
	// +optional
	// +kubebuilder:validation:MaxLength=64
	CAFingerprint string `json:"caFingerprint,omitempty"`
}
