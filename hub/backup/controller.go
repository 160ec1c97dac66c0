package backup

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
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
	"github.com/etcdfed/etcdfed/pkg/diskspace"
)

// runNow requeues at once: a backup recorded as in progress is taken by
// the next reconcile.
const runNow = time.Millisecond

// Reconciler takes the backups of EtcdClusters in the hub cluster.
type Reconciler struct {
	// Client writes EtcdCluster status and creates the ring's snapshot key
	// Secret.
	Client client.Client
	// Reader reads EtcdClusters and Secrets uncached (the hub caches
	// Secrets of its own namespace only).
	Reader client.Reader
	// Recorder records events on EtcdClusters; nil records none.
	Recorder events.EventRecorder
	// ScratchDir holds snapshots between the stream and the upload.
	// Default: os.TempDir(). It needs room for the largest database.
	ScratchDir string
	// FreeSpace reads the free space of ScratchDir's filesystem before a
	// snapshot is streamed there; nil: diskspace.Available (statfs).
	FreeSpace diskspace.Free
	// MaxConcurrentBackups bounds backups running at once. Default 2. One
	// namespace runs one backup at a time.
	MaxConcurrentBackups int
	// MaxTimeout bounds one backup whatever spec.backup.timeout says (a
	// backup holds one of the shared workers while it runs). Default
	// DefaultMaxTimeout.
	MaxTimeout time.Duration
	// Policy is the hub's tenancy policy: a store without credentials (the
	// hub's own identity) or a file:// store only when it allows them.
	Policy tenancy.Policy
	// Now is the hub's clock; time.Now when nil.
	Now func() time.Time

	// running counts the backups running per namespace (one tenant's
	// rings): each namespace runs one at a time, so a tenant whose store
	// is slow holds one worker, never all of them.
	mu      sync.Mutex
	running map[string]bool
}

// BusyRetry is when a backup due in a namespace that is already running
// one is tried again.
const BusyRetry = 2 * time.Second

// enter reserves the namespace's one running backup; false when it is
// taken.
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

// SetupWithManager registers the controller on the hub cluster's manager
// (for the multicluster hub, mgr.GetLocalManager()). It is woken by
// changes of spec and annotations (a request); everything else is a
// RequeueAfter it computed itself.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	if r.MaxConcurrentBackups == 0 {
		r.MaxConcurrentBackups = 2
	}
	if r.ScratchDir == "" {
		r.ScratchDir = os.TempDir()
	}
	return ctrl.NewControllerManagedBy(mgr).
		Named("etcdcluster-backup").
		For(&etcdfedv1.EtcdCluster{}, builder.WithPredicates(
			predicate.Or(predicate.GenerationChangedPredicate{}, predicate.AnnotationChangedPredicate{}),
		)).
		WithOptions(controller.Options{MaxConcurrentReconciles: r.MaxConcurrentBackups}).
		Complete(r)
}

