package v1alpha1

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Defaults resolved in code (never in the OpenAPI schema).
const (
	// DefaultRingNamespace is the namespace of each member cluster where the
	// spoke runs and where EtcdMember, EtcdSpoke and EtcdDNSZone objects live.
	DefaultRingNamespace = "etcdfed-system"
	// DefaultDNSTTLSeconds is the TTL of every published record.
	DefaultDNSTTLSeconds int32 = 30
	// DefaultHeartbeatIntervalMillis is etcd's own default heartbeat.
	DefaultHeartbeatIntervalMillis int32 = 100
	// DefaultElectionTimeoutMillis is etcd's own default election timeout.
	DefaultElectionTimeoutMillis int32 = 1000
	// DefaultStorageSize is the data volume size when none is given.
	DefaultStorageSize = "8Gi"
	// DefaultClientPort and DefaultPeerPort are the ports etcd listens on in
	// the pod, and the advertised ports for PodIP and LoadBalancer exposure.
	DefaultClientPort int32 = 2379
	DefaultPeerPort   int32 = 2380
	// DefaultImageRepository is the repository of the official etcd images;
	// the tag is "v" + spec.version.
	DefaultImageRepository = "gcr.io/etcd-development/etcd"
	// DefaultEtcdCPURequest and DefaultEtcdMemoryRequest are the etcd
	// container's requests where podTemplate.resources names neither a
	// request nor a limit of the resource.
	DefaultEtcdCPURequest    = "100m"
	DefaultEtcdMemoryRequest = "256Mi"
)

// ExposeType says how a member's peer and client ports are reached from the
// other member clusters.
// +kubebuilder:validation:Enum=PodIP;NodePort;LoadBalancer
type ExposeType string

const (
	// ExposePodIP publishes the pod IP. Use it when pod networks of all member
	// clusters are routable to each other (flat network, or the local
	// environment). No Service is created.
	ExposePodIP ExposeType = "PodIP"
	// ExposeNodePort creates a NodePort Service per member and publishes the
	// IP of the node that runs the member with the allocated node ports.
	ExposeNodePort ExposeType = "NodePort"
	// ExposeLoadBalancer creates a LoadBalancer Service per member and
	// publishes its ingress IP (A/AAAA record) or hostname (CNAME record).
	ExposeLoadBalancer ExposeType = "LoadBalancer"
)

// ExposeSpec says how members are reached across member clusters.
// +kubebuilder:validation:XValidation:rule="!has(self.loadBalancerSourceRanges) || (has(self.type) && self.type == 'LoadBalancer')",message="loadBalancerSourceRanges needs type LoadBalancer"
type ExposeSpec struct {
	// type is how each member is exposed: PodIP (default; pod networks are
	// routable between member clusters), NodePort or LoadBalancer.
	// +optional
	Type ExposeType `json:"type,omitempty"`

	// serviceAnnotations are added to the per-member Service (NodePort and
	// LoadBalancer only), for example to pick an internal load balancer.
	// +optional
	// +kubebuilder:validation:MaxProperties=32
	ServiceAnnotations map[string]string `json:"serviceAnnotations,omitempty"`

	// loadBalancerSourceRanges are the CIDRs (such as 203.0.113.0/24 or
	// 2001:db8::/48) that may reach a member's LoadBalancer Service, on
	// both ports; the cloud's load balancer drops everything else. Set it
	// to the addresses the other member clusters' nodes leave from (their
	// NAT gateways or node ranges), the hub's, and the clients'. Empty:
	// the load balancer accepts every source (its default). Only with
	// type LoadBalancer; copied to each Service's
	// spec.loadBalancerSourceRanges.
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=64
	// +kubebuilder:validation:items:MaxLength=49
	// +kubebuilder:validation:items:XValidation:rule="isCIDR(self)",message="each loadBalancerSourceRanges entry must be a CIDR such as 203.0.113.0/24 or 2001:db8::/48"
	LoadBalancerSourceRanges []string `json:"loadBalancerSourceRanges,omitempty"`

	// networkPolicy, when set, makes the spoke write a NetworkPolicy for
	// each member's pod (named after the member) that admits its peer port
	// from the ring's members only (their published addresses, the ring's
	// other pods in the same cluster, and peerSourceRanges) and its client
	// and metrics ports from clientSourceRanges only. Every other port and
	// source is refused. It takes effect only where the cluster's network
	// plugin enforces NetworkPolicy. Unset: no NetworkPolicy is written
	// (and one written before is deleted).
	// +optional
	NetworkPolicy *MemberNetworkPolicy `json:"networkPolicy,omitempty"`
}

