// Package spokestatus is the spoke's EtcdSpoke reconciler. It creates the
// ring namespace's one EtcdSpoke (named etcdfedv1.SpokeObjectName) if it is
// absent, never writes its spec (the hub writes clusterName and
// gossipPeers), starts and feeds the gossip agent from it, and writes the
// status: version, the cluster's zones (from node labels) and those where
// no node takes new pods, DNS and gossip addresses, the gossip view and
// the round trips to each peer (rule 15; only
// while gossip runs), Ready (NoNodes until a node exists), and whether that
// view may witness for the hub (GossipHealthy).
package spokestatus

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
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	etcdfedv1 "github.com/etcdfed/etcdfed/api/v1alpha1"
	"github.com/etcdfed/etcdfed/spoke/gossip"
)

// Reasons of the EtcdSpoke Ready condition.
const (
	ReasonReady                 = "Ready"                 // True: gossip runs (or is disabled) and the status is current.
	ReasonWaitingForClusterName = "WaitingForClusterName" // False: neither --cluster-name nor spec.clusterName is set; gossip waits for a node name.
	ReasonGossipKeyMissing      = "GossipKeyMissing"      // False: the gossip Secret or its key "key" is missing; gossip does not start.
	ReasonGossipKeyInvalid      = "GossipKeyInvalid"      // False: a key is not 16, 24 or 32 bytes, or the accepted keys are not whole keys of the key's size.
	ReasonGossipError           = "GossipError"           // False: memberlist failed to start.
	// False: the cluster has no nodes; the hub places nothing here. The hub
	// acts on it: defined in the API.
	ReasonNoNodes = etcdfedv1.ReasonNoNodes
)

// GossipKeyField is the key of the gossip encryption key in its Secret.
const GossipKeyField = etcdfedv1.GossipSecretKey

// GossipAcceptField holds further keys accepted on receipt, one after the
// other (each 16, 24 or 32 bytes, all of one size): a rotation's new key
// before it encrypts, or its old key until every spoke encrypts with the
// new one.
const GossipAcceptField = etcdfedv1.GossipSecretAccept

// GossipIdentityField holds this cluster's gossip identity (an ed25519
// seed) and GossipPeersField the table of every registered cluster's
// public key; both written by the hub (spoke/gossip, identity.go).
const (
	GossipIdentityField = etcdfedv1.GossipSecretIdentity
	GossipPeersField    = etcdfedv1.GossipSecretPeers
)

// FieldOwner is the field manager of the spoke's writes.
const FieldOwner = "etcdfed-spoke"

// Reconciler keeps the EtcdSpoke.
type Reconciler struct {
	Client    client.Client
	Namespace string
	// ClusterName overrides spec.clusterName as the gossip node name.
	ClusterName string
	// Gossip is the agent; nil disables gossip.
	Gossip *gossip.Agent
	// APIReader reads the EtcdSpoke from the apiserver, not the cache,
	// for the round trips a starting gossip carries on from (the last
	// this spoke wrote); nil: Client.
	APIReader client.Reader
	// GossipSecret names the Secret holding the gossip key; empty runs
	// gossip unencrypted.
	GossipSecret string
	// GossipSeeds are seeds from flags, joined with spec.gossipPeers.
	GossipSeeds []string
	// DNSAddresses are where this spoke serves DNS.
	DNSAddresses []string
	// Version of the spoke.
	Version string

	kick chan event.GenericEvent
}

// SetupWithManager registers the reconciler: the EtcdSpoke, the nodes
// (their zones and whether they take pods), the gossip Secret and the
// gossip agent's changes all lead to the one object.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager, opts ...func(*builder.Builder)) error {
	toSpoke := handler.EnqueueRequestsFromMapFunc(func(context.Context, client.Object) []reconcile.Request {
		return []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: r.Namespace, Name: etcdfedv1.SpokeObjectName}}}
	})
	b := ctrl.NewControllerManagedBy(mgr).
		Named("etcdspoke").
		For(&etcdfedv1.EtcdSpoke{}, builder.WithPredicates(predicate.NewPredicateFuncs(func(o client.Object) bool {
			return o.GetName() == etcdfedv1.SpokeObjectName
		}))).
		Watches(&corev1.Node{}, toSpoke, builder.WithPredicates(nodeChanged())).
		WatchesRawSource(source.Channel(r.gossipEvents(mgr), toSpoke))
	if r.GossipSecret != "" {
		b = b.Watches(&corev1.Secret{}, toSpoke, builder.WithPredicates(predicate.NewPredicateFuncs(func(o client.Object) bool {
			return o.GetName() == r.GossipSecret
		})))
	}
	for _, o := range opts {
		o(b)
	}
	// Kick the first reconcile even when no EtcdSpoke exists yet.
	if err := mgr.Add(manager.RunnableFunc(func(ctx context.Context) error {
		r.kick <- event.GenericEvent{Object: r.placeholder()}
		return nil
	})); err != nil {
		return err
	}
	return b.Complete(r)
}

