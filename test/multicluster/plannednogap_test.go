package multicluster

import (
	"bufio"
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	etcdfedv1 "github.com/etcdfed/etcdfed/api/v1alpha1"
	"github.com/etcdfed/etcdfed/dev/localenv"
)

// etcd's own shutdown logs one of these after SIGTERM: the first when it
// still led (it transfers leadership itself, after it stopped serving
// clients), the second when it no longer did.
const (
	etcdLogTransferStarting = "leadership transfer starting"
	etcdLogTransferSkipped  = "skipped leadership transfer; local server is not leader"
	etcdLogSignal           = "received signal; shutting down"
)

// plannedNoGapDistance is the round trip put between the member clusters
// (one zone each) for TestScenarioPlannedNoGap: regions' zones apart.
const plannedNoGapDistance = "10ms"

// TestScenarioPlannedNoGap: three planned stops under the recorded
// workload, 10 ms between the member clusters and etcd authentication on
// (the default), each with its longest write gap logged (a benchmark
// figure, not asserted; the goal is 100 ms): the leader's pod deleted by
// hand, the leader's node drained (cordon, the hub's grant, the Eviction
// API), and a version roll (3.6 to 3.7, leader last). Asserted: nothing
// acknowledged lost, the history linearizable, watches complete and in
// order, and, read from the stopped etcd's own log, that it no longer led
// when it received SIGTERM (the pod's preStop hook moved leadership first,
// with the member's own certificate, which the hub made an etcd user with
// the root role), for the deleted and the drained pod and for every
// member the roll restarted.
func TestScenarioPlannedNoGap(t *testing.T) {
	ringScenario(t, ringScenarioInput{What: "planned stops (pod deletion, drain, version roll) with leadership moved first by the preStop hook, 10 ms between member clusters",
		Ring: EtcdClusterSpecInput{Namespace: "planned", Name: "nogap", Domain: "nogap.etcd.test", Replicas: 3, WantZones: "1/1/1", Version: upgradePath[1].String()}},
		func(ctx context.Context, topo *Topology, etcd *ManagedEtcd) {
			ec, err := etcd.Get(ctx, topo.Hub)
			if err != nil {
				t.Fatal(err)
			}
			if !ec.Spec.TLS.AuthOn() {
				t.Fatalf("spec.tls.auth %q: the scenario runs with etcd authentication on", ec.Spec.TLS.Auth)
			}
			// Ready is not yet authenticated: the hub turns etcd's
			// authentication on after the ring formed, and a stage that
			// began before would run its first seconds without it (and
			// with the hub's user and role changes in its workload).
			waitAuthOn(ctx, t, etcd)
			setMemberDistance(ctx, t, topo, plannedNoGapDistance)
			plannedBaseline(ctx, t, etcd)
			plannedDelete(ctx, t, topo, etcd)
			plannedDrain(ctx, t, topo, etcd)
			plannedRoll(ctx, t, topo, etcd)
		})
}

// waitAuthOn waits until etcd itself says its authentication is on.
func waitAuthOn(ctx context.Context, t testing.TB, etcd *ManagedEtcd) {
	t.Helper()
	c, err := EtcdClient(etcd.Client)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	start := time.Now()
	if err := poll(ctx, 2*time.Minute, "etcd authentication on", func(ctx context.Context) (string, error) {
		as, err := c.AuthStatus(ctx)
		switch {
		case err != nil:
			return err.Error(), nil
		case !as.Enabled:
			return "authentication off", nil
		}
		return "", nil
	}); err != nil {
		t.Fatal(err)
	}
	t.Logf("etcd authentication on (waited %.1fs)", time.Since(start).Seconds())
}

// setMemberDistance puts rtt between every pair of member clusters (the
// hub stays at zero distance) until the test ends.
func setMemberDistance(ctx context.Context, t testing.TB, topo *Topology, rtt string) {
	t.Helper()
	if topo.SetDistance == nil {
		t.Skip("the topology cannot set a distance")
	}
	var links []string
	for i, a := range topo.Members {
		for _, b := range topo.Members[i+1:] {
			links = append(links, fmt.Sprintf("%s:%s=%s", a.Name, b.Name, rtt))
		}
	}
	d, err := localenv.ParseDistance(strings.Join(links, ","))
	if err != nil {
		t.Fatal(err)
	}
	if err := topo.SetDistance(ctx, d); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = topo.SetDistance(context.Background(), topo.BaseDistance) })
	t.Logf("distance set: %s", d)
}

// leaderOf is the ring's leader and the member cluster it runs in.
func leaderOf(ctx context.Context, t testing.TB, topo *Topology, etcd *ManagedEtcd) (string, *Cluster) {
	t.Helper()
	ec, err := etcd.Get(ctx, topo.Hub)
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range ec.Status.Members {
		if m.Name == ec.Status.Leader {
			return m.Name, memberCluster(t, topo, m.Cluster)
		}
	}
	t.Fatalf("leader %q is no member in status", ec.Status.Leader)
	return "", nil
}

