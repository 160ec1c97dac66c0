package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// SnapshotLatest as spec.bootstrap.fromSnapshot.object restores the newest
// snapshot of spec.bootstrap.fromSnapshot.sourceCluster in the store.
const SnapshotLatest = "latest"

// DefaultRestoreRevisionBump is what every member restored from a snapshot
// adds to the snapshot's revision (etcdutl snapshot restore
// --bump-revision), and the restored store marks that revision compacted
// (--mark-compacted). One billion is the amount the Kubernetes and etcd
// restore guides use: more revisions than any cluster writes between a
// snapshot and its restore (a million writes a second for 16 minutes), so
// revisions never go backwards for a client of the old cluster, and every
// watch or read at an older revision is answered "compacted" and
// resyncs instead of silently missing the events after the snapshot.
const DefaultRestoreRevisionBump int64 = 1_000_000_000

// ClusterBootstrap says how the etcd cluster is founded.
type ClusterBootstrap struct {
	// fromSnapshot founds the cluster from a snapshot in an object store
	// (one that spec.backup, or `etcdfed backup`, wrote) instead of empty.
	// Every founding member is restored from the same snapshot, with the
	// full initial cluster of DNS names and a new cluster token, its
	// revision raised by 1,000,000,000 and marked compacted, so that
	// watchers of the old cluster are told to resync. The hub first
	// resolves the object (latest: the newest), downloads it and checks it
	// (etcd's appended sha256, the bbolt structure, the sidecar's sha256,
	// revision and size) and records it in status.restore; a snapshot that
	// fails the check is refused (condition SnapshotVerified=False) and no
	// member is created. Each member checks the same sha256 again before it
	// restores. Immutable.
	// +required
	FromSnapshot *SnapshotSource `json:"fromSnapshot"`
}

