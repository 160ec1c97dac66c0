package install

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/etcdfed/etcdfed/hub/registration"
	"github.com/etcdfed/etcdfed/hub/registry"
)

// DefaultTokenLifetime is the lifetime of the hub's token in a member
// cluster; the hub renews it after a third.
const DefaultTokenLifetime = 24 * time.Hour

// DefaultCredentialLifetime is how long the hub's credential chain in a
// member cluster lasts: renewals never take the hub's token past it, and
// the spoke ends every token of the chain then (api/v1alpha1
// HubCredentialAnchor). `cluster join` again starts a new chain.
const DefaultCredentialLifetime = 90 * 24 * time.Hour

// AnnotationTokenLifetime records on a registration Secret the lifetime
// Join asked for, so that a second Join with the same flags keeps the
// token and one with another lifetime replaces it.
const AnnotationTokenLifetime = "etcdfed.dev/token-lifetime"

// AnnotationZoneSetBy marks a node whose zone label Join set (the value is
// the member cluster's name), so that Unjoin removes only those.
const AnnotationZoneSetBy = "etcdfed.dev/zone-set-by-join"

// JoinOptions configure Join.
type JoinOptions struct {
	MemberOptions
	// Hub and Member are admin REST configs of the two clusters.
	Hub, Member *rest.Config
	// MemberServer is the member apiserver's URL as the hub reaches it;
	// Member's host when empty.
	MemberServer string
	// Labels go on the registration (EtcdCluster
	// spec.topology.clusterSelector selects by them).
	Labels map[string]string
	// ZoneLabel, when set, labels every node of the member cluster that
	// has no zone with topology.kubernetes.io/zone=ZoneLabel (a cluster
	// that is one zone); a node in another zone is an error.
	ZoneLabel string
	// TokenLifetime of the hub's token; DefaultTokenLifetime when zero.
	TokenLifetime time.Duration
	// CredentialLifetime is how long the hub's renewals may go on (the
	// chain's end); DefaultCredentialLifetime when zero. A chain with
	// less than two thirds of it left is replaced by a new one, which
	// ends every token of the old one.
	CredentialLifetime time.Duration
	// TakeOver lets this hub cluster join a member cluster another hub
	// cluster joined (a take-over after the hub cluster was lost,
	// docs/disaster-recovery.md): its credential chain is ended (every
	// token of the other hub stops authenticating) and a new one started.
	// Without it such a join is refused before anything is written.
	TakeOver bool
	// DryRun prints every object Join would write, and writes nothing.
	DryRun io.Writer
	// Wait until the hub reports the cluster engaged and its spoke alive
	// (and the spoke is rolled out), within Timeout.
	Wait    bool
	Timeout time.Duration
	// Progress receives one line per step.
	Progress func(string)

	// hubID is the hub cluster's identity (its kube-system namespace's
	// UID), read by preflight.
	hubID string
}

