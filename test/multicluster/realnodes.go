package multicluster

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/etcdfed/etcdfed/dev/localenv"
)

// RealTopology is the topology of a local environment of real nodes
// (localenv.NodesReal): the hub and the spokes run in-cluster, deployed
// from config/; the ring's DNS is the spokes' (their load balancer
// addresses); pods connect from their own addresses. Killing the hub
// deletes its pod (its Deployment starts another); stopping it scales the
// Deployment to zero; restarting it with other flags changes its
// Deployment's arguments. Partitions of any shape and distance are made
// in the environment's network namespace, by the units' address blocks;
// a zone's node Leases stop when its nodes are cut off from their
// apiserver. The hub's metrics are read through a forwarder on loopback
// to whichever hub pod holds the lead. Namespaces the tests create in
// the hub cluster get the RoleBinding config/samples/hub_access.yaml
// gives default.
func RealTopology(env *localenv.Env) (*Topology, error) {
	st := env.State()
	members := map[string]string{}
	for _, c := range st.MemberClusters {
		members[c.Name] = env.Kubeconfig(c.Name)
	}
	t, err := NewTopology(env.Kubeconfig(localenv.HubClusterName), members, st.DNSServers())
	if err != nil {
		return nil, err
	}
	restarter := newRealHubRestarter(t.Hub)
	// A namespace granted to the hub installs the hub again, with the
	// arguments of its install: a restart with other arguments is made
	// again after it (both restart the hub, before the test's ring).
	t.Hub.OnNamespace = func(ctx context.Context, ns string) error {
		if err := env.GrantHub(ctx, ns); err != nil {
			return err
		}
		return restarter.reapply(ctx)
	}
	t.FailZone = func(ctx context.Context, zone, mode string) error {
		return env.FailZone(ctx, zone, localenv.Mode(mode))
	}
	t.RestoreZone = env.RestoreZone
	t.CanPartition = env.CanPartition()
	if t.CanPartition == nil {
		t.Partition, t.HealPartition = env.Partition, env.HealPartition
		t.SetDistance = env.SetDistance
		if d := env.State().Distance; d != nil {
			t.BaseDistance = *d
		}
	}
	t.PeerSourceIsPodIP = true
	t.StopMemberAPIServer = env.StopAPIServer
	t.StartMemberAPIServer = env.StartAPIServer
	t.StopNodeLeases = env.StopNodeLeases
	t.HubNamespace = localenv.RingNamespace
	t.KillHub = env.KillHubPods
	t.StopHub = func(ctx context.Context) error { return env.ScaleHub(ctx, 0) }
	t.StartHub = func(ctx context.Context) error { return env.ScaleHub(ctx, 1) }
	t.RestartHubWith = restarter.restart
	t.VolumeDir = env.VolumeDir
	t.DNSServerOf = map[string]string{}
	for _, c := range st.MemberClusters {
		t.DNSServerOf[c.Name] = c.DNS
	}
	if t.HubMetricsURL, err = forwardHubMetrics(t.Hub); err != nil {
		return nil, err
	}
	if err := checkHubMetrics(t.HubMetricsURL, time.Minute); err != nil {
		return nil, err
	}
	return t, nil
}

// checkHubMetrics reads the hub's metrics once through url (within
// timeout): a forwarder the hub refuses says so here, not as a scenario
// waiting for a metric that never comes.
func checkHubMetrics(url string, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		err := func() error {
			resp, err := http.Get(url)
			if err != nil {
				return err
			}
			defer resp.Body.Close()
			body, err := io.ReadAll(resp.Body)
			if err != nil {
				return err
			}
			if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), "etcdfed_hub_") {
				return fmt.Errorf("%s: %.200s", resp.Status, body)
			}
			return nil
		}()
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the hub's metrics through the forwarder %s: %w", url, err)
		}
		time.Sleep(2 * time.Second)
	}
}

// realHubLabel selects the in-cluster hub's pods.
const realHubLabel = "app.kubernetes.io/name=etcdfed-hub"

// forwardHubMetrics serves, on a loopback port of the test binary's
// network namespace (the environment's), the metrics of the hub pod that
// holds the lead (of the newest ready one when no Lease names one), found
// anew for every request: a killed or restarted hub has a new pod and
// address. The hub serves /metrics over TLS (a certificate of its own)
// to the callers its --metrics-readers names: the forwarder calls with a
// token of localenv.HubMetricsReader, which the environment's hub names,
// renewed every 10 minutes. It returns the metrics URL; the listener lives
// as long as the test binary.
func forwardHubMetrics(hub *Cluster) (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	// The hub's certificate is its own, made at its start: the forwarder
	// cannot verify it, and trusts the pod address it just read instead.
	client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}} //nolint:gosec // see above
	var (
		mu       sync.Mutex
		token    string
		tokenAge time.Time
	)
	bearer := func(ctx context.Context) (string, error) {
		mu.Lock()
		defer mu.Unlock()
		if token != "" && time.Since(tokenAge) < 10*time.Minute {
			return token, nil
		}
		tr, err := hub.Clientset.CoreV1().ServiceAccounts(localenv.RingNamespace).CreateToken(ctx, localenv.HubMetricsReader,
			&authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptrTo[int64](3600)}}, metav1.CreateOptions{})
		if err != nil {
			return "", fmt.Errorf("a token of %s/%s: %w", localenv.RingNamespace, localenv.HubMetricsReader, err)
		}
		token, tokenAge = tr.Status.Token, time.Now()
		return token, nil
	}
	srv := &http.Server{ReadHeaderTimeout: 10 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ip, err := hubPodIP(r.Context(), hub)
		if err != nil {
			http.Error(w, err.Error(), http.StatusServiceUnavailable)
			return
		}
		tok, err := bearer(r.Context())
		if err != nil {
			http.Error(w, err.Error(), http.StatusServiceUnavailable)
			return
		}
		req, err := http.NewRequestWithContext(r.Context(), http.MethodGet, "https://"+net.JoinHostPort(ip, "8080")+r.URL.Path, nil)
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		req.Header.Set("Authorization", "Bearer "+tok)
		resp, err := client.Do(req)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		defer resp.Body.Close()
		w.Header().Set("Content-Type", resp.Header.Get("Content-Type"))
		w.WriteHeader(resp.StatusCode)
		_, _ = io.Copy(w, resp.Body)
	})}
	go func() { _ = srv.Serve(ln) }()
	return "http://" + ln.Addr().String() + "/metrics", nil
}

