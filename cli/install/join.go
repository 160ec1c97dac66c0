package install

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdfedv1 "github.com/etcdfed/etcdfed/api/v1alpha1"

	hubmemberrbac "github.com/etcdfed/etcdfed/config/rbac/hub-member"
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
	// DryRun prints every object Join would write, and writes nothing.
	DryRun io.Writer
	// Wait until the hub reports the cluster engaged and its spoke alive
	// (and the spoke is rolled out), within Timeout.
	Wait    bool
	Timeout time.Duration
	// Progress receives one line per step.
	Progress func(string)
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
	dry := o.DryRun != nil

	// Preflight: nothing is written until these pass.
	if err := hub.Get(ctx, client.ObjectKey{Name: Namespace}, &corev1.Namespace{}); err != nil {
		if apierrors.IsNotFound(err) {
			return fmt.Errorf("the hub cluster has no namespace %s: run `etcdfed hub install` first", Namespace)
		}
		return fmt.Errorf("hub cluster (apiserver %s): %w", o.Hub.Host, err)
	}
	existing, others, err := registrations(ctx, hub, o.Name)
	if err != nil {
		return err
	}
	for _, other := range others {
		if cfg, err := registry.RESTConfig(other); err == nil && cfg.Host == o.MemberServer {
			return fmt.Errorf("%s is already registered as %q: unjoin that name first, or join under it", o.MemberServer, other.Name)
		}
	}
	zones, err := o.checkZones(ctx, mem, dry)
	if err != nil {
		return err
	}
	o.Progress(fmt.Sprintf("%s: %s, zones %s", o.Name, o.Member.Host, zones))

	// The member cluster.
	ma := &applier{c: mem, cluster: o.Name, dryRun: o.DryRun}
	sel := labels.SelectorFromSet(labels.Set{LabelJoinedAs: o.Name})
	key, err := gossipKey(ctx, hub, map[string]string{LabelHubInstall: "true"}, dry)
	if err != nil {
		return err
	}
	gossip, err := toUnstructured(&corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: GossipSecret, Namespace: Namespace, Labels: map[string]string{LabelJoinedAs: o.Name}},
		Type:       corev1.SecretTypeOpaque,
		Data:       map[string][]byte{GossipKeyKey: key},
	})
	if err != nil {
		return err
	}
	if dry {
		redact(gossip, "<the ring's gossip key, from the hub's Secret "+Namespace+"/"+GossipSecret+">")
	}
	mo := o.MemberOptions
	lbPending := !mo.External && (mo.Expose == "" || mo.Expose == ExposeLoadBalancer) && mo.Advertise == ""
	if lbPending && dry {
		mo.Advertise, lbPending = "<the Service's LoadBalancer address>", false
		mo.GossipAdvertise = "<the gossip Service's LoadBalancer address>"
	}
	objs, err := RenderMember(mo)
	if err != nil {
		return err
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
			return err
		}
		if mo.Advertise, err = waitLoadBalancer(ctx, mem, SpokeService, "DNS", o.Timeout, o.Progress); err != nil {
			return fmt.Errorf("%s: %w", o.Name, err)
		}
		if mo.GossipAdvertise, err = waitLoadBalancer(ctx, mem, SpokeGossipService, "gossip", o.Timeout, o.Progress); err != nil {
			return fmt.Errorf("%s: %w", o.Name, err)
		}
		if objs, err = RenderMember(mo); err != nil {
			return err
		}
	}
	objs = append(objs, gossip)
	st, err := o.applyMember(ctx, ma, mem, objs)
	if err != nil {
		return err
	}
	st = first.then(st)
	pruned, err := ma.prune(ctx, sel, objs)
	if err != nil {
		return err
	}
	if legacy, err := removeLegacyToken(ctx, mem, dry); err != nil {
		return fmt.Errorf("%s: %w", o.Name, err)
	} else if legacy != "" {
		pruned = append(pruned, legacy)
	}
	what := "CRDs, ring namespace, the hub's ServiceAccount and RBAC, the gossip key"
	if !mo.External {
		what += ", the spoke"
	}
	msg := fmt.Sprintf("%s: %s (%s)", o.Name, what, st)
	if len(pruned) > 0 {
		msg += "; removed " + strings.Join(pruned, ", ")
	}
	if !dry {
		o.Progress(msg)
	}

	// The registration in the hub: a token bound to the chain's anchor.
	anchor, err := o.anchor(ctx, memCS, dry)
	if err != nil {
		return err
	}
	token, minted, err := o.credential(ctx, memCS, existing, anchor, dry)
	if err != nil {
		return err
	}
	reg, err := o.registration(ca, token, anchor)
	if err != nil {
		return err
	}
	if dry {
		redact(reg, "<a token of ServiceAccount "+Namespace+"/"+hubmemberrbac.ServiceAccountName+", minted by join>")
	}
	ha := &applier{c: hub, cluster: "hub", dryRun: o.DryRun}
	rst, err := ha.apply(ctx, []*unstructured.Unstructured{reg})
	if err != nil {
		return err
	}
	if dry {
		return nil
	}
	cred := "kept the hub's token"
	if minted {
		c, _ := registration.ParseToken(token)
		cred = fmt.Sprintf("minted a token for the hub (expires %s; the hub renews it until %s, when the spoke ends its credential: run join again before)",
			c.Expiry.UTC().Format(time.RFC3339), anchor.Annotations[etcdfedv1.AnnotationCredentialNotAfter])
	}
	o.Progress(fmt.Sprintf("%s: registered in the hub as Secret %s/%s (%s); %s", o.Name, Namespace, o.Name, rst, cred))
	if !o.Wait {
		return nil
	}
	return o.wait(ctx, hub, mem)
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

