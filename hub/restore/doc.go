// Package restore is the hub's side of founding an EtcdCluster from a
// snapshot (spec.bootstrap.fromSnapshot) and of a quorum-loss recovery from
// a backup (the recover annotation's fromBackup, from spec.backup.store).
// Decide says which snapshot is due: the founding one once, before any
// member exists; a recovery's once per request. The controller checks the
// store and the source cluster against the hub's tenancy policy, resolves
// the snapshot (object latest: the newest of the source cluster in the
// store), authenticates its sidecar with the snapshot key of the ring that
// wrote it (unless allowUnsigned), downloads it, checks it (etcd's
// appended sha256, the bbolt structure, the sidecar's sha256, revision and
// size) and records it in status.restore with the SnapshotVerified
// condition. The EtcdCluster planner founds (or recovers) the cluster only
// once status.restore is set, and hands every founding member that one
// object and sha256, so all of them restore the same snapshot (each checks
// it again before restoring).
//
// It is its own controller over EtcdCluster in the hub cluster, beside the
// EtcdCluster reconciler, like hub/backup: a download can take minutes and
// must not hold a reconcile pass of the ring. It owns status.restore and
// the SnapshotVerified condition and writes nothing else. A snapshot that
// fails its check or its authentication, or that the policy forbids, is
// refused (SnapshotVerified=False with the reason, a Warning event) and
// tried again only after RetryInvalid; a store that cannot be reached is
// retried after RetryTransient.
package restore