// hubPodIP is the address of the hub pod holding the lead (a Lease of the
// hub's namespace names it), or of the newest ready hub pod.
func hubPodIP(ctx context.Context, hub *Cluster) (string, error) {
	pods, err := hub.Clientset.CoreV1().Pods(localenv.RingNamespace).List(ctx, metav1.ListOptions{LabelSelector: realHubLabel})
	if err != nil {
		return "", err
	}
	var ready []corev1.Pod
	for _, p := range pods.Items {
		if p.DeletionTimestamp == nil && p.Status.PodIP != "" && PodReady(&p) {
			ready = append(ready, p)
		}
	}
	if len(ready) == 0 {
		return "", fmt.Errorf("no ready hub pod (of %d)", len(pods.Items))
	}
	if leases, err := hub.Clientset.CoordinationV1().Leases(localenv.RingNamespace).List(ctx, metav1.ListOptions{}); err == nil {
		for _, l := range leases.Items {
			if l.Spec.HolderIdentity == nil {
				continue
			}
			for _, p := range ready {
				// The pod's name (POD_NAME), or controller-runtime's
				// <host>_<random> where a hub runs without it.
				if h := *l.Spec.HolderIdentity; h == p.Name || strings.HasPrefix(h, p.Name+"_") {
					return p.Status.PodIP, nil
				}
			}
		}
	}
	sort.Slice(ready, func(i, j int) bool { return ready[j].CreationTimestamp.Before(&ready[i].CreationTimestamp) })
	return ready[0].Status.PodIP, nil
}

// realHubRestarter is RestartHubWith for the in-cluster hub: its
// Deployment's arguments as installed, less drop, plus extra, and the
// rollout awaited (a new pod available, the old ones gone). A later
// `hub install` (GrantHub, for a namespace a test creates) writes the
// installed arguments back: reapply makes the last restart's again.
type realHubRestarter struct {
	hub       *Cluster
	mu        sync.Mutex
	installed []string
	// args are the arguments of the last restart; nil before one.
	args []string
}

func newRealHubRestarter(hub *Cluster) *realHubRestarter { return &realHubRestarter{hub: hub} }

func (h *realHubRestarter) restart(ctx context.Context, drop []string, extra ...string) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	d, i, err := h.deployment(ctx)
	if err != nil {
		return err
	}
	if h.installed == nil {
		h.installed = slices.Clone(d.Spec.Template.Spec.Containers[i].Args)
	}
	var args []string
	for _, a := range h.installed {
		name, _, _ := strings.Cut(a, "=")
		if !slices.Contains(drop, name) {
			args = append(args, a)
		}
	}
	h.args = append(args, extra...)
	return h.apply(ctx, d, i)
}

// reapply restarts the hub with the last restart's arguments when its
// Deployment no longer has them.
func (h *realHubRestarter) reapply(ctx context.Context) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.args == nil {
		return nil
	}
	d, i, err := h.deployment(ctx)
	if err != nil {
		return err
	}
	return h.apply(ctx, d, i)
}

func (h *realHubRestarter) deployment(ctx context.Context) (*appsv1.Deployment, int, error) {
	d, err := h.hub.Clientset.AppsV1().Deployments(localenv.RingNamespace).Get(ctx, "etcdfed-hub", metav1.GetOptions{})
	if err != nil {
		return nil, 0, err
	}
	i := slices.IndexFunc(d.Spec.Template.Spec.Containers, func(c corev1.Container) bool { return c.Name == "hub" })
	if i < 0 {
		return nil, 0, fmt.Errorf("the hub's Deployment has no container hub")
	}
	return d, i, nil
}

func (h *realHubRestarter) apply(ctx context.Context, d *appsv1.Deployment, i int) error {
	if slices.Equal(h.args, d.Spec.Template.Spec.Containers[i].Args) {
		return nil
	}
	d.Spec.Template.Spec.Containers[i].Args = slices.Clone(h.args)
	d, err := h.hub.Clientset.AppsV1().Deployments(localenv.RingNamespace).Update(ctx, d, metav1.UpdateOptions{})
	if err != nil {
		return fmt.Errorf("restart the hub with %v: %w", h.args, err)
	}
	return waitRolledOut(ctx, h.hub, d, 3*time.Minute)
}

// waitRolledOut waits until d's latest generation is rolled out: every
// replica updated and available, no old pod left.
func waitRolledOut(ctx context.Context, c *Cluster, d *appsv1.Deployment, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	for {
		cur, err := c.Clientset.AppsV1().Deployments(d.Namespace).Get(ctx, d.Name, metav1.GetOptions{})
		if err == nil && cur.Status.ObservedGeneration >= d.Generation && cur.Spec.Replicas != nil &&
			cur.Status.UpdatedReplicas == *cur.Spec.Replicas && cur.Status.AvailableReplicas == *cur.Spec.Replicas && cur.Status.Replicas == *cur.Spec.Replicas {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("deployment %s/%s not rolled out after %s", d.Namespace, d.Name, timeout)
		case <-time.After(time.Second):
		}
	}
}