// registrations returns the registration Secret of name (nil when none)
// and every other one.
func registrations(ctx context.Context, hub client.Client, name string) (*corev1.Secret, []*corev1.Secret, error) {
	var list corev1.SecretList
	if err := hub.List(ctx, &list, client.InNamespace(Namespace), client.MatchingLabels{registry.KubeconfigSecretLabel: "true"}); err != nil {
		return nil, nil, fmt.Errorf("list the hub's registrations: %w", err)
	}
	var mine *corev1.Secret
	var others []*corev1.Secret
	for i := range list.Items {
		if list.Items[i].Name == name {
			mine = &list.Items[i]
		} else {
			others = append(others, &list.Items[i])
		}
	}
	if mine == nil {
		// A Secret of that name without the label is not a registration,
		// but Join must not overwrite it blindly either.
		sec := &corev1.Secret{}
		err := hub.Get(ctx, client.ObjectKey{Namespace: Namespace, Name: name}, sec)
		switch {
		case err == nil && sec.Labels[LabelJoinedAs] == "":
			return nil, nil, fmt.Errorf("the hub's namespace already holds a Secret %s that is not a registration: pick another name", name)
		case err != nil && !apierrors.IsNotFound(err):
			return nil, nil, fmt.Errorf("read Secret %s/%s in the hub: %w", Namespace, name, err)
		}
	}
	return mine, others, nil
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

// anchor returns the Secret the hub's tokens are bound to
// (etcdfedv1.HubCredentialAnchor): the current one while at least two
// thirds of CredentialLifetime are left on it, else a new one (the old
// one deleted first: every token bound to it stops authenticating, a
// stolen copy too).
func (o *JoinOptions) anchor(ctx context.Context, cs kubernetes.Interface, dry bool) (*corev1.Secret, error) {
	now := time.Now()
	cur, err := cs.CoreV1().Secrets(Namespace).Get(ctx, etcdfedv1.HubCredentialAnchor, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		cur = nil
	case err != nil:
		return nil, fmt.Errorf("%s: read Secret %s/%s: %w", o.Name, Namespace, etcdfedv1.HubCredentialAnchor, err)
	}
	if cur != nil {
		end, err := time.Parse(time.RFC3339, cur.Annotations[etcdfedv1.AnnotationCredentialNotAfter])
		if err == nil && end.Sub(now) >= o.CredentialLifetime*2/3 && end.Sub(now) <= o.CredentialLifetime {
			return cur, nil
		}
	}
	want := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: etcdfedv1.HubCredentialAnchor, Namespace: Namespace,
		Annotations: map[string]string{etcdfedv1.AnnotationCredentialNotAfter: now.Add(o.CredentialLifetime).UTC().Format(time.RFC3339)}},
		Type: corev1.SecretTypeOpaque}
	if dry {
		return want, nil
	}
	if cur != nil {
		if err := cs.CoreV1().Secrets(Namespace).Delete(ctx, cur.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &cur.UID}}); err != nil && !apierrors.IsNotFound(err) {
			return nil, fmt.Errorf("%s: end the hub's old credential chain (delete Secret %s/%s): %w", o.Name, Namespace, cur.Name, err)
		}
	}
	made, err := cs.CoreV1().Secrets(Namespace).Create(ctx, want, metav1.CreateOptions{})
	if err != nil {
		return nil, fmt.Errorf("%s: start the hub's credential chain (create Secret %s/%s): %w", o.Name, Namespace, want.Name, err)
	}
	return made, nil
}

