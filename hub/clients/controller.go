package clients

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
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
	"github.com/etcdfed/etcdfed/hub/pki"
	"github.com/etcdfed/etcdfed/internal/text"
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

// result is one consumer's outcome in this pass.
type result struct {
	status  etcdfedv1.ClientStatus
	renewAt time.Time
}

// Reconcile is one pass over one EtcdCluster's consumers.
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
	if len(ec.Spec.Clients) == 0 && len(ec.Status.Clients) == 0 && meta.FindStatusCondition(ec.Status.Conditions, etcdfedv1.ConditionClientsReady) == nil &&
		!ec.Spec.TLS.Mode.Enabled() {
		return ctrl.Result{}, nil
	}

	var statuses []etcdfedv1.ClientStatus
	var cond *metav1.Condition
	next := r.now().Add(Resync)
	// Entries removed from spec: delete their Secrets (only the hub's).
	var removeErrs []string
	for _, st := range ec.Status.Clients {
		if slices.ContainsFunc(ec.Spec.Clients, func(c etcdfedv1.ClientSpec) bool { return c.Name == st.Name }) {
			continue
		}
		if err := r.deleteSecret(ctx, ec, Target{Name: st.Name, Cluster: st.Cluster, Namespace: st.Namespace, SecretName: st.SecretName}); err != nil {
			removeErrs = append(removeErrs, err.Error())
			statuses = append(statuses, st)
			next = r.now().Add(retryAfter)
			continue
		}
		forgetMetrics(ec.Namespace, ec.Name, []string{st.Name})
	}

	// etcd's users and roles, and authentication: a removed consumer's
	// user goes in this pass, whatever happens to its Secret.
	access := r.reconcileAccess(ctx, ec)
	if access.retry {
		next = minTime(next, r.now().Add(retryAfter))
	}

	switch {
	case len(ec.Spec.Clients) == 0:
		switch {
		case len(removeErrs) > 0:
			cond = condition(ec, metav1.ConditionFalse, etcdfedv1.ClientReasonFailed, strings.Join(removeErrs, "; "))
		case access.cond != nil && access.cond.Status == metav1.ConditionFalse:
			// Without consumers ClientsReady only says what went wrong.
			cond = access.cond
		}
	case !ec.Spec.TLS.Mode.Enabled():
		cond = condition(ec, metav1.ConditionFalse, etcdfedv1.ClientReasonTLSDisabled, "the ring runs without TLS (spec.tls.mode: Disabled): consumers need no certificate; no Secret is written")
		next = r.now().Add(Resync)
	default:
		ca, endpoints, why := r.inputs(ctx, ec)
		if why != "" {
			cond = condition(ec, metav1.ConditionUnknown, etcdfedv1.ClientReasonPending, why)
			next = r.now().Add(retryAfter)
			for _, c := range ec.Spec.Clients {
				t := TargetOf(ec, c)
				statuses = append(statuses, keepStatus(ec, t, why))
			}
			break
		}
		var failed []string
		for _, c := range ec.Spec.Clients {
			t := TargetOf(ec, c)
			var res result
			if why := Refusal(ec, c, t, r.Policy); why != "" {
				res = r.refuse(ec, t, why)
			} else {
				res = r.reconcileOne(ctx, ec, ca, endpoints, t)
			}
			if why, refused := access.refused[c.Name]; refused && res.status.Ready {
				res.status.Ready, res.status.Message = false, text.Truncate(why, maxMessage)
			}
			statuses = append(statuses, res.status)
			if !res.status.Ready {
				failed = append(failed, fmt.Sprintf("%s (%s): %s", res.status.Name, TargetOf(ec, c), res.status.Message))
				next = minTime(next, r.now().Add(retryAfter))
			} else if !res.renewAt.IsZero() {
				next = minTime(next, res.renewAt)
			}
		}
		failed = append(failed, removeErrs...)
		switch {
		case len(failed) > 0:
			cond = condition(ec, metav1.ConditionFalse, etcdfedv1.ClientReasonFailed, strings.Join(failed, "; "))
		case access.cond != nil:
			cond = access.cond
		default:
			cond = condition(ec, metav1.ConditionTrue, etcdfedv1.ClientReasonReady, fmt.Sprintf("%d client Secret(s) hold a valid certificate of the ring's CA and the current endpoints%s", len(statuses), access.summary))
		}
	}
	if err := r.patchStatus(ctx, ec, statuses, cond); err != nil {
		return ctrl.Result{}, err
	}
	if caPhase(ec).InProgress() {
		// The CA Secret changes during a rotation without an event here,
		// and the rotation waits for every consumer's Secret.
		next = minTime(next, r.now().Add(rotationPoll))
	}
	after := max(next.Sub(r.now()), time.Second)
	return ctrl.Result{RequeueAfter: after}, nil
}

