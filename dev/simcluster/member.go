package simcluster

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"maps"
	"net"
	"net/netip"
	"slices"
	"strconv"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	etcdfedv1 "github.com/etcdfed/etcdfed/api/v1alpha1"
	"github.com/etcdfed/etcdfed/dev/etcdsim"
	"github.com/etcdfed/etcdfed/spoke/component/budget"
	"github.com/etcdfed/etcdfed/spoke/etcdstatus"
	"github.com/etcdfed/etcdfed/spoke/member"
)

// The real spoke's contract (spoke/internal/spec, spoke/member): its
// finalizer and field owner, the ports a PodIP member advertises.
const (
	finalizer  = "etcdfed.dev/spoke"
	fieldOwner = "etcdfed-spoke"
	peerPort   = 2380
	clientPort = 2379
	// viewRefresh: a view that moved only in its counters is written
	// once in five minutes (spoke/member etcdViewRefresh).
	viewRefresh = 5 * time.Minute
)

// memberReconciler plays the EtcdMember reconciler of a spoke without
// pods: a simulated etcd member per EtcdMember.
type memberReconciler struct {
	c        *Cluster
	client   client.Client
	etcd     *etcdstatus.Reader
	interval time.Duration

	mu     sync.Mutex
	hosted map[types.NamespacedName]*hosted
	// used addresses per zone, by host byte.
	used map[string]map[byte]types.NamespacedName
}

// hosted is a member's "pod": the simulated member its process runs as.
type hosted struct {
	incarnation int64
	uid         string
	ring        *etcdsim.Ring
	id          uint64
	ip          netip.Addr
	zone        string
	started     time.Time
	running     bool
	// spec is what the process runs: the spec without its bootstrap and
	// disruption grant (a change of anything else replaces the pod).
	spec string
}

// runSpec is the part of the spec a pod runs: the real spoke replaces
// the pod when it changes (and the hub's Roll waits for that).
func runSpec(m *etcdfedv1.EtcdMember) string {
	s := m.Spec.DeepCopy()
	s.Bootstrap, s.Disruption = nil, nil
	b, _ := json.Marshal(s)
	return string(b)
}

func newMemberReconciler(c *Cluster, mgr manager.Manager, etcd *etcdstatus.Reader) *memberReconciler {
	iv := c.cfg.StatusInterval
	if iv == 0 {
		iv = member.DefaultStatusInterval
	}
	return &memberReconciler{c: c, client: mgr.GetClient(), etcd: etcd, interval: iv,
		hosted: map[types.NamespacedName]*hosted{}, used: map[string]map[byte]types.NamespacedName{}}
}

func (r *memberReconciler) setup(mgr manager.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).
		Named("etcdmember-"+r.c.cfg.Name).
		For(&etcdfedv1.EtcdMember{}, builder.WithPredicates(predicate.NewPredicateFuncs(func(o client.Object) bool {
			m, ok := o.(*etcdfedv1.EtcdMember)
			return !ok || r.c.cfg.Real == nil || !r.c.cfg.Real(m)
		}), predicate.Funcs{UpdateFunc: func(e event.UpdateEvent) bool {
			o, n := e.ObjectOld, e.ObjectNew
			return o.GetGeneration() != n.GetGeneration() || !o.GetDeletionTimestamp().Equal(n.GetDeletionTimestamp()) ||
				!maps.Equal(o.GetLabels(), n.GetLabels()) || !slices.Equal(o.GetFinalizers(), n.GetFinalizers())
		}})).
		Complete(r)
}

func (r *memberReconciler) runningCount() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, h := range r.hosted {
		if h.running {
			n++
		}
	}
	return n
}

// stopAll stops every hosted member's process.
func (r *memberReconciler) stopAll() {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, h := range r.hosted {
		r.stopLocked(h)
	}
}

func (r *memberReconciler) stopLocked(h *hosted) {
	if h.running && h.ring != nil {
		_ = h.ring.StopMember(h.id)
	}
	h.running = false
}

// drop stops the member's process and frees its address.
func (r *memberReconciler) drop(key types.NamespacedName) {
	r.mu.Lock()
	h := r.hosted[key]
	if h != nil {
		r.stopLocked(h)
		delete(r.hosted, key)
		for zone, used := range r.used {
			for host, k := range used {
				if k == key {
					delete(r.used[zone], host)
				}
			}
		}
	}
	r.mu.Unlock()
	r.etcd.Forget(key.String())
	if h != nil {
		r.c.fleet.forget(h.uid)
	}
}

