// Package etcdsnapshot checks and restores etcd snapshot files.
//
// A snapshot as etcd streams it (Maintenance.Snapshot) is the bbolt
// database followed by the sha256 of the database. Save writes such a
// stream to a file and checks the sha256 as the bytes go by; Status reads
// the file the way `etcdutl snapshot status` does (bbolt consistency check,
// revision, content hash, key count); Verify does both on a file that
// already exists (one downloaded from a store). Restore turns a checked
// snapshot into a member's data directory with etcdutl's library, including
// the --bump-revision and --mark-compacted equivalents.
//
// The package has no Kubernetes or store dependency: the hub uses it to
// check snapshots before they count, and restore code (a spoke, the CLI, a
// test) uses it to rebuild data directories.
package etcdsnapshot
