package etcdcluster

import (
	"context"
	"crypto/sha256"
	"crypto/tls"
	"encoding/hex"
	"fmt"
	"net/url"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/multicluster-runtime/pkg/multicluster"

	etcdfedv1 "github.com/etcdfed/etcdfed/api/v1alpha1"
	"github.com/etcdfed/etcdfed/hub/etcdops"
	"github.com/etcdfed/etcdfed/hub/liveness"
	"github.com/etcdfed/etcdfed/hub/membership"
	"github.com/etcdfed/etcdfed/hub/registry"
)

// clusterView is one registered member cluster as this reconcile sees it.
type clusterView struct {
	name     string
	labels   map[string]string
	client   client.Client // nil when the provider has not engaged it
	engaged  bool
	conn     *registry.ClusterState // the hub's connection, from the registry
	eligible bool
	verdict  liveness.Verdict
	spoke    *etcdfedv1.EtcdSpoke
	objects  map[string]*etcdfedv1.EtcdMember // this EtcdCluster's, by member name
	readErr  error
}

// visible: engaged and its spoke Lease fresh on the hub's clock. Only a
// visible cluster's objects are believed and written.
func (c *clusterView) visible() bool {
	return c.engaged && c.readErr == nil && c.verdict.State == liveness.Alive
}

// view is everything one reconcile observed.
type view struct {
	ec       *etcdfedv1.EtcdCluster
	now      time.Time
	clusters []*clusterView
	byName   map[string]*clusterView
	tls      *tlsMaterial
	etcd     membership.Etcd
	// results filled by the phases, read by updateStatus.
	placementErr error
	placement    placementResult
	decision     membership.Decision
	actErr       error
	dnsErr       error
	problems     []string
}

func (v *view) cluster(name string) *clusterView { return v.byName[name] }

// observe reads everything the decision needs. An error here means the hub
// itself could not read its own cluster; member clusters that cannot be read
// are recorded as not visible instead.
func (r *Reconciler) observe(ctx context.Context, ec *etcdfedv1.EtcdCluster) (*view, error) {
	v := &view{ec: ec, now: r.now(), byName: map[string]*clusterView{}}
	if tlsEnabled(ec) {
		m, err := r.ensurePKI(ctx, ec)
		if err != nil {
			return nil, fmt.Errorf("certificates: %w", err)
		}
		v.tls = m
	}
	if err := r.observeClusters(ctx, v); err != nil {
		return nil, err
	}
	adoptLostStatus(v)
	r.observeEtcd(ctx, v)
	return v, nil
}

func (r *Reconciler) observeClusters(ctx context.Context, v *view) error {
	regs, err := r.Registry.List(ctx)
	if err != nil {
		return err
	}
	sel, err := clusterSelector(v.ec)
	if err != nil {
		return err
	}
	for _, mc := range regs {
		cv := &clusterView{name: mc.Name, labels: mc.Labels, conn: mc.State, objects: map[string]*etcdfedv1.EtcdMember{}}
		cv.eligible = eligible(v.ec, mc.Name, mc.Labels, sel)
		v.clusters = append(v.clusters, cv)
		v.byName[mc.Name] = cv
	}
	// Every member cluster is read side by side, each within its own
	// deadline: one that does not answer is unknown for this pass and
	// never holds up the others.
	var wg sync.WaitGroup
	for _, cv := range v.clusters {
		cl, err := r.Manager.GetCluster(ctx, multicluster.ClusterName(cv.name))
		if err != nil {
			continue // not engaged: the registry says why
		}
		cv.client, cv.engaged = cl.GetClient(), true
		wg.Add(1)
		go func() {
			defer wg.Done()
			cctx, cancel := context.WithTimeout(ctx, r.ClusterReadTimeout)
			defer cancel()
			start := time.Now()
			err := r.readCluster(cctx, v.ec, cv)
			metricClusterRead.WithLabelValues(cv.name).Observe(time.Since(start).Seconds())
			switch {
			case err != nil && cctx.Err() != nil:
				metricClusterReadTimeouts.WithLabelValues(cv.name).Inc()
				cv.readErr = fmt.Errorf("member cluster %s did not answer within %s: %w", cv.name, r.ClusterReadTimeout, err)
			case err != nil:
				cv.readErr = err
			default:
				// A cluster the registry replaced or dropped while it was
				// read served a cache that is no longer kept current.
				if now, err := r.Manager.GetCluster(ctx, multicluster.ClusterName(cv.name)); err != nil || now != cl {
					cv.readErr = fmt.Errorf("member cluster %s reconnected while it was read", cv.name)
				}
			}
		}()
	}
	wg.Wait()
	var obs []liveness.Observation
	for _, cv := range v.clusters {
		o := liveness.Observation{Cluster: cv.name}
		if seen, ok := r.Tracker.LastSeen(cv.name); ok {
			o.LastSeen = seen
		}
		if cv.spoke != nil {
			o.Gossip = map[string]bool{}
			for _, g := range cv.spoke.Status.GossipView {
				o.Gossip[g.Cluster] = g.Alive
			}
		}
		obs = append(obs, o)
	}
	grace := durationOr(v.ec.Spec.FailurePolicy.ZoneGracePeriod, 2*time.Minute)
	for _, verdict := range liveness.Judge(obs, v.now, r.LeaseStaleAfter, grace) {
		v.byName[verdict.Cluster].verdict = verdict
	}
	return nil
}

