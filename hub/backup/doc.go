// Package backup is the hub's backup controller: scheduled and on-demand
// snapshots of every EtcdCluster with spec.backup, written to an object
// store.
//
// It is its own controller over EtcdCluster in the hub cluster, beside
// (not inside) the EtcdCluster reconciler: a backup is read-only for the
// ring, takes no part in the one-operation-at-a-time gate, and a store that
// cannot be reached only sets BackupHealthy=False; nothing else waits for
// it. It owns status.backup, the BackupHealthy condition and the ring's
// snapshot key Secret (created with the first backup), and writes nothing
// else.
//
// One reconcile reads the EtcdCluster and runs the hub's skeleton: observe
// (the spec, status.backup, a request, whether etcd formed, whether the
// policy allows the store), the pure Decide (schedule.go) on that
// snapshot, apply, then the status computed once (status.go: status.backup,
// BackupHealthy, the next pass) and patched once. Decide says wait
// (RequeueAfter until the next run: no goroutine or timer per ring),
// record a backup as in progress, or run the recorded backup; apply runs
// only that (run.go): pick a healthy follower (PickSource, the leader
// only when no follower is healthy), stream its snapshot to a local file
// while checking etcd's appended sha256, read the file like `etcdutl
// snapshot status` (bbolt check, revision), upload it with a metadata
// sidecar signed with the ring's snapshot key, and delete what retention
// no longer keeps. After a backup the schedule is decided again on the
// new status; events and metrics report each result.
//
// An on-demand snapshot is asked for with the etcdfed.dev/backup-requested
// annotation (etcdfed backup NAME); its value is handled once and recorded
// in status.backup.lastRequest.
package backup
