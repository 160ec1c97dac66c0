package member

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	etcdfedv1 "github.com/etcdfed/etcdfed/api/v1alpha1"
	"github.com/etcdfed/etcdfed/spoke/etcdlog"
	"github.com/etcdfed/etcdfed/spoke/etcdstatus"
	"github.com/etcdfed/etcdfed/spoke/internal/spec"
)

// DefaultStatusInterval is how often the etcd view of a member with a pod is
// refreshed.
const DefaultStatusInterval = 10 * time.Second

// JoiningStatusInterval is how often the etcd view is read while the
// member's etcd gives none yet (in its pod's first minute) or runs as a
// learner: the hub is waiting on
// it to promote, and a replacement's every second counts.
const JoiningStatusInterval = time.Second

// secretNameField indexes EtcdMembers by spec.tls.secretName.
const secretNameField = "spec.tls.secretName"

// Reconciler reconciles EtcdMember objects of one ring namespace.
type Reconciler struct {
	// Client reads from the manager's cache and writes to the apiserver.
	Client client.Client
	// Runs, when set, selects the EtcdMembers this reconciler runs; it
	// leaves the others alone, whatever event brought them (a member
	// certificate Secret, a node), as if they were not there. Nil runs
	// every member. (A cluster of the fleet benchmark runs some members
	// for real and simulates the others: dev/simcluster.)
	Runs func(*etcdfedv1.EtcdMember) bool
	// APIReader reads past the cache: an object of the member's name the
	// cache does not show (it holds only objects labelled managed-by
	// etcdfed, and may lag behind our own creates).
	APIReader client.Reader
	Scheme    *runtime.Scheme
	Recorder  events.EventRecorder
	// Etcd reads the members' own status.
	Etcd *etcdstatus.Reader
	// HelperImage runs the init containers (etcdfed-init).
	HelperImage string
	// WaitDNSTimeout is passed to wait-dns; 0: pod.DefaultWaitDNSTimeout.
	WaitDNSTimeout time.Duration
	// PodPolicy is what this cluster's operator lets members' pods hold;
	// its zero value checks nothing.
	PodPolicy PodPolicy
	// StatusInterval is how often a running member's etcd view is
	// refreshed; 0: DefaultStatusInterval.
	StatusInterval time.Duration
	// Logs reads a not-ready member's etcd log (pods/log) to explain it in
	// the PeerConnections condition; nil: not read.
	Logs *etcdlog.Reader
}

// SetupWithManager registers the reconciler. It watches every owned kind:
// the controlled ones (pod, Service, PodDisruptionBudget) through their
// owner, the others (PVCs: they outlive the member) by their member label;
// TLS Secrets map back to the members that name them, and a node cordoned
// or uncordoned to the members whose pod runs there.
func (r *Reconciler) SetupWithManager(ctx context.Context, mgr ctrl.Manager, opts ...func(*builder.Builder)) error {
	if err := mgr.GetFieldIndexer().IndexField(ctx, &etcdfedv1.EtcdMember{}, secretNameField, func(o client.Object) []string {
		m := o.(*etcdfedv1.EtcdMember)
		if m.Spec.TLS.SecretName == "" {
			return nil
		}
		return []string{m.Spec.TLS.SecretName}
	}); err != nil {
		return fmt.Errorf("index EtcdMember by TLS secret: %w", err)
	}
	b := ctrl.NewControllerManagedBy(mgr).
		Named("etcdmember").
		// A status read of an unreachable member waits for its timeout;
		// other members need not queue behind it.
		WithOptions(controller.Options{MaxConcurrentReconciles: 4}).
		For(&etcdfedv1.EtcdMember{}, builder.WithPredicates(notStatusOnly())).
		Watches(&corev1.Secret{}, handler.EnqueueRequestsFromMapFunc(r.membersOfSecret),
			builder.WithPredicates(predicate.ResourceVersionChangedPredicate{}))
	for _, k := range ownedKinds {
		if k.controlled {
			b = b.Owns(k.newObj())
		} else {
			b = b.Watches(k.newObj(), handler.EnqueueRequestsFromMapFunc(memberOfLabel))
		}
	}
	// A cordoned node asks for its members' disruption (the hub's budget).
	b = b.Watches(&corev1.Node{}, handler.EnqueueRequestsFromMapFunc(r.membersOnNode),
		builder.WithPredicates(predicate.Funcs{
			CreateFunc:  func(event.CreateEvent) bool { return false },
			DeleteFunc:  func(event.DeleteEvent) bool { return false },
			GenericFunc: func(event.GenericEvent) bool { return false },
			UpdateFunc: func(e event.UpdateEvent) bool {
				o, ok1 := e.ObjectOld.(*corev1.Node)
				n, ok2 := e.ObjectNew.(*corev1.Node)
				return ok1 && ok2 && o.Spec.Unschedulable != n.Spec.Unschedulable
			},
		}))
	for _, o := range opts {
		o(b)
	}
	return b.Complete(r)
}