func (r *Reconciler) placeholder() *etcdfedv1.EtcdSpoke {
	return &etcdfedv1.EtcdSpoke{ObjectMeta: metav1.ObjectMeta{Namespace: r.Namespace, Name: etcdfedv1.SpokeObjectName}}
}

// gossipEvents forwards the agent's change signals (and the first kick) as
// generic events.
func (r *Reconciler) gossipEvents(mgr ctrl.Manager) <-chan event.GenericEvent {
	out := make(chan event.GenericEvent, 1)
	r.kick = out
	if r.Gossip == nil {
		return out
	}
	_ = mgr.Add(manager.RunnableFunc(func(ctx context.Context) error {
		for {
			select {
			case <-ctx.Done():
				r.Gossip.Stop()
				return nil
			case <-r.Gossip.Changes():
				select {
				case out <- event.GenericEvent{Object: r.placeholder()}:
				case <-ctx.Done():
				}
			}
		}
	}))
	return out
}

// nodeChanged passes a node's creation and deletion, and an update that
// moves it to another zone or changes whether it takes new pods.
func nodeChanged() predicate.Predicate {
	return predicate.Funcs{
		UpdateFunc: func(e event.UpdateEvent) bool {
			o, ok1 := e.ObjectOld.(*corev1.Node)
			n, ok2 := e.ObjectNew.(*corev1.Node)
			if !ok1 || !ok2 {
				return true
			}
			return o.Labels[corev1.LabelTopologyZone] != n.Labels[corev1.LabelTopologyZone] || takesPods(o) != takesPods(n)
		},
	}
}

