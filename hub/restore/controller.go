package restore

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"
	"k8s.io/client-go/util/retry"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	etcdfedv1 "github.com/etcdfed/etcdfed/api/v1alpha1"
	"github.com/etcdfed/etcdfed/hub/tenancy"
	"github.com/etcdfed/etcdfed/internal/text"
	"github.com/etcdfed/etcdfed/pkg/backupstore"
	"github.com/etcdfed/etcdfed/pkg/diskspace"
	"github.com/etcdfed/etcdfed/pkg/etcdsnapshot"
)

// DefaultTimeout bounds one resolution (list, download, check).
const DefaultTimeout = 15 * time.Minute

// Reconciler resolves and checks the snapshot of EtcdClusters founded
// from one, or recovering from a backup.
type Reconciler struct {
	// Client writes EtcdCluster status.
	Client client.Client
	// Reader reads EtcdClusters and Secrets uncached.
	Reader client.Reader
	// Recorder records events on EtcdClusters; nil records none.
	Recorder events.EventRecorder
	// ScratchDir holds the downloaded snapshot while it is checked.
	// Default: os.TempDir().
	ScratchDir string
	// FreeSpace reads the free space of ScratchDir's filesystem before a
	// snapshot is downloaded there; nil: diskspace.Available (statfs).
	FreeSpace diskspace.Free
	// Timeout bounds one resolution; default DefaultTimeout.
	Timeout time.Duration
	// Policy is the hub's tenancy policy: which stores and source
	// clusters an EtcdCluster may restore from.
	Policy tenancy.Policy
	// MaxConcurrentRestores bounds resolutions running at once; default
	// DefaultMaxConcurrentRestores. One namespace resolves one at a time.
	MaxConcurrentRestores int
	// Now is the hub's clock; time.Now when nil.
	Now func() time.Time

	// running marks the namespaces (one tenant's rings) resolving a
	// snapshot now: each resolves one at a time, so a tenant whose store
	// holds every download occupies one worker for Timeout, never all.
	mu      sync.Mutex
	running map[string]bool
}

// DefaultMaxConcurrentRestores is MaxConcurrentRestores' default.
const DefaultMaxConcurrentRestores = 2

// BusyRetry is when a resolution due in a namespace already resolving
// another is tried again.
const BusyRetry = 2 * time.Second

// enter reserves the namespace's one resolution; false when it is taken.
func (r *Reconciler) enter(ns string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.running[ns] {
		return false
	}
	if r.running == nil {
		r.running = map[string]bool{}
	}
	r.running[ns] = true
	return true
}

func (r *Reconciler) leave(ns string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.running, ns)
}

func (r *Reconciler) now() time.Time {
	if r.Now != nil {
		return r.Now()
	}
	return time.Now()
}

// SetupWithManager registers the controller on the hub cluster's manager.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	if r.ScratchDir == "" {
		r.ScratchDir = os.TempDir()
	}
	if r.Timeout <= 0 {
		r.Timeout = DefaultTimeout
	}
	if r.MaxConcurrentRestores <= 0 {
		r.MaxConcurrentRestores = DefaultMaxConcurrentRestores
	}
	return ctrl.NewControllerManagedBy(mgr).
		Named("etcdcluster-restore").
		// The spec (founding) and the annotations (a recovery's request).
		For(&etcdfedv1.EtcdCluster{}, builder.WithPredicates(predicate.Or(predicate.GenerationChangedPredicate{}, predicate.AnnotationChangedPredicate{}))).
		WithOptions(controller.Options{MaxConcurrentReconciles: r.MaxConcurrentRestores}).
		Complete(r)
}