// Reconcile is one pass over one EtcdCluster's backups: read it
// (uncached), then observe, decide (Decide), apply (take the backup the
// decision runs) and the status, computed and written once.
func (r *Reconciler) Reconcile(ctx context.Context, req reconcile.Request) (ctrl.Result, error) {
	ec := &etcdfedv1.EtcdCluster{}
	if err := r.Reader.Get(ctx, req.NamespacedName, ec); err != nil {
		if apierrors.IsNotFound(err) {
			forgetMetrics(req.Namespace, req.Name)
		}
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	log := ctrl.LoggerFrom(ctx).WithValues("etcdcluster", klog.KObj(ec))
	ctx = ctrl.LoggerInto(ctx, log)
	if !ec.DeletionTimestamp.IsZero() {
		return ctrl.Result{}, nil
	}
	if ec.Spec.Backup == nil {
		return ctrl.Result{}, r.reconcileDisabled(ctx, ec)
	}

	s := r.observe(ec)
	d := Decide(s.input)
	out, busy := r.apply(ctx, s, d)
	if busy {
		return ctrl.Result{RequeueAfter: BusyRetry}, nil
	}
	st := computeStatus(s, d, out, r.now())
	r.report(ctx, s, d, out, st)
	recordDue(ec, st.backup)
	if err := r.patchStatus(ctx, ec, st.backup, st.cond); err != nil {
		return ctrl.Result{}, errors.Join(err, st.terminal)
	}
	if st.terminal != nil {
		return ctrl.Result{}, st.terminal
	}
	return ctrl.Result{RequeueAfter: st.requeueAfter}, nil
}

// apply takes the backup the decision runs (ActRun), nothing else; busy
// when the namespace's one running backup is taken (BusyRetry).
func (r *Reconciler) apply(ctx context.Context, s *snapshot, d Decision) (out *outcome, busy bool) {
	if d.Action != ActRun {
		return nil, false
	}
	// One backup at a time per namespace: the workers are shared by every
	// tenant, and a backup holds one for up to its timeout.
	if !r.enter(s.ec.Namespace) {
		ctrl.LoggerFrom(ctx).V(1).Info("Waiting: a backup of another EtcdCluster of this namespace is running")
		return nil, true
	}
	defer r.leave(s.ec.Namespace)
	o := r.run(ctx, s.ec, d.Trigger)
	return &o, false
}

// snapshot is what one pass read of one EtcdCluster's backups.
type snapshot struct {
	ec *etcdfedv1.EtcdCluster
	// status is status.backup as read (a copy: the pass's new one starts
	// from it).
	status etcdfedv1.BackupStatus
	// healthy is BackupHealthy as read, nil when unset.
	healthy *metav1.Condition
	// input is what Decide looks at.
	input Input
}

// observe reads what Decide needs: the spec, status.backup, a request,
// whether etcd formed and whether the hub's policy allows the store.
func (r *Reconciler) observe(ec *etcdfedv1.EtcdCluster) *snapshot {
	s := &snapshot{ec: ec, healthy: meta.FindStatusCondition(ec.Status.Conditions, etcdfedv1.ConditionBackupHealthy)}
	if ec.Status.Backup != nil {
		s.status = *ec.Status.Backup.DeepCopy()
	}
	s.input = Input{
		Now: r.now(), Schedule: ec.Spec.Backup.Schedule, Suspend: ec.Spec.Backup.Suspend,
		Status: *s.status.DeepCopy(), Request: normalizeRequest(ec.Annotations[etcdfedv1.AnnotationBackupRequested]),
		Formed: ec.Status.ClusterID != "", Refused: r.Policy.CheckStore("spec.backup.store", ec.Spec.Backup.Store),
	}
	return s
}

// reconcileDisabled removes the condition and any backup in progress when
// spec.backup was removed; the history in status.backup stays.
func (r *Reconciler) reconcileDisabled(ctx context.Context, ec *etcdfedv1.EtcdCluster) error {
	forgetMetrics(ec.Namespace, ec.Name)
	if meta.FindStatusCondition(ec.Status.Conditions, etcdfedv1.ConditionBackupHealthy) == nil &&
		(ec.Status.Backup == nil || (ec.Status.Backup.InProgress == nil && ec.Status.Backup.NextScheduleTime == nil)) {
		return nil
	}
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cur := &etcdfedv1.EtcdCluster{}
		if err := r.Reader.Get(ctx, client.ObjectKeyFromObject(ec), cur); err != nil {
			return client.IgnoreNotFound(err)
		}
		before := cur.DeepCopy()
		meta.RemoveStatusCondition(&cur.Status.Conditions, etcdfedv1.ConditionBackupHealthy)
		if cur.Status.Backup != nil {
			cur.Status.Backup.InProgress, cur.Status.Backup.NextScheduleTime = nil, nil
		}
		return r.Client.Status().Patch(ctx, cur, client.MergeFromWithOptions(before, client.MergeFromWithOptimisticLock{}))
	})
}

// patchStatus writes status.backup and the BackupHealthy condition, the
// only parts of the status this controller owns, onto the newest version
// of the object: a conflict with the EtcdCluster reconciler's own patch is
// retried on a fresh read, never dropped (a dropped result would repeat a
// backup or lose a failure).
func (r *Reconciler) patchStatus(ctx context.Context, ec *etcdfedv1.EtcdCluster, st etcdfedv1.BackupStatus, cond *metav1.Condition) error {
	first := true
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cur := ec
		if !first {
			cur = &etcdfedv1.EtcdCluster{}
			if err := r.Reader.Get(ctx, client.ObjectKeyFromObject(ec), cur); err != nil {
				return client.IgnoreNotFound(err)
			}
		}
		first = false
		before := cur.DeepCopy()
		cur.Status.Backup = st.DeepCopy()
		if cond != nil {
			meta.SetStatusCondition(&cur.Status.Conditions, *cond)
		}
		if equalStatus(before, cur) {
			return nil
		}
		if err := r.Client.Status().Patch(ctx, cur, client.MergeFromWithOptions(before, client.MergeFromWithOptimisticLock{})); err != nil {
			return fmt.Errorf("patch status: %w", err)
		}
		return nil
	})
}

// readSecret reads a Secret in the EtcdCluster's namespace, uncached.
func (r *Reconciler) readSecret(ctx context.Context, ec *etcdfedv1.EtcdCluster, name string) (*corev1.Secret, error) {
	sec := &corev1.Secret{}
	if err := r.Reader.Get(ctx, client.ObjectKey{Namespace: ec.Namespace, Name: name}, sec); err != nil {
		return nil, err
	}
	return sec, nil
}

// normalizeRequest keeps a request token within status.backup.lastRequest's
// bounds: a longer one is recorded by its hash.
func normalizeRequest(v string) string {
	const max = 253
	if len(v) <= max {
		return v
	}
	sum := sha256.Sum256([]byte(v))
	return "sha256:" + hex.EncodeToString(sum[:])
}

func timePtr(t *time.Time) *metav1.Time {
	if t == nil {
		return nil
	}
	mt := metav1.NewTime(t.UTC().Truncate(time.Second))
	return &mt
}