var nameRE = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$`)

func (o *JoinOptions) validate() error {
	if !nameRE.MatchString(o.Name) {
		return fmt.Errorf("cluster name %q: want a DNS label (lower case letters, digits and '-', at most 63)", o.Name)
	}
	if o.Hub == nil || o.Member == nil {
		return errors.New("both the hub's and the member cluster's kubeconfig are needed")
	}
	if o.TokenLifetime == 0 {
		o.TokenLifetime = DefaultTokenLifetime
	}
	if o.TokenLifetime < registration.MinLifetime {
		return fmt.Errorf("--token-lifetime %s: the TokenRequest API grants at least %s", o.TokenLifetime, registration.MinLifetime)
	}
	if o.CredentialLifetime == 0 {
		o.CredentialLifetime = DefaultCredentialLifetime
	}
	if o.CredentialLifetime < o.TokenLifetime {
		return fmt.Errorf("--credential-lifetime %s: at least the token's lifetime (%s)", o.CredentialLifetime, o.TokenLifetime)
	}
	if o.Timeout == 0 {
		o.Timeout = 5 * time.Minute
	}
	if o.Progress == nil {
		o.Progress = func(string) {}
	}
	if o.MemberServer == "" {
		o.MemberServer = o.Member.Host
	}
	u, err := url.Parse(o.MemberServer)
	if err != nil || u.Scheme != "https" || u.Host == "" {
		return fmt.Errorf("member apiserver %q: the hub needs an https:// URL (--member-server)", o.MemberServer)
	}
	if o.Member.Insecure {
		return errors.New("the member kubeconfig skips TLS verification (insecure-skip-tls-verify): the hub will not register a cluster it cannot verify; give the cluster's CA")
	}
	for k, v := range o.Labels {
		if k == registry.KubeconfigSecretLabel || k == LabelJoinedAs {
			return fmt.Errorf("label %s=%s: that label is etcdfed's own", k, v)
		}
	}
	if _, err := RenderMember(o.MemberOptions); err != nil {
		return err
	}
	return nil
}

// Join installs or upgrades etcdfed in a member cluster and registers it
// with the hub (see the package doc). It is idempotent: a second run with
// the same options writes nothing.
func Join(ctx context.Context, o JoinOptions) error {
	if err := o.validate(); err != nil {
		return err
	}
	hub, mem, err := hubAndMember(o.Hub, o.Member, o.Name)
	if err != nil {
		return err
	}
	memCS, err := kubernetes.NewForConfig(o.Member)
	if err != nil {
		return err
	}
	ca, err := caData(o.Member)
	if err != nil {
		return err
	}
	if len(ca) == 0 {
		return fmt.Errorf("the member kubeconfig names no CA for %s: the hub needs one to verify the apiserver", o.Member.Host)
	}
	existing, err := o.preflight(ctx, hub, mem)
	if err != nil {
		return err
	}
	if err := o.installMember(ctx, hub, mem); err != nil {
		return err
	}
	if err := o.register(ctx, hub, memCS, existing, ca); err != nil {
		return err
	}
	if o.DryRun != nil || !o.Wait {
		return nil
	}
	return o.wait(ctx, hub, mem)
}

// preflight checks what must hold before join writes anything but zone
// labels: the hub is installed and opens sealed tokens, the member
// cluster's apiserver is not registered under another name, it answers
// no other hub cluster (or TakeOver says to take it over), and its
// nodes' zones are usable (nodes without one labelled with
// --zone-label). It returns the existing registration of o.Name (nil
// when none).
func (o *JoinOptions) preflight(ctx context.Context, hub, mem client.Client) (*corev1.Secret, error) {
	if err := hub.Get(ctx, client.ObjectKey{Name: Namespace}, &corev1.Namespace{}); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, fmt.Errorf("the hub cluster has no namespace %s: run `etcdfed hub install` first", Namespace)
		}
		return nil, fmt.Errorf("hub cluster (apiserver %s): %w", o.Hub.Host, err)
	}
	if err := hubOpensSealedTokens(ctx, hub); err != nil {
		return nil, err
	}
	existing, others, err := registrations(ctx, hub, o.Name)
	if err != nil {
		return nil, err
	}
	for _, other := range others {
		if cfg, err := registry.RESTConfig(other); err == nil && cfg.Host == o.MemberServer {
			return nil, fmt.Errorf("%s is already registered as %q: unjoin that name first, or join under it", o.MemberServer, other.Name)
		}
	}
	if err := o.checkChain(ctx, hub, mem, existing); err != nil {
		return nil, err
	}
	zones, err := o.checkZones(ctx, mem, o.DryRun != nil)
	if err != nil {
		return nil, err
	}
	o.Progress(fmt.Sprintf("%s: %s, zones %s", o.Name, o.Member.Host, zones))
	return existing, nil
}

// installMember applies etcdfed's objects in the member cluster (CRDs,
// the ring namespace, the hub's ServiceAccount and RBAC, the gossip key,
// the spoke unless external) and prunes what an earlier join applied and
// this one no longer renders.
func (o *JoinOptions) installMember(ctx context.Context, hub, mem client.Client) error {
	dry := o.DryRun != nil
	gossip, err := o.gossipSecret(ctx, hub)
	if err != nil {
		return err
	}
	ma := &applier{c: mem, cluster: o.Name, dryRun: o.DryRun}
	objs, st, err := o.applyMemberObjects(ctx, ma, mem, gossip)
	if err != nil {
		return err
	}
	pruned, err := ma.prune(ctx, labels.SelectorFromSet(labels.Set{LabelJoinedAs: o.Name}), objs)
	if err != nil {
		return err
	}
	if legacy, err := removeLegacyToken(ctx, mem, dry); err != nil {
		return fmt.Errorf("%s: %w", o.Name, err)
	} else if legacy != "" {
		pruned = append(pruned, legacy)
	}
	what := "CRDs, ring namespace, the hub's ServiceAccount and RBAC, the gossip key"
	if !o.External {
		what += ", the spoke"
	}
	msg := fmt.Sprintf("%s: %s (%s)", o.Name, what, st)
	if len(pruned) > 0 {
		msg += "; removed " + strings.Join(pruned, ", ")
	}
	if !dry {
		o.Progress(msg)
	}
	return nil
}

// gossipSecret is the member cluster's copy of the ring's gossip key, read
// from the hub (redacted in a dry run).
func (o *JoinOptions) gossipSecret(ctx context.Context, hub client.Client) (*unstructured.Unstructured, error) {
	dry := o.DryRun != nil
	key, err := gossipKey(ctx, hub, map[string]string{LabelHubInstall: "true"}, dry)
	if err != nil {
		return nil, err
	}
	gossip, err := toUnstructured(&corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: GossipSecret, Namespace: Namespace, Labels: map[string]string{LabelJoinedAs: o.Name}},
		Type:       corev1.SecretTypeOpaque,
		Data:       map[string][]byte{GossipKeyKey: key},
	})
	if err != nil {
		return nil, err
	}
	if dry {
		redact(gossip, "<the ring's gossip key, from the hub's Secret "+Namespace+"/"+GossipSecret+">")
	}
	return gossip, nil
}

// applyMemberObjects renders and applies the member cluster's objects and
// gossip. When the spoke advertises its Services' LoadBalancer addresses,
// not known yet, everything but the spoke goes first, then the spoke
// rendered with the addresses the Services got. It returns the objects
// applied last (the set to prune against) and what applying did.
func (o *JoinOptions) applyMemberObjects(ctx context.Context, ma *applier, mem client.Client, gossip *unstructured.Unstructured) ([]*unstructured.Unstructured, applied, error) {
	dry := o.DryRun != nil
	mo := o.MemberOptions
	lbPending := !mo.External && (mo.Expose == "" || mo.Expose == ExposeLoadBalancer) && mo.Advertise == ""
	if lbPending && dry {
		mo.Advertise, lbPending = "<the Service's LoadBalancer address>", false
		mo.GossipAdvertise = "<the gossip Service's LoadBalancer address>"
	}
	objs, err := RenderMember(mo)
	if err != nil {
		return nil, applied{}, err
	}
	var first applied
	if lbPending {
		// First everything but the spoke, whose advertised address is the
		// LoadBalancer's, known once the Service has one.
		var some []*unstructured.Unstructured
		for _, obj := range objs {
			if k := obj.GetKind(); k != "Deployment" && k != "ConfigMap" {
				some = append(some, obj)
			}
		}
		if first, err = o.applyMember(ctx, ma, mem, append(some, gossip)); err != nil {
			return nil, applied{}, err
		}
		if mo.Advertise, err = waitLoadBalancer(ctx, mem, SpokeService, "DNS", o.Timeout, o.Progress); err != nil {
			return nil, applied{}, fmt.Errorf("%s: %w", o.Name, err)
		}
		if mo.GossipAdvertise, err = waitLoadBalancer(ctx, mem, SpokeGossipService, "gossip", o.Timeout, o.Progress); err != nil {
			return nil, applied{}, fmt.Errorf("%s: %w", o.Name, err)
		}
		if objs, err = RenderMember(mo); err != nil {
			return nil, applied{}, err
		}
	}
	objs = append(objs, gossip)
	st, err := o.applyMember(ctx, ma, mem, objs)
	if err != nil {
		return nil, applied{}, err
	}
	return objs, first.then(st), nil
}

// applyMember applies objs in the member cluster and waits for its CRDs.
func (o *JoinOptions) applyMember(ctx context.Context, ma *applier, mem client.Client, objs []*unstructured.Unstructured) (applied, error) {
	st, err := ma.apply(ctx, objs)
	if err != nil {
		return st, err
	}
	if ma.dryRun != nil {
		return st, nil
	}
	return st, waitCRDs(ctx, mem, objs)
}

// checkZones reports the member cluster's zones, and with ZoneLabel labels
// the nodes that have none.
func (o *JoinOptions) checkZones(ctx context.Context, mem client.Client, dry bool) (string, error) {
	var nodes corev1.NodeList
	if err := mem.List(ctx, &nodes); err != nil {
		return "", fmt.Errorf("member cluster %s (apiserver %s): %w", o.Name, o.Member.Host, err)
	}
	count := map[string]int{}
	var unlabelled []*corev1.Node
	for i := range nodes.Items {
		n := &nodes.Items[i]
		z := n.Labels[corev1.LabelTopologyZone]
		switch {
		case z == "":
			unlabelled = append(unlabelled, n)
		case o.ZoneLabel != "" && z != o.ZoneLabel && n.Annotations[AnnotationZoneSetBy] != o.Name:
			return "", fmt.Errorf("--zone-label %s: node %s is in zone %s already; --zone-label is for a cluster that is one zone, whose nodes carry none", o.ZoneLabel, n.Name, z)
		}
		count[z]++
	}
	if o.ZoneLabel != "" {
		for _, n := range unlabelled {
			if dry {
				fmt.Fprintf(o.DryRun, "---\n# %s: Node %s gets label %s=%s\n", o.Name, n.Name, corev1.LabelTopologyZone, o.ZoneLabel)
				continue
			}
			patched := n.DeepCopy()
			if patched.Annotations == nil {
				patched.Annotations = map[string]string{}
			}
			if patched.Labels == nil {
				patched.Labels = map[string]string{}
			}
			patched.Labels[corev1.LabelTopologyZone] = o.ZoneLabel
			patched.Annotations[AnnotationZoneSetBy] = o.Name
			if err := mem.Patch(ctx, patched, client.MergeFrom(n)); err != nil {
				return "", fmt.Errorf("label node %s with zone %s: %w", n.Name, o.ZoneLabel, err)
			}
		}
		if len(unlabelled) > 0 {
			count[o.ZoneLabel] += count[""]
			delete(count, "")
		}
	}
	if len(nodes.Items) == 0 {
		return "none (no nodes yet)", nil
	}
	var parts []string
	for _, z := range slices.Sorted(maps.Keys(count)) {
		name := z
		if z == "" {
			name = "(no zone label)"
		}
		parts = append(parts, fmt.Sprintf("%s (%d nodes)", name, count[z]))
	}
	return strings.Join(parts, ", "), nil
}
