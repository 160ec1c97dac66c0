package multicluster

import (
	"context"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr/funcr"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/etcdfed/etcdfed/internal/drill"
	"github.com/etcdfed/etcdfed/internal/localenv"
	"github.com/etcdfed/etcdfed/internal/localenv/realnode"
	"github.com/etcdfed/etcdfed/internal/s3test"
	"github.com/etcdfed/etcdfed/internal/testenv"
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

// startRealEnv starts a real-node environment once per fixture.
func startRealEnv(tb testing.TB, fx *envFixture, cfg localenv.Config) *localenv.Env {
	tb.Helper()
	skipUnlessReal(tb)
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
		cfg.StateDir, cfg.Nodes, cfg.ConfigDir = fx.state, localenv.NodesReal, filepath.Join(root, "config")
		cfg.Progress = func(ev localenv.Event) { fmt.Fprintln(os.Stderr, ev.String()) }
		cfg.Log = funcr.New(func(prefix, args string) {
			if verbose {
				fmt.Fprintln(os.Stderr, prefix, args)
			}
		}, funcr.Options{})
		start := time.Now()
		fx.env, fx.err = localenv.Start(context.Background(), cfg)
		if fx.err == nil {
			fmt.Fprintf(os.Stderr, "real-node environment ready in %.1fs (state in %s)\n", time.Since(start).Seconds(), fx.state)
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

var oneCluster envFixture

// TestRealNodesPodRuns: one member cluster of real nodes; a pod of the
// pause image is scheduled by kube-scheduler, started by kubelet through
// containerd and runc, gets an address of its node's pod range from the
// CNI bridge, and turns Ready.
func TestRealNodesPodRuns(t *testing.T) {
	env := startRealEnv(t, &oneCluster, localenv.Config{Clusters: 1, NoComponents: true})
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
	var got *corev1.Pod
	err = poll(ctx, 2*time.Minute, "pod default/pause ready", func(ctx context.Context) (string, error) {
		got, err = cs.CoreV1().Pods("default").Get(ctx, "pause", metav1.GetOptions{})
		if err != nil {
			return "", err
		}
		if !PodReady(got) {
			return string(got.Status.Phase), nil
		}
		return "", nil
	})
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
func realTopology(t *testing.T) (*Topology, *localenv.Env, string) {
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
		DrillSpec(ctx, DrillSpecInput{T: t, Topology: topo, Etcd: etcd, Member: "real-1", Mode: drill.ModeKill,
			Etcdfed: filepath.Join(bin, "etcdfed"), StateDir: env.State().Dir})
	})
	t.Run("restored from a snapshot", func(t *testing.T) {
		addr, err := env.ServiceAddress(0)
		if err != nil {
			t.Fatal(err)
		}
		srv := s3test.StartOnT(t, addr.String(), "real-restore")
		RestoreFromSnapshotSpec(ctx, RestoreFromSnapshotSpecInput{T: t, Topology: topo, Source: etcd, S3: srv, Bucket: "real-restore",
			Namespace: "real-restored", Name: "restored", Domain: "restored.etcd.test"})
	})
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
	var victims []string
	for _, m := range ec.Status.Members {
		if m.Name != ec.Status.Leader {
			victims = append(victims, m.Name)
			break
		}
	}
	victims = append(victims, ec.Status.Leader)
	zone := ""
	for _, m := range ec.Status.Members {
		if m.Name == ec.Status.Leader {
			zone = m.Zone
		}
	}
	for _, m := range ec.Status.Members {
		if m.Zone == zone {
			victims = append(victims, m.Name)
		}
	}
	for _, v := range victims {
		if !t.Run(v, func(t *testing.T) {
			PodDeletedSpec(ctx, PodDeletedSpecInput{T: t, Topology: topo, Etcd: etcd, Member: v})
			progress(ctx, t, w, 20, 30*time.Second)
		}) {
			break
		}
	}
	w.Stop()
	checkWorkload(ctx, t, w)
}