// connProblem says why the hub holds no connection to the cluster, "" when
// it does.
func (c *clusterView) connProblem(now time.Time) string {
	if c.engaged || c.conn == nil {
		return ""
	}
	msg := "hub not connected"
	if !c.conn.Since.IsZero() {
		msg += " for " + now.Sub(c.conn.Since).Truncate(time.Second).String()
	}
	if c.conn.Problem != "" {
		msg += ": " + c.conn.Problem
	}
	return msg
}

// readCluster reads the spoke, its Lease and this EtcdCluster's objects from
// the cluster's cache. Reading the Lease here also feeds the tracker: a
// renewal the watch delivered late still counts, an unchanged one does not.
func (r *Reconciler) readCluster(ctx context.Context, ec *etcdfedv1.EtcdCluster, cv *clusterView) error {
	key := client.ObjectKey{Namespace: r.RingNamespace, Name: etcdfedv1.SpokeObjectName}
	lease := &coordinationv1.Lease{}
	switch err := cv.client.Get(ctx, key, lease); {
	case err == nil:
		if lease.Spec.RenewTime != nil {
			holder := ""
			if lease.Spec.HolderIdentity != nil {
				holder = *lease.Spec.HolderIdentity
			}
			r.Tracker.ObserveLease(cv.name, lease.Spec.RenewTime.Time, holder)
		}
	case !apierrors.IsNotFound(err):
		return fmt.Errorf("read spoke Lease in %s: %w", cv.name, err)
	}
	spoke := &etcdfedv1.EtcdSpoke{}
	switch err := cv.client.Get(ctx, key, spoke); {
	case err == nil:
		cv.spoke = spoke
	case !apierrors.IsNotFound(err):
		return fmt.Errorf("read EtcdSpoke in %s: %w", cv.name, err)
	}
	var list etcdfedv1.EtcdMemberList
	if err := cv.client.List(ctx, &list, client.InNamespace(r.RingNamespace), client.MatchingLabels{etcdfedv1.LabelClusterUID: string(ec.UID)}); err != nil {
		return fmt.Errorf("list EtcdMembers in %s: %w", cv.name, err)
	}
	for i := range list.Items {
		m := &list.Items[i]
		cv.objects[m.Spec.MemberName] = m
	}
	return nil
}

func clusterSelector(ec *etcdfedv1.EtcdCluster) (labels.Selector, error) {
	if ec.Spec.Topology.ClusterSelector == nil {
		return nil, nil
	}
	sel, err := metav1.LabelSelectorAsSelector(ec.Spec.Topology.ClusterSelector)
	if err != nil {
		return nil, fmt.Errorf("spec.topology.clusterSelector: %w", err)
	}
	return sel, nil
}

// eligible: listed or selected; everything when neither is given.
func eligible(ec *etcdfedv1.EtcdCluster, name string, l map[string]string, sel labels.Selector) bool {
	t := ec.Spec.Topology
	if len(t.Clusters) == 0 && sel == nil {
		return true
	}
	return slices.Contains(t.Clusters, name) || (sel != nil && sel.Matches(labels.Set(l)))
}