// inputs reads the CA Secret and the endpoints, or says what is missing.
func (r *Reconciler) inputs(ctx context.Context, ec *etcdfedv1.EtcdCluster) (*pki.Authority, string, string) {
	if len(ec.Status.Endpoints) == 0 {
		return nil, "", "waiting for the ring's endpoints (status.endpoints)"
	}
	ca, err := pki.ReadAuthority(ctx, r.Reader, ec)
	if err != nil {
		return nil, "", fmt.Sprintf("waiting for the ring's CA: %v", err)
	}
	return ca, Endpoints(ec), ""
}

// keepStatus is a consumer's status carried over while nothing can be
// checked.
func keepStatus(ec *etcdfedv1.EtcdCluster, t Target, why string) etcdfedv1.ClientStatus {
	st := etcdfedv1.ClientStatus{Name: t.Name, Cluster: t.Cluster, Namespace: t.Namespace, SecretName: t.SecretName, Message: why}
	for _, old := range ec.Status.Clients {
		if old.Name == t.Name && old.Cluster == t.Cluster && old.Namespace == t.Namespace && old.SecretName == t.SecretName {
			st.NotAfter, st.IssuedAt = old.NotAfter, old.IssuedAt
		}
	}
	return st
}

func (r *Reconciler) cluster(ctx context.Context, name string) (client.Client, client.Reader, error) {
	if name == "" {
		return r.Client, r.Reader, nil
	}
	if r.Clusters == nil {
		return nil, nil, fmt.Errorf("member cluster %q is not known to the hub", name)
	}
	cl, err := r.Clusters.GetCluster(ctx, multicluster.ClusterName(name))
	if err != nil {
		return nil, nil, fmt.Errorf("member cluster %q is not connected: %w", name, err)
	}
	return cl.GetClient(), cl.GetAPIReader(), nil
}

// reconcileOne brings one consumer's Secret up to date.
func (r *Reconciler) reconcileOne(ctx context.Context, ec *etcdfedv1.EtcdCluster, a *pki.Authority, endpoints string, t Target) result {
	ca := a.Signer
	log := ctrl.LoggerFrom(ctx).WithValues("client", t.Name, "secret", t.String())
	st := keepStatus(ec, t, "")
	fail := func(err error) result {
		st.Ready, st.Message = false, text.Truncate(err.Error(), maxMessage)
		metricFailures.WithLabelValues(ec.Namespace, ec.Name, t.Name).Inc()
		return result{status: st}
	}
	ctx, cancel := context.WithTimeout(ctx, clusterTimeout)
	defer cancel()
	w, rd, err := r.cluster(ctx, t.Cluster)
	if err != nil {
		return fail(err)
	}
	cur := &corev1.Secret{}
	var found *Found
	switch err := rd.Get(ctx, client.ObjectKey{Namespace: t.Namespace, Name: t.SecretName}, cur); {
	case apierrors.IsNotFound(err):
	case err != nil:
		return fail(fmt.Errorf("read Secret: %w", err))
	default:
		found = &Found{Owner: ownerOf(ec, cur.Labels[etcdfedv1.LabelClusterUID]), Data: cur.Data}
	}
	now := r.now()
	d := Plan(a, string(ec.RingUID()), t, endpoints, found, now)
	notAfter := d.NotAfter
	data := cur.Data
	switch d.Action {
	case ActRefuse:
		return fail(errors.New(d.Reason))
	case ActIssue:
		if !ca.CanSign() {
			return fail(fmt.Errorf("waiting for a CA that issues (%s): the ring was taken over without its CA's key, and this Secret is issued from the new CA once the rotation reaches Reissuing", d.Reason))
		}
		leaf, err := ca.IssueClientFor(t.CommonName, t.Lifetime, now)
		if err != nil {
			return fail(err)
		}
		data = Data(a.Bundle(), leaf, endpoints)
		notAfter = expiry(leaf.CertPEM)
		log.Info("Issuing client certificate", "reason", d.Reason, "notAfter", notAfter)
	case ActUpdate:
		data = Data(a.Bundle(), &pki.Leaf{CertPEM: cur.Data[etcdfedv1.ClientSecretKeyCert], KeyPEM: cur.Data[etcdfedv1.ClientSecretKeyKey]}, endpoints)
		log.Info("Updating client Secret", "reason", d.Reason)
	}
	if d.Action == ActIssue || d.Action == ActUpdate || !equality.Semantic.DeepEqual(cur.Labels, wantLabels(ec, t, cur.Labels)) ||
		!equality.Semantic.DeepEqual(cur.OwnerReferences, ownerRefs(ec, t, cur.OwnerReferences)) {
		if err := writeSecret(ctx, w, ec, t, found != nil, cur, data); err != nil {
			return fail(err)
		}
	}
	if d.Action == ActIssue {
		st.IssuedAt = ptrTime(now)
		metricIssued.WithLabelValues(ec.Namespace, ec.Name, t.Name).Inc()
		r.event(ec, corev1.EventTypeNormal, etcdfedv1.EventClientCertificateIssued, "Issue", "Issued the client certificate of %s in Secret %s (%s), valid until %s", t.Name, t.String(), d.Reason, notAfter.UTC().Format(time.RFC3339))
	}
	st.Ready, st.Message = true, ""
	st.CAHash = CAHash(data)
	st.NotAfter = ptrTime(notAfter)
	metricExpiry.WithLabelValues(ec.Namespace, ec.Name, t.Name).Set(float64(notAfter.Unix()))
	return result{status: st, renewAt: RenewAt(data[etcdfedv1.ClientSecretKeyCert])}
}

