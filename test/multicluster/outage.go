package multicluster

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdfedv1 "github.com/etcdfed/etcdfed/api/v1alpha1"
	"github.com/etcdfed/etcdfed/dev/faultproxy"
)

// HubProbe samples the hub's metrics while a scenario runs and keeps the
// longest time any EtcdCluster reconcile had been running.
type HubProbe struct {
	url    string
	stop   chan struct{}
	done   chan struct{}
	mu     sync.Mutex
	max    float64
	errors int
	seen   int
}

// StartHubProbe polls url (the hub's /metrics) every 500ms.
func StartHubProbe(url string) *HubProbe {
	p := &HubProbe{url: url, stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(p.done)
		t := time.NewTicker(500 * time.Millisecond)
		defer t.Stop()
		for {
			v, err := longestRunning(url, "etcdcluster")
			p.mu.Lock()
			if err != nil {
				p.errors++
			} else {
				p.seen++
				p.max = max(p.max, v)
			}
			p.mu.Unlock()
			select {
			case <-p.stop:
				return
			case <-t.C:
			}
		}
	}()
	return p
}

// Stop ends sampling and returns the longest-running reconcile seen (in
// seconds) and how many samples were read.
func (p *HubProbe) Stop() (longest float64, samples int) {
	close(p.stop)
	<-p.done
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.max, p.seen
}

// longestRunning reads workqueue_longest_running_processor_seconds of a
// controller from a Prometheus text endpoint. A hub restarting does not
// answer: that is an error the caller counts, not a failure.
func longestRunning(url, controller string) (float64, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return 0, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	prefix := `workqueue_longest_running_processor_seconds{controller="` + controller + `"`
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, prefix) {
			continue
		}
		f := strings.Fields(line)
		return strconv.ParseFloat(f[len(f)-1], 64)
	}
	if err := sc.Err(); err != nil {
		return 0, err
	}
	return 0, fmt.Errorf("%s: no %s", url, prefix)
}

// HubOutageSpecInput disturbs one member cluster's apiserver under a
// recorded workload.
type HubOutageSpecInput struct {
	T        testing.TB
	Topology *Topology
	Etcd     *ManagedEtcd
	// Cluster is the member cluster disturbed.
	Cluster string
	// Replicas the ring has when the scenario ends.
	Replicas int
	// Disturb takes the cluster away (for at least 25s in total, long
	// enough for its spoke Lease to go stale on the hub) and returns once
	// it answers again.
	Disturb func(ctx context.Context) error
	// PassTimeout is the hub's reconcile deadline (cmd/hub's default).
	PassTimeout time.Duration
}