// notStatusOnly drops updates that changed nothing but the status (our own
// status patches): generation, deletion, labels, annotations or finalizers
// must change.
func notStatusOnly() predicate.Predicate {
	return predicate.Funcs{UpdateFunc: func(e event.UpdateEvent) bool {
		o, n := e.ObjectOld, e.ObjectNew
		return o.GetGeneration() != n.GetGeneration() ||
			!o.GetDeletionTimestamp().Equal(n.GetDeletionTimestamp()) ||
			!maps.Equal(o.GetLabels(), n.GetLabels()) ||
			!maps.Equal(o.GetAnnotations(), n.GetAnnotations()) ||
			!slices.Equal(o.GetFinalizers(), n.GetFinalizers())
	}}
}

func memberOfLabel(_ context.Context, o client.Object) []reconcile.Request {
	name := spec.MemberOfLabels(o.GetLabels())
	if name == "" {
		return nil
	}
	return []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: o.GetNamespace(), Name: name}}}
}

// membersOnNode maps a node to the members whose pod runs there.
func (r *Reconciler) membersOnNode(ctx context.Context, o client.Object) []reconcile.Request {
	list := &etcdfedv1.EtcdMemberList{}
	if err := r.Client.List(ctx, list); err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "Listing members of a node", "node", o.GetName())
		return nil
	}
	var reqs []reconcile.Request
	for i := range list.Items {
		if list.Items[i].Status.NodeName == o.GetName() {
			reqs = append(reqs, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&list.Items[i])})
		}
	}
	return reqs
}

func (r *Reconciler) membersOfSecret(ctx context.Context, o client.Object) []reconcile.Request {
	list := &etcdfedv1.EtcdMemberList{}
	if err := r.Client.List(ctx, list, client.InNamespace(o.GetNamespace()), client.MatchingFields{secretNameField: o.GetName()}); err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "Listing members of a Secret", "secret", klog.KObj(o))
		return nil
	}
	reqs := make([]reconcile.Request, 0, len(list.Items))
	for i := range list.Items {
		reqs = append(reqs, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&list.Items[i])})
	}
	return reqs
}

// Reconcile runs one EtcdMember: get it (gone: done), the delete path when
// it is being deleted, else the finalizer, a deferred status patch, the
// spec's validation and one pass.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (res ctrl.Result, retErr error) {
	m := &etcdfedv1.EtcdMember{}
	if err := r.Client.Get(ctx, req.NamespacedName, m); err != nil {
		if apierrors.IsNotFound(err) {
			r.forget(req.NamespacedName)
			return ctrl.Result{}, nil
		}
		return ctrl.Result{}, fmt.Errorf("get EtcdMember: %w", err)
	}
	if r.Runs != nil && !r.Runs(m) {
		return ctrl.Result{}, nil
	}
	if !m.DeletionTimestamp.IsZero() {
		return r.reconcileDelete(ctx, m)
	}
	if !controllerutil.ContainsFinalizer(m, spec.Finalizer) {
		patch := client.MergeFromWithOptions(m.DeepCopy(), client.MergeFromWithOptimisticLock{})
		controllerutil.AddFinalizer(m, spec.Finalizer)
		if err := r.Client.Patch(ctx, m, patch, client.FieldOwner(spec.FieldOwner)); err != nil {
			return ctrl.Result{}, fmt.Errorf("add finalizer: %w", err)
		}
	}

	before := m.DeepCopy()
	defer func() {
		err := r.patchStatus(ctx, before, m)
		switch {
		case apierrors.IsConflict(err) && retErr == nil:
			// The status was computed from a stale copy; do it again.
			res = ctrl.Result{RequeueAfter: time.Second}
		case err != nil:
			res, retErr = ctrl.Result{}, errors.Join(retErr, err)
		}
	}()
	// A spec that cannot work stops here: a condition says why and
	// nothing is created or deleted.
	if err := spec.Validate(m); err != nil {
		setInvalidSpec(&m.Status, m.Generation, ReasonInvalidSpec, err)
		return ctrl.Result{}, reconcile.TerminalError(fmt.Errorf("invalid EtcdMember spec: %w", err))
	}
	if err := r.PodPolicy.Check(m); err != nil {
		setInvalidSpec(&m.Status, m.Generation, ReasonRefusedByPolicy, err)
		return ctrl.Result{}, reconcile.TerminalError(fmt.Errorf("EtcdMember spec refused by this member cluster's policy: %w", err))
	}
	return r.reconcileNormal(ctx, m)
}

