package etcdcluster

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/multicluster-runtime/pkg/multicluster"

	etcdfedv1 "github.com/etcdfed/etcdfed/api/v1alpha1"
	"github.com/etcdfed/etcdfed/hub/etcdops"
	"github.com/etcdfed/etcdfed/hub/liveness"
	"github.com/etcdfed/etcdfed/hub/pki"
	"github.com/etcdfed/etcdfed/hub/planner"
)

// observe builds the pass's snapshot and writes nothing. Member clusters
// are read side by side, each within ClusterReadTimeout; one that does not
// answer is unknown for the pass (rule 8), never a reason to stop. An error
// means the hub could not read its own cluster (the registry, the CA).
func (r *Reconciler) observe(ctx context.Context, ec *etcdfedv1.EtcdCluster) (*snapshot, error) {
	s := &snapshot{ec: ec, now: r.now(), ringNamespace: r.RingNamespace, allowLoopback: r.AllowLoopbackAddresses, hubVersion: r.hubVersion(), byName: map[string]*clusterSnapshot{}}
	mark := time.Now()
	lap := func() time.Duration {
		now := time.Now()
		d := now.Sub(mark)
		mark = now
		return d
	}
	if ec.Spec.TLS.Mode.Enabled() {
		p, err := r.observePKI(ctx, ec)
		if err != nil {
			return nil, fmt.Errorf("certificates: %w", err)
		}
		s.pki = p
		s.pki.adoptClient, s.pki.adoptClientErr = r.observeAdoptClient(ctx, ec)
	}
	s.took.pki = lap()
	if err := r.observeClusters(ctx, s); err != nil {
		return nil, err
	}
	s.took.clusters = lap()
	r.observeEtcd(ctx, s)
	s.took.etcd = lap()
	s.restore = r.observeRestore(ctx, ec)
	return s, nil
}

// observePKI reads the CA and the hub's client certificate from the hub,
// uncached. A missing CA is for decide to create, unless the spec names
// one: then it is the user's to provide.
func (r *Reconciler) observePKI(ctx context.Context, ec *etcdfedv1.EtcdCluster) (pkiSnapshot, error) {
	var p pkiSnapshot
	// Both Secrets are read side by side: each is a request to the hub's
	// apiserver in every pass.
	key := client.ObjectKey{Namespace: ec.Namespace, Name: pki.CASecretName(ec)}
	hcKey := client.ObjectKey{Namespace: ec.Namespace, Name: pki.HubClientSecretName(ec)}
	sec, hc := &corev1.Secret{}, &corev1.Secret{}
	hcDone := make(chan error, 1)
	go func() { hcDone <- r.hubReader().Get(ctx, hcKey, hc) }()
	err := r.hubReader().Get(ctx, key, sec)
	hcErr := <-hcDone
	switch {
	case apierrors.IsNotFound(err) && ec.Spec.TLS.CASecretName != "":
		return p, fmt.Errorf("CA Secret %s named in spec.tls.caSecretName does not exist", key)
	case apierrors.IsNotFound(err):
		return p, nil
	case err != nil:
		return p, fmt.Errorf("get CA Secret %s: %w", key, err)
	}
	auth, err := pki.LoadAuthority(sec.Data)
	if err != nil {
		return p, fmt.Errorf("CA Secret %s: %w", key, err)
	}
	p.ca, p.auth, p.caSecret = auth.Signer, auth, sec
	switch {
	case apierrors.IsNotFound(hcErr):
	case hcErr != nil:
		return p, fmt.Errorf("get Secret %s: %w", hcKey, hcErr)
	default:
		p.hubClient = hc
	}
	return p, nil
}