// credential returns the hub's token: the registration's current one while
// it still authenticates as the hub's ServiceAccount, is bound to anchor,
// has at least a third of its life left and was asked for with this
// lifetime, else a new one bound to anchor.
func (o *JoinOptions) credential(ctx context.Context, cs kubernetes.Interface, existing, anchor *corev1.Secret, dry bool) (token string, minted bool, err error) {
	if existing != nil && existing.Annotations[AnnotationTokenLifetime] == o.TokenLifetime.String() {
		cur := string(existing.Data[registry.TokenKey])
		if c, err := registration.ParseToken(cur); err == nil && !registration.RenewDue(c, time.Now(), 2.0/3) &&
			c.SecretName == anchor.Name && c.SecretUID == string(anchor.UID) {
			if ok, err := authenticates(ctx, cs, cur); err != nil {
				return "", false, err
			} else if ok {
				return cur, false, nil
			}
		}
	}
	if dry {
		return "", true, nil
	}
	secs := int64(o.TokenLifetime.Seconds())
	tr, err := cs.CoreV1().ServiceAccounts(Namespace).CreateToken(ctx, hubmemberrbac.ServiceAccountName,
		&authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: &secs,
			BoundObjectRef: &authenticationv1.BoundObjectReference{Kind: "Secret", APIVersion: "v1", Name: anchor.Name, UID: anchor.UID}}}, metav1.CreateOptions{})
	if err != nil {
		return "", false, fmt.Errorf("%s: mint a token for the hub (TokenRequest): %w", o.Name, err)
	}
	return tr.Status.Token, true, nil
}

// authenticates asks the member cluster whether token is the hub's
// ServiceAccount's (TokenReview).
func authenticates(ctx context.Context, cs kubernetes.Interface, token string) (bool, error) {
	tr, err := cs.AuthenticationV1().TokenReviews().Create(ctx, &authenticationv1.TokenReview{Spec: authenticationv1.TokenReviewSpec{Token: token}}, metav1.CreateOptions{})
	if err != nil {
		return false, fmt.Errorf("check the hub's token (TokenReview): %w", err)
	}
	return tr.Status.Authenticated && tr.Status.User.Username == "system:serviceaccount:"+Namespace+":"+hubmemberrbac.ServiceAccountName, nil
}

// registration is the hub's registration Secret for the cluster: a
// kubeconfig naming the server and its CA (no credentials), and the token.
func (o *JoinOptions) registration(ca []byte, token string, anchor *corev1.Secret) (*unstructured.Unstructured, error) {
	kc := clientcmdapi.NewConfig()
	kc.Clusters[o.Name] = &clientcmdapi.Cluster{Server: o.MemberServer, CertificateAuthorityData: ca, TLSServerName: o.Member.ServerName}
	kc.AuthInfos[hubmemberrbac.ServiceAccountName] = &clientcmdapi.AuthInfo{}
	kc.Contexts[o.Name] = &clientcmdapi.Context{Cluster: o.Name, AuthInfo: hubmemberrbac.ServiceAccountName, Namespace: Namespace}
	kc.CurrentContext = o.Name
	data, err := clientcmd.Write(*kc)
	if err != nil {
		return nil, err
	}
	lbl := map[string]string{}
	maps.Copy(lbl, o.Labels)
	lbl[registry.KubeconfigSecretLabel] = "true"
	lbl[LabelJoinedAs] = o.Name
	return toUnstructured(&corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: o.Name, Namespace: Namespace, Labels: lbl, Annotations: map[string]string{
			registration.AnnotationCredential: registration.CredentialServiceAccountToken,
			AnnotationTokenLifetime:           o.TokenLifetime.String(),
			// The hub asks for no token past it (the spoke ends the
			// chain then whatever the hub asks).
			etcdfedv1.AnnotationCredentialNotAfter: anchor.Annotations[etcdfedv1.AnnotationCredentialNotAfter],
		}},
		Type: corev1.SecretTypeOpaque,
		Data: map[string][]byte{registry.KubeconfigSecretKey: data, registry.TokenKey: []byte(token)},
	})
}

