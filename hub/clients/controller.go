package clients

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
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"
	"k8s.io/client-go/util/retry"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	mcmanager "sigs.k8s.io/multicluster-runtime/pkg/manager"
	"sigs.k8s.io/multicluster-runtime/pkg/multicluster"

	etcdfedv1 "github.com/etcdfed/etcdfed/api/v1alpha1"
	"github.com/etcdfed/etcdfed/hub/etcdops"
)

// Bounds of one pass.
const (
	// clusterTimeout bounds the read and the write of one consumer's
	// Secret.
	clusterTimeout = 5 * time.Second
	// Resync repairs a Secret deleted or edited by hand, and retries a
	// failed write, without an event on the EtcdCluster.
	Resync = 5 * time.Minute
	// retryAfter is the next pass after a failure or a wait.
	retryAfter = 10 * time.Second
	// rotationPoll is the next pass while the ring's CA is rotated.
	rotationPoll = 2 * time.Second
)

func caPhase(ec *etcdfedv1.EtcdCluster) etcdfedv1.CARotationPhase {
	if ec.Status.CARotation == nil {
		return ""
	}
	return ec.Status.CARotation.Phase
}

// Clusters hands out member clusters by name (the multicluster manager).
type Clusters interface {
	GetCluster(ctx context.Context, name multicluster.ClusterName) (ClusterClient, error)
}

// ClusterClient is what the controller needs of one cluster.
type ClusterClient interface {
	GetClient() client.Client
	GetAPIReader() client.Reader
}

// Reconciler keeps the consumers' Secrets of EtcdClusters.
type Reconciler struct {
	// Client writes EtcdCluster status and finalizers, and the Secrets in
	// the hub cluster.
	Client client.Client
	// Reader reads EtcdClusters and Secrets in the hub cluster, uncached.
	Reader client.Reader
	// Clusters gives the member clusters; nil: only the hub cluster.
	Clusters Clusters
	// Recorder records events on EtcdClusters; nil records none.
	Recorder events.EventRecorder
	// Now is the hub's clock; time.Now when nil.
	Now func() time.Time
	// Policy is what the hub's operator allows beyond a spec's own
	// namespace.
	Policy Policy
	// Etcd connects to a ring as the hub; etcdops.ForRing when nil.
	Etcd func(ctx context.Context, ec *etcdfedv1.EtcdCluster) (AccessClient, error)
}

// AccessClient is what the controller needs of etcd: its authentication.
type AccessClient interface {
	ReadAuth(ctx context.Context) (etcdops.AuthState, error)
	ApplyAuth(ctx context.Context, ch etcdops.AuthChange) error
	Close() error
}

func (r *Reconciler) etcd(ctx context.Context, ec *etcdfedv1.EtcdCluster) (AccessClient, error) {
	if r.Etcd != nil {
		return r.Etcd(ctx, ec)
	}
	return etcdops.ForRing(ctx, r.Reader, ec)
}

func (r *Reconciler) now() time.Time {
	if r.Now != nil {
		return r.Now()
	}
	return time.Now()
}

// SetupWithManager registers the controller on the hub cluster's manager.
// It wakes on spec and annotation changes, changed endpoints, members
// (their etcd users) or cluster ID, a step of a CA rotation and the start
// of a deletion; renewals are a
// RequeueAfter it computes itself.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).
		Named("etcdcluster-clients").
		For(&etcdfedv1.EtcdCluster{}, builder.WithPredicates(predicate.Or(
			predicate.GenerationChangedPredicate{},
			predicate.AnnotationChangedPredicate{},
			predicate.Funcs{UpdateFunc: func(e event.UpdateEvent) bool {
				o, ok1 := e.ObjectOld.(*etcdfedv1.EtcdCluster)
				n, ok2 := e.ObjectNew.(*etcdfedv1.EtcdCluster)
				return ok1 && ok2 && (!slices.Equal(o.Status.Endpoints, n.Status.Endpoints) || o.Status.ClusterID != n.Status.ClusterID ||
					!slices.Equal(MemberUsers(o), MemberUsers(n)) ||
					caPhase(o) != caPhase(n) || o.DeletionTimestamp.IsZero() != n.DeletionTimestamp.IsZero())
			}},
		))).
		Complete(r)
}

