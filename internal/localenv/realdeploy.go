package localenv

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdfedv1 "github.com/etcdfed/etcdfed/api/v1alpha1"
	"github.com/etcdfed/etcdfed/internal/testenv"
)

// The in-cluster deployment of hub and spokes follows docs/kind.md's
// steps with the manifests users apply (config/), through kustomize
// overlays the environment writes under <state>/deploy: the image this
// environment built, and the addresses of this environment where the
// manifests hold placeholders.

// configDir is the repository's config/.
func (e *Env) configDir() (string, error) {
	dir := e.cfg.ConfigDir
	if dir == "" {
		dir = filepath.Join(filepath.Dir(e.bin), "config")
	}
	dir, err := filepath.Abs(dir)
	if err != nil {
		return "", err
	}
	for _, want := range []string{"hub/kustomization.yaml", "spoke/kustomization.yaml", "rbac/hub-member/kustomization.yaml", "samples/hub_access.yaml"} {
		if _, err := os.Stat(filepath.Join(dir, want)); err != nil {
			return "", fmt.Errorf("localenv: %s is not the repository's config/ (no %s): set Config.ConfigDir", dir, want)
		}
	}
	return dir, nil
}

// overlay writes <state>/deploy/<name>/kustomization.yaml on top of
// config/<base> with the given images and patches and returns its
// directory.
func (e *Env) overlay(configDir, name, base, body string) (string, error) {
	dir := filepath.Join(e.state.Dir, "deploy", name)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	rel, err := filepath.Rel(dir, filepath.Join(configDir, base))
	if err != nil {
		return "", err
	}
	k := fmt.Sprintf(`# Written by the local environment: config/%s as a user applies it,
# with this environment's image and addresses.
apiVersion: kustomize.config.k8s.io/v1beta1
kind: Kustomization
resources:
- %s
images:
- name: %s
  newTag: %s
%s`, base, rel, EtcdfedImageRepo, EtcdfedImageTag, body)
	return dir, os.WriteFile(filepath.Join(dir, "kustomization.yaml"), []byte(k), 0o644)
}

// spokeOverlay is config/spoke for member cluster c: the image present on
// the nodes, its load balancer address (the Service asks for it with
// spec.loadBalancerIP, as for a reserved address) advertised for DNS and
// gossip, the cluster's name, and gossip tuned for one machine (lan).
func (e *Env) spokeOverlay(configDir string, c ClusterState) (string, error) {
	image := EtcdfedImageRepo + ":" + EtcdfedImageTag
	args := []string{
		"--namespace=" + RingNamespace,
		"--cluster-name=" + c.Name,
		"--helper-image=" + image,
		"--dns-listen=0.0.0.0:5353",
		"--dns-advertise-address=" + c.DNS,
		"--gossip-bind=0.0.0.0:7946",
		"--gossip-advertise=" + c.Gossip,
		"--gossip-secret=etcdfed-gossip",
		"--gossip-profile=lan",
		"--health-probe-bind-address=:8081",
		"--metrics-bind-address=:8080",
	}
	var b strings.Builder
	b.WriteString(`patches:
- target: {group: apps, version: v1, kind: Deployment, name: etcdfed-spoke}
  patch: |-
    - op: add
      path: /spec/template/spec/containers/0/imagePullPolicy
      value: IfNotPresent
    - op: replace
      path: /spec/template/spec/containers/0/args
      value:
`)
	for _, a := range args {
		fmt.Fprintf(&b, "      - %q\n", a)
	}
	fmt.Fprintf(&b, `- target: {version: v1, kind: Service, name: etcdfed-spoke}
  patch: |-
    - op: add
      path: /spec/loadBalancerIP
      value: %s
`, c.AgentAddress)
	return e.overlay(configDir, c.Name+"-spoke", "spoke", b.String())
}

// hubOverlay is config/hub with the image present on the nodes.
func (e *Env) hubOverlay(configDir string) (string, error) {
	return e.overlay(configDir, "hub", "hub", `patches:
- target: {group: apps, version: v1, kind: Deployment, name: etcdfed-hub}
  patch: |-
    - op: add
      path: /spec/template/spec/containers/0/imagePullPolicy
      value: IfNotPresent
`)
}

// gossipKey is the ring's gossip key: 32 random bytes kept in the state
// directory, the same in every member cluster.
func (e *Env) gossipKey() ([]byte, error) {
	path := filepath.Join(e.state.pkiDir(), "gossip.key")
	if k, err := os.ReadFile(path); err == nil && len(k) == 32 {
		return k, nil
	}
	k := make([]byte, 32)
	if _, err := rand.Read(k); err != nil {
		return nil, err
	}
	return k, os.WriteFile(path, k, 0o600)
}