func (r *Reconciler) observeClusters(ctx context.Context, s *snapshot) error {
	regs, err := r.Registry.List(ctx)
	if err != nil {
		return err
	}
	sel, err := clusterSelector(s.ec)
	if err != nil {
		return err
	}
	for _, mc := range regs {
		cs := &clusterSnapshot{name: mc.Name, labels: mc.Labels, conn: mc.State, registered: true,
			members: map[string]*etcdfedv1.EtcdMember{}, zones: map[string]*etcdfedv1.EtcdDNSZone{}, secrets: map[string]*corev1.Secret{}}
		cs.eligible = eligible(s.ec, mc.Name, mc.Labels, sel)
		s.clusters = append(s.clusters, cs)
		s.byName[mc.Name] = cs
	}
	// A cluster that holds members but dropped out of the registry (its
	// kubeconfig Secret deleted or re-created) is judged like any other
	// (rule 8: grace and witnesses, on the hub's last sighting of its
	// Lease), not forgotten: its members stay until it is declared failed.
	for _, name := range ledgerClusters(&s.ec.Status) {
		if s.byName[name] == nil {
			cs := &clusterSnapshot{name: name, members: map[string]*etcdfedv1.EtcdMember{}, zones: map[string]*etcdfedv1.EtcdDNSZone{}, secrets: map[string]*corev1.Secret{}}
			cs.eligible = eligible(s.ec, name, nil, sel)
			s.clusters = append(s.clusters, cs)
			s.byName[name] = cs
		}
	}
	// Every member cluster is read side by side, each within its own
	// deadline: one that does not answer is unknown for this pass and
	// never holds up the others. The cluster object is asked for afresh
	// every pass: the provider replaces it when the cluster reconnects.
	var wg sync.WaitGroup
	for _, cs := range s.clusters {
		cl, err := r.Manager.GetCluster(ctx, multicluster.ClusterName(cs.name))
		if err != nil {
			continue // not engaged: the registry says why
		}
		cs.client, cs.engaged = cl.GetClient(), true
		wg.Add(1)
		go func() {
			defer wg.Done()
			cctx, cancel := context.WithTimeout(ctx, r.ClusterReadTimeout)
			defer cancel()
			start := time.Now()
			err := r.readCluster(cctx, s.ec, cs)
			metricClusterRead.WithLabelValues(cs.name).Observe(time.Since(start).Seconds())
			switch {
			case err != nil && cctx.Err() != nil:
				metricClusterReadTimeouts.WithLabelValues(cs.name).Inc()
				cs.readErr = fmt.Errorf("member cluster %s did not answer within %s: %w", cs.name, r.ClusterReadTimeout, err)
			case err != nil:
				cs.readErr = err
			default:
				// A cluster the registry replaced or dropped while it was
				// read served a cache that is no longer kept current.
				if now, err := r.Manager.GetCluster(ctx, multicluster.ClusterName(cs.name)); err != nil || now != cl {
					cs.readErr = fmt.Errorf("member cluster %s reconnected while it was read", cs.name)
				}
			}
		}()
	}
	wg.Wait()
	var obs []liveness.Observation
	for _, cs := range s.clusters {
		o := liveness.Observation{Cluster: cs.name, WatchedSince: r.Tracker.WatchedSince(cs.name)}
		if seen, ok := r.Tracker.LastSeen(cs.name); ok {
			o.LastSeen = seen
		}
		if cs.spoke != nil {
			if len(cs.spoke.Status.GossipView) > 0 {
				o.Gossip = map[string]bool{}
				for _, g := range cs.spoke.Status.GossipView {
					o.Gossip[g.Cluster] = g.Alive
				}
			}
			o.Abstains = gossipAbstains(cs.spoke)
		}
		// Witnesses are the ring's eligible clusters and those holding its
		// members: a cluster outside the ring neither votes nor counts.
		o.NotWitness = !cs.eligible && !hasMembers(&s.ec.Status, cs.name)
		o.Bystander = !s.concernedWith(cs)
		obs = append(obs, o)
	}
	s.hubView = liveness.ViewOf(obs, s.now, r.LeaseStaleAfter)
	// The hub judges whole member clusters (rule 8), and the zones of the
	// visible ones (zones.go); the API's zoneGracePeriod is the grace
	// before a failed cluster or zone is declared failed and its members
	// are moved.
	clusterGrace := durationOr(s.ec.Spec.FailurePolicy.ZoneGracePeriod, 2*time.Minute)
	for _, verdict := range liveness.Judge(obs, s.now, r.LeaseStaleAfter, clusterGrace) {
		s.byName[verdict.Cluster].verdict = verdict
	}
	for _, cs := range s.clusters {
		cs.backSince, _ = r.Tracker.BackSince(cs.name)
	}
	// A fresh Lease going stale wakes the ring through the hub's staleness
	// timer; only a grace period ending is the ring's own to schedule.
	s.livenessChange, s.livenessChanges = liveness.NextGraceEnd(obs, s.now, r.LeaseStaleAfter, clusterGrace)
	// Zones of visible multi-zone clusters (zones.go), with the same grace.
	if next, ok := judgeZones(s, &s.ec.Status, r.NodeStaleAfter, clusterGrace); ok && (!s.livenessChanges || next < s.livenessChange) {
		s.livenessChange, s.livenessChanges = next, true
	}
	return nil
}