// Reconcile is one pass over one EtcdCluster's consumers: read it
// (uncached), the finalizer, then observe, decide, apply and the status,
// written once, with the next pass.
func (r *Reconciler) Reconcile(ctx context.Context, req reconcile.Request) (ctrl.Result, error) {
	ec := &etcdfedv1.EtcdCluster{}
	if err := r.Reader.Get(ctx, req.NamespacedName, ec); err != nil {
		if apierrors.IsNotFound(err) {
			forgetMetrics(req.Namespace, req.Name, nil)
		}
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	log := ctrl.LoggerFrom(ctx).WithValues("etcdcluster", klog.KObj(ec))
	ctx = ctrl.LoggerInto(ctx, log)
	if !ec.DeletionTimestamp.IsZero() {
		return r.reconcileDelete(ctx, ec)
	}
	if err := r.ensureFinalizer(ctx, ec); err != nil {
		return ctrl.Result{}, err
	}
	if idle(ec) {
		return ctrl.Result{}, nil
	}
	s := r.observe(ctx, ec)
	defer s.close()
	d := decide(s)
	a := r.apply(ctx, s, d)
	st := computeStatus(s, d, a)
	if err := r.patchStatus(ctx, ec, st.clients, st.cond); err != nil {
		return ctrl.Result{}, err
	}
	return ctrl.Result{RequeueAfter: st.after(r.now())}, nil
}

func wantLabels(ec *etcdfedv1.EtcdCluster, t Target, have map[string]string) map[string]string {
	out := map[string]string{}
	for k, v := range have {
		out[k] = v
	}
	out[etcdfedv1.LabelManagedBy] = etcdfedv1.ManagedByValue
	out[etcdfedv1.LabelClusterUID] = string(ec.RingUID())
	out[etcdfedv1.LabelClusterName] = ec.Name
	out[etcdfedv1.LabelClusterNamespace] = ec.Namespace
	out[etcdfedv1.LabelClient] = t.Name
	return out
}

// writeSecret creates the Secret, or updates the one the hub wrote
// (optimistic: a concurrent change is retried next pass).
func writeSecret(ctx context.Context, c client.Client, ec *etcdfedv1.EtcdCluster, t Target, exists bool, cur *corev1.Secret, data map[string][]byte) error {
	if !exists {
		sec := &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Name: t.SecretName, Namespace: t.Namespace, Labels: wantLabels(ec, t, nil), OwnerReferences: ownerRefs(ec, t, nil)},
			Type:       corev1.SecretTypeTLS,
			Data:       data,
		}
		if err := c.Create(ctx, sec); err != nil {
			return fmt.Errorf("create Secret: %w", err)
		}
		return nil
	}
	upd := cur.DeepCopy()
	upd.Labels = wantLabels(ec, t, cur.Labels)
	upd.OwnerReferences = ownerRefs(ec, t, cur.OwnerReferences)
	upd.Data = data
	if err := c.Update(ctx, upd); err != nil {
		return fmt.Errorf("update Secret: %w", err)
	}
	return nil
}

// patchStatus writes status.clients and ClientsReady, the only parts of
// the status this controller owns, onto the newest version of the object
// (a conflict with the EtcdCluster reconciler is retried on a fresh read).
func (r *Reconciler) patchStatus(ctx context.Context, ec *etcdfedv1.EtcdCluster, sts []etcdfedv1.ClientStatus, cond *metav1.Condition) error {
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
		cur.Status.Clients = sts
		if cond != nil {
			if prev := meta.FindStatusCondition(cur.Status.Conditions, cond.Type); prev == nil || prev.Status != cond.Status || prev.Reason != cond.Reason {
				r.conditionEvent(ec, *cond)
			}
			meta.SetStatusCondition(&cur.Status.Conditions, *cond)
		} else {
			meta.RemoveStatusCondition(&cur.Status.Conditions, etcdfedv1.ConditionClientsReady)
		}
		if equality.Semantic.DeepEqual(before.Status, cur.Status) {
			return nil
		}
		if err := r.Client.Status().Patch(ctx, cur, client.MergeFromWithOptions(before, client.MergeFromWithOptimisticLock{})); err != nil {
			return fmt.Errorf("patch status: %w", err)
		}
		return nil
	})
}

func (r *Reconciler) conditionEvent(ec *etcdfedv1.EtcdCluster, c metav1.Condition) {
	if c.Status == metav1.ConditionFalse {
		r.event(ec, corev1.EventTypeWarning, c.Reason, "Check", "%s", c.Message)
	}
}

func (r *Reconciler) event(ec *etcdfedv1.EtcdCluster, typ, reason, action, format string, args ...any) {
	if r.Recorder == nil {
		return
	}
	r.Recorder.Eventf(ec, nil, typ, reason, action, format, args...)
}

// ManagerClusters adapts the multicluster manager to Clusters.
type ManagerClusters struct{ Manager mcmanager.Manager }

// GetCluster returns the engaged member cluster of that name.
func (m ManagerClusters) GetCluster(ctx context.Context, name multicluster.ClusterName) (ClusterClient, error) {
	return m.Manager.GetCluster(ctx, name)
}

// FinalizerClients keeps an EtcdCluster until the consumer Secrets its
// hub wrote in member clusters are deleted. It is set only while a
// spec.clients entry (or one not yet cleaned up) names a member cluster.
const FinalizerClients = "etcdfed.dev/clients"