// deployInCluster installs the spokes and the hub from config/, as
// docs/kind.md's steps 4 to 8 do: gossip key, spoke, the hub's identity in
// each member cluster; the hub; CoreDNS forwarding the ring's domains to
// the spokes; the member clusters registered with the hub through
// kubeconfig Secrets built from the hub's token in each.
func (e *Env) deployInCluster(ctx context.Context) error {
	configDir, err := e.configDir()
	if err != nil {
		return err
	}
	key, err := e.gossipKey()
	if err != nil {
		return err
	}
	for _, c := range e.state.MemberClusters {
		secret := fmt.Sprintf("apiVersion: v1\nkind: Secret\nmetadata: {name: etcdfed-gossip, namespace: %s}\ndata: {key: %s}\n", RingNamespace, base64.StdEncoding.EncodeToString(key))
		if _, err := e.kubectl(ctx, c.Name, []byte(secret), "apply", "-f", "-"); err != nil {
			return err
		}
		dir, err := e.spokeOverlay(configDir, c)
		if err != nil {
			return err
		}
		if _, err := e.kubectl(ctx, c.Name, nil, "apply", "-k", dir); err != nil {
			return err
		}
		if _, err := e.kubectl(ctx, c.Name, nil, "apply", "-k", filepath.Join(configDir, "rbac", "hub-member")); err != nil {
			return err
		}
	}
	dir, err := e.hubOverlay(configDir)
	if err != nil {
		return err
	}
	if _, err := e.kubectl(ctx, HubClusterName, nil, "apply", "-k", dir); err != nil {
		return err
	}
	if _, err := e.kubectl(ctx, HubClusterName, nil, "apply", "-f", filepath.Join(configDir, "samples", "hub_access.yaml")); err != nil {
		return err
	}
	e.progress("applied config/hub, config/spoke and config/rbac/hub-member", true)

	if err := e.waitSpokes(ctx); err != nil {
		return err
	}
	e.progress("spokes ready", true)
	if err := e.forwardRingDomains(ctx); err != nil {
		return err
	}
	e.progress("CoreDNS forwards "+strings.Join(e.cfg.RingDomains, ", ")+" to the spokes", true)
	if err := e.registerWithTokens(ctx); err != nil {
		return err
	}
	e.progress(fmt.Sprintf("registered %d member clusters with the hub (kubeconfig Secrets with the hub's token)", len(e.state.MemberClusters)), true)
	if err := e.waitDeployment(ctx, e.state.Hub, RingNamespace, "etcdfed-hub", 5*time.Minute); err != nil {
		return err
	}
	return nil
}

// waitSpokes waits until every spoke runs and publishes its DNS address.
func (e *Env) waitSpokes(ctx context.Context) error {
	for _, c := range e.state.MemberClusters {
		if err := e.waitDeployment(ctx, c, RingNamespace, "etcdfed-spoke", 5*time.Minute); err != nil {
			return err
		}
		cl, err := client.New(e.pki.restConfig(c.APIServer), client.Options{Scheme: testenv.Scheme()})
		if err != nil {
			return err
		}
		last := ""
		if err := waitFor(ctx, 3*time.Minute, "the spoke of "+c.Name+" to publish its DNS address", func() (bool, error) {
			sp := &etcdfedv1.EtcdSpoke{}
			if err := cl.Get(ctx, client.ObjectKey{Namespace: RingNamespace, Name: "spoke"}, sp); err != nil {
				last = err.Error()
				return false, nil
			}
			last = fmt.Sprint(sp.Status.DNSAddresses)
			for _, a := range sp.Status.DNSAddresses {
				if a == c.DNS {
					return true, nil
				}
			}
			return false, nil
		}); err != nil {
			return fmt.Errorf("%w (status.dnsAddresses %s, want %s)", err, last, c.DNS)
		}
	}
	return nil
}

