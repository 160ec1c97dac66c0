package restore

import (
	"time"

	etcdfedv1 "github.com/etcdfed/etcdfed/api/v1alpha1"
)

// Retry intervals after a failed resolution.
const (
	// RetryTransient: the store did not answer, credentials are missing,
	// no snapshot yet.
	RetryTransient = 30 * time.Second
	// RetryInvalid: the snapshot failed its check; only a change in the
	// store (or a new EtcdCluster) helps.
	RetryInvalid = 5 * time.Minute
)

// Action is what the controller does.
type Action string

const (
	// ActNone: nothing to resolve (no fromSnapshot, already resolved, or
	// the cluster has formed).
	ActNone Action = "None"
	// ActResolve: resolve, download and check the snapshot now.
	ActResolve Action = "Resolve"
)

// Decide says whether the snapshot of ec must be resolved. It is resolved
// once, before the cluster forms, and never again: status.restore is what
// every founding member restores.
func Decide(ec *etcdfedv1.EtcdCluster) Action {
	b := ec.Spec.Bootstrap
	switch {
	case b == nil || b.FromSnapshot == nil:
		return ActNone
	case ec.Status.Restore != nil, ec.Status.ClusterID != "":
		return ActNone
	}
	return ActResolve
}

// Retry is when a failed resolution with reason is tried again.
func Retry(reason string) time.Duration {
	if reason == etcdfedv1.SnapshotReasonInvalid {
		return RetryInvalid
	}
	return RetryTransient
}

// SourcePrefix is where the snapshots of the EtcdCluster NAMESPACE/NAME
// are in a store, every etcd cluster ID of it (backupstore.ClusterDir
// without the ID).
func SourcePrefix(sourceCluster string) string {
	return sourceCluster + "/"
}