// takesPods: the node is Ready and not cordoned, so the scheduler may bind
// new pods to it.
func takesPods(n *corev1.Node) bool {
	if n.Spec.Unschedulable {
		return false
	}
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// zoneStates returns the zones of nodes (sorted, from the zone label; none
// when no node has one) and the zones in which no node takes new pods,
// the empty string standing for a cluster without zones.
func zoneStates(nodes []corev1.Node) (zones, unschedulable []string) {
	open := map[string]bool{}
	for i := range nodes {
		z := nodes[i].Labels[corev1.LabelTopologyZone]
		if z != "" {
			zones = append(zones, z)
		}
		open[z] = open[z] || takesPods(&nodes[i])
	}
	slices.Sort(zones)
	zones = slices.Compact(zones)
	for z, ok := range open {
		// A node without a zone label in a cluster with zones belongs to
		// none of them.
		if !ok && (z != "" || len(zones) == 0) {
			unschedulable = append(unschedulable, z)
		}
	}
	slices.Sort(unschedulable)
	return zones, unschedulable
}

// Reconcile keeps the EtcdSpoke.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	if req.Name != etcdfedv1.SpokeObjectName || req.Namespace != r.Namespace {
		return ctrl.Result{}, nil
	}
	s := &etcdfedv1.EtcdSpoke{}
	if err := r.Client.Get(ctx, req.NamespacedName, s); err != nil {
		if !apierrors.IsNotFound(err) {
			return ctrl.Result{}, fmt.Errorf("get EtcdSpoke: %w", err)
		}
		s = r.placeholder()
		s.Labels = map[string]string{etcdfedv1.LabelManagedBy: etcdfedv1.ManagedByValue}
		ctrl.LoggerFrom(ctx).Info("Creating EtcdSpoke")
		if err := r.Client.Create(ctx, s, client.FieldOwner(FieldOwner)); err != nil && !apierrors.IsAlreadyExists(err) {
			return ctrl.Result{}, fmt.Errorf("create EtcdSpoke: %w", err)
		}
		// The create event brings the object back through the cache.
		return ctrl.Result{}, nil
	}
	before := s.DeepCopy()
	st := &s.Status
	st.Version = r.Version
	st.DNSAddresses = r.DNSAddresses
	zones, unschedulable, nodes, err := r.zones(ctx)
	if err != nil {
		return ctrl.Result{}, err
	}
	st.Zones, st.UnschedulableZones = zones, unschedulable

	status, reason, msg, gossipErr := r.gossip(ctx, s)
	if nodes == 0 {
		// The hub places members only where the spoke has seen nodes: a
		// zone list read before the nodes registered would be wrong.
		status, reason, msg = metav1.ConditionFalse, ReasonNoNodes, "the cluster has no nodes yet; the hub places no member here until it has"
	}
	setReady(s, status, reason, msg)
	st.GossipAddress, st.GossipView, st.RoundTrips, st.GossipKeys = "", nil, nil, nil
	var joined, started time.Time
	var abstains map[string]string
	if r.Gossip != nil {
		joined, started = r.Gossip.Joined()
		if _, running := r.Gossip.Running(); running {
			// A gossip that does not run reports no view: before, it
			// reported every expected peer dead, a witness's vote that
			// nothing had seen.
			st.GossipAddress = r.Gossip.Address()
			// Names it cannot check are left out: it abstains on them.
			st.GossipView = r.Gossip.View(r.expectedPeers(s))
			abstains = r.Gossip.Unverifiable(r.expectedPeers(s))
			// Published only when they moved significantly (rule 15).
			st.RoundTrips = r.Gossip.RoundTrips()
			// What is installed, for the hub's key rotation.
			encrypts, accepts := r.Gossip.Keys()
			identity, identities := r.Gossip.IdentityInfo()
			st.GossipKeys = &etcdfedv1.GossipKeysStatus{Encrypts: encrypts, Accepts: accepts, Identity: identity, Identities: int32(identities)}
		}
	}
	ghStatus, ghReason, ghMsg := gossipHealth(r.Gossip != nil, reason, msg, st.GossipView, abstains, joined, started)
	meta.SetStatusCondition(&s.Status.Conditions, metav1.Condition{
		Type: etcdfedv1.ConditionGossipHealthy, Status: ghStatus, Reason: ghReason, Message: ghMsg, ObservedGeneration: s.Generation,
	})
	if err := r.patchStatus(ctx, s, before); err != nil {
		return ctrl.Result{}, err
	}
	return ctrl.Result{}, gossipErr
}

// gossipHealth is the GossipHealthy condition: whether this spoke's view
// may witness another cluster's death for the hub. A gossip that does not
// run, has never reached a peer, or sees no peer alive abstains: from the
// inside, its own cut and every peer's death look the same. enabled is
// whether the spoke runs gossip at all; readyReason and readyMsg are the
// Ready condition's (why gossip does not run); view is the view reported
// (nil when gossip does not run); unverifiable are the peers left out of
// it because their names cannot be checked, with why (the spoke abstains
// on each; spoke/gossip, identity.go); joined is when this run first saw a
// peer alive (zero: never), started when it started (zero: not running).
// Pure.
func gossipHealth(enabled bool, readyReason, readyMsg string, view []etcdfedv1.GossipPeerStatus, unverifiable map[string]string, joined, started time.Time) (metav1.ConditionStatus, string, string) {
	const abstains = "; this spoke abstains as a witness of other clusters' failure"
	var on []string
	for _, n := range slices.Sorted(maps.Keys(unverifiable)) {
		on = append(on, n+" ("+unverifiable[n]+")")
	}
	abstainsOn := ""
	if len(on) > 0 {
		abstainsOn = "; abstains on " + strings.Join(on, ", ") + ": neither alive nor dead to the hub"
	}
	switch {
	case !enabled:
		return metav1.ConditionFalse, etcdfedv1.ReasonGossipNotRunning, "gossip is disabled" + abstains
	case started.IsZero() || view == nil:
		why := "gossip does not run"
		switch readyReason {
		case ReasonGossipKeyMissing, ReasonGossipKeyInvalid, ReasonGossipError, ReasonWaitingForClusterName:
			why = readyMsg
		}
		return metav1.ConditionFalse, etcdfedv1.ReasonGossipNotRunning, why + abstains
	}
	var alive, names []string
	for _, p := range view {
		names = append(names, p.Cluster)
		if p.Alive {
			alive = append(alive, p.Cluster)
		}
	}
	switch {
	case len(alive) > 0:
		return metav1.ConditionTrue, etcdfedv1.ReasonGossipHealthy, fmt.Sprintf("gossip sees %d of %d peers alive (%s)%s", len(alive), len(names), strings.Join(alive, ", "), abstainsOn)
	case joined.IsZero():
		return metav1.ConditionFalse, etcdfedv1.ReasonGossipNeverJoined, fmt.Sprintf("gossip runs since %s but has never reached a peer (%s): its seeds are unreachable, firewalled, or use another key%s%s",
			started.UTC().Format(time.RFC3339), orNone(names), abstainsOn, abstains)
	}
	return metav1.ConditionFalse, etcdfedv1.ReasonGossipNoPeerAlive, fmt.Sprintf("gossip sees no peer alive (%s): it cannot tell its own cut from every peer's death%s%s", orNone(names), abstainsOn, abstains)
}