// forwardRingDomains points every cluster's CoreDNS at the spokes: a
// member cluster's own spoke first (its ClusterIP), then the others' load
// balancers; the hub cluster all of them at random.
func (e *Env) forwardRingDomains(ctx context.Context) error {
	var all []string
	for _, c := range e.state.MemberClusters {
		all = append(all, c.DNS)
	}
	var errs []error
	for _, c := range e.state.MemberClusters {
		cs, err := kubernetes.NewForConfig(e.pki.restConfig(c.APIServer))
		if err != nil {
			return err
		}
		svc, err := cs.CoreV1().Services(RingNamespace).Get(ctx, "etcdfed-spoke", metav1.GetOptions{})
		if err != nil {
			return err
		}
		up := []string{svc.Spec.ClusterIP + ":53"}
		for _, o := range e.state.MemberClusters {
			if o.Name != c.Name {
				up = append(up, o.DNS)
			}
		}
		errs = append(errs, e.setCorefile(ctx, c, corefile(e.cfg.RingDomains, up, "sequential"), true))
	}
	errs = append(errs, e.setCorefile(ctx, e.state.Hub, corefile(e.cfg.RingDomains, all, "random"), true))
	if err := errors.Join(errs...); err != nil {
		return err
	}
	for _, c := range e.state.Clusters() {
		if err := e.waitDeployment(ctx, c, "kube-system", "coredns", 3*time.Minute); err != nil {
			return err
		}
	}
	return nil
}

// registerWithTokens registers every member cluster with the hub as
// docs/kind.md's step 8 says: a kubeconfig with the member apiserver's
// address (reachable from the hub's pods) and the CA and token of the
// member's Secret etcdfed-hub-token (config/rbac/hub-member), in a Secret
// named after the cluster in the hub's etcdfed-system.
func (e *Env) registerWithTokens(ctx context.Context) error {
	hub, err := kubernetes.NewForConfig(e.pki.restConfig(e.state.Hub.APIServer))
	if err != nil {
		return err
	}
	for _, m := range e.state.MemberClusters {
		cs, err := kubernetes.NewForConfig(e.pki.restConfig(m.APIServer))
		if err != nil {
			return err
		}
		var tok *corev1.Secret
		if err := waitFor(ctx, 2*time.Minute, "the hub's token in "+m.Name, func() (bool, error) {
			s, err := cs.CoreV1().Secrets(RingNamespace).Get(ctx, "etcdfed-hub-token", metav1.GetOptions{})
			if err != nil || len(s.Data["token"]) == 0 || len(s.Data["ca.crt"]) == 0 {
				return false, nil
			}
			tok = s
			return true, nil
		}); err != nil {
			return err
		}
		kc := fmt.Sprintf(`apiVersion: v1
kind: Config
clusters:
- name: %[1]s
  cluster:
    server: %[2]s
    certificate-authority-data: %[3]s
users:
- name: etcdfed-hub
  user:
    token: %[4]s
contexts:
- name: %[1]s
  context:
    cluster: %[1]s
    user: etcdfed-hub
    namespace: %[5]s
current-context: %[1]s
`, m.Name, m.APIServer, base64.StdEncoding.EncodeToString(tok.Data["ca.crt"]), string(tok.Data["token"]), RingNamespace)
		want := &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Name: m.Name, Namespace: RingNamespace, Labels: map[string]string{KubeconfigSecretLabel: "true"}},
			Type:       corev1.SecretTypeOpaque,
			Data:       map[string][]byte{KubeconfigSecretKey: []byte(kc)},
		}
		cur, err := hub.CoreV1().Secrets(RingNamespace).Get(ctx, m.Name, metav1.GetOptions{})
		switch {
		case err == nil:
			cur.Labels, cur.Data = want.Labels, want.Data
			_, err = hub.CoreV1().Secrets(RingNamespace).Update(ctx, cur, metav1.UpdateOptions{})
		default:
			_, err = hub.CoreV1().Secrets(RingNamespace).Create(ctx, want, metav1.CreateOptions{})
		}
		if err != nil {
			return fmt.Errorf("register %s with the hub: %w", m.Name, err)
		}
	}
	return nil
}

// GrantHub lets the in-cluster hub manage EtcdClusters in namespace ns of
// the hub cluster, as config/samples/hub_access.yaml does for default:
// the RoleBinding every namespace holding EtcdClusters needs. A no-op with
// process nodes (the hub runs as the environment's admin there).
func (e *Env) GrantHub(ctx context.Context, ns string) error {
	if !e.state.Real() {
		return nil
	}
	configDir, err := e.configDir()
	if err != nil {
		return err
	}
	data, err := os.ReadFile(filepath.Join(configDir, "samples", "hub_access.yaml"))
	if err != nil {
		return err
	}
	if _, err := e.kubectl(ctx, HubClusterName, []byte(fmt.Sprintf("apiVersion: v1\nkind: Namespace\nmetadata: {name: %s}\n", ns)), "apply", "-f", "-"); err != nil {
		return err
	}
	data = []byte(strings.Replace(string(data), "  namespace: default\n", "  namespace: "+ns+"\n", 1))
	_, err = e.kubectl(ctx, HubClusterName, data, "apply", "-f", "-")
	return err
}