// Reconcile resolves one EtcdCluster's snapshot when one is due.
func (r *Reconciler) Reconcile(ctx context.Context, req reconcile.Request) (ctrl.Result, error) {
	ec := &etcdfedv1.EtcdCluster{}
	if err := r.Reader.Get(ctx, req.NamespacedName, ec); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if !ec.DeletionTimestamp.IsZero() {
		return ctrl.Result{}, nil
	}
	src, due, err := Decide(ec)
	if !due {
		return ctrl.Result{}, nil
	}
	log := ctrl.LoggerFrom(ctx).WithValues("etcdcluster", klog.KObj(ec))
	ctx = ctrl.LoggerInto(ctx, log)
	// One resolution at a time per namespace: the workers are shared by
	// every tenant, and a resolution holds one for up to Timeout.
	if !r.enter(ec.Namespace) {
		log.V(1).Info("Waiting: a snapshot of another EtcdCluster of this namespace is being resolved")
		return ctrl.Result{RequeueAfter: BusyRetry}, nil
	}
	defer r.leave(ec.Namespace)
	var st *etcdfedv1.RestoreStatus
	reason := etcdfedv1.SnapshotReasonNoStore
	if err == nil {
		if err = src.Allowed(r.Policy, ec.Namespace); err != nil {
			reason = etcdfedv1.SnapshotReasonForbidden
		}
	}
	if err == nil {
		log.Info("Resolving the snapshot to restore", "store", src.Store.URL, "object", src.Object)
		st, reason, err = r.resolve(ctx, ec, src)
	}
	if err != nil {
		log.Error(err, "Snapshot cannot be restored", "reason", reason)
		prev := meta.FindStatusCondition(ec.Status.Conditions, etcdfedv1.ConditionSnapshotVerified)
		if prev == nil || prev.Reason != reason {
			r.event(ec, corev1.EventTypeWarning, etcdfedv1.EventSnapshotRefused, "%s: %v", reason, err)
		}
		cond := condition(ec, metav1.ConditionFalse, reason, text.Truncate(err.Error(), 4000))
		if perr := r.patchStatus(ctx, ec, nil, cond); perr != nil {
			return ctrl.Result{}, perr
		}
		return ctrl.Result{RequeueAfter: Retry(reason)}, nil
	}
	msg := fmt.Sprintf("snapshot %s at revision %d (hash %s, sha256 %s, %d bytes) checked; every member restored restores it, revision bumped by %d and marked compacted",
		st.Location, st.Revision, st.Hash, st.SHA256, st.SizeBytes, st.RevisionBump)
	log.Info("Snapshot verified", "location", st.Location, "revision", st.Revision, "sha256", st.SHA256)
	r.event(ec, corev1.EventTypeNormal, etcdfedv1.EventSnapshotVerified, "%s", msg)
	return ctrl.Result{}, r.patchStatus(ctx, ec, st, condition(ec, metav1.ConditionTrue, etcdfedv1.SnapshotReasonVerified, msg))
}