// ledgerClusters are the member clusters the ledger places members in (or
// an operation in flight moves one out of), sorted.
func ledgerClusters(st *etcdfedv1.EtcdClusterStatus) []string {
	var out []string
	for _, m := range st.Members {
		if m.Cluster != "" {
			out = append(out, m.Cluster)
		}
	}
	if op := st.Operation; op != nil && op.From != nil && op.From.Cluster != "" {
		out = append(out, op.From.Cluster)
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// gossipAbstains says why a spoke's gossip view is no witness ("" when it
// is): its GossipHealthy condition is False, or, from a spoke too old to
// write it, its Ready condition says gossip does not run.
func gossipAbstains(sp *etcdfedv1.EtcdSpoke) string {
	if c := meta.FindStatusCondition(sp.Status.Conditions, etcdfedv1.ConditionGossipHealthy); c != nil {
		if c.Status == metav1.ConditionTrue {
			return ""
		}
		return c.Reason + ": " + c.Message
	}
	if c := meta.FindStatusCondition(sp.Status.Conditions, etcdfedv1.ConditionReady); c != nil && c.Status == metav1.ConditionFalse &&
		c.Reason != etcdfedv1.ReasonNoNodes {
		return c.Reason + ": " + c.Message
	}
	return ""
}

// readCluster reads the spoke, its Lease, the nodes' zones and Leases (a
// multi-zone cluster only, for the zone witness) and this EtcdCluster's
// objects from the cluster's cache, and checks what the spoke reported
// (checkReports). Reading the Lease here also feeds the tracker: a
// renewal the watch delivered late still counts, an unchanged one does not.
func (r *Reconciler) readCluster(ctx context.Context, ec *etcdfedv1.EtcdCluster, cs *clusterSnapshot) error {
	key := client.ObjectKey{Namespace: r.RingNamespace, Name: etcdfedv1.SpokeObjectName}
	lease := &coordinationv1.Lease{}
	switch err := cs.client.Get(ctx, key, lease); {
	case err == nil:
		if lease.Spec.RenewTime != nil {
			holder := ""
			if lease.Spec.HolderIdentity != nil {
				holder = *lease.Spec.HolderIdentity
			}
			r.Tracker.ObserveLease(cs.name, lease.Spec.RenewTime.Time, holder, r.LeaseStaleAfter)
		}
	case !apierrors.IsNotFound(err):
		return fmt.Errorf("read spoke Lease in %s: %w", cs.name, err)
	}
	spoke := &etcdfedv1.EtcdSpoke{}
	switch err := cs.client.Get(ctx, key, spoke); {
	case err == nil:
		cs.spoke = spoke
	case !apierrors.IsNotFound(err):
		return fmt.Errorf("read EtcdSpoke in %s: %w", cs.name, err)
	}
	if multiZone(cs) {
		if err := r.readNodes(ctx, cs); err != nil {
			return err
		}
	}
	if seeksTakeOver(ec) {
		if err := listRing(ctx, cs.client, r.RingNamespace, ec, cs); err != nil {
			return err
		}
	} else if err := listOwned(ctx, cs.client, r.RingNamespace, ec.RingUID(), cs); err != nil {
		return err
	}
	cs.settle(&ec.Status)
	checkReports(ec, cs, r.AllowLoopbackAddresses)
	sort.Strings(cs.rejected)
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

// observeEtcd reads etcd's member list and every member's health through
// the recorded members' endpoints.
func (r *Reconciler) observeEtcd(ctx context.Context, s *snapshot) {
	ledger := withAdoptedMembers(s)
	if ledger.ClusterID == "" && !anyBootstrapStarted(s) && s.ec.Spec.Adopt == nil {
		// No founding member may run etcd yet: dialling names that do not
		// resolve would only cost a timeout per reconcile.
		s.etcd = planner.Etcd{Error: "not bootstrapped: no member has been started yet"}
		return
	}
	away := outOfSight(s, ledger)
	endpoints := clientEndpoints(s, ledger, away)
	if len(endpoints) == 0 {
		s.etcd = planner.Etcd{Error: "no member has a client URL yet"}
		return
	}
	var tlsCfg *clientTLS
	if s.ec.Spec.TLS.Mode.Enabled() {
		leaf := s.pki.hubClientLeaf()
		if leaf == nil {
			leaf = borrowedLeaf(s)
		}
		if s.ec.Spec.Adopt != nil && (s.pki.adoptClient != nil || s.pki.adoptClientErr != nil) {
			if s.pki.adoptClientErr != nil {
				s.etcd = planner.Etcd{Error: s.pki.adoptClientErr.Error()}
				return
			}
			leaf = s.pki.adoptClient
		}
		if leaf == nil {
			s.etcd = planner.Etcd{Error: "the hub has no client certificate from the CA yet"}
			return
		}
		// The whole bundle: during a CA rotation members serve
		// certificates of either CA.
		bundle := s.pki.bundle()
		cfg, err := pki.ClientTLS(bundle, leaf)
		if err != nil {
			s.etcd = planner.Etcd{Error: err.Error()}
			return
		}
		tlsCfg = &clientTLS{cfg: cfg, fingerprint: fingerprint(leaf.CertPEM, bundle)}
	}
	c, err := r.etcd.get(s.ec.UID, endpoints, tlsCfg, dialPolicy(r.AllowLoopbackAddresses))
	if err != nil {
		s.etcd = planner.Etcd{Error: err.Error()}
		return
	}
	s.etcdClient = c
	s.etcd = c.ObserveWith(ctx, etcdops.ObserveOptions{OutOfSight: outOfSightIDs(s, ledger, away)})
	// A member the hub cannot reach but its spoke reports healthy is
	// healthy: only the hub's path to it failed.
	var objs []*etcdfedv1.EtcdMember
	for _, m := range ledger.Members {
		objs = append(objs, s.currentObject(ledger, m.Name))
	}
	if op := ledger.Operation; op != nil && op.Type == etcdfedv1.OperationMove && op.From != nil {
		// The old incarnation a Move keeps until its ID is removed (beside
		// the new one's when it moves inside its cluster).
		if cs := s.cluster(op.From.Cluster); cs.visible() {
			objs = append(objs, cs.incarnation(op.Member, op.FromIncarnation))
		}
	}
	for i, em := range s.etcd.Members {
		if em.Healthy {
			continue
		}
		for _, obj := range objs {
			if obj != nil && obj.Status.Etcd != nil && obj.Status.Etcd.ID == hexID(em.ID) &&
				meta.IsStatusConditionTrue(obj.Status.Conditions, etcdfedv1.ConditionMemberHealthy) {
				s.etcd.Members[i].Healthy = true
			}
		}
	}
	if !s.etcd.Reachable {
		ctrl.LoggerFrom(ctx).V(1).Info("etcd not reachable", "endpoints", endpoints, "error", s.etcd.Error)
		if len(adoptEndpoints(s.ec, ledger)) > 0 {
			s.etcd.Error = etcdErrorSummary(s.etcd.Error)
		}
	}
}

// etcdErrorSummary is what status says of an error reaching etcd while
// the hub dials the endpoints a spec names (spec.adopt.endpoints, hosts
// the spec's author chose): the kind of failure, never its text, which
// quotes the addresses a name resolved to and what the host answered (the
// hub is nobody's probe of its own network, rule 14). The text is in the
// hub's log ("etcd not reachable", verbosity 1).
func etcdErrorSummary(raw string) string {
	has := func(subs ...string) bool {
		return slices.ContainsFunc(subs, func(sub string) bool { return strings.Contains(raw, sub) })
	}
	switch {
	case raw == "":
		return ""
	case has(etcdops.ErrDialRefused.Error()):
		return "an endpoint's address is refused by the hub's dial policy (link-local, unspecified, multicast or broadcast; loopback unless the hub allows it); details in the hub's log"
	case has("no answer within"):
		return raw // etcdops' own words: nothing of the host's
	case has("connection refused"):
		return "connection refused; details in the hub's log"
	case has("no such host", "server misbehaving"):
		return "an endpoint's name does not resolve; details in the hub's log"
	case has("deadline exceeded", "i/o timeout", "timed out"):
		return "no answer in time; details in the hub's log"
	case has("tls:", "x509:", "certificate", "handshake"):
		return "the TLS handshake failed (the endpoint's certificate, or the hub's client certificate of spec.tls.caSecretName, not accepted); details in the hub's log"
	}
	return "the endpoints did not answer as etcd; details in the hub's log"
}

// withAdoptedMembers is the status as read, with members adopted from the
// objects when the record was lost (adoptLostMembers): observe dials the
// members decide will record.
func withAdoptedMembers(s *snapshot) *etcdfedv1.EtcdClusterStatus {
	st := s.ec.Status.DeepCopy()
	adoptLostMembers(s, st)
	return st
}

// anyBootstrapStarted: some object of this EtcdCluster has spec.bootstrap,
// so an etcd process may run (or a cluster formed before the hub's status
// was lost).
func anyBootstrapStarted(s *snapshot) bool {
	for _, cs := range s.clusters {
		for _, obj := range cs.allObjects() {
			if obj.Spec.Bootstrap != nil {
				return true
			}
		}
	}
	return false
}

// outOfSight names the recorded members the hub has its own evidence
// against before it asks etcd: their member cluster is not visible in this
// pass (not connected, not read, or its spoke Lease stale on the hub's
// clock), or the zone witness holds their zone stale or failed. It decides
// nothing by itself (rule 8): it only keeps such members from costing the
// pass time, as endpoints the client may balance to and as status requests
// that wait out the full timeout.
func outOfSight(s *snapshot, ledger *etcdfedv1.EtcdClusterStatus) map[string]bool {
	away := map[string]bool{}
	for _, m := range ledger.Members {
		if m.Cluster == "" {
			continue
		}
		if domainOutOfSight(s, m.Cluster, m.Zone) {
			away[m.Name] = true
		}
	}
	return away
}

// domainOutOfSight: the member cluster is not visible in this pass, or the
// zone witness holds the zone stale or failed.
func domainOutOfSight(s *snapshot, cluster, zone string) bool {
	cs := s.cluster(cluster)
	return !cs.visible() || cs.zoneStale(zone) || cs.zoneFailed(zone)
}

// outOfSightIDs are the etcd IDs of the members out of sight (away), and
// the ID an operation in flight is replacing or removing when the domain
// it leaves is out of sight: once a replacement has begun, the ledger
// places the member in its new domain, but etcd still lists the old
// incarnation, which lives (or died) in the old one.
func outOfSightIDs(s *snapshot, ledger *etcdfedv1.EtcdClusterStatus, away map[string]bool) map[uint64]bool {
	ids := map[uint64]bool{}
	for _, m := range ledger.Members {
		if away[m.Name] && m.ID != "" {
			ids[parseID(m.ID)] = true
		}
	}
	if op := ledger.Operation; op != nil && op.MemberID != "" && op.From != nil {
		if domainOutOfSight(s, op.From.Cluster, op.From.Zone) {
			ids[parseID(op.MemberID)] = true
		}
	}
	return ids
}

// clientEndpoints are the client URLs of the recorded members: the spoke's
// report when its cluster is visible, else the DNS name on the default port.
// Once the cluster has formed, a member etcd does not list as a voter (one
// being added, or an incarnation being replaced whose old process may
// still answer "member not found") is left out while others remain, and so
// is a member out of sight (away): a black-holed address holds every
// request balanced to it until its timeout.
func clientEndpoints(s *snapshot, ledger *etcdfedv1.EtcdClusterStatus, away map[string]bool) []string {
	var out []string
	members := ledger.Members
	if op := ledger.Operation; op != nil && op.Type == etcdfedv1.OperationRecover {
		// During a recovery only the survivor can answer: the gone members'
		// endpoints may still accept connections (a frozen process, a
		// black-holed address) and hold every request the client balances
		// to them until it times out.
		members = slices.DeleteFunc(slices.Clone(members), func(m etcdfedv1.MemberStatus) bool { return m.Name != op.Member })
	} else if ledger.ClusterID != "" {
		voters := slices.DeleteFunc(slices.Clone(members), func(m etcdfedv1.MemberStatus) bool {
			return m.ID == "" || m.Role == etcdfedv1.RoleLearner || inOperation(ledger, m.Name)
		})
		if len(voters) > 0 {
			members = voters
		}
		if seen := slices.DeleteFunc(slices.Clone(members), func(m etcdfedv1.MemberStatus) bool { return away[m.Name] }); len(seen) > 0 {
			members = seen
		}
	}
	for _, m := range members {
		if obj := s.currentObject(ledger, m.Name); obj != nil && obj.Status.ClientURL != "" {
			out = append(out, obj.Status.ClientURL)
			continue
		}
		out = append(out, memberURL(s.ec, m.Name, etcdfedv1.DefaultClientPort))
	}
	// An adopted cluster's original members, until they are retired.
	out = append(out, adoptEndpoints(s.ec, ledger)...)
	sort.Strings(out)
	return slices.Compact(out)
}