// adoptLostStatus rebuilds status.members from the objects when the hub's
// record is empty but objects exist (status lost, or an EtcdCluster
// recreated with the same UID cannot happen; a restore can). The highest
// incarnation of each member wins.
func adoptLostStatus(v *view) {
	st := &v.ec.Status
	if len(st.Members) > 0 {
		return
	}
	best := map[string]*etcdfedv1.EtcdMember{}
	where := map[string]string{}
	for _, cv := range v.clusters {
		if !cv.visible() {
			continue
		}
		for name, obj := range cv.objects {
			if b, ok := best[name]; !ok || obj.Spec.Incarnation > b.Spec.Incarnation {
				best[name], where[name] = obj, cv.name
			}
		}
	}
	for name, obj := range best {
		st.Members = append(st.Members, etcdfedv1.MemberStatus{Name: name, Cluster: where[name], Zone: obj.Spec.Zone, Incarnation: obj.Spec.Incarnation})
		st.LastIncarnation = max(st.LastIncarnation, obj.Spec.Incarnation)
	}
	sortMembers(st.Members)
}

// observeEtcd reads etcd's member list and every member's health.
func (r *Reconciler) observeEtcd(ctx context.Context, v *view) {
	if v.ec.Status.ClusterID == "" && !anyBootstrapStarted(v) {
		// No founding member may run etcd yet: dialling names that do not
		// resolve would only cost a timeout per reconcile.
		v.etcd = membership.Etcd{Error: "not bootstrapped: no member has been started yet"}
		return
	}
	endpoints := clientEndpoints(v)
	if len(endpoints) == 0 {
		v.etcd = membership.Etcd{Error: "no member has a client URL yet"}
		return
	}
	var tlsCfg *tlsConfig
	if v.tls != nil {
		cfg, err := v.tls.config()
		if err != nil {
			v.etcd = membership.Etcd{Error: err.Error()}
			return
		}
		tlsCfg = &tlsConfig{cfg: cfg, fingerprint: fingerprint(v.tls.client.CertPEM, v.tls.ca.CertPEM)}
	}
	c, err := r.etcd.get(v.ec.UID, endpoints, tlsCfg)
	if err != nil {
		v.etcd = membership.Etcd{Error: err.Error()}
		return
	}
	v.etcd = c.Observe(ctx)
	// A member the hub cannot reach but its spoke reports healthy is
	// healthy: only the hub's path to it failed.
	for i, em := range v.etcd.Members {
		if em.Healthy {
			continue
		}
		for _, m := range v.ec.Status.Members {
			if obj := objectOf(v, m.Name); obj != nil && obj.Status.Etcd != nil && obj.Status.Etcd.ID == hexID(em.ID) &&
				meta.IsStatusConditionTrue(obj.Status.Conditions, etcdfedv1.ConditionMemberHealthy) {
				v.etcd.Members[i].Healthy = true
			}
		}
	}
	if !v.etcd.Reachable {
		ctrl.LoggerFrom(ctx).V(1).Info("etcd not reachable", "endpoints", endpoints, "error", v.etcd.Error)
	}
}

// anyBootstrapStarted: some object of this EtcdCluster has spec.bootstrap,
// so an etcd process may run (or a cluster formed before the hub's status
// was lost).
func anyBootstrapStarted(v *view) bool {
	for _, cv := range v.clusters {
		for _, obj := range cv.objects {
			if obj.Spec.Bootstrap != nil {
				return true
			}
		}
	}
	return false
}

// clientEndpoints are the client URLs of the recorded members: the spoke's
// report when its cluster is visible, else the DNS name on the default port.
// Once the cluster has formed, a member etcd does not list as a voter (one
// being added, or an incarnation being replaced whose old process may
// still answer "member not found") is left out while others remain.
func clientEndpoints(v *view) []string {
	var out []string
	members := v.ec.Status.Members
	if v.ec.Status.ClusterID != "" {
		voters := slices.DeleteFunc(slices.Clone(members), func(m etcdfedv1.MemberStatus) bool {
			return m.ID == "" || m.Role == etcdfedv1.RoleLearner || inOperation(v.ec, m.Name)
		})
		if len(voters) > 0 {
			members = voters
		}
	}
	for _, m := range members {
		if obj := objectOf(v, m.Name); obj != nil && obj.Status.ClientURL != "" {
			out = append(out, obj.Status.ClientURL)
			continue
		}
		out = append(out, memberURL(v.ec, m.Name, etcdfedv1.DefaultClientPort))
	}
	sort.Strings(out)
	return slices.Compact(out)
}