func orNone(names []string) string {
	if len(names) == 0 {
		return "no peer named"
	}
	return strings.Join(names, ", ") + " all dead to it"
}

// expectedPeers are the peer clusters named in spec.gossipPeers.
func (r *Reconciler) expectedPeers(s *etcdfedv1.EtcdSpoke) []string {
	self := r.nodeName(s)
	var out []string
	for _, p := range s.Spec.GossipPeers {
		if p.Cluster != self {
			out = append(out, p.Cluster)
		}
	}
	return out
}

func (r *Reconciler) nodeName(s *etcdfedv1.EtcdSpoke) string {
	if r.ClusterName != "" {
		return r.ClusterName
	}
	return s.Spec.ClusterName
}

// gossip starts or reconfigures the agent from the EtcdSpoke and the key.
func (r *Reconciler) gossip(ctx context.Context, s *etcdfedv1.EtcdSpoke) (metav1.ConditionStatus, string, string, error) {
	if r.Gossip == nil {
		return metav1.ConditionTrue, ReasonReady, "gossip is disabled", nil
	}
	name := r.nodeName(s)
	if name == "" {
		return metav1.ConditionFalse, ReasonWaitingForClusterName, "gossip waits for a node name: --cluster-name or spec.clusterName (written by the hub)", nil
	}
	var key []byte
	var accept [][]byte
	sec := &corev1.Secret{}
	if r.GossipSecret != "" {
		if err := r.Client.Get(ctx, types.NamespacedName{Namespace: r.Namespace, Name: r.GossipSecret}, sec); err != nil {
			if apierrors.IsNotFound(err) {
				return metav1.ConditionFalse, ReasonGossipKeyMissing, fmt.Sprintf("gossip Secret %s does not exist; gossip does not start", r.GossipSecret), nil
			}
			return metav1.ConditionFalse, ReasonGossipError, err.Error(), fmt.Errorf("get gossip Secret: %w", err)
		}
		key = sec.Data[GossipKeyField]
		if len(key) == 0 {
			return metav1.ConditionFalse, ReasonGossipKeyMissing, fmt.Sprintf("gossip Secret %s has no %q", r.GossipSecret, GossipKeyField), nil
		}
		if a := sec.Data[GossipAcceptField]; len(a) > 0 {
			if len(a)%len(key) != 0 {
				return metav1.ConditionFalse, ReasonGossipKeyInvalid, fmt.Sprintf("gossip Secret %s: %q is %d bytes, not a whole number of %d-byte keys", r.GossipSecret, GossipAcceptField, len(a), len(key)), nil
			}
			for len(a) > 0 {
				accept, a = append(accept, a[:len(key)]), a[len(key):]
			}
		}
	}
	var id *gossip.Identity
	if seed := sec.Data[GossipIdentityField]; len(seed) > 0 {
		k, err := gossip.PrivateKey(seed)
		if err != nil {
			return metav1.ConditionFalse, ReasonGossipKeyInvalid, fmt.Sprintf("gossip Secret %s: %q: %v", r.GossipSecret, GossipIdentityField, err), nil
		}
		peers, err := gossip.ParsePeers(sec.Data[GossipPeersField])
		if err != nil {
			if fp, _ := r.Gossip.IdentityInfo(); fp == "" {
				// Speak as this cluster, but with no table to check the
				// others against: abstain on every name rather than go
				// on counting names unchecked.
				r.Gossip.SetIdentity(&gossip.Identity{Key: k})
			}
			return metav1.ConditionFalse, ReasonGossipKeyInvalid, fmt.Sprintf("gossip Secret %s: %q: %v", r.GossipSecret, GossipPeersField, err), nil
		}
		id = &gossip.Identity{Key: k, Peers: peers}
	}
	r.Gossip.SetIdentity(id)
	seeds := slices.Clone(r.GossipSeeds)
	for _, p := range s.Spec.GossipPeers {
		if p.Cluster != name {
			seeds = append(seeds, p.Address)
		}
	}
	if _, running := r.Gossip.Running(); !running {
		if err := r.seedRoundTrips(ctx); err != nil {
			return metav1.ConditionFalse, ReasonGossipError, err.Error(), err
		}
	}
	if err := r.Gossip.Configure(name, key, seeds, accept...); err != nil {
		if errors.Is(err, gossip.ErrBadKey) {
			return metav1.ConditionFalse, ReasonGossipKeyInvalid, fmt.Sprintf("gossip Secret %s: %v", r.GossipSecret, err), nil
		}
		return metav1.ConditionFalse, ReasonGossipError, err.Error(), err
	}
	enc := "UNENCRYPTED"
	names := "names unchecked: no identity from the hub"
	if fp, n := r.Gossip.IdentityInfo(); fp != "" {
		names = fmt.Sprintf("identity %s, checking %d", fp, n)
	}
	if len(key) > 0 {
		// Fingerprints, so that a key rotation can be followed spoke by
		// spoke (docs/certificates.md, "Gossip encryption").
		encrypts, accepts := r.Gossip.Keys()
		enc = "encrypted with key " + encrypts
		if len(accepts) > 0 {
			enc += ", accepting " + strings.Join(accepts, ", ")
		}
	}
	return metav1.ConditionTrue, ReasonReady, fmt.Sprintf("gossip runs as %s at %s (%s; %s)", name, r.Gossip.Address(), enc, names), nil
}

