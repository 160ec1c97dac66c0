package etcdcluster

import (
	"maps"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdfedv1 "github.com/etcdfed/etcdfed/api/v1alpha1"
	"github.com/etcdfed/etcdfed/hub/etcdops"
	"github.com/etcdfed/etcdfed/hub/liveness"
	"github.com/etcdfed/etcdfed/hub/pki"
	"github.com/etcdfed/etcdfed/hub/planner"
	"github.com/etcdfed/etcdfed/hub/registry"
)

// snapshot is everything one pass observed of a ring. observe builds it;
// decide reads it and never changes it; apply uses its handles (the member
// clusters' clients, the etcd client) to carry out the decision.
type snapshot struct {
	// ec is the EtcdCluster as read at the start of the pass.
	ec *etcdfedv1.EtcdCluster
	// fleetAdmit reserves a place under the fleet-wide limit of fleetMax
	// disruptive operations (fleetlimit.go); nil: no limit.
	fleetAdmit func(fleetRequest) fleetAnswer
	fleetMax   int
	now        time.Time
	// ringNamespace is where the hub's objects live in member clusters.
	ringNamespace string
	// allowLoopback: loopback addresses are good addresses (the local
	// environment; hub/reports).
	allowLoopback bool
	// hubVersion is the hub's own version, judged against each spoke's
	// (spokeversion.go); "" leaves the SpokeVersions condition as it was.
	hubVersion string
	// clusters are the registered member clusters in the registry's order.
	clusters []*clusterSnapshot
	byName   map[string]*clusterSnapshot
	// pki is the CA and the hub's client certificate (TLS only).
	pki pkiSnapshot
	// etcd is etcd's own view: member list, health, leader.
	etcd planner.Etcd
	// etcdClient reaches etcd, for apply; nil when etcd was not dialled.
	etcdClient *etcdops.Client
	// hubView is which of the ring's clusters the hub sees (rule 8): a hub
	// that sees too few of them to declare any failed says so.
	hubView liveness.HubView
	// livenessChange is how long until a cluster's verdict changes by time
	// alone (a Lease going stale, a grace period ending), when
	// livenessChanges; the next pass is due then at the latest.
	livenessChange  time.Duration
	livenessChanges bool
	// restore is what founding from a snapshot needs (restore.go).
	restore restoreSnapshot
	// took is how long each part of the observation took, for the pass's
	// debug line.
	took observeTimes
	// asks are the ring's request annotations as decide read them
	// (requests.go).
	asks *requests
}

// observeTimes are the durations of a pass's observation, by source.
type observeTimes struct {
	pki, clusters, etcd time.Duration
}

// clusterSnapshot is one registered member cluster as this pass saw it.
type clusterSnapshot struct {
	name    string
	labels  map[string]string
	engaged bool
	conn    *registry.ClusterState // the hub's connection, from the registry
	// registered: the registry lists it. A cluster the ledger places
	// members in that is not registered (its kubeconfig Secret deleted)
	// is still judged, never engaged.
	registered bool
	eligible   bool
	verdict    liveness.Verdict
	// backSince is when the hub saw the cluster's spoke Lease again after
	// it had gone stale (zero: never out of view since the hub started).
	backSince time.Time
	spoke     *etcdfedv1.EtcdSpoke
	// The objects the hub owns there for this EtcdCluster (ownedKinds):
	// members by member name (the member's current object there,
	// clusterSnapshot.add and settle), the others by object name.
	members map[string]*etcdfedv1.EtcdMember
	// others are a member's other EtcdMembers in the cluster, by member
	// name: the old incarnation a Move inside the cluster keeps beside the
	// new one until its ID is removed, or one left behind there (swept).
	others  map[string][]*etcdfedv1.EtcdMember
	zones   map[string]*etcdfedv1.EtcdDNSZone
	secrets map[string]*corev1.Secret
	readErr error
	// foreign are the objects of a ring of this namespace and name under
	// another UID, read while the ring may be taken over (takeover.go);
	// nil otherwise.
	foreign *foreignObjects
	// rejected are the refused fields of what the cluster reported
	// (checkReports), one message each, sorted.
	rejected []string
	// nodes are the cluster's nodes with their zone and the hub's last
	// sighting of their Lease (multi-zone clusters only; nil otherwise).
	nodes map[string]nodeSeen
	// zoneVerdicts are the zone witness's verdicts, by zone (visible
	// multi-zone clusters only).
	zoneVerdicts map[string]liveness.ZoneVerdict
	// client writes to the cluster (apply only); nil when not engaged.
	client client.Client
}

// visible: engaged, read in this pass, and its spoke Lease fresh on the
// hub's clock. Only a visible cluster's objects are believed and written.
func (c *clusterSnapshot) visible() bool {
	return c != nil && c.engaged && c.readErr == nil && c.verdict.State == liveness.Alive
}

// connProblem says why the hub holds no connection to the cluster, "" when
// it does.
func (c *clusterSnapshot) connProblem(_ time.Time) string {
	if c.engaged || c.conn == nil {
		return ""
	}
	msg := "hub not connected"
	if !c.conn.Since.IsZero() {
		msg += " since " + c.conn.Since.UTC().Format(time.RFC3339)
	}
	if c.conn.Problem != "" {
		msg += ": " + c.conn.Problem
	}
	return msg
}