// etcdLog follows the etcd container's log of a pod until the pod is gone
// (or stop); wait returns what was read.
type etcdLog struct {
	mu   sync.Mutex
	text strings.Builder
	done chan struct{}
	stop context.CancelFunc
}

func followEtcdLog(ctx context.Context, t testing.TB, c *Cluster, pod string) *etcdLog {
	t.Helper()
	ctx, cancel := context.WithTimeout(ctx, 10*time.Minute)
	l := &etcdLog{done: make(chan struct{}), stop: cancel}
	rc, err := c.Clientset.CoreV1().Pods(etcdfedv1.DefaultRingNamespace).GetLogs(pod, &corev1.PodLogOptions{Container: "etcd", Follow: true}).Stream(ctx)
	if err != nil {
		cancel()
		t.Fatalf("follow %s's etcd log: %v", pod, err)
	}
	go func() {
		defer close(l.done)
		defer rc.Close()
		sc := bufio.NewScanner(rc)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			l.mu.Lock()
			l.text.WriteString(sc.Text())
			l.text.WriteByte('\n')
			l.mu.Unlock()
		}
	}()
	return l
}

// wait returns the log once the stream ended (the pod is gone), or what
// was read within timeout.
func (l *etcdLog) wait(timeout time.Duration) string {
	select {
	case <-l.done:
	case <-time.After(timeout):
		l.stop()
		<-l.done
	}
	l.stop()
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.text.String()
}

// checkStoppedAsFollower requires the stopped etcd's log to say it did
// not lead when SIGTERM came: what its shutdown logged after the signal
// (a MoveLeader before it logs "leadership transfer starting" too).
func checkStoppedAsFollower(t testing.TB, what, log string) {
	t.Helper()
	i := strings.LastIndex(log, etcdLogSignal)
	if i < 0 {
		t.Errorf("%s: etcd's log has no %q: its stop was not seen", what, etcdLogSignal)
		return
	}
	log = log[i:]
	switch {
	case strings.Contains(log, etcdLogTransferStarting):
		t.Errorf("%s: etcd still led when it received SIGTERM (its log: %q): nothing moved leadership before the stop", what, etcdLogTransferStarting)
	case !strings.Contains(log, etcdLogTransferSkipped):
		t.Errorf("%s: etcd's log has neither %q nor %q: its shutdown was not seen", what, etcdLogTransferStarting, etcdLogTransferSkipped)
	default:
		t.Logf("%s: etcd did not lead when it received SIGTERM", what)
	}
}

func logGap(t testing.TB, what string, w *Workload, start time.Time) {
	t.Helper()
	var after, before []string
	for _, g := range w.LongestWriteGaps() {
		s := fmt.Sprintf("%s at %.2fs", g.Took.Round(time.Millisecond), g.Began.Sub(start).Seconds())
		if g.Began.Before(start) {
			before = append(before, s)
		} else if len(after) < 5 {
			after = append(after, s)
		}
	}
	// A gap that began before the stop is the machine's or the fresh
	// clients' (the baseline stage shows their size), not the stop's.
	t.Logf("%s: longest write gaps since the start: %s; before it: %s", what, orNone(strings.Join(after, ", ")), orNone(strings.Join(before, ", ")))
	for _, f := range w.Failures() {
		t.Logf("%s: failed %.2fs after the start: %s", what, f.Call.Sub(start).Seconds(), f)
	}
}

// plannedBaselineFor is how long the baseline stage runs the workload
// with nothing stopped.
const plannedBaselineFor = 20 * time.Second

// plannedBaseline runs the stages' workload with nothing stopped: its
// longest write gaps are what this machine costs the ring without any
// disruption (other processes on the same cores), the figure beside
// which each stop's gap is read.
func plannedBaseline(ctx context.Context, t testing.TB, etcd *ManagedEtcd) {
	t.Helper()
	w := startScenarioWorkload(ctx, t, etcd, "planned-baseline")
	start := time.Now()
	select {
	case <-ctx.Done():
		t.Fatal(ctx.Err())
	case <-time.After(plannedBaselineFor):
	}
	w.Stop()
	logGap(t, fmt.Sprintf("baseline, nothing stopped for %s", plannedBaselineFor), w, start)
	checkWorkload(ctx, t, w)
}

