package member

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net"
	"slices"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
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
	"github.com/etcdfed/etcdfed/spoke/component/pod"
	"github.com/etcdfed/etcdfed/spoke/component/pvc"
	"github.com/etcdfed/etcdfed/spoke/component/service"
	"github.com/etcdfed/etcdfed/spoke/etcdlog"
	"github.com/etcdfed/etcdfed/spoke/etcdstatus"
	"github.com/etcdfed/etcdfed/spoke/internal/spec"
)

// DefaultStatusInterval is how often the etcd view of a member with a pod is
// refreshed.
const DefaultStatusInterval = 10 * time.Second

// secretNameField indexes EtcdMembers by spec.tls.secretName.
const secretNameField = "spec.tls.secretName"

// Reconciler reconciles EtcdMember objects of one ring namespace.
type Reconciler struct {
	// Client reads from the manager's cache and writes to the apiserver.
	Client client.Client
	// APIReader reads past the cache (after a create finds a name taken).
	APIReader client.Reader
	Scheme    *runtime.Scheme
	Recorder  events.EventRecorder
	// Etcd reads the members' own status.
	Etcd *etcdstatus.Reader
	// HelperImage runs the wait-dns init container.
	HelperImage string
	// WaitDNSTimeout is passed to wait-dns; 0: pod.DefaultWaitDNSTimeout.
	WaitDNSTimeout time.Duration
	// StatusInterval is how often a running member's etcd view is
	// refreshed; 0: DefaultStatusInterval.
	StatusInterval time.Duration
	// Logs reads a not-ready member's etcd log (pods/log) to explain it in
	// the PeerConnections condition; nil: not read.
	Logs *etcdlog.Reader
}

// SetupWithManager registers the reconciler. Pods and Services are owned;
// PVCs (never owned: they outlive the member) map back by label, TLS Secrets
// by the members that name them.
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
		Owns(&corev1.Pod{}).
		Owns(&corev1.Service{}).
		Watches(&corev1.PersistentVolumeClaim{}, handler.EnqueueRequestsFromMapFunc(memberOfLabel)).
		Watches(&corev1.Secret{}, handler.EnqueueRequestsFromMapFunc(r.membersOfSecret),
			builder.WithPredicates(predicate.ResourceVersionChangedPredicate{}))
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
	name := o.GetLabels()[etcdfedv1.LabelMember]
	if name == "" {
		return nil
	}
	return []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: o.GetNamespace(), Name: name}}}
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

// scope is one reconcile's observations, shared by the phases.
type scope struct {
	m *etcdfedv1.EtcdMember
	// before is the member as read, for the status patch.
	before *etcdfedv1.EtcdMember

	secret      *corev1.Secret
	secretBlock *pod.Blocker
	storage     pvc.Result
	svc         service.Result
	exposure    service.Exposure
	pod         pod.Result
	// current is the pod of the current incarnation, nil if none.
	current *corev1.Pod
	invalid bool
}

func (s *scope) setCondition(t string, status metav1.ConditionStatus, reason, msg string) {
	meta.SetStatusCondition(&s.m.Status.Conditions, metav1.Condition{
		Type: t, Status: status, Reason: reason, Message: truncate(msg, 32768),
		ObservedGeneration: s.m.Generation,
	})
}

type phase func(context.Context, *scope) (ctrl.Result, error)

// Reconcile runs one EtcdMember.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (res ctrl.Result, retErr error) {
	m := &etcdfedv1.EtcdMember{}
	if err := r.Client.Get(ctx, req.NamespacedName, m); err != nil {
		if apierrors.IsNotFound(err) {
			r.forget(req.NamespacedName)
			return ctrl.Result{}, nil
		}
		return ctrl.Result{}, fmt.Errorf("get EtcdMember: %w", err)
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

	s := &scope{m: m, before: m.DeepCopy()}
	defer func() {
		err := r.patchStatus(ctx, s, retErr)
		switch {
		case apierrors.IsConflict(err) && retErr == nil:
			// The status was computed from a stale copy; do it again.
			res = ctrl.Result{RequeueAfter: time.Second}
		case err != nil:
			res, retErr = ctrl.Result{}, errors.Join(retErr, err)
		}
	}()
	phases := []phase{r.validate, r.tlsSecret, r.storage, r.exposure, r.pod, r.report, r.retire, r.etcdView, r.peerConnections}
	for _, p := range phases {
		pr, err := p(ctx, s)
		if err != nil {
			return ctrl.Result{}, err
		}
		res = lowest(res, pr)
	}
	return res, nil
}

