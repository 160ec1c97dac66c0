// Package restore is the hub's side of founding an EtcdCluster from a
// snapshot (spec.bootstrap.fromSnapshot): before any member exists it
// resolves the snapshot once (object latest: the newest of the source
// cluster in the store), downloads it, checks it (etcd's appended sha256,
// the bbolt structure, the sidecar's sha256, revision and size) and
// records it in status.restore with the SnapshotVerified condition. The
// EtcdCluster planner founds the cluster only once status.restore is set,
// and hands every founding member that one object and sha256, so all of
// them restore the same snapshot (each checks it again before restoring).
//
// It is its own controller over EtcdCluster in the hub cluster, beside the
// EtcdCluster reconciler, like hub/backup: a download can take minutes and
// must not hold a reconcile pass of the ring. It owns status.restore and
// the SnapshotVerified condition and writes nothing else. A snapshot that
// fails its check is refused (SnapshotVerified=False, SnapshotInvalid, a
// Warning event) and nothing is founded; a store that cannot be reached is
// retried.
package restore
