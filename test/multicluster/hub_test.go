package multicluster

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr/funcr"

	etcdfedv1 "github.com/etcdfed/etcdfed/api/v1alpha1"
	"github.com/etcdfed/etcdfed/dev/localenv"
	"github.com/etcdfed/etcdfed/dev/testenv"
)

// A second local environment runs the real hub and one real spoke per
// member cluster (built from this checkout), so EtcdClusters are formed,
// scaled and repaired by etcdfed itself, with real etcd and real DNS.
var hubFx struct {
	once sync.Once
	err  error
	env  *localenv.Env
	topo *Topology
	bin  string
	dirs []string
	// state is the environment's state directory, whose control socket
	// (stopControl) lets the etcdfed CLI fail its zones.
	state       string
	stopControl func()
}

// binFx is hub, spoke, etcdfed and etcdfed-init built from this checkout (with the
// pinned tools beside them), once per test binary.
var binFx struct {
	once sync.Once
	dir  string
	err  error
}

func freshBin() (string, error) {
	binFx.once.Do(func() {
		if binFx.dir, binFx.err = os.MkdirTemp("", "multicluster-bin-"); binFx.err != nil {
			return
		}
		start := time.Now()
		if binFx.err = testenv.FreshBinDir(binFx.dir); binFx.err == nil {
			fmt.Fprintf(os.Stderr, "hub, spoke, etcdfed and etcdfed-init from this tree in %.1fs (bin/ from make, or built)\n", time.Since(start).Seconds())
		}
	})
	return binFx.dir, binFx.err
}

// stopHubFixture stops the environment; its state (logs of the hub,
// spokes, apiservers and pods) is kept when a test failed, or always with
// ETCDFED_KEEP_STATE set (to read a benchmark's hub log).
func stopHubFixture(failed bool) {
	if hubFx.stopControl != nil {
		hubFx.stopControl()
	}
	if hubFx.env != nil {
		if err := hubFx.env.Stop(); err != nil {
			fmt.Fprintln(os.Stderr, "stop hub environment:", err)
		}
	}
	if binFx.dir != "" {
		_ = os.RemoveAll(binFx.dir)
	}
	keep := failed || os.Getenv("ETCDFED_KEEP_STATE") != ""
	for _, d := range hubFx.dirs {
		if keep {
			fmt.Fprintln(os.Stderr, "kept for inspection:", d)
			continue
		}
		_ = os.RemoveAll(d)
	}
}

func hubTopology(tb testing.TB) *Topology {
	tb.Helper()
	testenv.SkipIfShort(tb, "the local environment with the hub and spokes (kube-apiservers, node agents, etcd)")
	if realNodesAsked() {
		return realHubTopology(tb)
	}
	hubFx.once.Do(func() {
		state, err := os.MkdirTemp("", "multicluster-hub-")
		if err != nil {
			hubFx.err = err
			return
		}
		hubFx.dirs = []string{state}
		bin, err := freshBin()
		if err != nil {
			hubFx.err = err
			return
		}
		hubFx.bin = bin
		verbose := os.Getenv("MULTICLUSTER_LOG") != ""
		start := time.Now()
		hubFx.env, hubFx.err = startLocalEnv(context.Background(), localenv.Config{
			StateDir: state, Clusters: 3, ZonesPerCluster: 1, BinDir: bin,
			BackoffBase: time.Second, BackoffMax: 5 * time.Second,
			Log: funcr.New(func(prefix, args string) {
				if verbose {
					fmt.Fprintln(os.Stderr, prefix, args)
				}
			}, funcr.Options{}),
		})
		if hubFx.err != nil {
			return
		}
		hubFx.state = state
		if hubFx.stopControl, hubFx.err = localenv.ServeControl(hubFx.env); hubFx.err != nil {
			return
		}
		fmt.Fprintf(os.Stderr, "local environment with hub and spokes ready in %.1fs%s (logs in %s)\n", time.Since(start).Seconds(), distanceNote(hubFx.env), filepath.Join(state, "logs"))
		hubFx.topo, hubFx.err = LocalTopology(hubFx.env, nil)
	})
	if hubFx.err != nil {
		tb.Fatalf("local environment with hub: %v", hubFx.err)
	}
	return hubFx.topo
}

