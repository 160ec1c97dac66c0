package localenv

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/kubernetes"

	"github.com/etcdfed/etcdfed/cli/install"
	"github.com/etcdfed/etcdfed/internal/version"
)

// The in-cluster deployment of the hub and the spokes is what a user does
// on real clusters: `etcdfed hub install` in the hub cluster, then
// `etcdfed cluster join` for every member cluster (cli/install, the
// same code), with the manifests of config/ rendered with kustomize, the
// images the nodes were given, and the spoke exposed through its
// LoadBalancer Service (the cloud controller gives it an address). Then
// every cluster's CoreDNS forwards the ring's domains to the spokes, as
// docs/kind.md tells users to do.

// knobs are the install options every real-node install uses: the images
// imported into the nodes.
func (e *Env) knobs() install.Knobs {
	return install.Knobs{ImageRepository: version.Registry, ImageTag: e.imageTag}
}

// HubMetricsReader is the ServiceAccount, in RingNamespace of the hub
// cluster, that the in-cluster hub of a real-node environment lets read
// its /metrics (its --metrics-readers; the hub serves /metrics over TLS to
// the callers its allow-list names, and to no one without one). The tests
// read the hub's metrics with a token of it.
const HubMetricsReader = "localenv-metrics-reader"

// hubOptions are the options of every `hub install` of a real-node
// environment, the first and each later one that grants the hub a
// namespace (GrantHub): the same Deployment, or a grant would restart
// the hub with other arguments.
func (e *Env) hubOptions(namespaces []string) install.HubOptions {
	return install.HubOptions{Knobs: e.knobs(), EtcdClusterNamespaces: namespaces, MetricsReaders: []string{RingNamespace + "/" + HubMetricsReader}}
}

// deployInCluster installs the hub and joins every member cluster, the hub
// and the spokes running in-cluster, then points CoreDNS at the spokes.
func (e *Env) deployInCluster(ctx context.Context) error {
	hub := e.pki.restConfig(e.state.Hub.APIServer)
	progress := func(s string) { e.log.Info(s) }
	t0 := time.Now()
	if err := install.InstallHub(ctx, install.HubInstallOptions{Hub: hub, HubOptions: e.hubOptions(nil),
		Wait: true, Timeout: 5 * time.Minute, Progress: progress}); err != nil {
		return fmt.Errorf("etcdfed hub install: %w", err)
	}
	if err := e.createHubMetricsReader(ctx); err != nil {
		return err
	}
	e.progress(fmt.Sprintf("etcdfed hub install: the hub runs in-cluster (%.1fs)", time.Since(t0).Seconds()), true)
	t0 = time.Now()
	errs := make([]error, len(e.state.MemberClusters))
	var wg sync.WaitGroup
	for i, m := range e.state.MemberClusters {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = install.Join(ctx, install.JoinOptions{
				MemberOptions: install.MemberOptions{Knobs: e.knobs(), Name: m.Name, GossipProfile: "lan"},
				Hub:           hub, Member: e.pki.restConfig(m.APIServer),
				Wait: true, Timeout: 5 * time.Minute, Progress: progress,
			})
			if errs[i] != nil {
				errs[i] = fmt.Errorf("etcdfed cluster join %s: %w", m.Name, errs[i])
			}
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return err
	}
	if err := e.checkSpokeAddresses(ctx); err != nil {
		return err
	}
	e.progress(fmt.Sprintf("etcdfed cluster join: %d member clusters joined, their spokes in-cluster and seen by the hub (%.1fs)", len(e.state.MemberClusters), time.Since(t0).Seconds()), true)
	if err := e.forwardRingDomains(ctx); err != nil {
		return err
	}
	e.progress("CoreDNS forwards "+strings.Join(e.cfg.RingDomains, ", ")+" to the spokes", true)
	// EtcdClusters in default, as config/samples/hub_access.yaml grants
	// (the demo's).
	return e.GrantHub(ctx, "default")
}