// MemberNetworkPolicy lists who may reach a member's pod besides its peers.
type MemberNetworkPolicy struct {
	// peerSourceRanges are CIDRs admitted to the peer port besides the
	// members' published addresses (/32 or /128 each, from the ring's DNS
	// zone) and the ring's own pods in the same cluster. Needed where peers
	// reach a member from another address than the one they publish: with
	// LoadBalancer exposure (a member publishes its load balancer's
	// address but connects from its node or NAT gateway), or behind NAT.
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=64
	// +kubebuilder:validation:items:MaxLength=49
	// +kubebuilder:validation:items:XValidation:rule="isCIDR(self)",message="each peerSourceRanges entry must be a CIDR such as 10.8.0.0/16 or fd00::/64"
	PeerSourceRanges []string `json:"peerSourceRanges,omitempty"`

	// clientSourceRanges are the CIDRs admitted to the client port (2379)
	// and the metrics port (2381): the ring's consumers, the hub's
	// cluster (it manages etcd through the client port), the spoke's pods
	// (they read each member's status) and the monitoring system. At
	// least one; 0.0.0.0/0 and ::/0 admit everyone.
	// +required
	// +listType=set
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=64
	// +kubebuilder:validation:items:MaxLength=49
	// +kubebuilder:validation:items:XValidation:rule="isCIDR(self)",message="each clientSourceRanges entry must be a CIDR such as 10.0.0.0/8 or fd00::/64"
	ClientSourceRanges []string `json:"clientSourceRanges"`
}

// AutoCompactionMode is etcd's --auto-compaction-mode.
// +kubebuilder:validation:Enum=periodic;revision
type AutoCompactionMode string

const (
	// AutoCompactionPeriodic keeps the revisions of the retention window.
	AutoCompactionPeriodic AutoCompactionMode = "periodic"
	// AutoCompactionRevision keeps the last N revisions.
	AutoCompactionRevision AutoCompactionMode = "revision"
)

