package localenv_test

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/netip"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr/testr"
	. "github.com/onsi/gomega"
	clientv3 "go.etcd.io/etcd/client/v3"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdfedv1 "github.com/etcdfed/etcdfed/api/v1alpha1"
	"github.com/etcdfed/etcdfed/dev/localenv"
	"github.com/etcdfed/etcdfed/dev/localenv/nodeagent"
	"github.com/etcdfed/etcdfed/dev/localenv/proc"
	"github.com/etcdfed/etcdfed/dev/testenv"
	"github.com/etcdfed/etcdfed/hub/registry"
)

// clientFromKubeconfig builds a client the way a user would: from the
// kubeconfig file only.
func clientFromKubeconfig(t *testing.T, path string) kubernetes.Interface {
	t.Helper()
	rc, err := clientcmd.BuildConfigFromFlags("", path)
	if err != nil {
		t.Fatalf("kubeconfig %s: %v", path, err)
	}
	rc.Timeout = 5 * time.Second
	cs, err := kubernetes.NewForConfig(rc)
	if err != nil {
		t.Fatal(err)
	}
	return cs
}

// singleEtcd is a one-member, TLS-free etcd pod pinned to a zone.
func singleEtcd(name, zone string, readinessExec []string) *corev1.Pod {
	args := []string{
		"--name=$(POD_NAME)", "--data-dir=/var/lib/etcd/data",
		"--listen-client-urls=http://$(POD_IP):2379", "--advertise-client-urls=http://$(POD_IP):2379",
		"--listen-peer-urls=http://$(POD_IP):2380", "--initial-advertise-peer-urls=http://$(POD_IP):2380",
		"--initial-cluster=$(POD_NAME)=http://$(POD_IP):2380", "--listen-metrics-urls=http://$(POD_IP):2381",
		"--unsafe-no-fsync",
	}
	probe := &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/readyz", Port: intstr.FromInt32(2381)}},
		PeriodSeconds: 1, FailureThreshold: 1, TimeoutSeconds: 2}
	if readinessExec != nil {
		probe = &corev1.Probe{ProbeHandler: corev1.ProbeHandler{Exec: &corev1.ExecAction{Command: readinessExec}},
			PeriodSeconds: 1, FailureThreshold: 1, TimeoutSeconds: 3}
	}
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"},
		Spec: corev1.PodSpec{
			NodeSelector: map[string]string{nodeagent.ZoneLabel: zone},
			Volumes:      []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: name}}}},
			Containers: []corev1.Container{{
				Name: "etcd", Image: "registry.k8s.io/etcd:3.6.16-0", Command: []string{"/usr/local/bin/etcd"}, Args: args,
				Env: []corev1.EnvVar{
					{Name: "POD_IP", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "status.podIP"}}},
					{Name: "POD_NAME", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.name"}}},
				},
				VolumeMounts:   []corev1.VolumeMount{{Name: "data", MountPath: "/var/lib/etcd"}},
				ReadinessProbe: probe,
			}},
		},
	}
}

func claimFor(name string) *corev1.PersistentVolumeClaim {
	return &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"},
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources:   corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resourceQty("1Gi")}},
		},
	}
}