// HubOutageSpec runs Disturb under a recorded workload and requires that
// the hub kept observing: while the cluster was away the EtcdCluster's
// Degraded condition named it and every member ready in the other clusters
// stayed ready in the hub's status, unless its own cluster said so too (a
// spoke's MemberHealthy or a pod's Ready False: a starved machine, logged); no reconcile ran longer than its
// deadline; after the cluster answers again Degraded stops naming it, then
// everything is ready and not degraded (both times are logged); the
// workload is linearizable and lost nothing.
func HubOutageSpec(ctx context.Context, in HubOutageSpecInput) {
	t := in.T
	t.Helper()
	if in.Topology.HubMetricsURL == "" {
		t.Skip("HubOutageSpec: the topology does not expose the hub's metrics")
	}
	hub := in.Topology.Hub
	// A fresh key space per run: the model starts empty. Every endpoint
	// answers again by the end, so each gets its own watcher too.
	w := StartWorkload(ctx, t, StartWorkloadInput{Client: in.Etcd.Client, Prefix: fmt.Sprintf("outage-%d/", time.Now().UnixNano()), WatchEachEndpoint: true})
	waitForWorkloadProgress(ctx, t, w)

	before, err := in.Etcd.Get(ctx, hub)
	if err != nil {
		t.Fatal(err)
	}
	readyBefore := map[string]bool{}
	for _, m := range before.Status.Members {
		if m.Ready && m.Cluster != in.Cluster {
			readyBefore[m.Name] = true
		}
	}
	probe := StartHubProbe(in.Topology.HubMetricsURL)
	watch := watchHubStatus(ctx, in.Topology, in.Etcd, in.Cluster, readyBefore)
	start := time.Now()
	if err := in.Disturb(ctx); err != nil {
		watch.stop()
		probe.Stop()
		t.Fatal(err)
	}
	back := time.Now()
	t.Logf("%s answers again %.1fs after the disturbance began", in.Cluster, back.Sub(start).Seconds())
	// The truth about the cluster: Degraded no longer names it.
	err = WaitForDegradedClear(ctx, hub, in.Etcd, in.Cluster+" ", 3*time.Minute)
	if err != nil {
		watch.stop()
		probe.Stop()
		t.Fatalf("after %s answered again: %v", in.Cluster, err)
	}
	seen := time.Since(back)
	_, err = WaitForEtcdClusterReady(ctx, WaitForEtcdClusterInput{Hub: hub, Namespace: in.Etcd.Namespace, Name: in.Etcd.Name, Replicas: in.Replicas, Timeout: 3 * time.Minute})
	if err == nil {
		err = WaitForDegradedClear(ctx, hub, in.Etcd, "", 3*time.Minute)
	}
	settled := time.Since(back)
	named, othersNotReady, truthful, samples := watch.stop()
	for _, r := range truthful {
		t.Logf("the hub reported a member of another cluster not ready, and so did its own cluster (the machine starved it): %s", r)
	}
	longest, probes := probe.Stop()
	if err != nil {
		t.Fatalf("after %s answered again: %v", in.Cluster, err)
	}
	t.Logf("after %s answered again: the hub's status stopped calling it away after %.1fs, everything ready and not degraded after %.1fs; Degraded named it while away: %v; %d status samples; longest-running reconcile %.1fs over %d metric samples",
		in.Cluster, seen.Seconds(), settled.Seconds(), named, samples, longest, probes)
	if !named {
		t.Errorf("the hub never said %s was away (Degraded never named it): it stopped observing", in.Cluster)
	}
	if othersNotReady != "" {
		t.Errorf("members in the other clusters were reported not ready during the outage: %s", othersNotReady)
	}
	if probes == 0 {
		t.Errorf("no sample of the hub's metrics")
	}
	if limit := in.PassTimeout + 5*time.Second; longest > limit.Seconds() {
		t.Errorf("a reconcile ran %.1fs, past its %s deadline", longest, in.PassTimeout)
	}
	checkWorkload(ctx, t, w)
}

// statusWatch samples the EtcdCluster while a cluster is away.
type statusWatch struct {
	cancel context.CancelFunc
	done   chan struct{}
	named  bool
	others string
	// truthful lists "not ready" reports of other clusters' members that
	// their own cluster confirmed (the spoke's MemberHealthy or the pod's
	// Ready was False too): a starved machine, not a hub that stopped
	// observing.
	truthful []string
	n        int
}

// watchHubStatus samples until stopped: whether Degraded named away, and
// the first of the members in watched (ready in other clusters when the
// outage began) the hub reported not ready.
func watchHubStatus(ctx context.Context, topo *Topology, m *ManagedEtcd, away string, watched map[string]bool) *statusWatch {
	ctx, cancel := context.WithCancel(ctx)
	sw := &statusWatch{cancel: cancel, done: make(chan struct{})}
	hub := topo.Hub
	go func() {
		defer close(sw.done)
		for ctx.Err() == nil {
			gctx, gcancel := context.WithTimeout(ctx, 2*time.Second)
			ec, err := m.Get(gctx, hub)
			gcancel()
			if err == nil {
				sw.n++
				if c := meta.FindStatusCondition(ec.Status.Conditions, etcdfedv1.ConditionDegraded); c != nil && c.Status == "True" && strings.Contains(c.Message, away) {
					sw.named = true
				}
				for _, mem := range ec.Status.Members {
					if !watched[mem.Name] || mem.Cluster == away || mem.Ready || sw.others != "" {
						continue
					}
					at := time.Now().Format(time.TimeOnly)
					if why := memberUnreadyAtHome(ctx, topo, mem.Cluster, m.ObjectName(mem.Name)); why != "" {
						sw.truthful = append(sw.truthful, fmt.Sprintf("%s (in %s) at %s: %s", mem.Name, mem.Cluster, at, why))
						continue
					}
					sw.others = fmt.Sprintf("%s (in %s) at %s, while its own cluster reported it healthy and ready", mem.Name, mem.Cluster, at)
				}
			}
			select {
			case <-ctx.Done():
			case <-time.After(500 * time.Millisecond):
			}
		}
	}()
	return sw
}

