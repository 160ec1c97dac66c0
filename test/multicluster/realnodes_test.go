package multicluster

import (
	"context"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr/funcr"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	etcdfedv1 "github.com/etcdfed/etcdfed/api/v1alpha1"
	"github.com/etcdfed/etcdfed/dev/drill"
	"github.com/etcdfed/etcdfed/dev/localenv"
	"github.com/etcdfed/etcdfed/dev/localenv/realnode"
	"github.com/etcdfed/etcdfed/dev/s3test"
	"github.com/etcdfed/etcdfed/dev/testenv"
)

// skipUnlessReal skips a test unless real nodes were asked for
// (ETCDFED_REALNODES=1, as make test-realnodes sets it): they need root,
// Debian's runc and CNI plugins and the real-node tools.
func skipUnlessReal(tb testing.TB) {
	tb.Helper()
	testenv.SkipIfShort(tb, "real nodes (kubelet, containerd, apiservers)")
	if os.Getenv("ETCDFED_NETNS") == "" {
		tb.Skip("real nodes run with ETCDFED_REALNODES=1 (make test-realnodes): they need root, hack/system-deps.sh realnodes and hack/tools.sh realnodes")
	}
}

// envFixture is one real-node environment, started once.
type envFixture struct {
	once  sync.Once
	err   error
	env   *localenv.Env
	state string
}

var realFixtures struct {
	mu   sync.Mutex
	envs []*envFixture
}

// startRealEnv starts a real-node environment once per fixture. A test
// binary runs one at a time: they share its network namespace, and with
// it their addresses.
func startRealEnv(tb testing.TB, fx *envFixture, cfg localenv.Config) *localenv.Env {
	tb.Helper()
	skipUnlessReal(tb)
	realFixtures.mu.Lock()
	for _, other := range realFixtures.envs {
		if other != fx {
			realFixtures.mu.Unlock()
			tb.Skipf("this test runs its own real-node environment, and this test binary runs another (in %s): one per binary, since they share its network namespace; run this test in a binary of its own (make failures NODES=real does)", other.state)
		}
	}
	realFixtures.mu.Unlock()
	fx.once.Do(func() {
		realFixtures.mu.Lock()
		realFixtures.envs = append(realFixtures.envs, fx)
		realFixtures.mu.Unlock()
		if fx.state, fx.err = os.MkdirTemp("", "realnodes-"); fx.err != nil {
			return
		}
		root, err := testenv.RepoRoot()
		if err != nil {
			fx.err = err
			return
		}
		if cfg.BinDir == "" {
			if cfg.BinDir, fx.err = testenv.BinDir(); fx.err != nil {
				return
			}
		}
		verbose := os.Getenv("MULTICLUSTER_LOG") != ""
		cfg.StateDir, cfg.Nodes, cfg.SourceDir = fx.state, localenv.NodesReal, root
		cfg.Progress = func(ev localenv.Event) { fmt.Fprintln(os.Stderr, ev.String()) }
		cfg.Log = funcr.New(func(prefix, args string) {
			if verbose {
				fmt.Fprintln(os.Stderr, prefix, args)
			}
		}, funcr.Options{})
		start := time.Now()
		fx.env, fx.err = startLocalEnv(context.Background(), cfg)
		if fx.err == nil {
			s := fx.env.Status()
			fmt.Fprintf(os.Stderr, "real-node environment ready in %.1fs%s (state in %s), %d MiB PSS (%d MiB RSS)\n", time.Since(start).Seconds(), distanceNote(fx.env), fx.state, s.TotalPSS>>20, s.TotalRSS>>20)
		}
	})
	if fx.err != nil {
		tb.Fatalf("real-node environment: %v", fx.err)
	}
	return fx.env
}