// pkiSnapshot is the EtcdCluster's certificate material in the hub.
type pkiSnapshot struct {
	// ca is the CA that issues; nil when the CA Secret does not exist yet
	// (decide creates it).
	ca *pki.CA
	// auth is the CA Secret's whole content: ca, and during a CA rotation
	// the CA trusted beside it. Nil means ca alone.
	auth *pki.Authority
	// caSecret is the CA Secret as read (a CA rotation updates it).
	caSecret *corev1.Secret
	// hubClient is the Secret of the hub's etcd client certificate, nil
	// when missing.
	hubClient *corev1.Secret
	// adoptClient is the client certificate of spec.adopt.clientSecretName,
	// which the hub uses instead of its own (nil: none named), and
	// adoptClientErr why it could not be read.
	adoptClient    *pki.Leaf
	adoptClientErr error
}

// authority is the CA Secret's content, nil when there is no CA yet.
func (p pkiSnapshot) authority() *pki.Authority {
	switch {
	case p.auth != nil:
		return p.auth
	case p.ca != nil:
		return &pki.Authority{Signer: p.ca}
	}
	return nil
}

// bundle is what every member and consumer trusts: the CA, and during a
// rotation the CA beside it.
func (p pkiSnapshot) bundle() []byte {
	if a := p.authority(); a != nil {
		return a.Bundle()
	}
	return nil
}

// hubClientLeaf is the hub's client certificate when it can be used in
// this pass: present and issued by a CA of the bundle (renewal and
// reissue, when due, are decided separately).
func (p pkiSnapshot) hubClientLeaf() *pki.Leaf {
	a := p.authority()
	if a == nil || p.hubClient == nil || a.Issuer(p.hubClient.Data[pki.KeyCert]) == nil {
		return nil
	}
	return &pki.Leaf{CertPEM: p.hubClient.Data[pki.KeyCert], KeyPEM: p.hubClient.Data[pki.KeyKey]}
}

func (s *snapshot) cluster(name string) *clusterSnapshot { return s.byName[name] }

// add files an EtcdMember of the cluster under its member: the preferred
// one (preferObject) is the member's current object, the others are kept
// beside it.
func (c *clusterSnapshot) add(o *etcdfedv1.EtcdMember) {
	name := o.Spec.MemberName
	prev := c.members[name]
	if prev != nil && preferObject(prev, o) {
		prev, o = o, prev
	}
	c.members[name] = o
	if prev != nil {
		if c.others == nil {
			c.others = map[string][]*etcdfedv1.EtcdMember{}
		}
		c.others[name] = append(c.others[name], prev)
	}
}

// settle makes the object of the incarnation ledger records in this
// cluster the member's current one when the cluster holds it beside
// another (a Move given up hands the member back to its old incarnation,
// whose object is older than the new one's).
func (c *clusterSnapshot) settle(ledger *etcdfedv1.EtcdClusterStatus) {
	for _, m := range ledger.Members {
		cur := c.members[m.Name]
		if m.Cluster != c.name || cur == nil || cur.Spec.Incarnation == m.Incarnation {
			continue
		}
		others := c.others[m.Name]
		if i := slices.IndexFunc(others, func(o *etcdfedv1.EtcdMember) bool { return o.Spec.Incarnation == m.Incarnation }); i >= 0 {
			c.members[m.Name], others[i] = others[i], cur
		}
	}
}

// objectsOf are every EtcdMember of member in the cluster, its current one
// first.
func (c *clusterSnapshot) objectsOf(member string) []*etcdfedv1.EtcdMember {
	if c == nil {
		return nil
	}
	cur := c.members[member]
	if cur == nil {
		return nil
	}
	return append([]*etcdfedv1.EtcdMember{cur}, c.others[member]...)
}

// allObjects are every EtcdMember of the cluster.
func (c *clusterSnapshot) allObjects() []*etcdfedv1.EtcdMember {
	var out []*etcdfedv1.EtcdMember
	for _, name := range slices.Sorted(maps.Keys(c.members)) {
		out = append(out, c.objectsOf(name)...)
	}
	return out
}

// object is member's EtcdMember named name in the cluster, nil when none.
func (c *clusterSnapshot) object(member, name string) *etcdfedv1.EtcdMember {
	for _, o := range c.objectsOf(member) {
		if o.Name == name {
			return o
		}
	}
	return nil
}

// incarnation is member's EtcdMember of incarnation inc in the cluster,
// nil when none.
func (c *clusterSnapshot) incarnation(member string, inc int64) *etcdfedv1.EtcdMember {
	for _, o := range c.objectsOf(member) {
		if o.Spec.Incarnation == inc {
			return o
		}
	}
	return nil
}

// refObject is the EtcdMember ref names: its object, or the member's
// current one when it names none.
func (c *clusterSnapshot) refObject(ref memberRef) *etcdfedv1.EtcdMember {
	if ref.object == "" {
		return c.members[ref.member]
	}
	return c.object(ref.member, ref.object)
}

// currentObject is the object of a member's current incarnation as recorded
// in ledger, when its cluster is visible. The object may still be of an
// older incarnation: callers compare.
func (s *snapshot) currentObject(ledger *etcdfedv1.EtcdClusterStatus, member string) *etcdfedv1.EtcdMember {
	m := statusMember(ledger, member)
	if m == nil {
		return nil
	}
	cs := s.cluster(m.Cluster)
	if !cs.visible() {
		return nil
	}
	return cs.members[member]
}
