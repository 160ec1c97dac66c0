// Package backupstore writes, lists, prunes and reads etcd snapshots in an
// object store through gocloud.dev/blob, so Amazon S3 and S3-compatible
// stores, Google Cloud Storage, Azure Blob Storage and a local directory
// share one code path.
//
// Layout: every snapshot of one etcd cluster lives under
// <store prefix>/<namespace>/<name>/<etcd cluster ID>/ as
// <UTC time>-rev<revision>.db with a <same>.json sidecar (Metadata). Names
// sort by time, so a listing is the history; a recreated EtcdCluster of the
// same name gets a new cluster ID and so a directory of its own.
//
// Naming, parsing and retention are pure functions (names.go,
// retention.go); Store does the I/O, every call bounded by its context.
package backupstore
