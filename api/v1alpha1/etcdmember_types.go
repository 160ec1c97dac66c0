package v1alpha1

import (
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// ClusterReference identifies the global EtcdCluster a member belongs to.
type ClusterReference struct {
	// name of the EtcdCluster in the hub.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name"`

	// namespace of the EtcdCluster in the hub.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	Namespace string `json:"namespace"`

	// uid of the EtcdCluster in the hub. Objects of another EtcdCluster with
	// the same name are never touched.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=64
	UID string `json:"uid"`
}

// InitialClusterState is etcd --initial-cluster-state.
// +kubebuilder:validation:Enum=new;existing
type InitialClusterState string

const (
	// InitialClusterNew founds a new cluster. Only the first members of an
	// EtcdCluster are ever started with it.
	InitialClusterNew InitialClusterState = "new"
	// InitialClusterExisting joins a cluster the member was added to.
	InitialClusterExisting InitialClusterState = "existing"
)

// BootstrapSpec is what the member's etcd needs at its first start. The hub
// sets it only once the member may start: for a new cluster when all first
// members exist, for a join after the member was added to etcd.
type BootstrapSpec struct {
	// initialCluster is etcd --initial-cluster: name=peerURL pairs, comma
	// separated, with DNS names.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=8192
	InitialCluster string `json:"initialCluster"`

	// initialClusterState is new (founding members only) or existing.
	// +required
	InitialClusterState InitialClusterState `json:"initialClusterState"`

	// token is etcd --initial-cluster-token, unique per EtcdCluster.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=128
	Token string `json:"token"`

	// restore, set on founding members of a cluster restored from a
	// snapshot, is the snapshot each restores its first data from before
	// etcd starts (only into an empty data directory).
	// +optional
	Restore *MemberRestore `json:"restore,omitempty"`

	// clusterID is the etcd cluster ID (hex) the member belongs to, set by
	// the hub once the cluster formed. The spoke's pod refuses to start
	// etcd on a data directory of another cluster ID (PodReady=False,
	// ContainerFailing, naming both IDs); the data is kept.
	// +optional
	// +kubebuilder:validation:MaxLength=16
	// +kubebuilder:validation:Pattern=`^[0-9a-f]{1,16}$`
	ClusterID string `json:"clusterID,omitempty"`
}

// MemberStorage is the data volume of one member.
type MemberStorage struct {
	// size of the PVC. Default 8Gi.
	// +optional
	Size *resource.Quantity `json:"size,omitempty"`

	// storageClassName of the PVC.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	StorageClassName *string `json:"storageClassName,omitempty"`

	// volumeReclaimPolicy for volumes of retired incarnations and of a
	// deleted member: Retain (default) or Delete.
	// +optional
	VolumeReclaimPolicy VolumeReclaimPolicy `json:"volumeReclaimPolicy,omitempty"`

	// keepVolumesBefore keeps the volumes of every incarnation below this
	// one whatever volumeReclaimPolicy says: the spoke labels them
	// etcdfed.dev/retired and etcdfed.dev/kept and never deletes them, not
	// even when the member is deleted; only a human does. The hub sets it
	// to the new incarnation on the seed of a recovery from a backup: the
	// seed's earlier volume may hold writes newer than the backup. Unset
	// or 0: none is kept beyond the policy.
	// +optional
	// +kubebuilder:validation:Minimum=0
	KeepVolumesBefore int64 `json:"keepVolumesBefore,omitempty"`
}

// KeepsVolume says whether a volume of incarnation inc is kept whatever
// the reclaim policy (keepVolumesBefore).
func (s MemberStorage) KeepsVolume(inc int64) bool { return inc < s.KeepVolumesBefore }

// MemberTLS names the member's certificate Secret.
type MemberTLS struct {
	// mode is Enabled (default) or Disabled.
	// +optional
	Mode TLSMode `json:"mode,omitempty"`

	// secretName is the Secret (written by the hub, next to this object)
	// with ca.crt, tls.crt and tls.key: the member's serving and peer
	// certificate with its DNS name as SAN. Required when mode is Enabled.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	SecretName string `json:"secretName,omitempty"`

	// peerSkipClientSANVerification is passed to etcd.
	// +optional
	PeerSkipClientSANVerification bool `json:"peerSkipClientSANVerification,omitempty"`

	// caHash is set by the hub only while the ring's CA is rotated: a hash
	// of the CA bundle in the Secret's ca.crt and of the CA that issued
	// tls.crt. etcd reads its trusted CA file only when it starts, so a
	// change of caHash restarts the pod (the hub rolls members one at a
	// time). Empty outside a rotation.
	// +optional
	// +kubebuilder:validation:MaxLength=64
	CAHash string `json:"caHash,omitempty"`

	// peerName is a DNS name that every member certificate of the ring
	// carries besides the member's own (etcdfed-peer.<domain>), and no
	// client certificate does: it tells a peer from a client of the same
	// CA. Set by the hub; a change restarts the member, so that its etcd
	// presents a certificate with it.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	PeerName string `json:"peerName,omitempty"`

	// requirePeerName makes etcd's peer port accept only certificates
	// that carry peerName (--peer-cert-allowed-hostname): a consumer's or
	// the hub's client certificate is refused in the TLS handshake. The
	// hub sets it once every member of the ring runs with a certificate
	// that carries peerName (on a new ring at once), and never clears it.
	// +optional
	RequirePeerName bool `json:"requirePeerName,omitempty"`

	// revocationList makes etcd refuse client certificates listed in the
	// revocation list the Secret holds under ca.crl (--client-crl-file),
	// read again on every client connection. The hub sets it once the
	// member's Secret holds a list (on a new member at once), and never
	// clears it: etcd refuses every client while the file is missing.
	// +optional
	RevocationList bool `json:"revocationList,omitempty"`

	// peerRevocationList makes etcd refuse peer certificates listed in the
	// same revocation list (--peer-crl-file): a member certificate the hub
	// replaced (a renewal, a CA rotation, an earlier incarnation of a
	// replaced or moved member) is refused on the peer port, read again on
	// every connection the peer port accepts. The hub sets it once the
	// member's Secret holds a list (on a new member at once), and never
	// clears it: etcd refuses every peer while the file is missing.
	// +optional
	PeerRevocationList bool `json:"peerRevocationList,omitempty"`
}

// EtcdMemberSpec is one member as the hub wants it run. The hub writes it.
// +kubebuilder:validation:XValidation:rule="!has(self.storage) || !has(self.storage.keepVolumesBefore) || self.storage.keepVolumesBefore <= self.incarnation",message="storage.keepVolumesBefore is at most the incarnation: it keeps volumes of earlier incarnations"
// +kubebuilder:validation:XValidation:rule="!has(oldSelf.storage) || !has(oldSelf.storage.keepVolumesBefore) || (has(self.storage) && has(self.storage.keepVolumesBefore) && self.storage.keepVolumesBefore >= oldSelf.storage.keepVolumesBefore)",message="storage.keepVolumesBefore never goes down: a volume kept stays kept"
// +kubebuilder:validation:XValidation:rule="has(self.tls) && ((has(self.tls.mode) && self.tls.mode == 'Disabled') || (has(self.tls.secretName) && size(self.tls.secretName) > 0))",message="tls.secretName is required when TLS is enabled"
type EtcdMemberSpec struct {
	// cluster is the EtcdCluster this member belongs to. Immutable.
	// +required
	// +kubebuilder:validation:XValidation:rule="self.uid == oldSelf.uid",message="cluster.uid is immutable"
	Cluster ClusterReference `json:"cluster"`

	// memberName is the etcd member name, <etcdcluster>-<ordinal>. Immutable.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="memberName is immutable"
	MemberName string `json:"memberName"`

	// incarnation counts the lives of this member's data. A higher value
	// means a fresh data volume and a new etcd member ID under the same name.
	// It never goes down.
	// +required
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:XValidation:rule="self >= oldSelf",message="incarnation never goes down"
	Incarnation int64 `json:"incarnation"`

	// image of the etcd container.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=512
	Image string `json:"image"`

	// version is the etcd release the image runs (the EtcdCluster's
	// spec.version): the spoke renders the flags of its minor version
	// (etcd 3.5 spells some differently). Empty means the newest known.
	// +optional
	// +kubebuilder:validation:MaxLength=32
	Version string `json:"version,omitempty"`

	// dnsName is the member's stable name, <member>.<domain>, advertised in
	// its peer and client URLs.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	DNSName string `json:"dnsName"`

	// zone the member must run in (node label topology.kubernetes.io/zone).
	// Empty: any node.
	// +optional
	// +kubebuilder:validation:MaxLength=63
	Zone string `json:"zone,omitempty"`

	// bootstrap is set by the hub when the member may start. Until then the
	// spoke prepares the volume and the exposure but runs no pod.
	// +optional
	Bootstrap *BootstrapSpec `json:"bootstrap,omitempty"`

	// forceNewCluster, when set, restarts the member's etcd with
	// --force-new-cluster on its own data: it becomes a one-member cluster
	// with its name, ID and data (quorum-loss recovery). The hub sets it to
	// the recovery's token and clears it as soon as etcd answers as one
	// member; each change restarts the pod.
	// +optional
	// +kubebuilder:validation:MaxLength=64
	ForceNewCluster string `json:"forceNewCluster,omitempty"`

	// storage of the member's data volume.
	// +optional
	Storage MemberStorage `json:"storage,omitempty"`

	// expose says how the member is reached from other member clusters.
	// +optional
	Expose ExposeSpec `json:"expose,omitempty"`

	// etcd settings.
	// +optional
	Etcd EtcdConfig `json:"etcd,omitempty"`

	// tls of the member.
	// +optional
	TLS MemberTLS `json:"tls,omitempty"`

	// podTemplate holds pod settings.
	// +optional
	PodTemplate MemberPodTemplate `json:"podTemplate,omitempty"`

	// disruption is the hub's grant on the member's PodDisruptionBudget
	// (one disruption at a time across the whole ring). Changing it
	// restarts nothing.
	// +optional
	Disruption *MemberDisruption `json:"disruption,omitempty"`
}

// VolumeReference names a PVC and its UID.
type VolumeReference struct {
	// claimName of the PVC.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	ClaimName string `json:"claimName,omitempty"`

	// uid of the PVC. A changed UID means the data is not the same data.
	// +optional
	// +kubebuilder:validation:MaxLength=64
	UID string `json:"uid,omitempty"`
}

// MemberEtcdView is what a member's own etcd says about itself.
type MemberEtcdView struct {
	// id is the member ID in hex, as its status read gives it; while the
	// member does not answer, as its log gives it when it shows the member
	// joined under another member's ID (PeerConnections
	// JoinedAsAnotherMember).
	// +optional
	// +kubebuilder:validation:MaxLength=16
	ID string `json:"id,omitempty"`

	// isLearner is true while the member is a non-voting learner.
	// +optional
	IsLearner bool `json:"isLearner,omitempty"`

	// leaderID is the leader's member ID in hex, as this member sees it.
	// +optional
	// +kubebuilder:validation:MaxLength=16
	LeaderID string `json:"leaderID,omitempty"`

	// raftIndex is the member's raft index.
	// +optional
	RaftIndex int64 `json:"raftIndex,omitempty"`

	// raftTerm is the member's raft term.
	// +optional
	RaftTerm int64 `json:"raftTerm,omitempty"`
	// revision is the key-value store's revision the member held at this
	// read (what a retained volume of an old incarnation holds).
	// +optional
	Revision int64 `json:"revision,omitempty"`

	// dbSize is the backend database size in bytes.
	// +optional
	DBSize int64 `json:"dbSize,omitempty"`

	// dbSizeInUse is how much of the database file is in use, in bytes;
	// the rest is free pages a defragmentation gives back.
	// +optional
	DBSizeInUse int64 `json:"dbSizeInUse,omitempty"`

	// version is the etcd server version.
	// +optional
	// +kubebuilder:validation:MaxLength=32
	Version string `json:"version,omitempty"`

	// error is the last error reading the member's status, if any.
	// +optional
	// +kubebuilder:validation:MaxLength=1024
	Error string `json:"error,omitempty"`

	// peers is which of its raft peers this member's etcd holds a
	// connection to, read from the member's own metrics
	// (etcd_network_active_peers) over its client endpoint. The hub uses
	// it to witness a failed zone: a zone is failed only when its nodes'
	// Leases went stale AND a majority of the members outside it have lost
	// every member in it. Absent when the metrics could not be read; such
	// a member is no witness.
	// +optional
	Peers *MemberPeerView `json:"peers,omitempty"`

	// walFsync is how long this member's etcd took to sync its write-ahead
	// log to disk over the last minutes, read from its own metrics
	// (etcd_disk_wal_fsync_duration_seconds). A leader's heartbeats wait
	// for its syncs: a sync slower than the election timeout costs the
	// ring its leader, whatever the distance. Absent for the first minute
	// after the member's etcd started (its first syncs are left out), or
	// when the metrics could not be read; a window without a sync reads
	// all zero.
	// +optional
	WALFsync *MemberDiskView `json:"walFsync,omitempty"`

	// observedAt is when this view was read.
	// +optional
	ObservedAt *metav1.Time `json:"observedAt,omitempty"`
}

// MemberPeerView is which raft peers a member's etcd is connected to, as
// etcd itself reports it (etcd_network_active_peers{Local,Remote}: 1 while
// the peer connection is active, 0 once it dropped). Peer IDs are member
// IDs in hex, as in status.etcd.id.
type MemberPeerView struct {
	// active lists the peers this member holds an active peer connection
	// to.
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=16
	// +kubebuilder:validation:items:MaxLength=16
	Active []string `json:"active,omitempty"`

	// lost lists the peers this member was connected to since its etcd
	// started and is no longer. A peer it never reached is in neither
	// list; a witness counts every peer not in active as lost.
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=16
	// +kubebuilder:validation:items:MaxLength=16
	Lost []string `json:"lost,omitempty"`
}

// MemberDiskView is the tail of a member's disk syncs over a window, as
// etcd's histogram gives it: each value is the upper bound of the
// histogram's bucket (1, 2, 4, ... 8192 ms), so a value moves only when
// the tail moves by a factor of two; and the heartbeats it sent late over
// the same window.
type MemberDiskView struct {
	// p99Millis: 99 of 100 syncs of the window took at most this long.
	// +required
	// +kubebuilder:validation:Minimum=0
	P99Millis int64 `json:"p99Millis"`

	// maxMillis: the slowest sync of the window took at most this long; a
	// sync slower than etcd's largest bucket (8.192 s) counts as 16384.
	// +required
	// +kubebuilder:validation:Minimum=0
	MaxMillis int64 `json:"maxMillis"`

	// syncs is how many syncs the window holds.
	// +required
	// +kubebuilder:validation:Minimum=0
	Syncs int64 `json:"syncs"`

	// windowSeconds is how far back the window reaches (600 s, a few
	// more between reads; less while the member or the spoke has just
	// started).
	// +required
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=86400
	WindowSeconds int32 `json:"windowSeconds"`

	// lateHeartbeats is how many heartbeats this member, while it led,
	// sent later than twice its heartbeat interval over the same window
	// (etcd's etcd_server_heartbeat_send_failures_total, one per peer and
	// late heartbeat): its raft loop stalled, waiting on its disk or for
	// the CPU. A follower campaigns when heartbeats stop for an election
	// timeout, so a leader that sends late is a stall short of an
	// election. timingFloor Disk keeps etcd's defaults while a voter
	// reports them. Zero or absent: none.
	// +optional
	// +kubebuilder:validation:Minimum=0
	LateHeartbeats int64 `json:"lateHeartbeats,omitempty"`
}

// EtcdMemberStatus is written by the spoke.
type EtcdMemberStatus struct {
	// conditions: StorageReady, Exposed, PodReady, MemberHealthy.
	// +optional
	// +listType=map
	// +listMapKey=type
	// +kubebuilder:validation:MaxItems=16
	Conditions []metav1.Condition `json:"conditions,omitempty"`

	// observedGeneration is the generation the spoke acted on.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// incarnation the status describes.
	// +optional
	Incarnation int64 `json:"incarnation,omitempty"`

	// podName of the member's pod.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	PodName string `json:"podName,omitempty"`

	// podIP of the member's pod.
	// +optional
	// +kubebuilder:validation:MaxLength=64
	PodIP string `json:"podIP,omitempty"`

	// nodeName the pod runs on.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	NodeName string `json:"nodeName,omitempty"`

	// zone of that node.
	// +optional
	// +kubebuilder:validation:MaxLength=63
	Zone string `json:"zone,omitempty"`

	// address is the reachable address other member clusters use: the pod
	// IP, the node IP, or the load balancer's IP or hostname.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	Address string `json:"address,omitempty"`

	// peerURL is the advertised peer URL (DNS name and exposed port).
	// +optional
	// +kubebuilder:validation:MaxLength=512
	PeerURL string `json:"peerURL,omitempty"`

	// clientURL is the advertised client URL (DNS name and exposed port).
	// +optional
	// +kubebuilder:validation:MaxLength=512
	ClientURL string `json:"clientURL,omitempty"`

	// volume is the data volume of the current incarnation.
	// +optional
	Volume VolumeReference `json:"volume,omitempty"`

	// etcd is the member's own view, read from its client endpoint.
	// +optional
	Etcd *MemberEtcdView `json:"etcd,omitempty"`

	// disruption reports the member's PodDisruptionBudget and whether its
	// node is being drained.
	// +optional
	Disruption *MemberDisruptionStatus `json:"disruption,omitempty"`
}

// EtcdMember is one etcd member in a member cluster. The hub writes the
// spec; the spoke runs the member's volume, pod and exposure and writes the
// status.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=em,categories=etcdfed
// +kubebuilder:printcolumn:name="Cluster",type=string,JSONPath=`.spec.cluster.name`
// +kubebuilder:printcolumn:name="Incarnation",type=integer,JSONPath=`.spec.incarnation`
// +kubebuilder:printcolumn:name="Zone",type=string,JSONPath=`.status.zone`
// +kubebuilder:printcolumn:name="Address",type=string,JSONPath=`.status.address`
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="PodReady")].status`
// +kubebuilder:printcolumn:name="Healthy",type=string,JSONPath=`.status.conditions[?(@.type=="MemberHealthy")].status`
// +kubebuilder:printcolumn:name="ID",type=string,JSONPath=`.status.etcd.id`,priority=1
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type EtcdMember struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec is written by the hub.
	// +required
	Spec EtcdMemberSpec `json:"spec"`

	// status is written by the spoke.
	// +optional
	Status EtcdMemberStatus `json:"status,omitempty"`
}

// +kubebuilder:object:root=true

// EtcdMemberList is a list of EtcdMember.
type EtcdMemberList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []EtcdMember `json:"items"`
}

func init() {
	register(&EtcdMember{}, &EtcdMemberList{})
}

// GetConditions returns the status conditions.
func (m *EtcdMember) GetConditions() []metav1.Condition { return m.Status.Conditions }

// SetConditions replaces the status conditions.
func (m *EtcdMember) SetConditions(conds []metav1.Condition) { m.Status.Conditions = conds }