// TestEtcdClusterLifecycle takes one EtcdCluster through its life on three
// member clusters in three zones: bootstrap (1/1/1, tolerant, records
// resolving), etcdctl --discovery-srv, a deleted pod, 3 -> 5 -> 3 under a
// recorded workload, a spec change rolled out under load, a cordoned zone
// evacuated and returned under load, a hub killed in the middle of a
// scale-up, deletion.
func TestEtcdClusterLifecycle(t *testing.T) {
	topo := hubTopology(t)
	ctx := context.Background()
	var etcd *ManagedEtcd
	if !t.Run("bootstrap 3", func(t *testing.T) {
		etcd = EtcdClusterSpec(ctx, EtcdClusterSpecInput{T: t, Topology: topo, Namespace: "lifecycle", Name: "main", Domain: "main.etcd.test", Replicas: 3, WantZones: "1/1/1"})
	}) {
		t.FailNow()
	}
	t.Run("etcdctl --discovery-srv", func(t *testing.T) {
		DiscoverySRVSpec(ctx, DiscoverySRVSpecInput{T: t, Topology: topo, Etcd: etcd, Etcdctl: filepath.Join(hubFx.bin, "etcdctl")})
	})
	t.Run("deleted pod keeps its member ID", func(t *testing.T) {
		PodDeletedSpec(ctx, PodDeletedSpecInput{T: t, Topology: topo, Etcd: etcd, Member: "main-1"})
	})
	t.Run("scale 3-5-3 under load", func(t *testing.T) {
		ScaleUnderLoadSpec(ctx, ScaleUnderLoadSpecInput{T: t, Topology: topo, Etcd: etcd, Sizes: []int{5, 3}})
	})
	t.Run("spec change rolls one member at a time, leader last, under load", func(t *testing.T) {
		// The local environment runs bin/etcd whatever the image says: a
		// new image (of the same etcd release) restarts every pod as a
		// version change would.
		image := "registry.k8s.io/etcd:3.6.16-0"
		RollSpecSpec(ctx, RollSpecInput{T: t, Topology: topo, Etcd: etcd, Image: image, Change: func(s *etcdfedv1.EtcdClusterSpec) { s.Image = image }})
	})
	t.Run("cordoned zone evacuated and returned under load", func(t *testing.T) {
		CordonZoneSpec(ctx, CordonZoneSpecInput{T: t, Topology: topo, Etcd: etcd, Member: "main-0"})
	})
	t.Run("hub killed mid scale-up", func(t *testing.T) {
		HubRestartSpec(ctx, HubRestartSpecInput{T: t, Topology: topo, Etcd: etcd, To: 5})
	})
	t.Run("delete", func(t *testing.T) {
		DeleteEtcdClusterSpec(ctx, t, topo, etcd)
	})
}

// TestEtcdClusterBootstrapFive: five members over three zones are placed
// 2/2/1 and survive the loss of any one zone; at zero distance the hub
// measures the round trips and keeps etcd's default timing; at rest, the
// ring costs no writes from the hub.
func TestEtcdClusterBootstrapFive(t *testing.T) {
	topo := hubTopology(t)
	ctx := context.Background()
	etcd := EtcdClusterSpec(ctx, EtcdClusterSpecInput{T: t, Topology: topo, Namespace: "five", Name: "five", Domain: "five.etcd.test", Replicas: 5, WantZones: "2/2/1"})
	t.Run("zero distance: round trips measured, etcd's default timing", func(t *testing.T) {
		ZeroDistanceTimingSpec(ctx, ZeroDistanceTimingSpecInput{T: t, Topology: topo, Etcd: etcd})
	})
	t.Run("at rest the hub writes nothing", func(t *testing.T) {
		AtRestSpec(ctx, AtRestSpecInput{T: t, Topology: topo, Etcd: etcd, Window: 30 * time.Second})
	})
	DeleteEtcdClusterSpec(ctx, t, topo, etcd)
}

// realNodesAsked: ETCDFED_NODES=real (make nemesis NODES=real, make
// scenarios NODES=real) runs the tests on hubTopology on real nodes
// (kubelet, containerd and runc per node, the hub and the spokes
// in-cluster): the same topology (three member clusters of one zone),
// from the real-node fixture of realnodes_test.go.
func realNodesAsked() bool { return os.Getenv("ETCDFED_NODES") == "real" }

// realHubTopology is hubTopology on real nodes: the real-node ring
// environment, its control socket and fresh binaries, recorded in hubFx
// for the tests that fail zones through the CLI (bin, state). hubFx.env
// stays nil: the real-node fixture stops its environment itself, and the
// tests that reach for the process environment's components are for
// process nodes only.
func realHubTopology(tb testing.TB) *Topology {
	tb.Helper()
	topo, env, bin := realTopology(tb)
	hubFx.once.Do(func() {
		hubFx.topo, hubFx.bin, hubFx.state = topo, bin, env.State().Dir
	})
	return topo
}