// SnapshotSource names one snapshot in an object store.
// +kubebuilder:validation:XValidation:rule="self.object != 'latest' || has(self.sourceCluster)",message="object latest needs sourceCluster (namespace/name of the EtcdCluster whose newest snapshot to restore)"
type SnapshotSource struct {
	// store is the object store, as spec.backup.store describes one. Its
	// credentials Secret (in this EtcdCluster's namespace) is copied by the
	// hub next to each founding member in its member cluster, the way
	// member certificates are, so that the member can download the
	// snapshot; a file:// store must be a path every member cluster's nodes
	// see (the local environment, a shared mount).
	// +required
	Store BackupStore `json:"store"`

	// object is the snapshot's key relative to store.url, as
	// status.backup.lastSuccess.location shows it after the store's URL:
	// NAMESPACE/NAME/CLUSTERID/TIME-revREVISION.db; or "latest" for the
	// newest snapshot of sourceCluster (any etcd cluster ID).
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=1024
	// +kubebuilder:validation:XValidation:rule="self == 'latest' || self.matches('^[A-Za-z0-9._~=+@-]+(/[A-Za-z0-9._~=+@-]+)*[.]db$')",message="object must be latest or a snapshot key ending in .db (path segments of letters, digits and ._~=+@-)"
	// +kubebuilder:validation:XValidation:rule="!self.matches('(^|/)[.][.]?(/|$)')",message="object must not contain '.' or '..' path segments"
	Object string `json:"object"`

	// sourceCluster is NAMESPACE/NAME of the EtcdCluster whose snapshots
	// object latest picks from (the store keeps them under that path).
	// +optional
	// +kubebuilder:validation:MaxLength=317
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?/[a-z0-9]([-a-z0-9.]*[a-z0-9])?$`
	SourceCluster string `json:"sourceCluster,omitempty"`

	// allowUnsigned restores a snapshot whose sidecar carries no MAC, or
	// one that the source EtcdCluster's snapshot key (the Secret
	// <name>-snapshot-key in its namespace) does not check: a snapshot
	// written before etcdfed signed them, or copied in from elsewhere.
	// Off by default: the hub restores only snapshots a hub wrote for the
	// source EtcdCluster.
	// +optional
	AllowUnsigned bool `json:"allowUnsigned,omitempty"`
}

// RestoreStatus is the snapshot the hub resolved and checked for
// spec.bootstrap.fromSnapshot, or for the last recovery from a backup. It
// is written before any member restores; every member restored restores
// exactly this object, with this sha256.
type RestoreStatus struct {
	// object is the snapshot's key relative to the store's URL.
	// +required
	// +kubebuilder:validation:MaxLength=1024
	Object string `json:"object"`

	// location is the object's URL.
	// +required
	// +kubebuilder:validation:MaxLength=2048
	Location string `json:"location"`

	// sha256 of the database (the checksum etcd appended), hex.
	// +required
	// +kubebuilder:validation:MaxLength=64
	SHA256 string `json:"sha256"`

	// hash is the content hash as etcdutl snapshot status prints it
	// (crc32, hex).
	// +optional
	// +kubebuilder:validation:MaxLength=8
	Hash string `json:"hash,omitempty"`

	// revision the snapshot holds: every write acknowledged at or below it
	// is restored.
	// +required
	Revision int64 `json:"revision"`

	// revisionBump is what each member adds to revision on restore; the
	// restored cluster starts above revision+revisionBump, with that
	// revision compacted.
	// +required
	RevisionBump int64 `json:"revisionBump"`

	// sizeBytes of the object.
	// +required
	SizeBytes int64 `json:"sizeBytes"`

	// sourceClusterID is the etcd cluster ID the snapshot was taken from,
	// as its sidecar says.
	// +optional
	// +kubebuilder:validation:MaxLength=16
	SourceClusterID string `json:"sourceClusterID,omitempty"`

	// verifiedAt is when the hub checked the snapshot.
	// +required
	VerifiedAt metav1.Time `json:"verifiedAt"`
}

// MemberRestore is what one member restores its first data from
// (EtcdMember spec.bootstrap.restore): the member's pod runs an init
// container that downloads the object, checks it, and runs etcdutl's
// snapshot restore into the data directory when that is empty. Data
// already there is never overwritten.
type MemberRestore struct {
	// store is the object store. Its credentialsSecretName names a Secret
	// next to this EtcdMember, copied there by the hub.
	// +required
	Store BackupStore `json:"store"`

	// object is the snapshot's key relative to store.url.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=1024
	Object string `json:"object"`

	// sha256 the downloaded snapshot must have (hex); anything else is
	// refused before it is restored.
	// +required
	// +kubebuilder:validation:MinLength=64
	// +kubebuilder:validation:MaxLength=64
	// +kubebuilder:validation:Pattern=`^[0-9a-f]{64}$`
	SHA256 string `json:"sha256"`

	// revisionBump is etcdutl --bump-revision; the bumped revision is
	// marked compacted (--mark-compacted).
	// +required
	// +kubebuilder:validation:Minimum=1
	RevisionBump int64 `json:"revisionBump"`
}

// ConditionSnapshotVerified on an EtcdCluster founded from a snapshot
// (spec.bootstrap.fromSnapshot) or recovering from a backup (etcdfed
// recover --from-backup): True once the snapshot is resolved, checked and
// recorded in status.restore (members may restore it); False with one of
// the Snapshot* reasons below when it cannot be used (no member restores
// anything).
const ConditionSnapshotVerified = "SnapshotVerified"

// Reasons of the SnapshotVerified condition.
const (
	// SnapshotReasonVerified: the snapshot passed every check.
	SnapshotReasonVerified = "Verified"
	// SnapshotReasonPending: not resolved yet.
	SnapshotReasonPending = "Pending"
	// SnapshotReasonNotFound: no such object, or no snapshot of the source
	// cluster (latest).
	SnapshotReasonNotFound = "SnapshotNotFound"
	// SnapshotReasonInvalid: the snapshot failed its check (sha256,
	// structure, sidecar); it is refused.
	SnapshotReasonInvalid = "SnapshotInvalid"
	// SnapshotReasonUnauthenticated: the sidecar's MAC is missing or the
	// source EtcdCluster's snapshot key does not check it (and
	// allowUnsigned is not set).
	SnapshotReasonUnauthenticated = "SnapshotUnauthenticated"
	// SnapshotReasonStoreUnreachable: the store did not answer or refused
	// the credentials; retried.
	SnapshotReasonStoreUnreachable = BackupReasonStoreUnreachable
	// SnapshotReasonCredentials: the credentials Secret is missing or
	// incomplete; retried.
	SnapshotReasonCredentials = BackupReasonCredentials
	// SnapshotReasonNoStore: a recovery from a backup was asked of an
	// EtcdCluster without spec.backup (the store to restore from).
	SnapshotReasonNoStore = "NoBackupStore"
	// SnapshotReasonInsufficientSpace: the hub's scratch directory
	// (--backup-scratch-dir) has less free space than the snapshot's size
	// plus a 64 MiB margin; nothing was downloaded. The message names the
	// bytes needed and available; retried.
	SnapshotReasonInsufficientSpace = "InsufficientSpace"
)