// EtcdConfig holds the etcd settings that must be the same on every member.
// +kubebuilder:validation:XValidation:rule="(has(self.electionTimeoutMillis) ? self.electionTimeoutMillis : 1000) >= 5 * (has(self.heartbeatIntervalMillis) ? self.heartbeatIntervalMillis : 100)",message="electionTimeoutMillis must be at least 5 times heartbeatIntervalMillis (defaults: 1000 and 100); etcd refuses to start otherwise"
// +kubebuilder:validation:XValidation:rule="!has(self.timingFloor) || self.timingFloor != 'Disk' || !has(self.timing) || self.timing != 'Manual'",message="timingFloor Disk is a floor of timing Auto; with timing Manual give heartbeatIntervalMillis and electionTimeoutMillis instead"
// +kubebuilder:validation:XValidation:rule="!has(self.autoCompactionRetention) || has(self.autoCompactionMode)",message="autoCompactionRetention needs autoCompactionMode (periodic or revision)"
// +kubebuilder:validation:XValidation:rule="!has(self.autoCompactionRetention) || !has(self.autoCompactionMode) || self.autoCompactionMode != 'revision' || self.autoCompactionRetention.matches('^[0-9]+$')",message="with autoCompactionMode revision, autoCompactionRetention is a number of revisions, such as 1000"
// +kubebuilder:validation:XValidation:rule="!has(self.autoCompactionRetention) || !has(self.autoCompactionMode) || self.autoCompactionMode != 'periodic' || self.autoCompactionRetention.matches('^([0-9]+|([0-9]+(ms|s|m|h))+)$')",message="with autoCompactionMode periodic, autoCompactionRetention is a duration such as 30m or 1h, or a number of hours"
type EtcdConfig struct {
	// heartbeatIntervalMillis is the leader's heartbeat interval in
	// milliseconds (etcd --heartbeat-interval). Across zones or regions set it
	// to about the round-trip time between members. Default 100.
	// +optional
	// +kubebuilder:validation:Minimum=10
	// +kubebuilder:validation:Maximum=5000
	HeartbeatIntervalMillis *int32 `json:"heartbeatIntervalMillis,omitempty"`

	// electionTimeoutMillis is how long a follower waits without a heartbeat
	// before it starts an election (etcd --election-timeout). At least 5 times
	// heartbeatIntervalMillis; 10 times the round-trip time is a good value.
	// Default 1000.
	// +optional
	// +kubebuilder:validation:Minimum=50
	// +kubebuilder:validation:Maximum=50000
	ElectionTimeoutMillis *int32 `json:"electionTimeoutMillis,omitempty"`

	// quotaBackendBytes is the backend size quota (etcd
	// --quota-backend-bytes), between 16Mi and 100Gi. When it is exceeded
	// etcd raises a NOSPACE alarm and only accepts reads and deletes. Default
	// is etcd's (2Gi).
	// +optional
	// +kubebuilder:validation:XValidation:rule="quantity(string(self)).compareTo(quantity('16Mi')) >= 0 && quantity(string(self)).compareTo(quantity('100Gi')) <= 0",message="quotaBackendBytes must be between 16Mi and 100Gi"
	QuotaBackendBytes *resource.Quantity `json:"quotaBackendBytes,omitempty"`

	// autoCompactionMode is etcd --auto-compaction-mode: periodic or
	// revision. Unset means no automatic compaction by etcd.
	// +optional
	AutoCompactionMode AutoCompactionMode `json:"autoCompactionMode,omitempty"`

	// autoCompactionRetention is etcd --auto-compaction-retention: a
	// duration (periodic, e.g. "1h") or a revision count (revision, e.g.
	// "1000").
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=32
	AutoCompactionRetention string `json:"autoCompactionRetention,omitempty"`

	// timing says where the heartbeat interval and the election timeout
	// come from: Auto (the default) derives them from the round trips
	// measured between the voters' member clusters (EtcdCluster
	// status.roundTrips, following etcd's tuning guide: heartbeat 1.5
	// median round trips with a quarter of the jitter (p99 minus median)
	// as a margin, over the worst pair of voters' clusters, at least 100;
	// election timeout 10 times the heartbeat, at least 1000), and changes
	// them by a roll only when the difference matters; at zero distance,
	// and before any round trip is measured, they are etcd's defaults.
	// Manual uses etcd's defaults (100 and 1000)
	// where no value is given. heartbeatIntervalMillis and
	// electionTimeoutMillis, when given, always win. EtcdCluster
	// status.timing says what was chosen and why. Ignored on an
	// EtcdMember: the hub writes the values it chose.
	// +optional
	Timing TimingMode `json:"timing,omitempty"`

	// timingFloor is the least heartbeat interval and election timeout
	// timing Auto chooses. EtcdDefaults (the default): etcd's own, 100
	// and 1000 ms, whatever the disks. Disk: from the voters' WAL syncs
	// (their EtcdMembers' status.etcd.walFsync): an election timeout of
	// four times the slowest sync of the last ten minutes, at least 300
	// ms, and a heartbeat of a tenth of it; etcd's defaults (or the
	// values chosen before) until every voter reported a full window of
	// ten minutes, and while a voter reports heartbeats it sent late as
	// leader in its window (walFsync.lateHeartbeats: its raft loop
	// stalled, on its disk or for the CPU). A late heartbeat, or a sync
	// slow enough to raise the election timeout by more than a quarter,
	// raises the floor at once; a smaller raise waits until it differs
	// enough to roll for, like any derived change; a lower floor waits for full
	// windows of every voter, clear of late heartbeats. It fails over
	// faster where the disks and CPU are quick (at 300 ms a lost leader
	// is replaced in about half a second rather than one to two) and
	// holds a ring together where they stall, at the price of a roll
	// each time the floor moves. Only with timing Auto.
	// +optional
	TimingFloor TimingFloor `json:"timingFloor,omitempty"`
}

// VolumeReclaimPolicy says what happens to the data volume of a member
// incarnation that is no longer in use.
// +kubebuilder:validation:Enum=Retain;Delete
type VolumeReclaimPolicy string

const (
	// VolumeRetain keeps the PVC, labelled as retired, for a human to inspect
	// and delete. The default: etcdfed never deletes data on its own.
	VolumeRetain VolumeReclaimPolicy = "Retain"
	// VolumeDelete deletes the PVC of a retired incarnation once the member
	// runs on its new incarnation, and the PVC of a deleted member.
	VolumeDelete VolumeReclaimPolicy = "Delete"
)

// TLSMode turns TLS on or off for peer and client traffic.
// +kubebuilder:validation:Enum=Enabled;Disabled
type TLSMode string