// memberUnreadyAtHome says why member's own cluster considers it not ready
// (its spoke's MemberHealthy condition or its pod's Ready condition False),
// or "" when the cluster says it is healthy and ready, or cannot be read.
func memberUnreadyAtHome(ctx context.Context, topo *Topology, cluster, object string) string {
	var cl *Cluster
	for _, c := range topo.Members {
		if c.Name == cluster {
			cl = c
		}
	}
	if cl == nil {
		return ""
	}
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	em := &etcdfedv1.EtcdMember{}
	if err := cl.Client.Get(ctx, client.ObjectKey{Namespace: etcdfedv1.DefaultRingNamespace, Name: object}, em); err == nil {
		if c := meta.FindStatusCondition(em.Status.Conditions, etcdfedv1.ConditionMemberHealthy); c != nil && c.Status != metav1.ConditionTrue {
			return "its spoke reported MemberHealthy=" + string(c.Status) + " (" + c.Reason + ": " + c.Message + ")"
		}
	}
	pod := &corev1.Pod{}
	if err := cl.Client.Get(ctx, client.ObjectKey{Namespace: etcdfedv1.DefaultRingNamespace, Name: object}, pod); err == nil {
		for _, c := range pod.Status.Conditions {
			if c.Type == corev1.PodReady && c.Status != corev1.ConditionTrue {
				return "its pod was not Ready (" + c.Reason + ": " + c.Message + ")"
			}
		}
	}
	return ""
}

func (sw *statusWatch) stop() (named bool, othersNotReady string, truthful []string, samples int) {
	sw.cancel()
	<-sw.done
	return sw.named, sw.others, sw.truthful, sw.n
}

// memberKubeconfigSecret reads the kubeconfig Secret registering cluster
// with the hub.
func memberKubeconfigSecret(ctx context.Context, topo *Topology, cluster string) (*corev1.Secret, error) {
	sec := &corev1.Secret{}
	if err := topo.Hub.Client.Get(ctx, client.ObjectKey{Namespace: topo.HubNamespace, Name: cluster}, sec); err != nil {
		return nil, fmt.Errorf("kubeconfig Secret of %s: %w", cluster, err)
	}
	return sec, nil
}

// RouteHubThrough points the hub's registration of cluster at a proxy in
// front of its apiserver (the apiserver's certificate names its address,
// so the proxy listens on the same address, another port). It returns the
// proxy and a function that restores the registration.
func RouteHubThrough(ctx context.Context, topo *Topology, cluster string) (*faultproxy.Proxy, func(context.Context) error, error) {
	sec, err := memberKubeconfigSecret(ctx, topo, cluster)
	if err != nil {
		return nil, nil, err
	}
	orig := sec.DeepCopy()
	cfg, err := clientcmd.Load(sec.Data["kubeconfig"])
	if err != nil {
		return nil, nil, fmt.Errorf("kubeconfig of %s: %w", cluster, err)
	}
	var target *url.URL
	for _, c := range cfg.Clusters {
		if target, err = url.Parse(c.Server); err != nil {
			return nil, nil, err
		}
	}
	if target == nil {
		return nil, nil, fmt.Errorf("kubeconfig of %s names no server", cluster)
	}
	proxy, err := faultproxy.Start(target.Hostname()+":0", target.Host)
	if err != nil {
		return nil, nil, err
	}
	for _, c := range cfg.Clusters {
		c.Server = "https://" + proxy.Addr()
	}
	data, err := clientcmd.Write(*cfg)
	if err != nil {
		proxy.Close()
		return nil, nil, err
	}
	patched := sec.DeepCopy()
	patched.Data["kubeconfig"] = data
	if err := topo.Hub.Client.Patch(ctx, patched, client.MergeFrom(sec)); err != nil {
		proxy.Close()
		return nil, nil, fmt.Errorf("route the hub's view of %s through a proxy: %w", cluster, err)
	}
	restore := func(ctx context.Context) error {
		cur, err := memberKubeconfigSecret(ctx, topo, cluster)
		if err != nil {
			return err
		}
		back := cur.DeepCopy()
		back.Data["kubeconfig"] = orig.Data["kubeconfig"]
		if err := topo.Hub.Client.Patch(ctx, back, client.MergeFrom(cur)); err != nil {
			return fmt.Errorf("restore the hub's registration of %s: %w", cluster, err)
		}
		return nil
	}
	return proxy, restore, nil
}

// hubEngaged reads etcdfed_hub_member_cluster_engaged for cluster.
func hubEngaged(metricsURL, cluster string) (bool, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, metricsURL, nil)
	if err != nil {
		return false, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return false, err
	}
	defer resp.Body.Close()
	want := `etcdfed_hub_member_cluster_engaged{member_cluster="` + cluster + `"} `
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), want); ok {
			return v == "1", nil
		}
	}
	return false, sc.Err()
}