// resolve finds, downloads and checks the snapshot. On failure it returns
// the SnapshotVerified reason.
func (r *Reconciler) resolve(ctx context.Context, ec *etcdfedv1.EtcdCluster, src Source) (*etcdfedv1.RestoreStatus, string, error) {
	ctx, cancel := context.WithTimeout(ctx, r.Timeout)
	defer cancel()
	var creds map[string][]byte
	if name := src.Store.CredentialsSecretName; name != "" {
		sec := &corev1.Secret{}
		if err := r.Reader.Get(ctx, client.ObjectKey{Namespace: ec.Namespace, Name: name}, sec); err != nil {
			return nil, etcdfedv1.SnapshotReasonCredentials, fmt.Errorf("credentials Secret %s: %w", name, err)
		}
		creds = sec.Data
	}
	store, err := backupstore.Open(ctx, src.Store, creds)
	if err != nil {
		return nil, reasonOf(err), err
	}
	defer func() { _ = store.Close() }()
	if err := store.Check(ctx); err != nil {
		return nil, reasonOf(err), err
	}
	key := src.Object
	if key == etcdfedv1.SnapshotLatest {
		snaps, err := store.ListUnder(ctx, SourcePrefix(src.SourceCluster))
		if err != nil {
			return nil, reasonOf(err), err
		}
		if len(snaps) == 0 {
			return nil, etcdfedv1.SnapshotReasonNotFound, fmt.Errorf("%w: no snapshot of %s under %s", backupstore.ErrNotFound, src.SourceCluster, store.Location(SourcePrefix(src.SourceCluster)))
		}
		key = snaps[0].Key
	}
	dir, err := os.MkdirTemp(r.ScratchDir, "restore-")
	if err != nil {
		return nil, etcdfedv1.SnapshotReasonStoreUnreachable, fmt.Errorf("scratch directory: %w", err)
	}
	defer func() { _ = os.RemoveAll(dir) }()
	accept, err := r.authenticator(ctx, ec.Namespace, src, key)
	if err != nil {
		return nil, reasonOf(err), err
	}
	// Room for the snapshot is checked once its size is known (from the
	// sidecar, after it is authenticated) and before any byte of it is
	// written.
	fits := func(md backupstore.Metadata) error {
		if err := accept(md); err != nil {
			return err
		}
		return diskspace.Check(r.FreeSpace, dir, md.SizeBytes+diskspace.Margin,
			fmt.Sprintf("checking snapshot %s (%d bytes) in the hub's scratch directory (--backup-scratch-dir, with a %d-byte margin)", store.Location(key), md.SizeBytes, diskspace.Margin))
	}
	info, md, err := store.FetchAccepted(ctx, key, filepath.Join(dir, "snapshot.db"), fits)
	if err != nil {
		return nil, reasonOf(err), err
	}
	return &etcdfedv1.RestoreStatus{
		Object: key, Location: store.Location(key), SHA256: info.SHA256, Hash: info.HashHex(), Revision: info.Revision,
		RevisionBump: etcdfedv1.DefaultRestoreRevisionBump, SizeBytes: info.Size, SourceClusterID: md.ClusterID,
		VerifiedAt: metav1.NewTime(r.now()),
	}, "", nil
}

// authenticator returns the check of a snapshot's sidecar before it is
// downloaded: its MAC under the snapshot key of the EtcdCluster that wrote
// it (Source.Owner), and that the sidecar names that EtcdCluster. With
// AllowUnsigned a missing key or MAC is let through (logged), a MAC that
// does not check is still refused.
func (r *Reconciler) authenticator(ctx context.Context, namespace string, src Source, key string) (func(backupstore.Metadata) error, error) {
	// The key resolved (latest: a listing's newest) is checked like a key
	// the spec names.
	if owner, ok := keyOwner(key); ok {
		if err := r.Policy.CheckOwner(namespace, "the object "+key+" (NAMESPACE/NAME/...)", owner); err != nil {
			return nil, err
		}
	}
	ns, name, ok := src.Owner(key)
	if !ok {
		return nil, fmt.Errorf("%w: %s is not under NAMESPACE/NAME/ and no sourceCluster names the EtcdCluster that wrote it", backupstore.ErrUnauthenticated, key)
	}
	sec := &corev1.Secret{}
	var mk []byte
	switch err := r.Reader.Get(ctx, client.ObjectKey{Namespace: ns, Name: backupstore.KeySecretName(name)}, sec); {
	case err == nil:
		mk = sec.Data[backupstore.KeySecretField]
	case apierrors.IsNotFound(err):
	default:
		return nil, fmt.Errorf("snapshot key Secret %s/%s: %w", ns, backupstore.KeySecretName(name), err)
	}
	log := ctrl.LoggerFrom(ctx)
	return func(md backupstore.Metadata) error {
		if err := AllowedSidecar(r.Policy, namespace, key, md); err != nil {
			return err
		}
		if md.Namespace != ns || md.Name != name {
			if src.AllowUnsigned && md.MAC == "" {
				log.Info("Restoring an unsigned snapshot (allowUnsigned)", "object", key, "sidecarRing", md.Namespace+"/"+md.Name)
				return nil
			}
			return fmt.Errorf("%w: %s: its sidecar names EtcdCluster %s/%s, the snapshot is taken as %s/%s's", backupstore.ErrUnauthenticated, key, md.Namespace, md.Name, ns, name)
		}
		if len(mk) == 0 {
			if src.AllowUnsigned {
				log.Info("Restoring without checking the snapshot's MAC: no snapshot key (allowUnsigned)", "object", key, "secret", ns+"/"+backupstore.KeySecretName(name))
				return nil
			}
			return fmt.Errorf("%w: %s: no snapshot key Secret %s/%s to check it with (set allowUnsigned to restore it anyway)", backupstore.ErrUnauthenticated, key, ns, backupstore.KeySecretName(name))
		}
		err := md.CheckMAC(key, mk)
		if err != nil && src.AllowUnsigned && md.MAC == "" {
			log.Info("Restoring a snapshot without a MAC (allowUnsigned)", "object", key)
			return nil
		}
		if err != nil && md.MAC == "" {
			return fmt.Errorf("%w (set allowUnsigned to restore it anyway)", err)
		}
		return err
	}, nil
}