const (
	// TLSEnabled (default): peer and client traffic use TLS with
	// certificates issued by the hub's CA.
	TLSEnabled TLSMode = "Enabled"
	// TLSDisabled: plain HTTP between members and for clients. For labs only.
	TLSDisabled TLSMode = "Disabled"
)

// MemberPodTemplate holds the pod settings a user may change for every
// member pod.
type MemberPodTemplate struct {
	// labels are added to every member pod.
	// +optional
	// +kubebuilder:validation:MaxProperties=64
	Labels map[string]string `json:"labels,omitempty"`

	// annotations are added to every member pod.
	// +optional
	// +kubebuilder:validation:MaxProperties=64
	Annotations map[string]string `json:"annotations,omitempty"`

	// resources of the etcd container: what the scheduler reserves
	// (requests) and the kubelet enforces (limits). Where neither a
	// request nor a limit names cpu or memory, the spoke requests
	// DefaultEtcdCPURequest (100m) and DefaultEtcdMemoryRequest (256Mi),
	// so a member pod is never BestEffort, the class evicted first under
	// node pressure; size them for the ring's load. A memory limit risks
	// an OOM kill of a member under load and a CPU limit throttles its
	// heartbeats: set them only where the cluster demands them. The init
	// containers request 10m CPU and 32Mi memory.
	// +optional
	// +kubebuilder:validation:XValidation:rule="!has(self.claims)",message="resources.claims is not supported: member pods claim no dynamic resources"
	// +kubebuilder:validation:XValidation:rule="!has(self.requests) || !('cpu' in self.requests) || quantity(string(self.requests['cpu'])).compareTo(quantity('0')) > 0",message="resources.requests.cpu must be above zero: leave it out for the default (a pod without requests is BestEffort, evicted first)"
	// +kubebuilder:validation:XValidation:rule="!has(self.requests) || !('memory' in self.requests) || quantity(string(self.requests['memory'])).compareTo(quantity('0')) > 0",message="resources.requests.memory must be above zero: leave it out for the default (a pod without requests is BestEffort, evicted first)"
	// +kubebuilder:validation:XValidation:rule="!has(self.requests) || !has(self.limits) || !('cpu' in self.requests) || !('cpu' in self.limits) || quantity(string(self.requests['cpu'])).compareTo(quantity(string(self.limits['cpu']))) <= 0",message="resources.requests.cpu must not exceed resources.limits.cpu"
	// +kubebuilder:validation:XValidation:rule="!has(self.requests) || !has(self.limits) || !('memory' in self.requests) || !('memory' in self.limits) || quantity(string(self.requests['memory'])).compareTo(quantity(string(self.limits['memory']))) <= 0",message="resources.requests.memory must not exceed resources.limits.memory"
	Resources *corev1.ResourceRequirements `json:"resources,omitempty"`

	// tolerations of every member pod.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=32
	Tolerations []corev1.Toleration `json:"tolerations,omitempty"`

	// nodeSelector narrows the nodes a member pod may run on, in addition to
	// the zone the hub assigned.
	// +optional
	// +kubebuilder:validation:MaxProperties=32
	NodeSelector map[string]string `json:"nodeSelector,omitempty"`

	// priorityClassName of every member pod.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	PriorityClassName string `json:"priorityClassName,omitempty"`

	// terminationGracePeriodSeconds gives etcd time to stop cleanly: on
	// SIGTERM a leader hands leadership to a follower (up to 5 s plus two
	// election timeouts) before it closes its database. Default: 30, or
	// more when the election timeout asks for it (15 s plus two election
	// timeouts).
	// +optional
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=600
	TerminationGracePeriodSeconds *int64 `json:"terminationGracePeriodSeconds,omitempty"`
}

// FailureDomain is one (member cluster, zone) pair.
type FailureDomain struct {
	// cluster is the member cluster's name as registered with the hub.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Cluster string `json:"cluster"`

	// zone is the value of the topology.kubernetes.io/zone label of the
	// nodes, empty for a cluster without zone labels.
	// +optional
	// +kubebuilder:validation:MaxLength=63
	Zone string `json:"zone,omitempty"`
}

// ConditionsOf is implemented by every etcdfed object with status conditions.
// +kubebuilder:object:generate=false
type ConditionsOf interface {
	GetConditions() []metav1.Condition
	SetConditions([]metav1.Condition)
}