// plannedDelete deletes the leader's pod (kubectl delete pod).
func plannedDelete(ctx context.Context, t testing.TB, topo *Topology, etcd *ManagedEtcd) {
	t.Helper()
	leader, cl := leaderOf(ctx, t, topo, etcd)
	podName := etcd.ObjectName(leader)
	pods := cl.Clientset.CoreV1().Pods(etcdfedv1.DefaultRingNamespace)
	pod, err := pods.Get(ctx, podName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	w := startScenarioWorkload(ctx, t, etcd, "planned-delete")
	logs := followEtcdLog(ctx, t, cl, podName)
	start := time.Now()
	if err := pods.Delete(ctx, podName, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := WaitForPodReplaced(ctx, WaitForPodInput{Cluster: cl, Namespace: etcdfedv1.DefaultRingNamespace, Name: podName}, pod.UID); err != nil {
		t.Fatal(err)
	}
	if _, err := WaitForEtcdClusterReady(ctx, WaitForEtcdClusterInput{Hub: topo.Hub, Namespace: etcd.Namespace, Name: etcd.Name, Replicas: 3, Tolerant: true}); err != nil {
		t.Fatal(err)
	}
	progress(ctx, t, w, 50, 30*time.Second)
	w.Stop()
	checkStoppedAsFollower(t, "leader "+leader+"'s pod deleted", logs.wait(30*time.Second))
	logGap(t, "leader "+leader+"'s pod deleted", w, start)
	checkWorkload(ctx, t, w)
}

// plannedDrain drains the leader's node as kubectl drain does: cordon,
// then evict once the hub granted the disruption.
func plannedDrain(ctx context.Context, t testing.TB, topo *Topology, etcd *ManagedEtcd) {
	t.Helper()
	leader, cl := leaderOf(ctx, t, topo, etcd)
	podName := etcd.ObjectName(leader)
	node, err := MemberNode(ctx, cl, podName)
	if err != nil {
		t.Fatal(err)
	}
	pod, err := cl.Clientset.CoreV1().Pods(etcdfedv1.DefaultRingNamespace).Get(ctx, podName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	w := startScenarioWorkload(ctx, t, etcd, "planned-drain")
	logs := followEtcdLog(ctx, t, cl, podName)
	start := time.Now()
	if err := SetCordon(ctx, cl, node, true); err != nil {
		t.Fatal(err)
	}
	uncordoned := false
	t.Cleanup(func() {
		if !uncordoned {
			_ = SetCordon(context.Background(), cl, node, false)
		}
	})
	if _, err := WaitForDisrupt(ctx, WaitForDisruptInput{Hub: topo.Hub, Etcd: etcd, Step: "GrantDisruption", Member: leader}); err != nil {
		t.Fatal(err)
	}
	if err := WaitForBudget(ctx, WaitForBudgetInput{Cluster: cl, Member: podName, Allowed: 1}); err != nil {
		t.Fatal(err)
	}
	if err := Evict(ctx, cl, podName); err != nil {
		t.Fatalf("evict %s once granted: %v", podName, err)
	}
	stopped := logs.wait(2 * time.Minute)
	uncordoned = true
	if err := SetCordon(ctx, cl, node, false); err != nil {
		t.Fatal(err)
	}
	if _, err := WaitForPodReplaced(ctx, WaitForPodInput{Cluster: cl, Namespace: etcdfedv1.DefaultRingNamespace, Name: podName, Timeout: 3 * time.Minute}, pod.UID); err != nil {
		t.Fatal(err)
	}
	if _, err := WaitForEtcdClusterReady(ctx, WaitForEtcdClusterInput{Hub: topo.Hub, Namespace: etcd.Namespace, Name: etcd.Name, Replicas: 3, Tolerant: true}); err != nil {
		t.Fatal(err)
	}
	progress(ctx, t, w, 50, 30*time.Second)
	w.Stop()
	checkStoppedAsFollower(t, "leader "+leader+"'s node drained", stopped)
	logGap(t, "leader "+leader+"'s node drained", w, start)
	checkWorkload(ctx, t, w)
}

// plannedRoll upgrades the ring one minor version (3.6 to 3.7), leader
// last: UpgradeSpec runs its own recorded workload and checks.
func plannedRoll(ctx context.Context, t testing.TB, topo *Topology, etcd *ManagedEtcd) {
	t.Helper()
	ec, err := etcd.Get(ctx, topo.Hub)
	if err != nil {
		t.Fatal(err)
	}
	var logs []*etcdLog
	var names []string
	for _, m := range ec.Status.Members {
		logs = append(logs, followEtcdLog(ctx, t, memberCluster(t, topo, m.Cluster), etcd.ObjectName(m.Name)))
		names = append(names, m.Name)
	}
	to := upgradePath[2].String()
	res := UpgradeSpec(ctx, UpgradeSpecInput{T: t, Topology: topo, Etcd: etcd, To: to, Timeout: 10 * time.Minute})
	for i, l := range logs {
		checkStoppedAsFollower(t, "version roll to "+to+": "+names[i], l.wait(30*time.Second))
	}
	t.Logf("version roll to %s: longest write gap %s; order %v; %s", to, res.MaxWriteGap.Round(time.Millisecond), res.Order, res.PerMember)
}
