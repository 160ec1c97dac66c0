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

// Reconcile is one pass over one EtcdCluster's backups.
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

	st := etcdfedv1.BackupStatus{}
	if ec.Status.Backup != nil {
		st = *ec.Status.Backup.DeepCopy()
	}
	d := Decide(Input{
		Now: r.now(), Schedule: ec.Spec.Backup.Schedule, Suspend: ec.Spec.Backup.Suspend,
		Status: st, Request: normalizeRequest(ec.Annotations[etcdfedv1.AnnotationBackupRequested]),
		Formed: ec.Status.ClusterID != "", Refused: r.Policy.CheckStore("spec.backup.store", ec.Spec.Backup.Store),
	})
	cond := meta.FindStatusCondition(ec.Status.Conditions, etcdfedv1.ConditionBackupHealthy)
	var newCond *metav1.Condition
	var res ctrl.Result
	var retErr error
	switch d.Action {
	case ActInvalid:
		newCond = condition(ec, metav1.ConditionFalse, d.Reason, d.Message)
		st.NextScheduleTime = nil
		retErr = reconcile.TerminalError(errors.New(d.Message))
	case ActWait:
		st.NextScheduleTime = timePtr(d.Next)
		if cond == nil || cond.Status == metav1.ConditionUnknown || cond.Reason == etcdfedv1.BackupReasonInvalidSpec {
			newCond = condition(ec, metav1.ConditionUnknown, d.Reason, d.Message)
		}
		res = ctrl.Result{RequeueAfter: d.RequeueAfter}
	case ActStart:
		log.Info("Starting backup", "trigger", d.Trigger, "request", d.Request)
		st.InProgress = &etcdfedv1.BackupInProgress{StartedAt: metav1.NewTime(r.now()), Trigger: d.Trigger, Request: d.Request}
		st.NextScheduleTime = timePtr(d.Next)
		res = ctrl.Result{RequeueAfter: runNow}
	case ActRun:
		// One backup at a time per namespace: the workers are shared by
		// every tenant, and a backup holds one for up to its timeout.
		if !r.enter(ec.Namespace) {
			log.V(1).Info("Waiting: a backup of another EtcdCluster of this namespace is running")
			return ctrl.Result{RequeueAfter: BusyRetry}, nil
		}
		out := r.run(ctx, ec, d.Trigger)
		r.leave(ec.Namespace)
		newCond = r.record(ctx, ec, &st, d, out)
		after := Decide(Input{Now: r.now(), Schedule: ec.Spec.Backup.Schedule, Suspend: ec.Spec.Backup.Suspend, Status: st,
			Request: normalizeRequest(ec.Annotations[etcdfedv1.AnnotationBackupRequested]), Formed: ec.Status.ClusterID != "",
			Refused: r.Policy.CheckStore("spec.backup.store", ec.Spec.Backup.Store)})
		st.NextScheduleTime = timePtr(after.Next)
		switch after.Action {
		case ActWait:
			res = ctrl.Result{RequeueAfter: after.RequeueAfter}
		case ActStart, ActRun:
			res = ctrl.Result{RequeueAfter: runNow}
		}
	}
	recordDue(ec, st)
	if err := r.patchStatus(ctx, ec, st, newCond); err != nil {
		return ctrl.Result{}, errors.Join(err, retErr)
	}
	if retErr != nil {
		return ctrl.Result{}, retErr
	}
	return res, nil
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