// objectOf is the current incarnation's object of a recorded member, when
// its cluster is visible.
func objectOf(v *view, member string) *etcdfedv1.EtcdMember {
	m := statusMember(v.ec, member)
	if m == nil {
		return nil
	}
	cv := v.cluster(m.Cluster)
	if cv == nil || !cv.visible() {
		return nil
	}
	return cv.objects[member]
}

func statusMember(ec *etcdfedv1.EtcdCluster, name string) *etcdfedv1.MemberStatus {
	for i := range ec.Status.Members {
		if ec.Status.Members[i].Name == name {
			return &ec.Status.Members[i]
		}
	}
	return nil
}

func sortMembers(ms []etcdfedv1.MemberStatus) {
	sort.Slice(ms, func(i, j int) bool { return lessOrdinal(ms[i].Name, ms[j].Name) })
}

// lessOrdinal orders main-2 before main-10.
func lessOrdinal(a, b string) bool {
	ia, ib := strings.LastIndexByte(a, '-'), strings.LastIndexByte(b, '-')
	if ia > 0 && ib > 0 && a[:ia] == b[:ib] {
		na, ea := strconv.Atoi(a[ia+1:])
		nb, eb := strconv.Atoi(b[ib+1:])
		if ea == nil && eb == nil {
			return na < nb
		}
	}
	return a < b
}

func scheme(ec *etcdfedv1.EtcdCluster) string {
	if tlsEnabled(ec) {
		return "https"
	}
	return "http"
}

// memberDNSName is <member>.<domain>.
func memberDNSName(ec *etcdfedv1.EtcdCluster, member string) string {
	return member + "." + strings.TrimSuffix(ec.Spec.DNS.Domain, ".")
}

func memberURL(ec *etcdfedv1.EtcdCluster, member string, port int32) string {
	return fmt.Sprintf("%s://%s:%d", scheme(ec), memberDNSName(ec, member), port)
}

func urlPort(u string, def int32) int32 {
	p, err := url.Parse(u)
	if err != nil {
		return def
	}
	n, err := strconv.Atoi(p.Port())
	if err != nil {
		return def
	}
	return int32(n)
}

func hexID(id uint64) string {
	if id == 0 {
		return ""
	}
	return strconv.FormatUint(id, 16)
}

func parseID(s string) uint64 {
	id, _ := strconv.ParseUint(s, 16, 64)
	return id
}

func durationOr(d *metav1.Duration, def time.Duration) time.Duration {
	if d == nil || d.Duration <= 0 {
		return def
	}
	return d.Duration
}

// clientCache keeps one etcd client per EtcdCluster, replaced when the
// endpoints or certificates change.
type clientCache struct {
	mu      sync.Mutex
	clients map[types.UID]*cachedClient
}

type cachedClient struct {
	key    string
	client *etcdops.Client
}

type tlsConfig struct {
	cfg         *tls.Config
	fingerprint string
}

func (c *clientCache) get(uid types.UID, endpoints []string, t *tlsConfig) (*etcdops.Client, error) {
	key := strings.Join(endpoints, ",")
	cfg := etcdops.Config{Endpoints: endpoints}
	if t != nil {
		key += "|" + t.fingerprint
		cfg.TLS = t.cfg
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.clients == nil {
		c.clients = map[types.UID]*cachedClient{}
	}
	if cc, ok := c.clients[uid]; ok {
		if cc.key == key {
			return cc.client, nil
		}
		_ = cc.client.Close()
		delete(c.clients, uid)
	}
	cl, err := etcdops.New(cfg)
	if err != nil {
		return nil, err
	}
	c.clients[uid] = &cachedClient{key: key, client: cl}
	return cl, nil
}

func (c *clientCache) drop(uid types.UID) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if cc, ok := c.clients[uid]; ok {
		_ = cc.client.Close()
		delete(c.clients, uid)
	}
}

func fingerprint(parts ...[]byte) string {
	h := sha256.New()
	for _, p := range parts {
		h.Write(p)
	}
	return hex.EncodeToString(h.Sum(nil))[:16]
}

func (c *clientCache) current(uid types.UID) (*etcdops.Client, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	cc, ok := c.clients[uid]
	if !ok {
		return nil, false
	}
	return cc.client, true
}