// refuse is the result of a consumer whose Secret may not go where its
// entry says (Refusal): nothing is read or written there.
func (r *Reconciler) refuse(ec *etcdfedv1.EtcdCluster, t Target, why string) result {
	st := keepStatus(ec, t, "")
	st.Ready, st.Message = false, text.Truncate("refused: "+why, maxMessage)
	metricFailures.WithLabelValues(ec.Namespace, ec.Name, t.Name).Inc()
	return result{status: st}
}

// accessResult is the outcome of one pass over etcd's authentication.
type accessResult struct {
	// cond, when set, is the ClientsReady condition access asks for (it
	// could not be brought in line); nil when it is.
	cond *metav1.Condition
	// refused consumers (their user is a human's), by spec.clients name.
	refused map[string]string
	// summary is appended to a True condition's message.
	summary string
	// retry asks for the next pass soon.
	retry bool
}

// reconcileAccess keeps etcd's users, roles and authentication in line
// with spec.clients and spec.tls.auth (access.go).
func (r *Reconciler) reconcileAccess(ctx context.Context, ec *etcdfedv1.EtcdCluster) accessResult {
	if !ec.Spec.TLS.Mode.Enabled() {
		return accessResult{}
	}
	on := ec.Spec.TLS.AuthOn()
	pending := func(format string, args ...any) accessResult {
		return accessResult{retry: true, cond: condition(ec, metav1.ConditionUnknown, etcdfedv1.ClientReasonPending, fmt.Sprintf(format, args...))}
	}
	if ec.Status.ClusterID == "" || len(ec.Status.Endpoints) == 0 {
		return pending("waiting for the ring to form before etcd's users and roles are set")
	}
	log := ctrl.LoggerFrom(ctx)
	cli, err := r.etcd(ctx, ec)
	if err != nil {
		return pending("etcd's users and roles not checked: %v", err)
	}
	defer func() { _ = cli.Close() }()
	have, err := cli.ReadAuth(ctx)
	if err != nil {
		return pending("etcd's users and roles not checked: %v", err)
	}
	plan := PlanAccess(Grants(ec), MemberUsers(ec), have, on)
	for _, ch := range plan.Changes {
		log.Info("Changing etcd's authentication", "change", ch.String())
		if err := cli.ApplyAuth(ctx, ch); err != nil {
			return accessResult{retry: true, refused: plan.Refused,
				cond: condition(ec, metav1.ConditionFalse, etcdfedv1.ClientReasonAccessFailed, fmt.Sprintf("etcd's authentication not in line with spec.clients: %v", err))}
		}
		switch ch.Op {
		case etcdops.AuthDeleteUser:
			r.event(ec, corev1.EventTypeNormal, etcdfedv1.EventClientAccessRevoked, "Revoke", "Deleted etcd user %s: its consumer is no longer in spec.clients (its certificate reads and writes nothing from now on)", ch.User)
		case etcdops.AuthEnable:
			r.event(ec, corev1.EventTypeNormal, etcdfedv1.EventEtcdAuthEnabled, "EnableAuth", "Turned etcd authentication on: %d consumer(s) with their roles, the hub as root", len(ec.Spec.Clients))
		case etcdops.AuthDisable:
			r.event(ec, corev1.EventTypeWarning, etcdfedv1.EventEtcdAuthDisabled, "DisableAuth", "Turned etcd authentication off (spec.tls.auth: Disabled): every certificate of the ring's CA is root on the data")
		}
	}
	res := accessResult{refused: plan.Refused}
	if !on {
		res.summary = "; etcd authentication is off (spec.tls.auth: Disabled)"
		return res
	}
	res.summary = "; etcd authentication is on, each consumer with its role"
	for _, m := range slices.Sorted(maps.Keys(plan.MembersLeftAlone)) {
		log.Info("Member's etcd user left alone", "member", m, "why", plan.MembersLeftAlone[m])
		res.summary += "; member " + m + ": " + plan.MembersLeftAlone[m]
	}
	if len(plan.Refused) > 0 {
		var msgs []string
		for _, name := range slices.Sorted(maps.Keys(plan.Refused)) {
			msgs = append(msgs, name+": "+plan.Refused[name])
		}
		enabled := "on"
		if !have.Enabled {
			enabled = "not turned on while a consumer would lose its access"
		}
		res.cond = condition(ec, metav1.ConditionFalse, etcdfedv1.ClientReasonAccessFailed, fmt.Sprintf("etcd authentication %s; %s", enabled, strings.Join(msgs, "; ")))
		res.retry = true
	}
	return res
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

// deleteSecret deletes a removed consumer's Secret if the hub wrote it, in
// a member cluster. In the hub cluster the hub's Role may not delete
// Secrets (config/rbac/hub: it never deletes one next to the CA), so the
// Secret is left for a human, with an event.
func (r *Reconciler) deleteSecret(ctx context.Context, ec *etcdfedv1.EtcdCluster, t Target) error {
	if t.Cluster == "" {
		r.event(ec, corev1.EventTypeNormal, etcdfedv1.EventClientSecretLeft, "Delete", "Client %s was removed; its Secret %s in the hub cluster is left in place (the hub deletes no Secret there): delete it by hand", t.Name, t)
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, clusterTimeout)
	defer cancel()
	w, rd, err := r.cluster(ctx, t.Cluster)
	if err != nil {
		return fmt.Errorf("removed client %s (%s): %w", t.Name, t, err)
	}
	cur := &corev1.Secret{}
	if err := rd.Get(ctx, client.ObjectKey{Namespace: t.Namespace, Name: t.SecretName}, cur); err != nil {
		if apierrors.IsNotFound(err) {
			return nil
		}
		return fmt.Errorf("removed client %s (%s): read Secret: %w", t.Name, t, err)
	}
	if ownerOf(ec, cur.Labels[etcdfedv1.LabelClusterUID]) != string(ec.RingUID()) {
		return nil // not ours: left alone
	}
	ctrl.LoggerFrom(ctx).Info("Deleting the Secret of a removed client", "client", t.Name, "secret", t.String())
	if err := w.Delete(ctx, cur, client.Preconditions{UID: &cur.UID}); client.IgnoreNotFound(err) != nil {
		return fmt.Errorf("removed client %s (%s): delete Secret: %w", t.Name, t, err)
	}
	r.event(ec, corev1.EventTypeNormal, etcdfedv1.EventClientSecretDeleted, "Delete", "Deleted the Secret %s of removed client %s", t, t.Name)
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

func condition(ec *etcdfedv1.EtcdCluster, s metav1.ConditionStatus, reason, msg string) *metav1.Condition {
	return &metav1.Condition{Type: etcdfedv1.ConditionClientsReady, Status: s, Reason: reason, Message: text.Truncate(msg, maxMessage), ObservedGeneration: ec.Generation}
}

// maxMessage bounds a client's status message.
const maxMessage = 1024

func ptrTime(t time.Time) *metav1.Time {
	mt := metav1.NewTime(t.UTC().Truncate(time.Second))
	return &mt
}

func minTime(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
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
		if err := r.deleteSecret(ctx, ec, t); err != nil {
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