func lowest(a, b ctrl.Result) ctrl.Result {
	switch {
	case a.RequeueAfter == 0:
		return b
	case b.RequeueAfter == 0:
		return a
	case b.RequeueAfter < a.RequeueAfter:
		return b
	}
	return a
}

// patchStatus writes the status in one patch. observedGeneration moves only
// when the reconcile succeeded on a valid spec.
func (r *Reconciler) patchStatus(ctx context.Context, s *scope, reconcileErr error) error {
	if reconcileErr == nil && !s.invalid {
		s.m.Status.ObservedGeneration = s.m.Generation
	}
	if equality.Semantic.DeepEqual(s.before.Status, s.m.Status) {
		return nil
	}
	// Optimistic lock: a status computed from a stale copy is not written.
	patch := client.MergeFromWithOptions(s.before, client.MergeFromWithOptimisticLock{})
	if err := r.Client.Status().Patch(ctx, s.m, patch, client.FieldOwner(spec.FieldOwner)); err != nil {
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

// validate stops at a spec that cannot work: a condition says why and
// nothing is created or deleted.
func (r *Reconciler) validate(_ context.Context, s *scope) (ctrl.Result, error) {
	if err := spec.Validate(s.m); err != nil {
		s.invalid = true
		s.setCondition(etcdfedv1.ConditionPodReady, metav1.ConditionFalse, ReasonInvalidSpec, err.Error())
		return ctrl.Result{}, reconcile.TerminalError(fmt.Errorf("invalid EtcdMember spec: %w", err))
	}
	return ctrl.Result{}, nil
}

// tlsSecret reads the member's certificate Secret, which the hub writes.
func (r *Reconciler) tlsSecret(ctx context.Context, s *scope) (ctrl.Result, error) {
	if !spec.TLSEnabled(s.m) {
		return ctrl.Result{}, nil
	}
	name := s.m.Spec.TLS.SecretName
	sec := &corev1.Secret{}
	if err := r.Client.Get(ctx, types.NamespacedName{Namespace: s.m.Namespace, Name: name}, sec); err != nil {
		if apierrors.IsNotFound(err) {
			s.secretBlock = &pod.Blocker{Reason: ReasonTLSSecretMissing, Message: fmt.Sprintf("TLS Secret %s does not exist yet (the hub writes it)", name)}
			return ctrl.Result{}, nil
		}
		return ctrl.Result{}, fmt.Errorf("get TLS Secret: %w", err)
	}
	for _, k := range []string{"ca.crt", "tls.crt", "tls.key"} {
		if len(sec.Data[k]) == 0 {
			s.secretBlock = &pod.Blocker{Reason: ReasonTLSSecretInvalid, Message: fmt.Sprintf("TLS Secret %s has no %s", name, k)}
			return ctrl.Result{}, nil
		}
	}
	if _, err := etcdstatus.TLSConfig(sec.Data["ca.crt"], sec.Data["tls.crt"], sec.Data["tls.key"], s.m.Spec.DNSName); err != nil {
		s.secretBlock = &pod.Blocker{Reason: ReasonTLSSecretInvalid, Message: fmt.Sprintf("TLS Secret %s: %v", name, err)}
		return ctrl.Result{}, nil
	}
	s.secret = sec
	return ctrl.Result{}, nil
}

// storage ensures the current incarnation's PVC.
func (r *Reconciler) storage(ctx context.Context, s *scope) (ctrl.Result, error) {
	res, err := pvc.Reconcile(ctx, r.Client, r.APIReader, s.m)
	s.storage = res
	if err != nil {
		return ctrl.Result{}, err
	}
	cur := res.Current
	switch res.Decision.Action {
	case pvc.Lost:
		s.setCondition(etcdfedv1.ConditionStorageReady, metav1.ConditionFalse, ReasonVolumeLost, res.Decision.Message)
		r.event(s.m, corev1.EventTypeWarning, ReasonVolumeLost, res.Decision.Message)
		return ctrl.Result{}, nil
	case pvc.Conflict:
		s.setCondition(etcdfedv1.ConditionStorageReady, metav1.ConditionFalse, ReasonVolumeConflict, res.Decision.Message)
		return ctrl.Result{}, nil
	case pvc.Terminating:
		s.setCondition(etcdfedv1.ConditionStorageReady, metav1.ConditionFalse, ReasonVolumeTerminating, res.Decision.Message)
	case pvc.Keep, pvc.Create:
		if cur.Status.Phase == corev1.ClaimBound {
			s.setCondition(etcdfedv1.ConditionStorageReady, metav1.ConditionTrue, ReasonBound, fmt.Sprintf("PVC %s is bound to %s", cur.Name, cur.Spec.VolumeName))
		} else {
			s.setCondition(etcdfedv1.ConditionStorageReady, metav1.ConditionFalse, ReasonVolumePending,
				fmt.Sprintf("PVC %s is %s; a WaitForFirstConsumer class binds it when the pod is scheduled", cur.Name, phaseOr(string(cur.Status.Phase), "Pending")))
		}
	}
	if cur != nil && cur.UID != "" {
		s.m.Status.Volume = etcdfedv1.VolumeReference{ClaimName: cur.Name, UID: string(cur.UID)}
	}
	return ctrl.Result{}, nil
}

// usableVolume reports whether a pod may be created on the current PVC.
func (s *scope) usableVolume() bool {
	a := s.storage.Decision.Action
	return s.storage.Current != nil && (a == pvc.Keep || a == pvc.Create)
}

// exposure ensures the member's Service (NodePort, LoadBalancer) and reads
// the advertised ports back.
func (r *Reconciler) exposure(ctx context.Context, s *scope) (ctrl.Result, error) {
	existing := &corev1.Pod{}
	podExists := true
	if err := r.Client.Get(ctx, types.NamespacedName{Namespace: s.m.Namespace, Name: spec.PodName(s.m)}, existing); apierrors.IsNotFound(err) {
		podExists = false
	} else if err != nil {
		return ctrl.Result{}, fmt.Errorf("get pod: %w", err)
	}
	res, err := service.Reconcile(ctx, r.Client, r.Scheme, s.m, podExists)
	if err != nil {
		return ctrl.Result{}, err
	}
	s.svc = res
	if res.Conflict != "" {
		s.exposure = service.Exposure{Waiting: res.Conflict}
		return ctrl.Result{}, nil
	}
	s.exposure = service.ExposureOf(s.m, res.Service)
	if s.exposure.Waiting != "" && spec.ExposeType(s.m) == etcdfedv1.ExposeLoadBalancer {
		// Load balancers report their address without an event we watch
		// for sure on every provider; look again soon.
		return ctrl.Result{RequeueAfter: 10 * time.Second}, nil
	}
	return ctrl.Result{}, nil
}

// blocker says why no pod can be created now, or nil.
func (r *Reconciler) blocker(s *scope) *pod.Blocker {
	m := s.m
	switch {
	case m.Spec.Bootstrap == nil:
		return &pod.Blocker{Reason: ReasonWaitingForBootstrap, Message: "spec.bootstrap is not set: the volume and the exposure are prepared, the pod starts once the hub sets bootstrap"}
	case s.secretBlock != nil:
		return s.secretBlock
	case !s.usableVolume():
		return &pod.Blocker{Reason: ReasonWaitingForStorage, Message: "the data volume cannot be used: " + conditionMessage(m, etcdfedv1.ConditionStorageReady)}
	case s.svc.Conflict != "":
		return &pod.Blocker{Reason: ReasonServiceConflict, Message: s.svc.Conflict}
	case s.exposure.Waiting != "":
		return &pod.Blocker{Reason: ReasonWaitingForExposure, Message: s.exposure.Waiting}
	}
	if err := spec.CheckBootstrap(m, spec.PeerURL(m, s.exposure.Ports)); err != nil {
		return &pod.Blocker{Reason: ReasonBootstrapMismatch, Message: err.Error()}
	}
	if m.Spec.Bootstrap.InitialClusterState == etcdfedv1.InitialClusterNew {
		for _, c := range s.storage.All {
			if inc, ok := spec.Incarnation(c.Labels); ok && inc < m.Spec.Incarnation {
				return &pod.Blocker{Reason: ReasonBootstrapRefused, Message: fmt.Sprintf(
					"initialClusterState is new but the member had incarnation %d (PVC %s): a new incarnation must join the existing cluster (state existing), or it would found a second cluster", inc, c.Name)}
			}
		}
	}
	return nil
}

// pod ensures the member's pod.
func (r *Reconciler) pod(ctx context.Context, s *scope) (ctrl.Result, error) {
	m := s.m
	blocker := r.blocker(s)
	var desired *corev1.Pod
	if blocker == nil {
		desired = pod.Build(m, pod.Params{
			HelperImage:         r.HelperImage,
			WaitDNSTimeout:      r.WaitDNSTimeout,
			ClaimName:           s.storage.Current.Name,
			Advertised:          s.exposure.Ports,
			LoadBalancerAddress: s.exposure.LoadBalancerAddress,
		})
	}
	res, err := pod.Reconcile(ctx, r.Client, r.APIReader, r.Scheme, m, desired, blocker)
	s.pod = res
	if err != nil {
		return ctrl.Result{}, err
	}
	switch res.Decision.Action {
	case pod.Create:
		r.event(m, corev1.EventTypeNormal, ReasonPodCreated, fmt.Sprintf("Created pod %s for incarnation %d", res.Pod.Name, m.Spec.Incarnation))
	case pod.DeleteOldIncarnation, pod.DeleteTerminated:
		r.event(m, corev1.EventTypeNormal, ReasonPodTerminating, "Deleted pod: "+res.Decision.Message)
	case pod.Replace:
		r.event(m, corev1.EventTypeNormal, ReasonPodReplaced, "Replacing pod: "+res.Decision.Message)
	}
	if p := res.Pod; p != nil && res.Decision.Action != pod.Conflict {
		if inc, _ := spec.Incarnation(p.Labels); inc == m.Spec.Incarnation && p.DeletionTimestamp == nil {
			s.current = p
		}
	}
	status, reason, msg := podReadiness(m, res, blocker)
	s.setCondition(etcdfedv1.ConditionPodReady, status, reason, msg)
	return ctrl.Result{}, nil
}

// podReadiness turns the pod (or why there is none) into PodReady.
func podReadiness(m *etcdfedv1.EtcdMember, res pod.Result, blocker *pod.Blocker) (metav1.ConditionStatus, string, string) {
	p := res.Pod
	outdated := ""
	if res.Decision.Outdated {
		outdated = "; " + res.Decision.Message
	}
	switch res.Decision.Action {
	case pod.Conflict:
		return metav1.ConditionFalse, ReasonPodConflict, res.Decision.Message
	case pod.Create:
		return metav1.ConditionFalse, ReasonPodCreated, fmt.Sprintf("pod %s created", p.Name)
	case pod.DeleteOldIncarnation, pod.DeleteTerminated:
		return metav1.ConditionFalse, ReasonPodTerminating, "deleting: " + res.Decision.Message
	case pod.Replace:
		return metav1.ConditionFalse, ReasonPodReplaced, "replacing: " + res.Decision.Message
	}
	if p == nil {
		return metav1.ConditionFalse, blocker.Reason, blocker.Message
	}
	if p.DeletionTimestamp != nil {
		return metav1.ConditionFalse, ReasonPodTerminating, res.Decision.Message
	}
	if inc, _ := spec.Incarnation(p.Labels); inc != m.Spec.Incarnation {
		return metav1.ConditionFalse, ReasonPodPending, res.Decision.Message
	}
	switch p.Status.Phase {
	case corev1.PodFailed, corev1.PodSucceeded:
		return metav1.ConditionFalse, ReasonPodTerminated, res.Decision.Message
	}
	if isReady(p) {
		return metav1.ConditionTrue, ReasonReady, fmt.Sprintf("pod %s is ready on node %s%s", p.Name, p.Spec.NodeName, outdated)
	}
	if p.Spec.NodeName == "" {
		return metav1.ConditionFalse, ReasonPodPending, fmt.Sprintf("pod %s is not scheduled%s", p.Name, outdated)
	}
	for _, cs := range p.Status.InitContainerStatuses {
		done := cs.State.Terminated != nil && cs.State.Terminated.ExitCode == 0
		if cs.Name == pod.ContainerWaitDNS && !done {
			return metav1.ConditionFalse, ReasonWaitingForDNS, fmt.Sprintf("init container %s waits until %s resolves to the member's address%s", pod.ContainerWaitDNS, m.Spec.DNSName, outdated)
		}
	}
	if p.Status.Phase == corev1.PodRunning {
		if m.Status.Etcd != nil && m.Status.Etcd.IsLearner && m.Status.Etcd.Error == "" {
			return metav1.ConditionFalse, ReasonLearner, fmt.Sprintf("etcd runs as a learner and waits for promotion%s", outdated)
		}
		return metav1.ConditionFalse, ReasonPodNotReady, fmt.Sprintf("etcd runs but is not ready (/readyz)%s", outdated)
	}
	return metav1.ConditionFalse, ReasonPodPending, fmt.Sprintf("pod %s is %s%s", p.Name, phaseOr(string(p.Status.Phase), "Pending"), outdated)
}

func isReady(p *corev1.Pod) bool {
	if p.Status.Phase != corev1.PodRunning {
		return false
	}
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// report fills the pod, node, zone, address and URL fields and Exposed.
func (r *Reconciler) report(ctx context.Context, s *scope) (ctrl.Result, error) {
	m := s.m
	st := &m.Status
	if st.Incarnation != m.Spec.Incarnation {
		st.Etcd = nil
	}
	st.Incarnation = m.Spec.Incarnation
	st.PodName, st.PodIP, st.NodeName, st.Zone, st.Address = "", "", "", "", ""
	if p := s.current; p != nil {
		st.PodName, st.PodIP, st.NodeName = p.Name, p.Status.PodIP, p.Spec.NodeName
		if p.Spec.NodeName != "" {
			zone, err := r.nodeZone(ctx, p.Spec.NodeName)
			if err != nil {
				return ctrl.Result{}, err
			}
			st.Zone = zone
		}
	}
	if s.svc.Conflict != "" {
		st.PeerURL, st.ClientURL = "", ""
		s.setCondition(etcdfedv1.ConditionExposed, metav1.ConditionFalse, ReasonServiceConflict, s.svc.Conflict)
		return ctrl.Result{}, nil
	}
	if s.exposure.Ports.Peer != 0 {
		st.PeerURL, st.ClientURL = spec.PeerURL(m, s.exposure.Ports), spec.ClientURL(m, s.exposure.Ports)
	} else {
		st.PeerURL, st.ClientURL = "", ""
	}
	reason, waiting := "", ""
	switch spec.ExposeType(m) {
	case etcdfedv1.ExposePodIP:
		st.Address = st.PodIP
		reason, waiting = ReasonWaitingForPodIP, "the address is the pod IP, known once the pod runs"
	case etcdfedv1.ExposeNodePort:
		if s.exposure.Waiting != "" {
			reason, waiting = ReasonWaitingForNodePorts, s.exposure.Waiting
		} else {
			if s.current != nil {
				st.Address = s.current.Status.HostIP
			}
			reason, waiting = ReasonWaitingForNodeIP, "the address is the IP of the pod's node, known once the pod is scheduled and started"
		}
	case etcdfedv1.ExposeLoadBalancer:
		st.Address = s.exposure.LoadBalancerAddress
		reason, waiting = ReasonWaitingForLoadBalancer, s.exposure.Waiting
	}
	if st.Address != "" && st.PeerURL != "" {
		s.setCondition(etcdfedv1.ConditionExposed, metav1.ConditionTrue, ReasonExposed,
			fmt.Sprintf("%s exposure: address %s, peer URL %s, client URL %s", spec.ExposeType(m), st.Address, st.PeerURL, st.ClientURL))
	} else {
		s.setCondition(etcdfedv1.ConditionExposed, metav1.ConditionFalse, reason, waiting)
	}
	return ctrl.Result{}, nil
}

// nodeZone reads the zone label of a node (metadata only).
func (r *Reconciler) nodeZone(ctx context.Context, name string) (string, error) {
	n := &metav1.PartialObjectMetadata{}
	n.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("Node"))
	if err := r.Client.Get(ctx, types.NamespacedName{Name: name}, n); err != nil {
		if apierrors.IsNotFound(err) {
			return "", nil
		}
		return "", fmt.Errorf("get node %s: %w", name, err)
	}
	return n.Labels[corev1.LabelTopologyZone], nil
}

// retire labels volumes of earlier incarnations and, with the Delete policy,
// deletes them once the current incarnation's pod runs.
func (r *Reconciler) retire(ctx context.Context, s *scope) (ctrl.Result, error) {
	running := s.current != nil && s.current.Status.Phase == corev1.PodRunning
	plan := pvc.PlanRetired(s.m, s.storage.All, running)
	if err := pvc.Apply(ctx, r.Client, s.m, s.storage.All, plan); err != nil {
		return ctrl.Result{}, err
	}
	return ctrl.Result{}, nil
}

// etcdView reads the member's own view from its etcd and sets
// MemberHealthy.
func (r *Reconciler) etcdView(ctx context.Context, s *scope) (ctrl.Result, error) {
	m := s.m
	key := client.ObjectKeyFromObject(m)
	p := s.current
	if p == nil || p.Status.PodIP == "" || p.Status.Phase != corev1.PodRunning {
		r.Etcd.Forget(key.String())
		s.setCondition(etcdfedv1.ConditionMemberHealthy, metav1.ConditionFalse, ReasonNoPod, "no running pod of the current incarnation")
		recordHealth(key, false, false)
		return ctrl.Result{}, nil
	}
	interval := r.StatusInterval
	if interval == 0 {
		interval = DefaultStatusInterval
	}
	t := etcdstatus.Target{
		Endpoint:   fmt.Sprintf("%s://%s", spec.Scheme(m), hostPort(p.Status.PodIP, spec.ClientPort)),
		ServerName: m.Spec.DNSName,
	}
	if spec.TLSEnabled(m) {
		if s.secret == nil {
			s.setCondition(etcdfedv1.ConditionMemberHealthy, metav1.ConditionFalse, s.secretBlock.Reason, s.secretBlock.Message)
			recordHealth(key, false, isReady(p))
			return ctrl.Result{RequeueAfter: interval}, nil
		}
		t.CA, t.Cert, t.Key, t.Version = s.secret.Data["ca.crt"], s.secret.Data["tls.crt"], s.secret.Data["tls.key"], s.secret.ResourceVersion
	}
	view, err := r.Etcd.Read(ctx, key.String(), t)
	switch {
	case err != nil:
		if m.Status.Etcd == nil {
			m.Status.Etcd = &etcdfedv1.MemberEtcdView{}
		}
		m.Status.Etcd.Error = truncate(err.Error(), 1024)
		s.setCondition(etcdfedv1.ConditionMemberHealthy, metav1.ConditionFalse, ReasonUnreachable, err.Error())
	case view.Error != "":
		m.Status.Etcd = view
		s.setCondition(etcdfedv1.ConditionMemberHealthy, metav1.ConditionFalse, ReasonAlarm, view.Error)
	case view.LeaderID == "":
		m.Status.Etcd = view
		s.setCondition(etcdfedv1.ConditionMemberHealthy, metav1.ConditionFalse, ReasonNoLeader, fmt.Sprintf("member %s answers but sees no leader", view.ID))
	default:
		m.Status.Etcd = view
		role := "voter"
		if view.IsLearner {
			role = "learner"
		}
		s.setCondition(etcdfedv1.ConditionMemberHealthy, metav1.ConditionTrue, ReasonHealthy,
			fmt.Sprintf("member %s (%s) sees leader %s at raft term %d", view.ID, role, view.LeaderID, view.RaftTerm))
	}
	recordHealth(key, meta.IsStatusConditionTrue(m.Status.Conditions, etcdfedv1.ConditionMemberHealthy), isReady(p))
	return ctrl.Result{RequeueAfter: interval}, nil
}

// peerConnections explains a member that is not ready from etcd's own log
// (a bounded tail through pods/log, at most once per Logs.Interval) in the
// PeerConnections condition: a peer certificate that does not name its
// source address, certificates of another CA, a peer of another cluster,
// a peer name that does not resolve. A ready member's log is not read.
func (r *Reconciler) peerConnections(ctx context.Context, s *scope) (ctrl.Result, error) {
	if r.Logs == nil {
		return ctrl.Result{}, nil
	}
	key := client.ObjectKeyFromObject(s.m).String()
	p := s.current
	if p == nil || p.Spec.NodeName == "" || p.Status.Phase != corev1.PodRunning {
		r.Logs.Forget(key)
		meta.RemoveStatusCondition(&s.m.Status.Conditions, etcdfedv1.ConditionPeerConnections)
		return ctrl.Result{}, nil
	}
	plan := etcdlog.PlanRead(p, pod.ContainerEtcd, time.Now())
	switch {
	case plan.Ready:
		r.Logs.Forget(key)
		s.setCondition(etcdfedv1.ConditionPeerConnections, metav1.ConditionTrue, etcdfedv1.ReasonPeersReady,
			"etcd is ready, so it reaches a quorum of its peers (its log is read only while it is not ready)")
		return ctrl.Result{}, nil
	case !plan.Read:
		return ctrl.Result{RequeueAfter: plan.After}, nil
	}
	res, next := r.Logs.Read(ctx, key, p, plan.Previous)
	if res.Err != nil {
		s.setCondition(etcdfedv1.ConditionPeerConnections, metav1.ConditionUnknown, etcdfedv1.ReasonEtcdLogUnavailable, res.Err.Error())
		return ctrl.Result{RequeueAfter: next}, nil
	}
	status, reason, msg := res.Diagnosis.Condition()
	if plan.Previous {
		msg = "etcd exited and waits to restart; its last run's log: " + msg
	}
	if prev := meta.FindStatusCondition(s.before.Status.Conditions, etcdfedv1.ConditionPeerConnections); status == metav1.ConditionFalse && (prev == nil || prev.Reason != reason) {
		r.event(s.m, corev1.EventTypeWarning, reason, msg)
	}
	s.setCondition(etcdfedv1.ConditionPeerConnections, status, reason, msg)
	return ctrl.Result{RequeueAfter: next}, nil
}

// reconcileDelete runs when the hub deleted the EtcdMember: the pod and the
// Service go, the volumes are deleted with the Delete policy and otherwise
// labelled retired.
func (r *Reconciler) reconcileDelete(ctx context.Context, m *etcdfedv1.EtcdMember) (ctrl.Result, error) {
	if !controllerutil.ContainsFinalizer(m, spec.Finalizer) {
		return ctrl.Result{}, nil
	}
	log := ctrl.LoggerFrom(ctx)
	var errs []error
	for _, obj := range []client.Object{&corev1.Pod{}, &corev1.Service{}} {
		if err := r.Client.Get(ctx, types.NamespacedName{Namespace: m.Namespace, Name: m.Name}, obj); err != nil {
			if !apierrors.IsNotFound(err) {
				errs = append(errs, fmt.Errorf("get %T: %w", obj, err))
			}
			continue
		}
		if !spec.OwnedBy(m, obj.GetLabels()) || obj.GetDeletionTimestamp() != nil {
			continue
		}
		log.Info("Deleting object of a deleted member", "kind", fmt.Sprintf("%T", obj), "name", obj.GetName())
		uid := obj.GetUID()
		if err := r.Client.Delete(ctx, obj, client.Preconditions{UID: &uid}); err != nil && !apierrors.IsNotFound(err) {
			errs = append(errs, fmt.Errorf("delete %s: %w", obj.GetName(), err))
		}
	}
	pvcs, err := pvc.List(ctx, r.Client, m)
	if err != nil {
		errs = append(errs, err)
	} else if err := pvc.Apply(ctx, r.Client, m, pvcs, pvc.PlanDeleted(m, pvcs)); err != nil {
		errs = append(errs, err)
	}
	if err := errors.Join(errs...); err != nil {
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

func (r *Reconciler) event(m *etcdfedv1.EtcdMember, typ, reason, note string) {
	if r.Recorder == nil {
		return
	}
	r.Recorder.Eventf(m, nil, typ, reason, reason, "%s", truncate(note, 1024))
}

func conditionMessage(m *etcdfedv1.EtcdMember, t string) string {
	if c := meta.FindStatusCondition(m.Status.Conditions, t); c != nil {
		return c.Message
	}
	return ""
}

func phaseOr(p, def string) string {
	if p == "" {
		return def
	}
	return p
}

func hostPort(ip string, port int32) string {
	return net.JoinHostPort(ip, strconv.Itoa(int(port)))
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n-3] + "..."
}