// stopRealFixtures stops every real-node environment; their state is kept when a test
// failed, or with ETCDFED_KEEP_STATE.
func stopRealFixtures(failed bool) {
	keep := failed || os.Getenv("ETCDFED_KEEP_STATE") != ""
	for _, fx := range realFixtures.envs {
		if fx.env != nil {
			if err := fx.env.Stop(); err != nil {
				fmt.Fprintln(os.Stderr, "stop environment:", err)
			}
		}
		if fx.state == "" {
			continue
		}
		if keep {
			fmt.Fprintln(os.Stderr, "kept for inspection:", fx.state)
			continue
		}
		_ = os.RemoveAll(fx.state)
	}
}

// TestRealNodesPodRuns: a pod of the pause image in member-1 is scheduled
// by kube-scheduler, started by kubelet through containerd and runc, gets
// an address of its node's pod range from the CNI bridge, and turns Ready.
func TestRealNodesPodRuns(t *testing.T) {
	_, env, _ := realTopology(t)
	ctx := context.Background()
	cs, err := env.Clientset("member-1")
	if err != nil {
		t.Fatal(err)
	}
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "pause", Namespace: "default"},
		Spec: corev1.PodSpec{
			Containers: []corev1.Container{{Name: "pause", Image: realnode.SandboxImage, ImagePullPolicy: corev1.PullNever,
				SecurityContext: &corev1.SecurityContext{RunAsUser: ptr.To[int64](65532)}}},
			TerminationGracePeriodSeconds: ptr.To[int64](1),
		},
	}
	if _, err := cs.CoreV1().Pods("default").Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	got, err := WaitForPodReady(ctx, WaitForPodInput{Cluster: &Cluster{Name: "member-1", Clientset: cs}, Namespace: "default", Name: "pause", Timeout: 2 * time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	node := env.State().MemberClusters[0].Zones[0].Nodes[0]
	ip, err := netip.ParseAddr(got.Status.PodIP)
	if err != nil || got.Spec.NodeName != node.Name || !netip.MustParsePrefix(node.PodCIDR).Contains(ip) {
		t.Fatalf("pod on %s at %s, want node %s and an address in %s", got.Spec.NodeName, got.Status.PodIP, node.Name, node.PodCIDR)
	}
	t.Logf("pod on %s at %s", got.Spec.NodeName, got.Status.PodIP)
	if err := cs.CoreV1().Pods("default").Delete(ctx, "pause", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
}

// The ring environment: hub + 3 member clusters of real nodes (one zone
// and one node each), the hub and the spokes deployed in-cluster from
// config/.
var ringEnv envFixture

// realTopology starts (once) the real-node environment with the hub and
// the spokes in-cluster, serves its control socket (for `etcdfed drill`)
// and returns its topology and the bin directory (hub, spoke and etcdfed
// freshly built, the images made from them).
func realTopology(t testing.TB) (*Topology, *localenv.Env, string) {
	t.Helper()
	skipUnlessReal(t)
	bin, err := freshBin()
	if err != nil {
		t.Fatal(err)
	}
	env := startRealEnv(t, &ringEnv, localenv.Config{Clusters: 3, ZonesPerCluster: 1, BinDir: bin})
	ringTopo.once.Do(func() {
		if ringTopo.stop, ringTopo.err = localenv.ServeControl(env); ringTopo.err != nil {
			return
		}
		ringTopo.topo, ringTopo.err = RealTopology(env)
	})
	if ringTopo.err != nil {
		t.Fatal(ringTopo.err)
	}
	return ringTopo.topo, env, bin
}

var ringTopo struct {
	once sync.Once
	topo *Topology
	stop func()
	err  error
}

// TestRealNodesRing: a 5-member ring over 3 clusters of real nodes,
// formed by the in-cluster hub and spokes (etcd 3.5), then, each under
// the recorded workload and its checks: member pods deleted with `kubectl
// delete pod` (a member, the leader, every member of one zone in turn),
// each back with the same etcd ID and its data; a lost volume replaced;
// the version rolled from 3.5 to 3.6, leader last; the leader's cluster's
// node killed (the members evacuated, then moved back when it returns);
// `etcdfed drill zone-failure --mode kill --json`; and the ring restored
// from a snapshot into a new EtcdCluster.
func TestRealNodesRing(t *testing.T) {
	topo, env, bin := realTopology(t)
	ctx := context.Background()
	var etcd *ManagedEtcd
	if !t.Run("5 members over 3 clusters formed in-cluster", func(t *testing.T) {
		etcd = EtcdClusterSpec(ctx, EtcdClusterSpecInput{T: t, Topology: topo, Namespace: "real", Name: "real", Domain: "real.etcd.test",
			Replicas: 5, WantZones: "2/2/1", Version: upgradeFrom})
	}) {
		t.FailNow()
	}
	logMemory(t, env, "with the 5-member ring")
	t.Run("distance between member pods", func(t *testing.T) {
		distanceBetweenPods(ctx, t, topo, env, etcd)
	})
	t.Run("the leader's pod deleted at 10ms between clusters", func(t *testing.T) {
		leaderPodDeletedAtDistance(ctx, t, topo, env, etcd, "member-1:member-2=10ms,member-1:member-3=10ms,member-2:member-3=10ms", 10*time.Millisecond)
	})
	t.Run("kubectl delete pod: a member, the leader, every member of one zone", func(t *testing.T) {
		podsDeletedUnderLoad(ctx, t, topo, etcd)
	})
	t.Run("a lost volume replaced", func(t *testing.T) {
		VolumeLostSpec(ctx, VolumeLostSpecInput{T: t, Topology: topo, Etcd: etcd, Member: "real-4"})
	})
	t.Run("3.5 to 3.6 one member at a time, leader last", func(t *testing.T) {
		UpgradeSpec(ctx, UpgradeSpecInput{T: t, Topology: topo, Etcd: etcd, To: upgradeTo, Timeout: 20 * time.Minute})
	})
	t.Run("the leader's node killed: evacuated, and back", func(t *testing.T) {
		ZoneKilledAndReturnedSpec(ctx, ZoneKilledAndReturnedSpecInput{T: t, Topology: topo, Etcd: etcd, WantZones: "2/2/1"})
	})
	t.Run("etcdfed drill zone-failure --mode kill --json", func(t *testing.T) {
		// From an idle ring, whatever the subtests before left in flight
		// (the drill refuses to start otherwise).
		if _, err := WaitForEtcdClusterReady(ctx, WaitForEtcdClusterInput{Hub: topo.Hub, Namespace: etcd.Namespace, Name: etcd.Name,
			Replicas: 5, Tolerant: true, Timeout: 10 * time.Minute}); err != nil {
			t.Fatal(err)
		}
		DrillSpec(ctx, DrillSpecInput{T: t, Topology: topo, Etcd: etcd, Member: "real-1", Mode: drill.ModeKill,
			Etcdfed: filepath.Join(bin, "etcdfed"), StateDir: env.State().Dir})
	})
	t.Run("restored from a snapshot", func(t *testing.T) {
		addr, err := env.ServiceAddress(0)
		if err != nil {
			t.Fatal(err)
		}
		srv := s3test.StartOnT(t, addr.String(), "real-restore")
		// Into the source's namespace: the hub allows a restore from
		// another namespace's ring only with
		// --allowed-restore-source-namespaces, which the install does not
		// set (TestScenarioRestoreFromSnapshot restores in place too).
		RestoreFromSnapshotSpec(ctx, RestoreFromSnapshotSpecInput{T: t, Topology: topo, Source: etcd, S3: srv, Bucket: "real-restore",
			Namespace: etcd.Namespace, Name: "restored", Domain: "restored.etcd.test"})
	})
}

// logMemory logs the environment's memory (every process it started, the
// nodes' containers included: PSS, and RSS) and its largest parts.
func logMemory(t *testing.T, env *localenv.Env, when string) {
	s := env.Status()
	var n int
	for _, c := range s.Clusters {
		n += len(c.Processes) + len(c.Pods)
	}
	t.Logf("real-node environment %s: %d processes, %d MiB PSS (%d MiB RSS)", when, n, s.TotalPSS>>20, s.TotalRSS>>20)
}

// podsDeletedUnderLoad deletes member pods one after the other under the
// recorded workload: a member, then the leader, then every member of one
// zone in turn (PodDeletedSpec: each comes back with the same etcd ID
// and its data, no membership change), and checks the workload.
func podsDeletedUnderLoad(ctx context.Context, t *testing.T, topo *Topology, etcd *ManagedEtcd) {
	w := StartWorkload(ctx, t, StartWorkloadInput{Client: etcd.Client, Prefix: "real-pods/", WatchEachEndpoint: true})
	waitForWorkloadProgress(ctx, t, w)
	ec, err := etcd.Get(ctx, topo.Hub)
	if err != nil {
		t.Fatal(err)
	}
	victims := podVictims(ec.Status.Members, ec.Status.Leader)
	t.Logf("deleting in turn: %v (leader %s)", victims, ec.Status.Leader)
	for _, v := range victims {
		// The leader's etcd must no longer lead at SIGTERM: its pod's
		// preStop hook moved leadership first (read from its own log).
		var logs *etcdLog
		if v == ec.Status.Leader {
			for _, m := range ec.Status.Members {
				if m.Name == v {
					logs = followEtcdLog(ctx, t, memberCluster(t, topo, m.Cluster), etcd.ObjectName(v))
				}
			}
		}
		start := time.Now()
		if !t.Run(v, func(t *testing.T) {
			PodDeletedSpec(ctx, PodDeletedSpecInput{T: t, Topology: topo, Etcd: etcd, Member: v})
			progress(ctx, t, w, 20, 30*time.Second)
		}) {
			break
		}
		if logs != nil {
			checkStoppedAsFollower(t, "leader "+v+"'s pod deleted", logs.wait(30*time.Second))
		}
		// The workload keeps its longest gap only: it is this deletion's
		// when it began after it.
		gap, at := w.MaxWriteGapAt()
		t.Logf("%s's pod deleted: longest write gap of the workload so far %s, began %.2fs after this deletion", v, gap.Round(time.Millisecond), at.Sub(start).Seconds())
	}
	w.Stop()
	checkWorkload(ctx, t, w)
}

// podVictims picks whose pods podsDeletedUnderLoad deletes, each once: a
// member outside the leader's zone and outside the zone deleted whole,
// the leader, then every member of one zone other than the leader's (the
// one with the most members; the leader's when it is the only one).
func podVictims(members []etcdfedv1.MemberStatus, leader string) []string {
	zoneOf := map[string]string{}
	count := map[string]int{}
	for _, m := range members {
		zoneOf[m.Name] = m.Zone
		count[m.Zone]++
	}
	lz := zoneOf[leader]
	whole := lz
	for z, n := range count {
		if z != lz && (whole == lz || n > count[whole] || (n == count[whole] && z < whole)) {
			whole = z
		}
	}
	var out []string
	for _, m := range members {
		if m.Zone != lz && m.Zone != whole {
			out = append(out, m.Name)
			break
		}
	}
	out = append(out, leader)
	for _, m := range members {
		if m.Zone == whole && !slices.Contains(out, m.Name) {
			out = append(out, m.Name)
		}
	}
	return out
}

// TestRealNodesPodStartup measures pod start to Ready on real nodes: a
// single-member etcd pod (the etcd image, an emptyDir, a /readyz
// readiness probe every second) created and deleted five times in
// member-1; it logs each time and the median. TestPodStartupProcessNodes
// measures the same on process nodes.
func TestRealNodesPodStartup(t *testing.T) {
	_, env, _ := realTopology(t)
	cs, err := env.Clientset("member-1")
	if err != nil {
		t.Fatal(err)
	}
	measurePodStartup(context.Background(), t, cs, "real nodes", 5)
}

// TestPodStartupProcessNodes is TestRealNodesPodStartup's measurement on
// process nodes (ETCDFED_MEASURE=1; not part of make test).
func TestPodStartupProcessNodes(t *testing.T) {
	if os.Getenv("ETCDFED_MEASURE") == "" {
		t.Skip("a measurement: run it with ETCDFED_MEASURE=1")
	}
	topo := localTopology(t)
	measurePodStartup(context.Background(), t, topo.Members[0].Clientset, "process nodes", 5)
}

// measurePodStartup creates an etcd pod n times and logs how long each
// took from creation to Ready (by the apiserver's clock: creation
// timestamp to the Ready condition's transition), and the median.
func measurePodStartup(ctx context.Context, t *testing.T, cs kubernetes.Interface, where string, n int) {
	const ns = "pod-startup"
	if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	var took []time.Duration
	c := &Cluster{Name: where, Clientset: cs}
	for i := range n {
		name := fmt.Sprintf("etcd-%d", i)
		pod := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
			Spec: corev1.PodSpec{
				AutomountServiceAccountToken:  ptr.To(false),
				TerminationGracePeriodSeconds: ptr.To[int64](2),
				Containers: []corev1.Container{{
					Name: "etcd", Image: etcdfedv1.DefaultImageRepository + ":v3.6.16", ImagePullPolicy: corev1.PullIfNotPresent,
					Command: []string{"/usr/local/bin/etcd", "--name=default", "--data-dir=/var/lib/etcd/data",
						"--listen-client-urls=http://$(POD_IP):2379", "--advertise-client-urls=http://$(POD_IP):2379",
						"--listen-peer-urls=http://$(POD_IP):2380", "--initial-advertise-peer-urls=http://$(POD_IP):2380",
						"--initial-cluster=default=http://$(POD_IP):2380"},
					Env: []corev1.EnvVar{{Name: "POD_IP", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "status.podIP"}}}},
					ReadinessProbe: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/readyz", Port: intstr.FromInt32(2379)}},
						PeriodSeconds: 1},
					VolumeMounts: []corev1.VolumeMount{{Name: "data", MountPath: "/var/lib/etcd"}},
				}},
				Volumes: []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}},
			},
		}
		created, err := cs.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		p, err := WaitForPodReady(ctx, WaitForPodInput{Cluster: c, Namespace: ns, Name: name, Timeout: 2 * time.Minute})
		if err != nil {
			t.Fatal(err)
		}
		var ready time.Time
		for _, c := range p.Status.Conditions {
			if c.Type == corev1.PodReady {
				ready = c.LastTransitionTime.Time
			}
		}
		d := ready.Sub(created.CreationTimestamp.Time)
		took = append(took, d)
		t.Logf("%s: pod %s ready %.1fs after its creation", where, name, d.Seconds())
		if err := cs.CoreV1().Pods(ns).Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		if err := WaitForPodGone(ctx, WaitForPodInput{Cluster: c, Namespace: ns, Name: name, Timeout: 2 * time.Minute}); err != nil {
			t.Fatal(err)
		}
	}
	slices.Sort(took)
	t.Logf("%s: pod start to Ready, median of %d: %.1fs (min %.1fs, max %.1fs)", where, n, took[n/2].Seconds(), took[0].Seconds(), took[n-1].Seconds())
}

// TestPodVictims: each member once; 2/2/1 with the leader in a zone of
// two: the single zone's member, the leader, the other zone of two.
func TestPodVictims(t *testing.T) {
	ms := []etcdfedv1.MemberStatus{{Name: "a", Zone: "z1"}, {Name: "b", Zone: "z1"}, {Name: "c", Zone: "z2"}, {Name: "d", Zone: "z2"}, {Name: "e", Zone: "z3"}}
	for _, tc := range []struct{ leader, want string }{
		{"a", "[e a c d]"},
		{"e", "[c e a b]"}, // the leader alone in its zone
		{"d", "[e d a b]"},
	} {
		if got := fmt.Sprint(podVictims(ms, tc.leader)); got != tc.want {
			t.Errorf("leader %s: %s, want %s", tc.leader, got, tc.want)
		}
	}
}
