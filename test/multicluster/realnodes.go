package multicluster

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"sort"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
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
	t.Hub.OnNamespace = env.GrantHub
	t.FailZone = func(ctx context.Context, zone, mode string) error {
		return env.FailZone(ctx, zone, localenv.Mode(mode))
	}
	t.RestoreZone = env.RestoreZone
	t.CanPartition = env.CanPartition()
	if t.CanPartition == nil {
		t.Partition, t.HealPartition = env.Partition, env.HealPartition
		t.SetDistance = env.SetDistance
	}
	t.PeerSourceIsPodIP = true
	t.StopMemberAPIServer = env.StopAPIServer
	t.StartMemberAPIServer = env.StartAPIServer
	t.StopNodeLeases = env.StopNodeLeases
	t.HubNamespace = localenv.RingNamespace
	t.KillHub = env.KillHubPods
	t.StopHub = func(ctx context.Context) error { return env.ScaleHub(ctx, 0) }
	t.StartHub = func(ctx context.Context) error { return env.ScaleHub(ctx, 1) }
	t.RestartHubWith = realHubRestarter(t.Hub)
	t.VolumeDir = env.VolumeDir
	t.DNSServerOf = map[string]string{}
	for _, c := range st.MemberClusters {
		t.DNSServerOf[c.Name] = c.DNS
	}
	if t.HubMetricsURL, err = forwardHubMetrics(t.Hub); err != nil {
		return nil, err
	}
	return t, nil
}

// realHubLabel selects the in-cluster hub's pods.
const realHubLabel = "app.kubernetes.io/name=etcdfed-hub"

// forwardHubMetrics serves, on a loopback port of the test binary's
// network namespace (the environment's), the metrics of the hub pod that
// holds the lead (of the newest ready one when no Lease names one), found
// anew for every request: a killed or restarted hub has a new pod and
// address. It returns the metrics URL; the listener lives as long as the
// test binary.
func forwardHubMetrics(hub *Cluster) (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	client := &http.Client{Timeout: 10 * time.Second}
	srv := &http.Server{ReadHeaderTimeout: 10 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ip, err := hubPodIP(r.Context(), hub)
		if err != nil {
			http.Error(w, err.Error(), http.StatusServiceUnavailable)
			return
		}
		req, err := http.NewRequestWithContext(r.Context(), http.MethodGet, "http://"+net.JoinHostPort(ip, "8080")+r.URL.Path, nil)
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
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
		if p.DeletionTimestamp == nil && p.Status.PodIP != "" && podReady(&p) {
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
				if strings.HasPrefix(*l.Spec.HolderIdentity, p.Name+"_") {
					return p.Status.PodIP, nil
				}
			}
		}
	}
	sort.Slice(ready, func(i, j int) bool { return ready[j].CreationTimestamp.Before(&ready[i].CreationTimestamp) })
	return ready[0].Status.PodIP, nil
}

func podReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// realHubRestarter is RestartHubWith for the in-cluster hub: its
// Deployment's arguments as installed, less drop, plus extra, and the
// rollout awaited (a new pod available, the old ones gone).
func realHubRestarter(hub *Cluster) func(ctx context.Context, drop []string, extra ...string) error {
	var installed []string
	return func(ctx context.Context, drop []string, extra ...string) error {
		deps := hub.Clientset.AppsV1().Deployments(localenv.RingNamespace)
		d, err := deps.Get(ctx, "etcdfed-hub", metav1.GetOptions{})
		if err != nil {
			return err
		}
		i := slices.IndexFunc(d.Spec.Template.Spec.Containers, func(c corev1.Container) bool { return c.Name == "hub" })
		if i < 0 {
			return fmt.Errorf("the hub's Deployment has no container hub")
		}
		if installed == nil {
			installed = slices.Clone(d.Spec.Template.Spec.Containers[i].Args)
		}
		var args []string
		for _, a := range installed {
			name, _, _ := strings.Cut(a, "=")
			if !slices.Contains(drop, name) {
				args = append(args, a)
			}
		}
		args = append(args, extra...)
		if slices.Equal(args, d.Spec.Template.Spec.Containers[i].Args) {
			return nil
		}
		d.Spec.Template.Spec.Containers[i].Args = args
		if d, err = deps.Update(ctx, d, metav1.UpdateOptions{}); err != nil {
			return fmt.Errorf("restart the hub with %v: %w", args, err)
		}
		return waitRolledOut(ctx, hub, d, 3*time.Minute)
	}
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