// reconcileNormal is one pass: observe a snapshot, decide purely, apply
// thinly, and compute the status from the three into m. A pass whose
// writes failed, or that found its snapshot stale, leaves the status as it
// was.
func (r *Reconciler) reconcileNormal(ctx context.Context, m *etcdfedv1.EtcdMember) (ctrl.Result, error) {
	s, err := r.observe(ctx, m)
	if err != nil {
		return ctrl.Result{}, err
	}
	d := decide(s, params{helperImage: r.HelperImage, waitDNSTimeout: r.WaitDNSTimeout})
	out, stale, err := r.apply(ctx, m, d)
	if err != nil {
		return ctrl.Result{}, err
	}
	if stale {
		return ctrl.Result{RequeueAfter: time.Second}, nil
	}
	st := computeStatus(s, d, out)
	for _, e := range transitionEvents(&m.Status, &st) {
		r.event(m, e)
	}
	m.Status = st
	key := client.ObjectKeyFromObject(m)
	recordHealth(key, meta.IsStatusConditionTrue(st.Conditions, etcdfedv1.ConditionMemberHealthy), s.etcd.pod != nil && isReady(s.etcd.pod))
	recordDisruption(key, st.Disruption)
	return ctrl.Result{RequeueAfter: d.requeueAfter}, nil
}

// patchStatus writes the status in one patch.
func (r *Reconciler) patchStatus(ctx context.Context, before, m *etcdfedv1.EtcdMember) error {
	if equality.Semantic.DeepEqual(before.Status, m.Status) {
		return nil
	}
	// Optimistic lock: a status computed from a stale copy is not written.
	patch := client.MergeFromWithOptions(before, client.MergeFromWithOptimisticLock{})
	if err := r.Client.Status().Patch(ctx, m, patch, client.FieldOwner(spec.FieldOwner)); err != nil {
		if apierrors.IsNotFound(err) {
			return nil
		}
		return fmt.Errorf("patch EtcdMember status: %w", err)
	}
	return nil
}

func (r *Reconciler) forget(key types.NamespacedName) {
	r.Etcd.Forget(key.String())
	if r.Logs != nil {
		r.Logs.Forget(key.String())
	}
	forgetMetrics(key)
}

// reconcileDelete runs when the hub deleted the EtcdMember: every owned
// kind's delete hook disposes of its objects (deleteMember: the pod, the
// Service and the disruption budget go; the volumes are deleted with the
// Delete policy and otherwise labelled retired), then the finalizer goes.
func (r *Reconciler) reconcileDelete(ctx context.Context, m *etcdfedv1.EtcdMember) (ctrl.Result, error) {
	if !controllerutil.ContainsFinalizer(m, spec.Finalizer) {
		return ctrl.Result{}, nil
	}
	if err := r.deleteMember(ctx, m); err != nil {
		return ctrl.Result{}, err
	}
	patch := client.MergeFromWithOptions(m.DeepCopy(), client.MergeFromWithOptimisticLock{})
	controllerutil.RemoveFinalizer(m, spec.Finalizer)
	if err := r.Client.Patch(ctx, m, patch, client.FieldOwner(spec.FieldOwner)); err != nil && !apierrors.IsNotFound(err) {
		return ctrl.Result{}, fmt.Errorf("remove finalizer: %w", err)
	}
	r.forget(client.ObjectKeyFromObject(m))
	return ctrl.Result{}, nil
}