// reasonOf maps a store or check error to a SnapshotVerified reason.
func reasonOf(err error) string {
	switch {
	case errors.Is(err, tenancy.ErrForbidden):
		return etcdfedv1.SnapshotReasonForbidden
	case errors.Is(err, backupstore.ErrUnauthenticated):
		return etcdfedv1.SnapshotReasonUnauthenticated
	case errors.Is(err, etcdsnapshot.ErrInvalid):
		return etcdfedv1.SnapshotReasonInvalid
	case errors.Is(err, backupstore.ErrNotFound):
		return etcdfedv1.SnapshotReasonNotFound
	case errors.Is(err, backupstore.ErrCredentials):
		return etcdfedv1.SnapshotReasonCredentials
	case errors.Is(err, diskspace.ErrInsufficient):
		return etcdfedv1.SnapshotReasonInsufficientSpace
	}
	return etcdfedv1.SnapshotReasonStoreUnreachable
}

func condition(ec *etcdfedv1.EtcdCluster, status metav1.ConditionStatus, reason, msg string) metav1.Condition {
	return metav1.Condition{Type: etcdfedv1.ConditionSnapshotVerified, Status: status, Reason: reason, Message: msg, ObservedGeneration: ec.Generation}
}

// patchStatus writes status.restore (when st is set) and the condition
// onto the newest version of the object, retrying on a conflict with the
// EtcdCluster reconciler's own patches.
func (r *Reconciler) patchStatus(ctx context.Context, ec *etcdfedv1.EtcdCluster, st *etcdfedv1.RestoreStatus, cond metav1.Condition) error {
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cur := &etcdfedv1.EtcdCluster{}
		if err := r.Reader.Get(ctx, client.ObjectKeyFromObject(ec), cur); err != nil {
			return client.IgnoreNotFound(err)
		}
		if _, due, _ := Decide(cur); !due {
			return nil // resolved meanwhile
		}
		before := cur.DeepCopy()
		if st != nil {
			cur.Status.Restore = st
		}
		meta.SetStatusCondition(&cur.Status.Conditions, cond)
		err := r.Client.Status().Patch(ctx, cur, client.MergeFromWithOptions(before, client.MergeFromWithOptimisticLock{}))
		if err != nil && !apierrors.IsConflict(err) {
			return fmt.Errorf("patch status: %w", err)
		}
		return err
	})
}

func (r *Reconciler) event(ec *etcdfedv1.EtcdCluster, typ, reason, format string, args ...any) {
	if r.Recorder != nil {
		r.Recorder.Eventf(ec, nil, typ, reason, "Restore", format, args...)
	}
}