// ensureFinalizer sets FinalizerClients when a consumer's Secret is (or
// will be) in a member cluster. It is never removed on the normal path: a
// removed entry's Secret is deleted by the pass, and the finalizer only
// costs one pass at deletion.
func (r *Reconciler) ensureFinalizer(ctx context.Context, ec *etcdfedv1.EtcdCluster) error {
	if !inMemberCluster(ec) || controllerutil.ContainsFinalizer(ec, FinalizerClients) {
		return nil
	}
	before := ec.DeepCopy()
	controllerutil.AddFinalizer(ec, FinalizerClients)
	// The optimistic lock: the finalizer list is replaced as a whole, and
	// the EtcdCluster reconciler keeps its own in it.
	if err := r.Client.Patch(ctx, ec, client.MergeFromWithOptions(before, client.MergeFromWithOptimisticLock{})); err != nil {
		return fmt.Errorf("add finalizer %s: %w", FinalizerClients, err)
	}
	return nil
}

func inMemberCluster(ec *etcdfedv1.EtcdCluster) bool {
	return slices.ContainsFunc(ec.Spec.Clients, func(c etcdfedv1.ClientSpec) bool { return c.Cluster != "" }) ||
		slices.ContainsFunc(ec.Status.Clients, func(c etcdfedv1.ClientStatus) bool { return c.Cluster != "" })
}

// reconcileDelete deletes the consumers' Secrets in member clusters when
// their EtcdCluster is deleted, then lets it go. A member cluster the hub
// cannot reach keeps the finalizer (nothing is abandoned silently; remove
// it by hand to abandon the Secret). Secrets in the hub cluster are left to
// the garbage collector (owner reference, same namespace) or, in another
// namespace, to a human: the hub deletes no Secret there.
func (r *Reconciler) reconcileDelete(ctx context.Context, ec *etcdfedv1.EtcdCluster) (ctrl.Result, error) {
	if !controllerutil.ContainsFinalizer(ec, FinalizerClients) {
		return ctrl.Result{}, nil
	}
	targets := map[string]Target{}
	for _, c := range ec.Spec.Clients {
		t := TargetOf(ec, c)
		targets[t.String()] = t
	}
	for _, st := range ec.Status.Clients {
		t := Target{Name: st.Name, Cluster: st.Cluster, Namespace: st.Namespace, SecretName: st.SecretName}
		targets[t.String()] = t
	}
	var errs []error
	for _, key := range slices.Sorted(maps.Keys(targets)) {
		t := targets[key]
		if t.Cluster == "" {
			if t.Namespace != ec.Namespace {
				r.event(ec, corev1.EventTypeNormal, etcdfedv1.EventClientSecretLeft, "Delete", "EtcdCluster deleted; the Secret %s of client %s in the hub cluster is left in place (the hub deletes no Secret there): delete it by hand", t, t.Name)
			}
			continue
		}
		rm := removal{removedView: removedView{secretView: r.readSecret(ctx, t)}}
		rm.action = removalOf(ec, rm.secretView)
		if err := removalError(rm, r.applyRemoval(ctx, ec, rm)); err != nil {
			errs = append(errs, err)
		}
	}
	if err := errors.Join(errs...); err != nil {
		ctrl.LoggerFrom(ctx).Info("Keeping the finalizer until the consumers' Secrets are deleted; remove it by hand to abandon them", "finalizer", FinalizerClients, "error", err.Error())
		return ctrl.Result{RequeueAfter: retryAfter}, nil
	}
	forgetMetrics(ec.Namespace, ec.Name, nil)
	before := ec.DeepCopy()
	controllerutil.RemoveFinalizer(ec, FinalizerClients)
	if err := r.Client.Patch(ctx, ec, client.MergeFromWithOptions(before, client.MergeFromWithOptimisticLock{})); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(fmt.Errorf("remove finalizer %s: %w", FinalizerClients, err))
	}
	return ctrl.Result{}, nil
}

// ownerRefs is a Secret's owner references with the EtcdCluster as owner
// when the Secret is in its namespace in the hub cluster (the garbage
// collector deletes it with the EtcdCluster); other owners are kept.
func ownerRefs(ec *etcdfedv1.EtcdCluster, t Target, have []metav1.OwnerReference) []metav1.OwnerReference {
	out := slices.DeleteFunc(slices.Clone(have), func(o metav1.OwnerReference) bool { return o.UID == ec.UID })
	if t.Cluster != "" || t.Namespace != ec.Namespace {
		if len(out) == 0 {
			return nil
		}
		return out
	}
	return append(out, metav1.OwnerReference{APIVersion: etcdfedv1.GroupVersion.String(), Kind: "EtcdCluster", Name: ec.Name, UID: ec.UID})
}

// ownerOf is the owner a Secret's LabelClusterUID names, as Plan
// compares it with the ring's UID (EtcdCluster.RingUID): a Secret written
// under this EtcdCluster's own UID before it took a running ring over
// (status.takeOver) is the ring's too.
func ownerOf(ec *etcdfedv1.EtcdCluster, label string) string {
	if label == string(ec.UID) {
		return string(ec.RingUID())
	}
	return label
}
