package restore

import (
	"errors"
	"fmt"
	"strings"
	"time"

	etcdfedv1 "github.com/etcdfed/etcdfed/api/v1alpha1"
	"github.com/etcdfed/etcdfed/hub/tenancy"
	"github.com/etcdfed/etcdfed/pkg/backupstore"
)

// Retry intervals after a failed resolution.
const (
	// RetryTransient: the store did not answer, credentials are missing,
	// no snapshot yet.
	RetryTransient = 30 * time.Second
	// RetryInvalid: the snapshot failed its check or its authentication,
	// or the tenancy policy forbids it; only a change in the store, the
	// spec or the policy helps.
	RetryInvalid = 5 * time.Minute
)

// Source is the snapshot to resolve: where and which.
type Source struct {
	Store etcdfedv1.BackupStore
	// Object is a key or SnapshotLatest; SourceCluster NAMESPACE/NAME,
	// whose snapshots latest picks from.
	Object, SourceCluster string
	// AllowUnsigned accepts a snapshot whose MAC is missing or does not
	// check (spec.bootstrap.fromSnapshot.allowUnsigned, or the recovery
	// request's allowUnsigned).
	AllowUnsigned bool
	// StoreField is where the store is in the spec, for messages.
	StoreField string
}

// Owner is NAMESPACE and NAME of the EtcdCluster whose snapshot key
// authenticates object key: SourceCluster when set, else the key's first
// two path segments (a store keeps a ring's snapshots under
// NAMESPACE/NAME/).
func (s Source) Owner(key string) (namespace, name string, ok bool) {
	src := s.SourceCluster
	if src == "" {
		var ok bool
		if src, ok = keyOwner(key); !ok {
			return "", "", false
		}
	}
	namespace, name, ok = strings.Cut(src, "/")
	return namespace, name, ok && namespace != "" && name != ""
}

// Allowed says whether the hub's tenancy policy lets an EtcdCluster of
// namespace restore from src: its store (no credentials: the hub's own
// identity; file://: the hub's filesystem), its source cluster and the
// namespace its object's key lies under (another namespace's snapshots,
// however named). The sidecar's own namespace is checked once it is read
// (AllowedSidecar). The error wraps tenancy.ErrForbidden.
func (src Source) Allowed(p tenancy.Policy, namespace string) error {
	errs := []error{p.CheckStore(src.StoreField, src.Store), p.CheckSource(namespace, src.SourceCluster)}
	if src.Object != etcdfedv1.SnapshotLatest {
		if owner, ok := keyOwner(src.Object); ok {
			errs = append(errs, p.CheckOwner(namespace, "the object "+src.Object+" (NAMESPACE/NAME/...)", owner))
		}
	}
	return errors.Join(errs...)
}

// AllowedSidecar says whether the policy lets an EtcdCluster of namespace
// restore a snapshot whose sidecar names the EtcdCluster md.Namespace/
// md.Name: a store under another prefix, or an object key that does not
// follow the layout, still holds the other ring's sidecar.
func AllowedSidecar(p tenancy.Policy, namespace, key string, md backupstore.Metadata) error {
	if md.Namespace == "" {
		return nil
	}
	return p.CheckOwner(namespace, "the snapshot "+key+" (its sidecar names EtcdCluster "+md.Namespace+"/"+md.Name+")", md.Namespace+"/"+md.Name)
}

// keyOwner is NAMESPACE/NAME of a key laid out as a store keeps a ring's
// snapshots, NAMESPACE/NAME/...; ok is false for a shorter key.
func keyOwner(key string) (string, bool) {
	parts := strings.SplitN(key, "/", 3)
	if len(parts) < 3 || parts[0] == "" || parts[1] == "" {
		return "", false
	}
	return parts[0] + "/" + parts[1], true
}

// Decide says whether a snapshot of ec must be resolved, and which. The
// founding snapshot (spec.bootstrap.fromSnapshot) is resolved once, before
// the cluster forms, and never again: status.restore is what every
// founding member restores. A recovery from a backup (the recover
// annotation's fromBackup) resolves its snapshot, from spec.backup.store,
// once per request. ok is false when there is nothing to resolve; err
// says why a requested one cannot be (no spec.backup).
func Decide(ec *etcdfedv1.EtcdCluster) (src Source, ok bool, err error) {
	if b := ec.Spec.Bootstrap; b != nil && b.FromSnapshot != nil && ec.Status.ClusterID == "" {
		if ec.Status.Restore != nil {
			return Source{}, false, nil
		}
		f := b.FromSnapshot
		return Source{Store: f.Store, Object: f.Object, SourceCluster: f.SourceCluster, AllowUnsigned: f.AllowUnsigned, StoreField: "spec.bootstrap.fromSnapshot.store"}, true, nil
	}
	v, found := ec.Annotations[etcdfedv1.AnnotationRecover]
	if !found || ec.Status.ClusterID == "" {
		return Source{}, false, nil
	}
	req, perr := etcdfedv1.ParseRecoveryRequest(v)
	if perr != nil || req.FromBackup == "" {
		return Source{}, false, nil
	}
	if r := ec.Status.Restore; r != nil && !r.VerifiedAt.Time.Before(req.RequestedAt) {
		return Source{}, false, nil // resolved for this request
	}
	if ec.Spec.Backup == nil {
		return Source{}, true, fmt.Errorf("recovery from backup %s requested, but spec.backup is not set: it names the store to restore from", req.FromBackup)
	}
	return Source{Store: ec.Spec.Backup.Store, Object: req.FromBackup, SourceCluster: ec.Namespace + "/" + ec.Name, AllowUnsigned: req.AllowUnsigned, StoreField: "spec.backup.store"}, true, nil
}

// Retry is when a failed resolution with reason is tried again.
func Retry(reason string) time.Duration {
	if reason == etcdfedv1.SnapshotReasonInvalid || reason == etcdfedv1.SnapshotReasonUnauthenticated || reason == etcdfedv1.SnapshotReasonForbidden {
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