// seedRoundTrips gives gossip, before it starts, the round trips this
// spoke published before (a restart): read from the apiserver, since the
// status this process is about to write (no round trips until its own
// probes are in) must not be what it carries on from. A restarted spoke
// then keeps them until its probes, warmed up, confirm a move
// (spoke/gossip, roundtrips.go), instead of publishing a first window
// taken while the machine is loaded by the restart.
func (r *Reconciler) seedRoundTrips(ctx context.Context) error {
	reader := r.APIReader
	if reader == nil {
		reader = r.Client
	}
	s := &etcdfedv1.EtcdSpoke{}
	if err := reader.Get(ctx, types.NamespacedName{Namespace: r.Namespace, Name: etcdfedv1.SpokeObjectName}, s); err != nil {
		if apierrors.IsNotFound(err) {
			r.Gossip.Seed(nil)
			return nil
		}
		return fmt.Errorf("get EtcdSpoke for its round trips: %w", err)
	}
	r.Gossip.Seed(s.Status.RoundTrips)
	return nil
}

// zones returns the distinct zone labels of the cluster's nodes, sorted,
// the zones where no node takes new pods (zoneStates), and the number of
// nodes.
func (r *Reconciler) zones(ctx context.Context) (zones, unschedulable []string, nodes int, err error) {
	list := &corev1.NodeList{}
	if err := r.Client.List(ctx, list); err != nil {
		return nil, nil, 0, fmt.Errorf("list nodes: %w", err)
	}
	zones, unschedulable = zoneStates(list.Items)
	return zones, unschedulable, len(list.Items), nil
}

func setReady(s *etcdfedv1.EtcdSpoke, status metav1.ConditionStatus, reason, msg string) {
	meta.SetStatusCondition(&s.Status.Conditions, metav1.Condition{
		Type: etcdfedv1.ConditionReady, Status: status, Reason: reason, Message: msg, ObservedGeneration: s.Generation,
	})
}

// patchStatus writes the status when something other than observedAt
// changed.
func (r *Reconciler) patchStatus(ctx context.Context, s, before *etcdfedv1.EtcdSpoke) error {
	if equality.Semantic.DeepEqual(before.Status, s.Status) {
		return nil
	}
	now := metav1.NewTime(time.Now())
	s.Status.ObservedAt = &now
	if err := r.Client.Status().Patch(ctx, s, client.MergeFrom(before), client.FieldOwner(FieldOwner)); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("patch EtcdSpoke status: %w", err)
	}
	return nil
}