// checkSpokeAddresses checks that every spoke's LoadBalancer addresses
// are the ones the state records for it: its DNS Service's (the first of
// the cluster's pool: dev status, the tests and the DNS servers of the
// topology name it) and its gossip Service's (the second: the spokes
// gossip there, and the distance's UDP routes to it were made for it
// before the spokes ran; another address would leave the spokes' gossip
// probes at zero distance whatever the distance, issue 35).
func (e *Env) checkSpokeAddresses(ctx context.Context) error {
	for _, c := range e.state.MemberClusters {
		cs, err := kubernetes.NewForConfig(e.pki.restConfig(c.APIServer))
		if err != nil {
			return err
		}
		gossip, err := netip.ParseAddrPort(c.Gossip)
		if err != nil {
			return fmt.Errorf("localenv: the gossip address of %s in state: %w", c.Name, err)
		}
		for _, want := range []struct{ svc, addr string }{{install.SpokeService, c.AgentAddress}, {install.SpokeGossipService, gossip.Addr().String()}} {
			svc, err := cs.CoreV1().Services(RingNamespace).Get(ctx, want.svc, metav1.GetOptions{})
			if err != nil {
				return err
			}
			var got []string
			for _, in := range svc.Status.LoadBalancer.Ingress {
				got = append(got, in.IP)
			}
			if !slices.Contains(got, want.addr) {
				return fmt.Errorf("localenv: the spoke's Service %s of %s got LoadBalancer address %v, the environment expects %s (another LoadBalancer Service took it?)", want.svc, c.Name, got, want.addr)
			}
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
		svc, err := cs.CoreV1().Services(RingNamespace).Get(ctx, install.SpokeService, metav1.GetOptions{})
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

// grantMu serializes GrantHub's installs.
var grantMu sync.Mutex

// GrantHub lets the in-cluster hub manage EtcdClusters in namespace ns of
// the hub cluster (creating ns if need be) the way a user does: `etcdfed
// hub install --etcdcluster-namespace` with every namespace granted so far
// (the install keeps only the RoleBindings it is given). A no-op with
// process nodes (the hub runs as the environment's admin there).
func (e *Env) GrantHub(ctx context.Context, ns string) error {
	if !e.state.Real() {
		return nil
	}
	grantMu.Lock()
	defer grantMu.Unlock()
	cfg := e.pki.restConfig(e.state.Hub.APIServer)
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	rbs, err := cs.RbacV1().RoleBindings("").List(ctx, metav1.ListOptions{LabelSelector: labels.SelectorFromSet(labels.Set{install.LabelHubInstall: "true"}).String()})
	if err != nil {
		return err
	}
	namespaces := []string{ns}
	for _, rb := range rbs.Items {
		if granted(rb) && !slices.Contains(namespaces, rb.Namespace) {
			namespaces = append(namespaces, rb.Namespace)
		}
	}
	slices.Sort(namespaces)
	return install.InstallHub(ctx, install.HubInstallOptions{Hub: cfg,
		HubOptions: e.hubOptions(namespaces),
		Progress:   func(s string) { e.log.Info(s) }})
}

// createHubMetricsReader creates the ServiceAccount HubMetricsReader.
func (e *Env) createHubMetricsReader(ctx context.Context) error {
	cs, err := kubernetes.NewForConfig(e.pki.restConfig(e.state.Hub.APIServer))
	if err != nil {
		return err
	}
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: HubMetricsReader, Namespace: RingNamespace}}
	if _, err := cs.CoreV1().ServiceAccounts(RingNamespace).Create(ctx, sa, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("localenv: the hub's metrics reader: %w", err)
	}
	return nil
}

// granted tells a RoleBinding `hub install --etcdcluster-namespace` wrote.
func granted(rb rbacv1.RoleBinding) bool {
	return rb.Name == "etcdfed-hub" && rb.Namespace != install.Namespace && rb.RoleRef.Name == "etcdfed-hub-etcdcluster-namespace"
}

// KillHubPods deletes the in-cluster hub's pods at once (grace 0), as a
// node losing it would; its Deployment starts a new one.
func (e *Env) KillHubPods(ctx context.Context) error {
	cs, err := kubernetes.NewForConfig(e.pki.restConfig(e.state.Hub.APIServer))
	if err != nil {
		return err
	}
	return cs.CoreV1().Pods(RingNamespace).DeleteCollection(ctx, metav1.DeleteOptions{GracePeriodSeconds: ptrTo[int64](0)},
		metav1.ListOptions{LabelSelector: "app.kubernetes.io/name=etcdfed-hub"})
}

// ScaleHub sets the in-cluster hub's replicas (0 stops it, as a user
// scales it down) and, for 1, waits until it is available again.
func (e *Env) ScaleHub(ctx context.Context, replicas int) error {
	if _, err := e.kubectl(ctx, HubClusterName, nil, "-n", RingNamespace, "scale", "deployment/etcdfed-hub", fmt.Sprintf("--replicas=%d", replicas)); err != nil {
		return err
	}
	if replicas == 0 {
		cs, err := kubernetes.NewForConfig(e.pki.restConfig(e.state.Hub.APIServer))
		if err != nil {
			return err
		}
		return waitFor(ctx, 2*time.Minute, "the hub's pods gone", func() (bool, error) {
			pods, err := cs.CoreV1().Pods(RingNamespace).List(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/name=etcdfed-hub"})
			return err == nil && len(pods.Items) == 0, nil
		})
	}
	return e.waitDeployment(ctx, e.state.Hub, RingNamespace, "etcdfed-hub", 3*time.Minute)
}

func ptrTo[T any](v T) *T { return &v }
