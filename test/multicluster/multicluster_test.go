package multicluster

import (
	"context"
	"fmt"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr/funcr"

	"github.com/etcdfed/etcdfed/dev/localenv"
	"github.com/etcdfed/etcdfed/dev/testenv"
)

// One local environment (hub + 3 member clusters, one zone each) and the
// ring's DNS (embedded servers on the member clusters' DNS addresses, as
// the spokes would run them) serve every test of this package.
var fx struct {
	once  sync.Once
	err   error
	env   *localenv.Env
	dns   *RingDNS
	topo  *Topology
	state string
}

func TestMain(m *testing.M) {
	// TestRealNodes*, and every test on hubTopology with
	// ETCDFED_NODES=real: the binary re-runs itself in a network namespace of
	// its own, where the real nodes' addresses live (realnodes_test.go).
	if os.Getenv("ETCDFED_REALNODES") != "" || realNodesAsked() {
		if _, err := localenv.EnterOwnNetwork(""); err != nil {
			fmt.Fprintln(os.Stderr, "real nodes:", err)
			os.Exit(1)
		}
	}
	code := m.Run()
	stopRealFixtures(code != 0)
	stopHubFixture(code != 0)
	if fx.dns != nil {
		fx.dns.Stop()
	}
	if fx.env != nil {
		if err := fx.env.Stop(); err != nil {
			fmt.Fprintln(os.Stderr, "stop environment:", err)
		}
	}
	if fx.state != "" {
		_ = os.RemoveAll(fx.state)
	}
	os.Exit(code)
}

func localTopology(t *testing.T) *Topology {
	t.Helper()
	testenv.SkipIfShort(t, "the local environment (kube-apiservers, node agents, etcd)")
	fx.once.Do(func() {
		fx.state, fx.err = os.MkdirTemp("", "multicluster-")
		if fx.err != nil {
			return
		}
		verbose := os.Getenv("MULTICLUSTER_LOG") != ""
		start := time.Now()
		fx.env, fx.err = startLocalEnv(context.Background(), localenv.Config{
			StateDir: fx.state, Clusters: 3, ZonesPerCluster: 1, NoComponents: true,
			BackoffBase: time.Second, BackoffMax: 5 * time.Second,
			Log: funcr.New(func(prefix, args string) {
				if verbose {
					fmt.Fprintln(os.Stderr, prefix, args)
				}
			}, funcr.Options{}),
		})
		if fx.err != nil {
			return
		}
		fmt.Fprintf(os.Stderr, "local environment (hub + 3 member clusters) ready in %.1fs%s\n", time.Since(start).Seconds(), distanceNote(fx.env))
		if fx.dns, fx.err = StartRingDNS(fx.env.State().DNSServers()); fx.err != nil {
			return
		}
		fx.topo, fx.err = LocalTopology(fx.env, fx.dns)
	})
	if fx.err != nil {
		t.Fatalf("local environment: %v", fx.err)
	}
	return fx.topo
}

func TestClustersReady(t *testing.T) {
	topo := localTopology(t)
	ctx := context.Background()
	if err := WaitForClusterReady(ctx, WaitForClusterReadyInput{Cluster: topo.Hub}); err != nil {
		t.Fatal(err)
	}
	for _, c := range topo.Members {
		if err := WaitForClusterReady(ctx, WaitForClusterReadyInput{Cluster: c}); err != nil {
			t.Fatal(err)
		}
		zones, err := c.Zones(ctx)
		if err != nil || len(zones) != 1 {
			t.Fatalf("%s zones %v: %v", c.Name, zones, err)
		}
	}
}

// A 3-member etcd cluster of hand-written pods, one per member cluster,
// peers named through the ring's DNS; then one member's zone is killed
// and, where possible, another's partitioned, each under a recorded
// workload.
func TestHandWrittenEtcdAcrossClusters(t *testing.T) {
	topo := localTopology(t)
	ctx := context.Background()
	var etcd *HandWrittenEtcd
	if !t.Run("bootstrap", func(t *testing.T) {
		etcd = HandWrittenEtcdSpec(ctx, HandWrittenEtcdSpecInput{T: t, Topology: topo, Namespace: "hand-written", Domain: "etcd.localenv.test."})
	}) {
		t.FailNow()
	}
	t.Run("kill zone", func(t *testing.T) {
		ZoneFailureUnderLoadSpec(ctx, ZoneFailureUnderLoadSpecInput{T: t, Topology: topo, Etcd: etcd, Victim: etcd.Members[0].Name, Mode: "kill"})
	})
	t.Run("partition zone", func(t *testing.T) {
		ZoneFailureUnderLoadSpec(ctx, ZoneFailureUnderLoadSpecInput{T: t, Topology: topo, Etcd: etcd, Victim: etcd.Members[1].Name, Mode: "partition"})
	})
}