// redact replaces every data value of a Secret with note (for printing).
func redact(sec *unstructured.Unstructured, note string) {
	data, _, _ := unstructured.NestedMap(sec.Object, "data")
	for k := range data {
		if k == registry.KubeconfigSecretKey {
			continue // a kubeconfig without credentials
		}
		data[k] = note
	}
	_ = unstructured.SetNestedMap(sec.Object, data, "data")
}

// waitLoadBalancer waits for the LoadBalancer address of one of the
// spoke's Services (name), where other clusters reach what (DNS, gossip).
func waitLoadBalancer(ctx context.Context, mem client.Client, name, what string, timeout time.Duration, progress func(string)) (string, error) {
	progress(fmt.Sprintf("waiting for the LoadBalancer address of the Service %s (other clusters reach the spoke's %s there)", name, what))
	var addr string
	err := poll(ctx, timeout, func(ctx context.Context) (bool, error) {
		svc := &corev1.Service{}
		if err := mem.Get(ctx, client.ObjectKey{Namespace: Namespace, Name: name}, svc); err != nil {
			return false, nil //nolint:nilerr // retried
		}
		for _, in := range svc.Status.LoadBalancer.Ingress {
			if in.IP != "" {
				addr = in.IP
			} else if in.Hostname != "" {
				addr = in.Hostname
			}
		}
		return addr != "", nil
	})
	if err != nil {
		return "", fmt.Errorf("the Service %s/%s got no LoadBalancer address within %s: the cluster may have no LoadBalancer; give --advertise-address (and --gossip-advertise-address), or --spoke-expose NodePort", Namespace, name, timeout)
	}
	if ip := net.ParseIP(addr); ip == nil && strings.Contains(addr, ":") {
		return "", fmt.Errorf("LoadBalancer address %q: not a host", addr)
	}
	return addr, nil
}

// wait waits until the spoke is rolled out and alive and the hub reports
// the cluster engaged and the spoke alive, with a line per step and one
// every 15 seconds while it waits.
func (o *JoinOptions) wait(ctx context.Context, hub, mem client.Client) error {
	ctx, cancel := context.WithTimeout(ctx, o.Timeout)
	defer cancel()
	type step struct {
		what string
		done func(ctx context.Context) (bool, string)
	}
	var firstRenew *time.Time
	steps := []step{}
	if !o.External {
		steps = append(steps, step{"the spoke rolled out", func(ctx context.Context) (bool, string) {
			return deploymentReady(ctx, mem, SpokeDeployment)
		}})
	}
	steps = append(steps,
		step{"the spoke renews its Lease", func(ctx context.Context) (bool, string) {
			t, err := spokeRenewTime(ctx, mem)
			if err != nil {
				return false, err.Error()
			}
			if firstRenew == nil {
				firstRenew = &t
				return false, "Lease " + Namespace + "/spoke renewed at " + t.UTC().Format(time.RFC3339) + "; waiting for the next renewal"
			}
			return !t.Equal(*firstRenew), ""
		}},
		step{"the hub engaged the cluster and sees its spoke", func(ctx context.Context) (bool, string) {
			sec := &corev1.Secret{}
			if err := hub.Get(ctx, client.ObjectKey{Namespace: Namespace, Name: o.Name}, sec); err != nil {
				return false, err.Error()
			}
			s, ok := registration.StatusOf(sec.Annotations)
			if !ok {
				return false, "the hub has not reported on this registration yet: is the hub running? (kubectl -n " + Namespace + " logs deploy/" + HubDeployment + ")"
			}
			why := fmt.Sprintf("the hub reports engaged=%v, spoke %s", s.Engaged, s.Spoke)
			if s.Problem != "" {
				why += ": " + s.Problem
			}
			return s.Engaged && s.Spoke == registration.SpokeAlive, why
		}},
	)
	start := time.Now()
	for _, s := range steps {
		last := time.Now()
		var why string
		err := poll(ctx, o.Timeout, func(ctx context.Context) (bool, error) {
			var done bool
			done, why = s.done(ctx)
			if !done && time.Since(last) >= 15*time.Second {
				last = time.Now()
				o.Progress(fmt.Sprintf("%s: still waiting for %s (%s)", o.Name, s.what, why))
			}
			return done, nil
		})
		if err != nil {
			return fmt.Errorf("%s: %s did not happen within %s (%s)", o.Name, s.what, o.Timeout, why)
		}
		o.Progress(fmt.Sprintf("%s: %s (%.1fs)", o.Name, s.what, time.Since(start).Seconds()))
	}
	return nil
}