func ready(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

type podRef struct {
	cs   kubernetes.Interface
	name string
}

func (p podRef) get(g Gomega) *corev1.Pod {
	pod, err := p.cs.CoreV1().Pods("default").Get(context.Background(), p.name, metav1.GetOptions{})
	g.Expect(err).NotTo(HaveOccurred())
	return pod
}

func (p podRef) create(t *testing.T, pod *corev1.Pod) {
	t.Helper()
	ctx := context.Background()
	if _, err := p.cs.CoreV1().PersistentVolumeClaims("default").Create(ctx, claimFor(pod.Name), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := p.cs.CoreV1().Pods("default").Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

func healthCmd(ip string) []string {
	return []string{"etcdctl", "--endpoints=http://" + ip + ":2379", "--dial-timeout=1s", "--command-timeout=1s", "endpoint", "health"}
}

// reachable reports whether this process (outside every zone) can put a
// key into the etcd at ip.
func reachable(ip string) error {
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{"http://" + ip + ":2379"}, DialTimeout: time.Second})
	if err != nil {
		return err
	}
	defer cli.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	_, err = cli.Put(ctx, "probe", time.Now().String())
	return err
}

func pidOf(g Gomega, p *corev1.Pod) int {
	g.Expect(p.Status.ContainerStatuses).NotTo(BeEmpty())
	pid, err := strconv.Atoi(strings.TrimPrefix(p.Status.ContainerStatuses[0].ContainerID, "local://"))
	g.Expect(err).NotTo(HaveOccurred())
	return pid
}

// One environment (hub + 2 member clusters with 2 zones each) goes
// through its life: registration, pods in zones, a partitioned zone and a
// partitioned cluster, a killed cluster (apiserver stopped and started
// again), and a restart on the same state directory.
func TestEnvironmentLifecycleAndFaults(t *testing.T) {
	testenv.SkipIfShort(t, "kube-apiserver, etcd and the node agents")
	g := NewWithT(t)
	ctx := context.Background()
	dir := t.TempDir()
	cfg := localenv.Config{StateDir: dir, Clusters: 2, ZonesPerCluster: 2, NoComponents: true,
		BackoffBase: time.Second, BackoffMax: 4 * time.Second, Log: testr.NewWithOptions(t, testr.Options{Verbosity: 0})}
	start := time.Now()
	env, err := localenv.Start(ctx, cfg)
	g.Expect(err).NotTo(HaveOccurred())
	stopped := false
	t.Cleanup(func() {
		if !stopped {
			_ = env.Stop()
		}
	})
	t.Logf("environment (3 apiservers, 4 zones) ready in %.1fs", time.Since(start).Seconds())
	st := env.State()

	// Kubeconfig files work; members are registered in the hub; CRDs are
	// installed everywhere.
	hub := clientFromKubeconfig(t, env.Kubeconfig(localenv.HubClusterName))
	secrets, err := hub.CoreV1().Secrets(localenv.RingNamespace).List(ctx, metav1.ListOptions{LabelSelector: localenv.KubeconfigSecretLabel + "=true"})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(secrets.Items).To(HaveLen(2))
	for _, s := range secrets.Items {
		// Registered by `etcdfed cluster join`: the hub's own
		// least-privilege ServiceAccount, not the environment's admin.
		kc, err := registry.RESTConfig(&s)
		g.Expect(err).NotTo(HaveOccurred())
		mc, err := testenvClient(kc)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(mc.List(ctx, &etcdfedv1.EtcdMemberList{}, client.InNamespace(localenv.RingNamespace))).To(Succeed(), "secret %s", s.Name)
		g.Expect(apierrors.IsForbidden(mc.List(ctx, &corev1.PodList{}, client.InNamespace(localenv.RingNamespace)))).To(BeTrue(), "the hub's credentials in %s list pods", s.Name)
	}
	for _, c := range st.Clusters() {
		rc, err := clientcmd.BuildConfigFromFlags("", env.Kubeconfig(c.Name))
		g.Expect(err).NotTo(HaveOccurred())
		cl, err := testenvClient(rc)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(cl.List(ctx, &etcdfedv1.EtcdMemberList{})).To(Succeed(), "CRDs in %s", c.Name)
	}
	g.Expect(filepath.Join(st.MemberKubeconfigDir(), "member-1.yaml")).To(BeARegularFile())

	m1 := clientFromKubeconfig(t, env.Kubeconfig("member-1"))
	m2 := clientFromKubeconfig(t, env.Kubeconfig("member-2"))
	g.Eventually(func(g Gomega) {
		nodes, err := m1.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(nodes.Items).To(HaveLen(2))
		zones := []string{}
		for _, n := range nodes.Items {
			zones = append(zones, n.Labels[nodeagent.ZoneLabel])
		}
		g.Expect(zones).To(ConsistOf("zone-1a", "zone-1b"))
	}).WithTimeout(30 * time.Second).Should(Succeed())

	// Targets in three zones.
	ta, tb, tc := podRef{m1, "t-a"}, podRef{m1, "t-b"}, podRef{m2, "t-c"}
	ta.create(t, singleEtcd("t-a", "zone-1a", nil))
	tb.create(t, singleEtcd("t-b", "zone-1b", nil))
	tc.create(t, singleEtcd("t-c", "zone-2a", nil))
	ips := map[string]string{}
	g.Eventually(func(g Gomega) {
		for _, p := range []podRef{ta, tb, tc} {
			pod := p.get(g)
			g.Expect(ready(pod)).To(BeTrue(), "%s", p.name)
			ips[p.name] = pod.Status.PodIP
		}
	}).WithTimeout(60 * time.Second).Should(Succeed())
	for name, ip := range ips {
		zone := map[string]string{"t-a": "zone-1a", "t-b": "zone-1b", "t-c": "zone-2a"}[name]
		cluster := map[string]string{"t-a": "member-1", "t-b": "member-1", "t-c": "member-2"}[name]
		c, _ := st.Cluster(cluster)
		for _, z := range c.Zones {
			if z.Name == zone {
				g.Expect(netip.MustParsePrefix(z.CIDR).Contains(netip.MustParseAddr(ip))).To(BeTrue(), "%s %s in %s", name, ip, z.CIDR)
			}
		}
	}
	// Watchers: their readiness says whether they reach a target.
	wAB, wAA, wCA := podRef{m1, "w-ab"}, podRef{m1, "w-aa"}, podRef{m2, "w-ca"}
	wAB.create(t, singleEtcd("w-ab", "zone-1a", healthCmd(ips["t-b"])))
	wAA.create(t, singleEtcd("w-aa", "zone-1a", healthCmd(ips["t-a"])))
	wCA.create(t, singleEtcd("w-ca", "zone-2a", healthCmd(ips["t-a"])))
	expectReady := func(g Gomega, want map[podRef]bool) {
		g.Eventually(func(g Gomega) {
			for p, r := range want {
				g.Expect(ready(p.get(g))).To(Equal(r), "%s ready", p.name)
			}
		}).WithTimeout(60 * time.Second).WithPolling(250 * time.Millisecond).Should(Succeed())
	}
	expectReady(g, map[podRef]bool{wAB: true, wAA: true, wCA: true})
	g.Expect(reachable(ips["t-a"])).To(Succeed())

	// pods/log works as on a real cluster: the apiserver asks the node
	// agent's kubelet endpoint on the node's IP.
	t.Run("pods/log", func(t *testing.T) {
		g := NewWithT(t)
		logs := func(name string, opts *corev1.PodLogOptions) (string, error) {
			opts.Container = "etcd"
			// Do, not DoRaw: DoRaw drops the message of an error Status.
			res := m1.CoreV1().Pods("default").GetLogs(name, opts).Do(ctx)
			if err := res.Error(); err != nil {
				return "", err
			}
			out, err := res.Raw()
			return string(out), err
		}
		out, err := logs("t-a", &corev1.PodLogOptions{TailLines: ptr[int64](3)})
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(strings.Split(strings.TrimSuffix(out, "\n"), "\n")).To(HaveLen(3))
		g.Expect(out).To(ContainSubstring(`"level":`), "etcd's own log lines")
		out, err = logs("t-a", &corev1.PodLogOptions{LimitBytes: ptr[int64](100)})
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(out).To(HaveLen(100))
		_, err = logs("t-a", &corev1.PodLogOptions{Timestamps: true})
		g.Expect(err).To(MatchError(ContainSubstring("no per-line timestamps")))

		// A container that fails at once and restarts: previous is the
		// run before, and following the current run ends when it
		// restarts.
		crasher := podRef{m1, "crasher"}
		pod := singleEtcd("crasher", "zone-1b", nil)
		pod.Spec.Containers[0].Args = []string{"--no-such-flag"}
		crasher.create(t, pod)
		g.Eventually(func(g Gomega) {
			p := crasher.get(g)
			g.Expect(p.Status.ContainerStatuses).NotTo(BeEmpty())
			g.Expect(p.Status.ContainerStatuses[0].RestartCount).To(BeNumerically(">=", 1))
		}).WithTimeout(60 * time.Second).Should(Succeed())
		out, err = logs("crasher", &corev1.PodLogOptions{Previous: true})
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(out).To(ContainSubstring("no-such-flag"))
		g.Expect(out).NotTo(ContainSubstring("--- "), "the agent's start headers are not container output")
		fctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		stream, err := m1.CoreV1().Pods("default").GetLogs("crasher", &corev1.PodLogOptions{Container: "etcd", Follow: true}).Stream(fctx)
		g.Expect(err).NotTo(HaveOccurred())
		followed, err := io.ReadAll(stream)
		_ = stream.Close()
		g.Expect(err).NotTo(HaveOccurred(), "the followed stream ends when the container restarts")
		g.Expect(string(followed)).To(ContainSubstring("no-such-flag"))
		g.Expect(m1.CoreV1().Pods("default").Delete(ctx, "crasher", metav1.DeleteOptions{})).To(Succeed())
	})

	// A pod's connections come from its own address, as on a real node.
	t.Run("source address", func(t *testing.T) {
		if err := env.CanPartition(); err != nil {
			t.Skipf("pods connect from 127.0.0.1 here (no SNAT without root): %v", err)
		}
		g := NewWithT(t)
		l, err := net.Listen("tcp", fmt.Sprintf("127.%d.255.1:2379", st.Slot))
		g.Expect(err).NotTo(HaveOccurred())
		defer l.Close()
		seen := make(chan string, 16)
		go func() {
			for {
				c, err := l.Accept()
				if err != nil {
					return
				}
				select {
				case seen <- c.RemoteAddr().(*net.TCPAddr).IP.String():
				default:
				}
				_ = c.Close()
			}
		}()
		caller := podRef{m1, "caller"}
		caller.create(t, singleEtcd("caller", "zone-1b", healthCmd(fmt.Sprintf("127.%d.255.1", st.Slot))))
		var ip string
		g.Eventually(func(g Gomega) { ip = caller.get(g).Status.PodIP; g.Expect(ip).NotTo(BeEmpty()) }).WithTimeout(time.Minute).Should(Succeed())
		g.Eventually(seen).WithTimeout(time.Minute).Should(Receive(Equal(ip)))
	})

	// Partition zone-1a: nothing leaves it, nothing enters it; inside it,
	// and for its own node agent, everything works.
	t.Run("partition", func(t *testing.T) {
		if err := env.CanPartition(); err != nil {
			t.Skipf("partitions unavailable here: %v", err)
		}
		g := NewWithT(t)
		g.Expect(env.FailZone(ctx, "zone-1a", localenv.ModePartition)).To(Succeed())
		expectReady(g, map[podRef]bool{wAB: false, wCA: false, wAA: true, ta: true})
		g.Expect(reachable(ips["t-a"])).To(HaveOccurred(), "the partitioned zone answered from outside")
		g.Expect(reachable(ips["t-b"])).To(Succeed())
		g.Expect(env.RestoreZone(ctx, "zone-1a")).To(Succeed())
		expectReady(g, map[podRef]bool{wAB: true, wCA: true, wAA: true})
		g.Expect(reachable(ips["t-a"])).To(Succeed())

		// Partition the whole of member-2, its apiserver included.
		g.Expect(env.FailZone(ctx, "member-2", localenv.ModePartition)).To(Succeed())
		_, err := m2.CoreV1().Namespaces().Get(ctx, "default", metav1.GetOptions{})
		g.Expect(err).To(HaveOccurred(), "member-2's apiserver answered through the partition")
		g.Expect(reachable(ips["t-c"])).To(HaveOccurred())
		// Seen from inside member-2 (through its node agent's client, which
		// the partition lets through as it would a kubelet): w-ca cannot
		// reach t-a, t-c itself is fine.
		inside := podRef{env.Agent("member-2").Client(), ""}
		g.Eventually(func(g Gomega) {
			inside.name = "w-ca"
			g.Expect(ready(inside.get(g))).To(BeFalse())
			inside.name = "t-c"
			g.Expect(ready(inside.get(g))).To(BeTrue())
		}).WithTimeout(60 * time.Second).Should(Succeed())
		g.Expect(env.RestoreZone(ctx, "member-2")).To(Succeed())
		expectReady(g, map[podRef]bool{wCA: true, tc: true})
		g.Expect(reachable(ips["t-c"])).To(Succeed())
	})

	// Partitions into groups: each group reaches only its own units; this
	// process (outside every unit) reaches every group; a one-way cut
	// stops one direction only.
	t.Run("groups", func(t *testing.T) {
		if err := env.CanPartition(); err != nil {
			t.Skipf("partitions unavailable here: %v", err)
		}
		g := NewWithT(t)
		wBA := podRef{m1, "w-ba"}
		wBA.create(t, singleEtcd("w-ba", "zone-1b", healthCmd(ips["t-a"])))
		expectReady(g, map[podRef]bool{wBA: true})

		// Zones of two clusters together, one zone apart.
		g.Expect(env.Partition(ctx, localenv.Partition{Groups: [][]string{{"zone-1a", "zone-2a"}, {"zone-1b"}}})).To(Succeed())
		g.Expect(env.Status().Partition).NotTo(BeNil())
		expectReady(g, map[podRef]bool{wAB: false, wBA: false, wAA: true, wCA: true})
		for _, name := range []string{"t-a", "t-b", "t-c"} {
			g.Expect(reachable(ips[name])).To(Succeed(), "%s from outside every group", name)
		}

		// Whole clusters: the hub with member-1, member-2 apart (its
		// apiserver still answers this process).
		g.Expect(env.Partition(ctx, localenv.Partition{Groups: [][]string{{"hub", "member-1"}, {"member-2"}}})).To(Succeed())
		expectReady(g, map[podRef]bool{wCA: false, wAB: true, wBA: true, wAA: true})
		_, err := m2.CoreV1().Namespaces().Get(ctx, "default", metav1.GetOptions{})
		g.Expect(err).NotTo(HaveOccurred(), "member-2's apiserver from outside every group")

		// One way: zone-1a cannot reach zone-1b; zone-1b still reaches
		// zone-1a.
		g.Expect(env.Partition(ctx, localenv.Partition{OneWay: []localenv.Cut{{From: "zone-1a", To: "zone-1b"}}})).To(Succeed())
		expectReady(g, map[podRef]bool{wAB: false, wBA: true, wCA: true, wAA: true})

		g.Expect(env.Partition(ctx, localenv.Partition{Groups: [][]string{{"member-1"}, {"zone-1a"}}})).To(MatchError(localenv.ErrBadPartition))
		g.Expect(env.HealPartition(ctx)).To(Succeed())
		g.Expect(env.Status().Partition).To(BeNil())
		expectReady(g, map[podRef]bool{wAB: true, wBA: true, wCA: true, wAA: true})
		g.Expect(m1.CoreV1().Pods("default").Delete(ctx, "w-ba", metav1.DeleteOptions{})).To(Succeed())
	})

	// Kill the whole of member-2: its processes die and its apiserver
	// stops; restoring brings all back with the data.
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{"http://" + ips["t-c"] + ":2379"}, DialTimeout: 2 * time.Second})
	g.Expect(err).NotTo(HaveOccurred())
	defer cli.Close()
	wctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	_, err = cli.Put(wctx, "kept", "across the failure")
	cancel()
	g.Expect(err).NotTo(HaveOccurred())
	oldPID := pidOf(g, tc.get(g))
	g.Expect(env.FailZone(ctx, "member-2", localenv.ModeKill)).To(Succeed())
	g.Expect(proc.StartTicks(oldPID)).To(BeZero(), "t-c's etcd survived")
	_, err = m2.CoreV1().Namespaces().Get(ctx, "default", metav1.GetOptions{})
	g.Expect(err).To(HaveOccurred())
	g.Expect(err.Error()).To(ContainSubstring("connection refused"))
	g.Expect(env.Agent("member-2")).To(BeNil())
	expectReady(g, map[podRef]bool{ta: true, tb: true}) // the other cluster is untouched
	g.Expect(env.RestoreZone(ctx, "member-2")).To(Succeed())
	g.Eventually(func(g Gomega) {
		p := tc.get(g)
		g.Expect(ready(p)).To(BeTrue())
		g.Expect(p.Status.PodIP).To(Equal(ips["t-c"]))
		g.Expect(p.Status.ContainerStatuses[0].RestartCount).To(BeNumerically(">=", 1))
	}).WithTimeout(60 * time.Second).Should(Succeed())
	g.Eventually(func(g Gomega) {
		rctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		defer cancel()
		resp, err := cli.Get(rctx, "kept")
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(resp.Kvs).To(HaveLen(1))
	}).WithTimeout(30 * time.Second).Should(Succeed())

	// Stop, then start again on the same state directory: same addresses,
	// same credentials, the pods come back.
	status := env.Status()
	t.Logf("memory before stop: %d processes, total PSS %d MiB", countProcs(status), status.TotalPSS>>20)
	g.Expect(env.Stop()).To(Succeed())
	stopped = true
	live, err := proc.LivePIDFiles(localenv.PIDDir(dir))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(live).To(BeEmpty(), "processes left after Stop")

	start = time.Now()
	env2, err := localenv.Start(ctx, cfg)
	g.Expect(err).NotTo(HaveOccurred())
	t.Cleanup(func() { _ = env2.Stop() })
	t.Logf("environment restarted on its state in %.1fs", time.Since(start).Seconds())
	g.Expect(env2.State().Slot).To(Equal(st.Slot))
	m1 = clientFromKubeconfig(t, env2.Kubeconfig("member-1"))
	ta.cs = m1
	g.Eventually(func(g Gomega) {
		p := ta.get(g)
		g.Expect(ready(p)).To(BeTrue())
		g.Expect(p.Status.PodIP).To(Equal(ips["t-a"]))
	}).WithTimeout(60 * time.Second).Should(Succeed())
}

func countProcs(s localenv.Status) int {
	n := len(s.Components) + 1
	for _, c := range s.Clusters {
		n += len(c.Processes) + len(c.Pods)
	}
	return n
}

func ptr[T any](v T) *T { return &v }