// address is the member's address in its zone's block (the highest free
// host), kept across its incarnations (a pod's IP changes with every pod; nothing here relies on
// it staying).
func (r *memberReconciler) address(key types.NamespacedName, zone string) (netip.Addr, string, error) {
	z := r.c.cfg.Zones[0]
	for _, cand := range r.c.cfg.Zones {
		if cand.Name == zone {
			z = cand
		}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	used := r.used[z.Name]
	if used == nil {
		used = map[byte]types.NamespacedName{}
		r.used[z.Name] = used
	}
	for host, k := range used {
		if k == key {
			return hostIn(z.CIDR, host), z.Name, nil
		}
	}
	// From the top of the block down: the node agent gives real pods of
	// the same zone addresses from the bottom (FirstHost) up, so real and
	// simulated rings on one cluster meet only when the zone is full.
	for host := 254; host >= FirstHost; host-- {
		if _, taken := used[byte(host)]; !taken {
			used[byte(host)] = key
			return hostIn(z.CIDR, byte(host)), z.Name, nil
		}
	}
	return netip.Addr{}, z.Name, fmt.Errorf("zone %s: no address left in %s", z.Name, z.CIDR)
}

func hostIn(p netip.Prefix, host byte) netip.Addr {
	b := p.Masked().Addr().As4()
	b[3] = host
	return netip.AddrFrom4(b)
}

// Reconcile is one pass over an EtcdMember, as spoke/member's: gone or
// deleting: the process stops and the finalizer goes; otherwise the
// process runs when spec.bootstrap says it may, and the status reports it.
func (r *memberReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	m := &etcdfedv1.EtcdMember{}
	if err := r.client.Get(ctx, req.NamespacedName, m); err != nil {
		if apierrors.IsNotFound(err) {
			r.drop(req.NamespacedName)
			return ctrl.Result{}, nil
		}
		return ctrl.Result{}, fmt.Errorf("get EtcdMember: %w", err)
	}
	if !m.DeletionTimestamp.IsZero() {
		r.drop(req.NamespacedName)
		if controllerutil.ContainsFinalizer(m, finalizer) {
			patch := client.MergeFromWithOptions(m.DeepCopy(), client.MergeFromWithOptimisticLock{})
			controllerutil.RemoveFinalizer(m, finalizer)
			if err := r.client.Patch(ctx, m, patch, client.FieldOwner(fieldOwner)); err != nil && !apierrors.IsNotFound(err) {
				return ctrl.Result{}, fmt.Errorf("remove finalizer: %w", err)
			}
		}
		return ctrl.Result{}, nil
	}
	if !controllerutil.ContainsFinalizer(m, finalizer) {
		patch := client.MergeFromWithOptions(m.DeepCopy(), client.MergeFromWithOptimisticLock{})
		controllerutil.AddFinalizer(m, finalizer)
		if err := r.client.Patch(ctx, m, patch, client.FieldOwner(fieldOwner)); err != nil {
			return ctrl.Result{}, fmt.Errorf("add finalizer: %w", err)
		}
	}
	before := m.DeepCopy()
	next := r.pass(ctx, m)
	if equality.Semantic.DeepEqual(before.Status, m.Status) {
		return ctrl.Result{RequeueAfter: next}, nil
	}
	patch := client.MergeFromWithOptions(before, client.MergeFromWithOptimisticLock{})
	if err := r.client.Status().Patch(ctx, m, patch, client.FieldOwner(fieldOwner)); err != nil {
		if apierrors.IsConflict(err) {
			return ctrl.Result{RequeueAfter: time.Second}, nil
		}
		if apierrors.IsNotFound(err) {
			return ctrl.Result{}, nil
		}
		return ctrl.Result{}, fmt.Errorf("patch EtcdMember status: %w", err)
	}
	return ctrl.Result{RequeueAfter: next}, nil
}

// pass runs the member and computes its status into m; it returns when
// to look again.
func (r *memberReconciler) pass(ctx context.Context, m *etcdfedv1.EtcdMember) time.Duration {
	key := client.ObjectKeyFromObject(m)
	s := memberStatus{st: &m.Status, gen: m.Generation}
	st := s.st
	h := r.current(key, m)
	s.fromSpec(m)

	target, soTLS, reason, msg := r.tlsOf(ctx, m)
	if reason != "" {
		return s.noPod(reason, msg)
	}
	if m.Spec.Bootstrap == nil {
		return s.noPod(member.ReasonWaitingForBootstrap, "spec.bootstrap is unset: no pod is created until the hub says how etcd starts")
	}
	ip, zone, err := r.address(key, m.Spec.Zone)
	if err != nil {
		return s.noPod(etcdfedv1.ReasonContainerFailing, err.Error())
	}
	if h == nil || !h.running {
		if h, err = r.start(m, h, ip, zone, soTLS); err != nil {
			return s.noPod(etcdfedv1.ReasonContainerFailing, "etcd cannot start: "+err.Error())
		}
	}
	st.PodName, st.PodIP, st.Zone, st.Address = m.Name, ip.String(), zone, ip.String()
	st.NodeName = r.nodeIn(ctx, zone)
	s.set(etcdfedv1.ConditionExposed, metav1.ConditionTrue, member.ReasonExposed,
		fmt.Sprintf("PodIP exposure: address %s, peer URL %s, client URL %s", st.Address, st.PeerURL, st.ClientURL))

	target.Endpoint = fmt.Sprintf("%s://%s", m.Spec.TLS.Mode.URLScheme(), net.JoinHostPort(ip.String(), strconv.Itoa(clientPort)))
	view, err := r.etcd.Read(ctx, key.String(), target)
	if err != nil {
		if st.Etcd == nil {
			st.Etcd = &etcdfedv1.MemberEtcdView{}
		}
		st.Etcd.Error = err.Error()
		s.set(etcdfedv1.ConditionMemberHealthy, metav1.ConditionFalse, member.ReasonUnreachable, err.Error())
		s.set(etcdfedv1.ConditionPodReady, metav1.ConditionFalse, member.ReasonPodNotReady, "etcd runs but is not ready (/readyz)")
		if time.Since(h.started) < time.Minute {
			return member.JoiningStatusInterval
		}
		return r.interval
	}
	if viewNews(st.Etcd, view, m.QuotaBytes()) {
		st.Etcd = view
	}
	s.health(view)
	return s.readiness(view, r.interval)
}

// current is the member's hosted process for this incarnation, nil when
// none: the process of an older incarnation is stopped and forgotten (its
// pod deleted), that of a changed spec stopped (its pod replaced on the
// same volume, to restart as the same member).
func (r *memberReconciler) current(key types.NamespacedName, m *etcdfedv1.EtcdMember) *hosted {
	r.mu.Lock()
	defer r.mu.Unlock()
	h := r.hosted[key]
	if h != nil && h.incarnation != m.Spec.Incarnation {
		r.stopLocked(h)
		delete(r.hosted, key)
		h = nil
	}
	if h != nil && h.running && h.spec != runSpec(m) {
		r.stopLocked(h)
	}
	return h
}

// tlsOf reads the member's TLS Secret (TLS on): the target to read
// etcd's view with and the simulated member's server configuration. A
// reason says why the pod cannot start.
func (r *memberReconciler) tlsOf(ctx context.Context, m *etcdfedv1.EtcdMember) (target etcdstatus.Target, cfg *tls.Config, reason, msg string) {
	if !m.Spec.TLS.Mode.Enabled() {
		return target, nil, "", ""
	}
	sec := &corev1.Secret{}
	if err := r.client.Get(ctx, client.ObjectKey{Namespace: m.Namespace, Name: m.Spec.TLS.SecretName}, sec); err != nil {
		if apierrors.IsNotFound(err) {
			return target, nil, member.ReasonTLSSecretMissing, fmt.Sprintf("Secret %s does not exist", m.Spec.TLS.SecretName)
		}
		return target, nil, member.ReasonTLSSecretMissing, err.Error()
	}
	cfg, err := serverTLS(sec.Data["ca.crt"], sec.Data["tls.crt"], sec.Data["tls.key"])
	if err != nil {
		return target, nil, member.ReasonTLSSecretInvalid, err.Error()
	}
	cur := &servedCert{client: r.client, key: client.ObjectKeyFromObject(sec), rv: sec.ResourceVersion, cert: &cfg.Certificates[0]}
	// crypto/tls asks GetCertificate only when Certificates is empty or
	// the client sent a server name (not when it dials an address).
	cfg.Certificates, cfg.GetCertificate = nil, cur.get
	target = etcdstatus.Target{ServerName: m.Spec.DNSName, CA: sec.Data["ca.crt"], Cert: sec.Data["tls.crt"], Key: sec.Data["tls.key"], Version: sec.ResourceVersion}
	return target, cfg, "", ""
}

// start starts the member's process on ip: h's member again on its data
// (a replaced pod of the same incarnation), else a member of the fleet's
// ring for m.
func (r *memberReconciler) start(m *etcdfedv1.EtcdMember, h *hosted, ip netip.Addr, zone string, cfg *tls.Config) (*hosted, error) {
	var ring *etcdsim.Ring
	var id uint64
	if h != nil {
		ring, id = h.ring, h.id
	} else {
		var err error
		if ring, id, err = r.c.fleet.memberFor(m, m.Status.PeerURL); err != nil {
			return nil, err
		}
	}
	so := etcdsim.StartOptions{Name: m.Spec.MemberName, ListenAddr: net.JoinHostPort(ip.String(), strconv.Itoa(clientPort)),
		ClientURL: m.Status.ClientURL, TLS: cfg, Version: m.Spec.Version}
	if _, err := ring.StartMember(id, so); err != nil {
		return nil, err
	}
	h = &hosted{incarnation: m.Spec.Incarnation, uid: m.Spec.Cluster.UID, ring: ring, id: id, ip: ip, zone: zone, started: time.Now(), running: true, spec: runSpec(m)}
	r.mu.Lock()
	r.hosted[client.ObjectKeyFromObject(m)] = h
	r.mu.Unlock()
	return h, nil
}

// memberStatus is the status a pass computes, its conditions at the
// generation the pass read.
type memberStatus struct {
	st  *etcdfedv1.EtcdMemberStatus
	gen int64
}

func (s memberStatus) set(t string, c metav1.ConditionStatus, reason, msg string) {
	meta.SetStatusCondition(&s.st.Conditions, metav1.Condition{Type: t, Status: c, Reason: reason, Message: msg, ObservedGeneration: s.gen})
}

// fromSpec sets what the status takes from the spec alone: the
// incarnation, the bound simulated volume, the disruption budget and the
// member's URLs.
func (s memberStatus) fromSpec(m *etcdfedv1.EtcdMember) {
	st := s.st
	if st.Incarnation != m.Spec.Incarnation {
		st.Etcd = nil
	}
	st.Incarnation = m.Spec.Incarnation
	st.ObservedGeneration = s.gen
	st.Disruption = &etcdfedv1.MemberDisruptionStatus{Budget: budget.Name(m)}
	claim := fmt.Sprintf("%s-data-%d", m.Name, m.Spec.Incarnation)
	st.Volume = etcdfedv1.VolumeReference{ClaimName: claim, UID: "sim-" + string(m.UID) + "-" + strconv.FormatInt(m.Spec.Incarnation, 10)}
	s.set(etcdfedv1.ConditionStorageReady, metav1.ConditionTrue, member.ReasonBound, "simulated volume "+claim+" is bound")
	mode := m.Spec.TLS.Mode
	st.PeerURL = etcdfedv1.MemberURL(mode, m.Spec.DNSName, peerPort)
	st.ClientURL = etcdfedv1.MemberURL(mode, m.Spec.DNSName, clientPort)
}

// noPod says the member has no running pod, and why; it returns when to
// look again.
func (s memberStatus) noPod(reason, msg string) time.Duration {
	st := s.st
	st.PodName, st.PodIP, st.NodeName, st.Zone, st.Address = "", "", "", "", ""
	s.set(etcdfedv1.ConditionExposed, metav1.ConditionFalse, member.ReasonWaitingForPodIP, "the address is the pod IP, known once the pod runs")
	s.set(etcdfedv1.ConditionPodReady, metav1.ConditionFalse, reason, msg)
	s.set(etcdfedv1.ConditionMemberHealthy, metav1.ConditionFalse, member.ReasonNoPod, "no running pod of the current incarnation")
	meta.RemoveStatusCondition(&st.Conditions, etcdfedv1.ConditionPeerConnections)
	return 2 * time.Second
}

// health sets MemberHealthy from etcd's view of the member.
func (s memberStatus) health(view *etcdfedv1.MemberEtcdView) {
	switch {
	case view.Error != "":
		s.set(etcdfedv1.ConditionMemberHealthy, metav1.ConditionFalse, member.ReasonAlarm, view.Error)
	case view.LeaderID == "":
		s.set(etcdfedv1.ConditionMemberHealthy, metav1.ConditionFalse, member.ReasonNoLeader, fmt.Sprintf("member %s answers but sees no leader", view.ID))
	default:
		role := "voter"
		if view.IsLearner {
			role = "learner"
		}
		s.set(etcdfedv1.ConditionMemberHealthy, metav1.ConditionTrue, member.ReasonHealthy, fmt.Sprintf("member %s (%s) sees leader %s at raft term %d", view.ID, role, view.LeaderID, view.RaftTerm))
	}
}

// readiness sets PodReady (and, ready, PeerConnections) from etcd's view
// of the member, and returns when to look again (next, or sooner while
// the member joins or has no leader).
func (s memberStatus) readiness(view *etcdfedv1.MemberEtcdView, next time.Duration) time.Duration {
	switch {
	case view.IsLearner:
		s.set(etcdfedv1.ConditionPodReady, metav1.ConditionFalse, member.ReasonLearner, "etcd runs as a learner and waits for promotion")
		return member.JoiningStatusInterval
	case view.LeaderID == "":
		s.set(etcdfedv1.ConditionPodReady, metav1.ConditionFalse, member.ReasonPodNotReady, "etcd runs but is not ready (/readyz)")
		return min(next, 2*time.Second)
	default:
		s.set(etcdfedv1.ConditionPodReady, metav1.ConditionTrue, member.ReasonReady, fmt.Sprintf("pod %s is ready on node %s", s.st.PodName, s.st.NodeName))
		s.set(etcdfedv1.ConditionPeerConnections, metav1.ConditionTrue, etcdfedv1.ReasonPeersReady,
			"etcd is ready, so it reaches a quorum of its peers (its log is read only while it is not ready)")
		return next
	}
}

// nodeIn is a node of the zone (the local environment's node agent keeps
// them), "" when none.
func (r *memberReconciler) nodeIn(ctx context.Context, zone string) string {
	var nodes corev1.NodeList
	if err := r.client.List(ctx, &nodes, client.MatchingLabels{corev1.LabelTopologyZone: zone}); err != nil || len(nodes.Items) == 0 {
		return ""
	}
	return nodes.Items[0].Name
}

// viewNews is spoke/member's rule for writing a new etcd view: its first,
// anything but the counters changed, sizes moved as a size policy acts on,
// or the last written is older than viewRefresh.
func viewNews(old, cur *etcdfedv1.MemberEtcdView, quota int64) bool {
	if old == nil || cur == nil || old.ObservedAt == nil || cur.ObservedAt == nil {
		return true
	}
	a, b := *old, *cur
	a.RaftIndex, a.Revision, a.DBSize, a.DBSizeInUse, a.ObservedAt, a.Peers = 0, 0, 0, 0, nil, nil
	b.RaftIndex, b.Revision, b.DBSize, b.DBSizeInUse, b.ObservedAt, b.Peers = 0, 0, 0, 0, nil, nil
	return a != b || !equality.Semantic.DeepEqual(old.Peers, cur.Peers) || etcdfedv1.SizeNews(old, cur, quota) ||
		cur.ObservedAt.Sub(old.ObservedAt.Time) >= viewRefresh
}

// servedCert is the certificate a member serves, as etcd serves it: its
// certificate and key files read again at each handshake (here the
// Secret as the spoke's cache holds it now, as a pod's volume follows its
// Secret), while the CA it trusts is the one read when it started (a
// change of trust is a restart: spec.tls.caHash). A Secret that cannot be
// read or holds no valid pair leaves the last one served, as a volume
// keeps its files.
type servedCert struct {
	client client.Reader
	key    types.NamespacedName

	mu   sync.Mutex
	rv   string
	cert *tls.Certificate
}

func (c *servedCert) get(hello *tls.ClientHelloInfo) (*tls.Certificate, error) {
	ctx := context.Background()
	if hello != nil {
		ctx = hello.Context()
	}
	sec := &corev1.Secret{}
	err := c.client.Get(ctx, c.key, sec)
	c.mu.Lock()
	defer c.mu.Unlock()
	if err != nil || sec.ResourceVersion == c.rv {
		return c.cert, nil
	}
	pair, err := tls.X509KeyPair(sec.Data["tls.crt"], sec.Data["tls.key"])
	if err != nil {
		return c.cert, nil
	}
	c.rv, c.cert = sec.ResourceVersion, &pair
	return c.cert, nil
}