func poll(ctx context.Context, timeout time.Duration, f func(ctx context.Context) (bool, error)) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	t := time.NewTicker(500 * time.Millisecond)
	defer t.Stop()
	for {
		done, err := f(ctx)
		if done || err != nil {
			return err
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		}
	}
}

// deploymentReady reports whether a Deployment in the ring namespace has
// rolled out its current template, and if not, what it waits for.
func deploymentReady(ctx context.Context, c client.Client, name string) (bool, string) {
	d := &appsv1.Deployment{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: Namespace, Name: name}, d); err != nil {
		return false, err.Error()
	}
	want := ptr.Deref(d.Spec.Replicas, 1)
	s := d.Status
	if s.ObservedGeneration >= d.Generation && s.UpdatedReplicas >= want && s.AvailableReplicas >= want && s.Replicas == s.UpdatedReplicas {
		return true, ""
	}
	return false, fmt.Sprintf("Deployment %s: %d of %d updated, %d available (kubectl -n %s describe deploy/%s)", name, s.UpdatedReplicas, want, s.AvailableReplicas, Namespace, name)
}

// spokeRenewTime reads the renewTime of the spoke's liveness Lease.
func spokeRenewTime(ctx context.Context, c client.Client) (time.Time, error) {
	l := &coordinationv1.Lease{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: Namespace, Name: etcdfedv1.SpokeObjectName}, l); err != nil {
		if apierrors.IsNotFound(err) {
			return time.Time{}, errors.New("the spoke has not created its Lease " + Namespace + "/" + etcdfedv1.SpokeObjectName + " yet")
		}
		return time.Time{}, err
	}
	if l.Spec.RenewTime == nil {
		return time.Time{}, errors.New("the spoke's Lease has no renewTime yet")
	}
	return l.Spec.RenewTime.Time, nil
}

// legacyTokenSecret is the long-lived token Secret of the hub's
// ServiceAccount that installs before `etcdfed cluster join` applied
// (config/rbac/hub-member's token_secret.yaml).
const legacyTokenSecret = "etcdfed-hub-token"

// removeLegacyToken deletes that Secret, which holds a token that never
// expires, when it is there; it returns what it removed.
func removeLegacyToken(ctx context.Context, c client.Client, dry bool) (string, error) {
	sec := &corev1.Secret{}
	err := c.Get(ctx, client.ObjectKey{Namespace: Namespace, Name: legacyTokenSecret}, sec)
	switch {
	case apierrors.IsNotFound(err):
		return "", nil
	case err != nil:
		return "", fmt.Errorf("read Secret %s/%s: %w", Namespace, legacyTokenSecret, err)
	case sec.Type != corev1.SecretTypeServiceAccountToken || sec.Annotations[corev1.ServiceAccountNameKey] != hubmemberrbac.ServiceAccountName:
		return "", nil
	case dry:
		return "", nil
	}
	if err := c.Delete(ctx, sec); client.IgnoreNotFound(err) != nil {
		return "", fmt.Errorf("delete the long-lived token Secret %s/%s: %w", Namespace, legacyTokenSecret, err)
	}
	return "Secret " + Namespace + "/" + legacyTokenSecret + " (a token that never expired, of an earlier install)", nil
}
