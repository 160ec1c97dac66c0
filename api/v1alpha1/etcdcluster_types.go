package v1alpha1

import (
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
