package v1alpha1

import (
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// EtcdClusterSpec is the desired state of one global etcd cluster.
// +kubebuilder:validation:XValidation:rule="has(self.adopt) == has(oldSelf.adopt)",message="spec.adopt cannot be added or removed after creation: a ring is either founded by etcdfed or adopted from a running cluster, and an adopted ring keeps the record of its original members"
// +kubebuilder:validation:XValidation:rule="!has(self.adopt) || !has(self.bootstrap)",message="spec.adopt and spec.bootstrap exclude each other: an adopted cluster keeps its own data, it is not founded from a snapshot"
// +kubebuilder:validation:XValidation:rule="!has(self.adopt) || (has(self.tls) && has(self.tls.caSecretName) && size(self.tls.caSecretName) > 0 && (!has(self.tls.mode) || self.tls.mode == 'Enabled'))",message="spec.adopt needs spec.tls.caSecretName: a Secret with the existing cluster's CA certificate and key (tls.crt, tls.key), which becomes the ring's CA so that the original members trust the new ones"
// +kubebuilder:validation:XValidation:rule="!has(self.adopt) || (has(self.tls) && has(self.tls.auth))",message="spec.adopt needs spec.tls.auth set explicitly: Enabled turns etcd authentication on in the adopted cluster, and clients of the old endpoints whose certificate's common name is neither root nor a spec.clients user lose access; Disabled leaves authentication as it is"
// +kubebuilder:validation:XValidation:rule="has(self.bootstrap) == has(oldSelf.bootstrap)",message="spec.bootstrap cannot be added or removed after creation: it says how the cluster was founded"
// +kubebuilder:validation:XValidation:rule="(has(self.tls) && has(self.tls.caSecretName)) == (has(oldSelf.tls) && has(oldSelf.tls.caSecretName)) && (!(has(self.tls) && has(self.tls.caSecretName)) || self.tls.caSecretName == oldSelf.tls.caSecretName)",message="tls.caSecretName cannot be set, changed or removed after creation: members would stop trusting each other at once; a generated CA is rotated with etcdfed rotate-ca"
type EtcdClusterSpec struct {
	// replicas is the number of voting etcd members: odd, from 1 to 9. The
	// hub spreads them over zones first, then over member clusters, so that
	// losing any one zone keeps a majority where the zones allow it.
	// +required
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=9
	// +kubebuilder:validation:XValidation:rule="self % 2 == 1",message="replicas must be odd (1, 3, 5, 7 or 9): an even count adds a member without adding failure tolerance"
	Replicas int32 `json:"replicas"`

	// version is the etcd version every member runs, such as "3.7.3": a
	// patch release of a minor version etcdfed runs (the version matrix in
	// docs/upgrades.md lists them, the newest patch tested of each, and
	// the patches refused with the reason and the release that fixes it). It changes one step at a time, as etcd
	// upgrades and downgrades: within a minor version, one minor version up
	// from a patch etcd supports the upgrade from, or one minor version
	// down; any other change is refused with the step to take first. A
	// change rolls the members one at a time, the leader last (Progressing
	// reason Upgrading or Downgrading); a downgrade is first enabled in etcd
	// (etcdctl downgrade enable), and refused when etcd refuses it.
	// The rules below are generated from pkg/etcdversion (make generate).
	// +required
	// +kubebuilder:validation:MaxLength=32
	// +kubebuilder:validation:XValidation:rule="self.matches('^3[.][0-9]{1,9}[.][0-9]{1,9}$')",message="version must be an etcd release such as 3.7.3 (three numbers, no leading v)"
	// +kubebuilder:validation:XValidation:rule="!self.matches('^3[.][0-9]{1,9}[.][0-9]{1,9}$') || int(self.split('.')[1]) >= 5",message="etcd versions before 3.5 are not supported"
	// +kubebuilder:validation:XValidation:rule="!self.matches('^3[.][0-9]{1,9}[.][0-9]{1,9}$') || int(self.split('.')[1]) <= 7",message="unknown etcd version: etcdfed knows etcd 3.5, 3.6 and 3.7 (a newer minor version needs a newer etcdfed)"
	// +kubebuilder:validation:XValidation:rule="!self.matches('^3[.][0-9]{1,9}[.][0-9]{1,9}$') || !(int(self.split('.')[1]) == 5 && int(self.split('.')[2]) >= 0 && int(self.split('.')[2]) <= 22)",message="etcd 3.5.0 to 3.5.22 are refused: a member can corrupt its data when a snapshot from the leader is applied while it defragments, and etcdfed defragments members (etcd #20653; the same line also lost data on a crash under load before 3.5.3, #13766, and during a defragmentation before 3.5.6, #14730); fixed in 3.5.23: use 3.5.35 (the newest 3.5 etcdfed runs)"
	// +kubebuilder:validation:XValidation:rule="!self.matches('^3[.][0-9]{1,9}[.][0-9]{1,9}$') || !(int(self.split('.')[1]) == 5 && int(self.split('.')[2]) >= 23 && int(self.split('.')[2]) <= 24)",message="etcd 3.5.23 to 3.5.24 are refused: --force-new-cluster does not clean up learners after it creates its snapshot (etcd #20896), and etcdfed's quorum-loss recovery restarts a survivor with it; fixed in 3.5.25: use 3.5.35 (the newest 3.5 etcdfed runs)"
	// +kubebuilder:validation:XValidation:rule="!self.matches('^3[.][0-9]{1,9}[.][0-9]{1,9}$') || !(int(self.split('.')[1]) == 6 && int(self.split('.')[2]) >= 0 && int(self.split('.')[2]) <= 4)",message="etcd 3.6.0 to 3.6.4 are refused: a member can corrupt its data when a snapshot from the leader is applied while it defragments (etcd #20650), and before 3.6.4 a member that replays a learner's promotion fails to start (#20387); etcdfed defragments members and adds every member as a learner; fixed in 3.6.5: use 3.6.16 (the newest 3.6 etcdfed runs)"
	// +kubebuilder:validation:XValidation:rule="!self.matches('^3[.][0-9]{1,9}[.][0-9]{1,9}$') || !(int(self.split('.')[1]) == 6 && int(self.split('.')[2]) >= 5 && int(self.split('.')[2]) <= 5)",message="etcd 3.6.5 is refused: --force-new-cluster does not clean up learners after it creates its snapshot (etcd #20896), and etcdfed's quorum-loss recovery restarts a survivor with it; fixed in 3.6.6: use 3.6.16 (the newest 3.6 etcdfed runs)"
	// +kubebuilder:validation:XValidation:rule="!self.matches('^3[.][0-9]{1,9}[.][0-9]{1,9}$') || !oldSelf.matches('^3[.][0-9]{1,9}[.][0-9]{1,9}$') || int(self.split('.')[1]) <= int(oldSelf.split('.')[1]) + 1",message="etcd upgrades one minor version at a time: change spec.version to the next minor version first",messageExpression="(int(oldSelf.split('.')[1]) + 1) in {5: '3.5.35', 6: '3.6.16', 7: '3.7.3'} && int(oldSelf.split('.')[1]) in {5: '3.5.35', 6: '3.6.16', 7: '3.7.3'} ? 'etcd upgrades one minor version at a time: change spec.version to ' + ((int(oldSelf.split('.')[1]) + 1) in {6: 32, 7: 11} && int(oldSelf.split('.')[2]) < {6: 32, 7: 11}[int(oldSelf.split('.')[1]) + 1] ? {5: '3.5.35', 6: '3.6.16', 7: '3.7.3'}[int(oldSelf.split('.')[1])] : {5: '3.5.35', 6: '3.6.16', 7: '3.7.3'}[int(oldSelf.split('.')[1]) + 1]) + ' first' : 'etcd upgrades one minor version at a time'"
	// +kubebuilder:validation:XValidation:rule="!self.matches('^3[.][0-9]{1,9}[.][0-9]{1,9}$') || !oldSelf.matches('^3[.][0-9]{1,9}[.][0-9]{1,9}$') || !(int(self.split('.')[1]) == 6 && int(oldSelf.split('.')[1]) == 5) || int(oldSelf.split('.')[2]) >= 32",message="moving to 3.6 needs every member on 3.5.32 or later (etcd's upgrade guide: 3.5.26 repairs 'zombie members' (members removed long ago that come back after the upgrade), and 3.5.24 to 3.5.32 fix further upgrade blockers): change spec.version to 3.5.35 first"
	// +kubebuilder:validation:XValidation:rule="!self.matches('^3[.][0-9]{1,9}[.][0-9]{1,9}$') || !oldSelf.matches('^3[.][0-9]{1,9}[.][0-9]{1,9}$') || !(int(self.split('.')[1]) == 7 && int(oldSelf.split('.')[1]) == 6) || int(oldSelf.split('.')[2]) >= 11",message="moving to 3.7 needs every member on 3.6.11 or later (etcd's upgrade guide: earlier 3.6 patches may not be compatible with a rolling upgrade to 3.7): change spec.version to 3.6.16 first"
	// +kubebuilder:validation:XValidation:rule="!self.matches('^3[.][0-9]{1,9}[.][0-9]{1,9}$') || !oldSelf.matches('^3[.][0-9]{1,9}[.][0-9]{1,9}$') || int(self.split('.')[1]) >= int(oldSelf.split('.')[1]) - 1",message="etcd downgrades one minor version at a time: change spec.version to the previous minor version first",messageExpression="(int(oldSelf.split('.')[1]) - 1) in {5: '3.5.35', 6: '3.6.16', 7: '3.7.3'} ? 'etcd downgrades one minor version at a time: change spec.version to ' + {5: '3.5.35', 6: '3.6.16', 7: '3.7.3'}[int(oldSelf.split('.')[1]) - 1] + ' first' : 'etcd downgrades one minor version at a time'"
	Version string `json:"version"`

	// image overrides the etcd container image. Default:
	// gcr.io/etcd-development/etcd:v<version>. The image must have etcd at
	// /usr/local/bin/etcd.
	// +optional
	// +kubebuilder:validation:MaxLength=512
	Image string `json:"image,omitempty"`

	// topology says which member clusters may host members and which zones
	// or clusters to evacuate.
	// +optional
	Topology TopologySpec `json:"topology,omitempty"`

	// dns configures the records that give each member a stable name.
	// +required
	DNS DNSSpec `json:"dns"`

	// storage configures each member's data volume.
	// +optional
	Storage StorageSpec `json:"storage,omitempty"`

	// expose says how members reach each other across member clusters.
	// +optional
	Expose ExposeSpec `json:"expose,omitempty"`

	// etcd holds settings passed to every etcd member.
	// +optional
	Etcd EtcdConfig `json:"etcd,omitempty"`

	// tls configures peer and client TLS, and etcd's authentication of
	// clients by their certificates. Both on by default.
	// +optional
	TLS TLSSpec `json:"tls,omitempty"`

	// podTemplate holds pod settings for every member.
	// +optional
	PodTemplate MemberPodTemplate `json:"podTemplate,omitempty"`

	// failurePolicy says when a failed member is replaced and a failed zone
	// evacuated.
	// +optional
	FailurePolicy FailurePolicy `json:"failurePolicy,omitempty"`

	// bootstrap says how the etcd cluster is founded: unset, empty;
	// fromSnapshot, every founding member restored from one snapshot.
	// Immutable.
	// +optional
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="spec.bootstrap is immutable: it says how the cluster was founded"
	Bootstrap *ClusterBootstrap `json:"bootstrap,omitempty"`

	// adopt takes over a running etcd cluster that etcdfed did not create
	// instead of founding a new one (AdoptSpec): etcdfed's members join it
	// one at a time, and its original members are removed once
	// adopt.retire is set. Set at creation only; needs spec.tls.caSecretName
	// (the existing cluster's CA) and an explicit spec.tls.auth.
	// +optional
	Adopt *AdoptSpec `json:"adopt,omitempty"`

	// backup takes scheduled snapshots into an object store. Unset: no
	// scheduled backups (on-demand ones need it too, for the store).
	// +optional
	Backup *BackupSpec `json:"backup,omitempty"`

	// defragmentation says when the hub defragments members' databases.
	// Changing it restarts nothing.
	// +optional
	Defragmentation DefragmentationSpec `json:"defragmentation,omitempty"`
	// clients are the consumers of the ring that get a client certificate,
	// the CA and the endpoints as a Secret in the cluster and namespace
	// where they run, kept renewed by the hub (ClientSpec).
	// +optional
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=64
	// +kubebuilder:validation:XValidation:rule="self.all(c, self.exists_one(d, (has(d.commonName) && size(d.commonName) > 0 ? d.commonName : d.name) == (has(c.commonName) && size(c.commonName) > 0 ? c.commonName : c.name)))",message="every consumer needs its own etcd user: commonName (default name) must be unique among spec.clients"
	Clients []ClientSpec `json:"clients,omitempty"`
	// leader says where the ring's leader should be (LeaderSpec). Unset:
	// where etcd's elections put it. Changing it restarts nothing.
	// +optional
	Leader *LeaderSpec `json:"leader,omitempty"`
}

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

// DNSSpec configures the per-member records.
type DNSSpec struct {
	// domain is the DNS zone of this etcd cluster. Member <name> is reachable
	// as <name>.<domain>, and SRV records under the domain let clients use
	// --discovery-srv. At least two labels. The hub's operator may limit
	// the domains a namespace can use (hub flag --allowed-domains).
	// Immutable: every client's endpoint list is built from it.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=200
	// +kubebuilder:validation:XValidation:rule="self.matches('^[a-z0-9]([-a-z0-9]*[a-z0-9])?([.][a-z0-9]([-a-z0-9]*[a-z0-9])?)*$')",message="domain must be a lowercase DNS name such as etcd.example.com (letters, digits, '-' and '.')"
	// +kubebuilder:validation:XValidation:rule="self.contains('.')",message="domain must have at least two labels, such as etcd.example.com: a single-label domain (com, local) would hold every name under it and keep every other ring out"
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="domain is immutable: clients' endpoint lists are built from it; create a new EtcdCluster to change it"
	Domain string `json:"domain"`

	// ttlSeconds is the TTL of every record, 1 to 3600. Default 30. A low TTL
	// lets clients follow a member that moved.
	// +optional
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=3600
	TTLSeconds *int32 `json:"ttlSeconds,omitempty"`

	// rfc2136 also publishes the records to an external authoritative server
	// by dynamic update (RFC 2136) signed with TSIG.
	// +optional
	RFC2136 *RFC2136Spec `json:"rfc2136,omitempty"`
}

// TSIGAlgorithm names a TSIG HMAC algorithm.
// +kubebuilder:validation:Enum=hmac-sha256;hmac-sha512;hmac-sha1
type TSIGAlgorithm string

// RFC2136Spec points at an external DNS server that accepts signed updates.
type RFC2136Spec struct {
	// server is the host:port of the authoritative server.
	// +required
	// +kubebuilder:validation:MinLength=3
	// +kubebuilder:validation:MaxLength=261
	Server string `json:"server"`

	// zone is the zone to update on that server; dns.domain must be in it.
	// Default: dns.domain.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	Zone string `json:"zone,omitempty"`

	// tsigKeyName is the name of the TSIG key.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	TSIGKeyName string `json:"tsigKeyName"`

	// tsigSecretName is a Secret in the EtcdCluster's namespace whose key
	// "secret" holds the base64 TSIG secret.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	TSIGSecretName string `json:"tsigSecretName"`

	// tsigAlgorithm defaults to hmac-sha256.
	// +optional
	TSIGAlgorithm TSIGAlgorithm `json:"tsigAlgorithm,omitempty"`
}

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

// TLSSpec configures peer and client TLS, and etcd's authentication of
// clients by their certificates (auth).
// +kubebuilder:validation:XValidation:rule="!has(self.revokedCertificates) || size(self.revokedCertificates) == 0 || !has(self.mode) || self.mode != 'Disabled'",message="tls.revokedCertificates needs TLS: a ring with tls.mode Disabled asks no client for a certificate"
type TLSSpec struct {
	// mode is Enabled (default) or Disabled. Immutable.
	// +optional
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="tls.mode is immutable: switching TLS on a running cluster is not supported"
	Mode TLSMode `json:"mode,omitempty"`

	// caSecretName is a Secret in the EtcdCluster's namespace with tls.crt
	// and tls.key of a CA to issue member and client certificates from.
	// Default: the hub generates a CA in the Secret <name>-ca. Fixed at
	// creation: switching CAs at once would make members distrust each
	// other. The generated CA is rotated in place with `etcdfed rotate-ca`.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	CASecretName string `json:"caSecretName,omitempty"`

	// peerSkipClientSANVerification turns off etcd's check that a peer's
	// source IP is in its certificate. Needed when peer connections pass NAT
	// or a load balancer, and on loopback.
	// +optional
	PeerSkipClientSANVerification bool `json:"peerSkipClientSANVerification,omitempty"`

	// auth is etcd's authentication: Enabled (default) or Disabled. When
	// enabled, the user of every request is its client certificate's
	// common name: the hub's (etcdfed-hub) and root are root, each
	// spec.clients consumer has the role it declares, and any other
	// certificate of the ring's CA reads and writes nothing. The hub
	// creates the users and roles first and turns authentication on
	// after, so consumers declared in spec.clients keep working. Disabled
	// turns it off again: every certificate of the CA is root on the data.
	// +optional
	Auth AuthMode `json:"auth,omitempty"`

	// revokedCertificates are serial numbers of certificates of the ring's
	// CA that etcd refuses as clients: lowercase hexadecimal without
	// leading zeros or colons, as `etcdfed client-cert` prints them
	// (`openssl x509 -noout -serial` prints the same digits in upper
	// case; `etcdfed client-cert revoke --cert FILE` adds one from a
	// certificate). The hub signs a revocation list of them with the
	// ring's CA, writes it into every member's Secret, and every member
	// runs etcd with --client-crl-file; etcd checks it on every new
	// client connection. A connection opened before a serial is listed
	// stays open until it closes. Removing a serial admits its
	// certificate again. Meant for root certificates (the hub's,
	// `etcdfed client-cert`'s) that no etcd user can be taken from; a
	// spec.clients entry is revoked by removing it. At most 512.
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=512
	// +kubebuilder:validation:items:MaxLength=40
	// +kubebuilder:validation:items:Pattern=`^[1-9a-f][0-9a-f]*$`
	RevokedCertificates []string `json:"revokedCertificates,omitempty"`
}

// AuthMode turns etcd's authentication on or off.
// +kubebuilder:validation:Enum=Enabled;Disabled
type AuthMode string

const (
	// AuthEnabled (default): etcd authentication with per-consumer roles.
	AuthEnabled AuthMode = "Enabled"
	// AuthDisabled: no etcd authentication.
	AuthDisabled AuthMode = "Disabled"
)

// AuthOn reports whether etcd authentication is wanted on a ring whose TLS
// is on (it needs client certificates).
func (t TLSSpec) AuthOn() bool { return t.Mode.Enabled() && t.Auth != AuthDisabled }

// FailurePolicy says when the hub replaces members on its own.
type FailurePolicy struct {
	// automatic lets the hub replace a failed member and evacuate a failed
	// zone without a human. Default true. When false, failures are reported
	// in conditions and nothing moves.
	// +optional
	Automatic *bool `json:"automatic,omitempty"`

	// memberGracePeriod is how long a member may be unhealthy before it is
	// replaced by a new incarnation. At least 30s. Default 5m.
	// +optional
	// +kubebuilder:validation:XValidation:rule="duration(self) >= duration('30s')",message="memberGracePeriod must be at least 30s"
	MemberGracePeriod *metav1.Duration `json:"memberGracePeriod,omitempty"`

	// zoneGracePeriod is how long a member cluster (and so its zone or
	// zones) must be seen failed, by the hub and a majority of the other
	// spokes, before its members are moved away; and how long a zone of a
	// multi-zone member cluster must be seen failed (all its node Leases
	// stale on the hub's clock and a majority of the ring's members in
	// other zones lost every member in it) before its members are moved
	// away. At least 30s. Default 2m.
	// +optional
	// +kubebuilder:validation:XValidation:rule="duration(self) >= duration('30s')",message="zoneGracePeriod must be at least 30s"
	ZoneGracePeriod *metav1.Duration `json:"zoneGracePeriod,omitempty"`

	// quorumLossRecovery is Manual (default: the hub declares the loss of
	// quorum and waits for `etcdfed recover`) or Automatic (the hub
	// recovers from the freshest survivor once the loss has lasted
	// memberGracePeriod).
	// +optional
	QuorumLossRecovery QuorumLossRecovery `json:"quorumLossRecovery,omitempty"`
}

// MemberRole is a member's role in etcd.
// +kubebuilder:validation:Enum=Leader;Follower;Learner;Unknown
type MemberRole string

const (
	RoleLeader   MemberRole = "Leader"
	RoleFollower MemberRole = "Follower"
	RoleLearner  MemberRole = "Learner"
	RoleUnknown  MemberRole = "Unknown"
)

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

// OperationType is the kind of operation: a membership change, or the
// restart of one member on a changed spec (Roll).
// +kubebuilder:validation:Enum=Bootstrap;Add;Remove;Replace;Move;MoveLeader;Roll;Defrag;Disrupt;Recover;RotateCA;Retire
type OperationType string

const (
	OperationBootstrap OperationType = "Bootstrap"
	OperationAdd       OperationType = "Add"
	OperationRemove    OperationType = "Remove"
	OperationReplace   OperationType = "Replace"
	// OperationMove moves a live member make-before-break: its new
	// incarnation joins as a learner beside the old one and is promoted
	// (the ring has one voter more than replicas for a while), then
	// leadership leaves the old incarnation, its ID is removed and its
	// objects deleted. A move whose old incarnation is already dead is a
	// Replace (break-before-make).
	OperationMove       OperationType = "Move"
	OperationMoveLeader OperationType = "MoveLeader"
	// OperationRoll restarts one member on the EtcdCluster's current spec
	// (image, version, etcd flags, pod template) on its own volume,
	// leadership moved away first. A rollout is one Roll per member,
	// followers first, the leader last.
	OperationRoll OperationType = "Roll"
	// OperationDefrag defragments members' databases one at a time
	// (reason Fragmented: one member; reason NoSpace: compaction, every
	// member, then the NOSPACE alarm disarmed).
	OperationDefrag OperationType = "Defrag"
)

// MembershipOperation is the one operation in flight on the ring: a
// membership change or a member's roll. It is written before the change is
// made, so a restarted hub resumes it.
type MembershipOperation struct {
	// type of the change.
	// +required
	Type OperationType `json:"type"`

	// member is the member being added, removed, replaced or rolled.
	// +optional
	// +kubebuilder:validation:MaxLength=63
	Member string `json:"member,omitempty"`

	// memberID is the etcd ID being removed: the removed member's (Remove)
	// or the replaced incarnation's (Replace).
	// +optional
	// +kubebuilder:validation:MaxLength=16
	MemberID string `json:"memberID,omitempty"`

	// newMemberID is the etcd ID of the member being added (Add, Replace),
	// once etcd has assigned it.
	// +optional
	// +kubebuilder:validation:MaxLength=16
	NewMemberID string `json:"newMemberID,omitempty"`

	// incarnation of the member being added.
	// +optional
	Incarnation int64 `json:"incarnation,omitempty"`

	// fromIncarnation is the incarnation a Move retires (and keeps, should
	// the new one never start).
	// +optional
	FromIncarnation int64 `json:"fromIncarnation,omitempty"`

	// fromAddress is the address of the incarnation a Move retires: the
	// member's stable DNS name keeps pointing at it until its etcd ID is
	// removed.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	FromAddress string `json:"fromAddress,omitempty"`

	// fromDNSName is the DNS name the retired incarnation runs under when
	// it is its own (status.members[].dnsName of an incarnation a Move
	// added): its record stays, at fromAddress, while etcd lists the
	// retired ID, since its peers and its client URL use that name.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	FromDNSName string `json:"fromDNSName,omitempty"`

	// from is the failure domain a member leaves.
	// +optional
	From *FailureDomain `json:"from,omitempty"`

	// to is the failure domain a member joins.
	// +optional
	To *FailureDomain `json:"to,omitempty"`

	// reason says why: ScaleUp, ScaleDown, Evacuate, Rebalance, Spread,
	// Replace, Bootstrap, SpecChanged, Fragmented, NoSpace, CARotation. For
	// a placement move the type says how: Move (make before break) or
	// Replace (break before make: the old incarnation was already dead,
	// which the message says).
	// +optional
	// +kubebuilder:validation:MaxLength=64
	Reason string `json:"reason,omitempty"`

	// step is the step in progress, such as AddLearner, Promote or
	// UpdateObject.
	// +optional
	// +kubebuilder:validation:MaxLength=64
	Step string `json:"step,omitempty"`

	// message explains what the operation waits for.
	// +optional
	// +kubebuilder:validation:MaxLength=1024
	Message string `json:"message,omitempty"`

	// startedAt is when the operation was recorded.
	// +required
	StartedAt metav1.Time `json:"startedAt"`
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

	// roundTrips is the matrix of round trips between the ring's member
	// clusters, from their spokes' reports (EtcdSpoke status.roundTrips),
	// sorted by from and to. An entry changes only when the round trip
	// changes enough to matter.
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

// EtcdCluster is one etcd cluster whose members live in several member
// clusters and zones. It lives in the hub cluster. Its name names its
// members (<name>-0, <name>-1, ...), each a DNS label in spec.dns.domain
// and a part of object names in every member cluster: a lowercase DNS
// label of at most 60 characters that starts with a letter.
//
// +kubebuilder:validation:XValidation:rule="oldSelf.hasValue() || (self.metadata.name.size() <= 60 && self.metadata.name.matches('^[a-z]([-a-z0-9]*[a-z0-9])?$'))",message="metadata.name must be a lowercase DNS label of at most 60 characters starting with a letter (letters, digits and '-', no '.'): it names the members (<name>-0, ...), each a DNS name <name>-0.<domain>",optionalOldSelf=true
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=ec;etcdc,categories=etcdfed
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Available")].status`,description="Quorate and serving"
// +kubebuilder:printcolumn:name="Members",type=string,JSONPath=`.status.memberSummary`,description="Ready members / desired"
// +kubebuilder:printcolumn:name="Zones",type=string,JSONPath=`.status.zoneSummary`,description="Zones and members per zone"
// +kubebuilder:printcolumn:name="Leader",type=string,JSONPath=`.status.leader`
// +kubebuilder:printcolumn:name="Version",type=string,JSONPath=`.status.clusterVersion`,priority=1,description="Cluster version etcd reports"
// +kubebuilder:printcolumn:name="Tolerant",type=string,JSONPath=`.status.conditions[?(@.type=="FailureTolerant")].status`,priority=1,description="Survives the loss of any one zone"
// +kubebuilder:printcolumn:name="Compaction",type=string,JSONPath=`.spec.etcd.autoCompactionMode`,priority=1,description="etcd --auto-compaction-mode"
// +kubebuilder:printcolumn:name="Retention",type=string,JSONPath=`.spec.etcd.autoCompactionRetention`,priority=1,description="etcd --auto-compaction-retention"
// +kubebuilder:printcolumn:name="Last Backup",type=date,JSONPath=`.status.backup.lastSuccess.time`,priority=1,description="When the newest stored snapshot was taken"
// +kubebuilder:printcolumn:name="Adoption",type=string,JSONPath=`.status.adoption.summary`,priority=1,description="Originals retired and etcdfed members joined (spec.adopt)"
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type EtcdCluster struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec is the desired state.
	// +required
	Spec EtcdClusterSpec `json:"spec"`

	// status is the observed state.
	// +optional
	Status EtcdClusterStatus `json:"status,omitempty"`
}

// +kubebuilder:object:root=true

// EtcdClusterList is a list of EtcdCluster.
type EtcdClusterList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []EtcdCluster `json:"items"`
}

func init() {
	register(&EtcdCluster{}, &EtcdClusterList{})
}

// GetConditions returns the status conditions.
func (c *EtcdCluster) GetConditions() []metav1.Condition { return c.Status.Conditions }

// SetConditions replaces the status conditions.
func (c *EtcdCluster) SetConditions(conds []metav1.Condition) { c.Status.Conditions = conds }
