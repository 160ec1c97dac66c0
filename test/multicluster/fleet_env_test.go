package multicluster

import (
	"context"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/go-logr/logr/funcr"
	"k8s.io/client-go/tools/clientcmd"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	etcdfedv1 "github.com/etcdfed/etcdfed/api/v1alpha1"
	"github.com/etcdfed/etcdfed/dev/localenv"
	"github.com/etcdfed/etcdfed/dev/simcluster"
	"github.com/etcdfed/etcdfed/dev/testenv"
)

// SimFleet is a local environment whose member clusters are simulated
// (dev/simcluster) except the first Real ones, which run the real spoke
// and real etcd; one real hub.
type SimFleet struct {
	Env      *localenv.Env
	Topo     *Topology
	Fleet    *simcluster.Fleet
	Sim      []*simcluster.Cluster // member clusters Real+1..N
	Real     int
	StateDir string
	// Bin holds the binaries built for this run (the hub's among them).
	Bin string
	// hubs are the hub processes BenchmarkFleet watches (the
	// environment's first).
	hubs []fleetHub
}

// startSimFleet starts a local environment of clusters member clusters
// with zones zones each, the first real of them with the real spoke, the
// others simulated in this process, and the hub (with hubArgs added). It
// is stopped when tb ends (its state kept with ETCDFED_KEEP_STATE or a
// failure).
func startSimFleet(tb testing.TB, clusters, zones, real int, hubArgs ...string) *SimFleet {
	return startSimFleetWith(tb, simFleetOptions{Clusters: clusters, Zones: zones, RealClusters: real, HubArgs: hubArgs})
}

// simFleetOptions shape a simulated fleet.
type simFleetOptions struct {
	Clusters, Zones int
	// RealClusters: member-1..RealClusters run the real spoke process.
	RealClusters int
	// RealNamespaces: the rings of these hub namespaces run real etcd
	// in the simulated clusters too (simcluster.Config.Real).
	RealNamespaces []string
	HubArgs        []string
}

func startSimFleetWith(tb testing.TB, o simFleetOptions) *SimFleet {
	clusters, zones, real, hubArgs := o.Clusters, o.Zones, o.RealClusters, o.HubArgs
	tb.Helper()
	testenv.SkipIfShort(tb, "a local environment with simulated member clusters (kube-apiservers, the hub)")
	bin, err := freshBin()
	if err != nil {
		tb.Fatal(err)
	}
	state, err := os.MkdirTemp("", "multicluster-fleet-")
	if err != nil {
		tb.Fatal(err)
	}
	verbose := os.Getenv("MULTICLUSTER_LOG") != ""
	log := funcr.New(func(prefix, args string) {
		if verbose {
			fmt.Fprintln(os.Stderr, prefix, args)
		}
	}, funcr.Options{})
	// The simulated spokes run in this process: what of controller-runtime
	// logs through its global logger goes where theirs goes (without it,
	// controller-runtime prints a stack after 30 s: "log.SetLogger(...)
	// was never called").
	ctrllog.SetLogger(log)
	realNames := map[string]bool{}
	for i := 1; i <= real; i++ {
		realNames[localenv.MemberClusterName(i)] = true
	}
	start := time.Now()
	env, err := startLocalEnv(context.Background(), localenv.Config{
		StateDir: state, Clusters: clusters, ZonesPerCluster: zones, BinDir: bin,
		BackoffBase: time.Second, BackoffMax: 5 * time.Second, Log: log,
		// The hub, and the real spoke in the real clusters only: the
		// simulated clusters' spokes run in this process.
		Components: func(st *localenv.State, binDir string) []localenv.ComponentSpec {
			comps := slices.DeleteFunc(localenv.DefaultComponents(st, binDir), func(c localenv.ComponentSpec) bool {
				return c.Name != "hub" && !realNames[c.Cluster]
			})
			for i := range comps {
				if comps[i].Name == "hub" {
					comps[i].Args = append(comps[i].Args, hubArgs...)
				}
			}
			return comps
		},
	})
	if err != nil {
		tb.Fatalf("local environment for a simulated fleet: %v", err)
	}
	f := &SimFleet{Env: env, Fleet: simcluster.NewFleet(), Real: real, StateDir: state, Bin: bin}
	tb.Cleanup(func() {
		for _, c := range f.Sim {
			c.Stop()
		}
		f.Fleet.Close()
		if err := env.Stop(); err != nil {
			tb.Logf("stop the fleet environment: %v", err)
		}
		if tb.Failed() || os.Getenv("ETCDFED_KEEP_STATE") != "" {
			tb.Logf("kept for inspection: %s", state)
			return
		}
		_ = os.RemoveAll(state)
	})
	st := env.State()
	for _, c := range st.MemberClusters {
		if realNames[c.Name] {
			continue
		}
		cfg, err := clientcmd.BuildConfigFromFlags("", st.KubeconfigPath(c.Name))
		if err != nil {
			tb.Fatal(err)
		}
		cfg.QPS, cfg.Burst = 50, 100
		var zs []simcluster.Zone
		for _, z := range c.Zones {
			p, err := netip.ParsePrefix(z.CIDR)
			if err != nil {
				tb.Fatal(err)
			}
			zs = append(zs, simcluster.Zone{Name: z.Name, CIDR: p})
		}
		var seeds []string
		for _, o := range st.MemberClusters {
			if o.Name != c.Name {
				seeds = append(seeds, o.Gossip)
			}
		}
		scfg := simcluster.Config{
			Name: c.Name, REST: cfg, Namespace: localenv.RingNamespace,
			DNSListen: c.DNS, GossipBind: c.Gossip, GossipSeeds: seeds, Zones: zs,
			Log: log.WithName("sim"),
		}
		if len(o.RealNamespaces) > 0 {
			realNS := slices.Clone(o.RealNamespaces)
			scfg.Real = func(m *etcdfedv1.EtcdMember) bool {
				return slices.Contains(realNS, m.Labels[etcdfedv1.LabelClusterNamespace])
			}
		}
		sc, err := simcluster.Start(context.Background(), f.Fleet, scfg)
		if err != nil {
			tb.Fatal(err)
		}
		f.Sim = append(f.Sim, sc)
	}
	if f.Topo, err = LocalTopology(env, nil); err != nil {
		tb.Fatal(err)
	}
	tb.Logf("local environment with %d member clusters (%d simulated) ready in %.1fs (logs in %s)",
		clusters, len(f.Sim), time.Since(start).Seconds(), filepath.Join(state, "logs"))
	return f
}

// LoseCluster fails a member cluster as a power loss: a simulated one's
// spoke and members stop at once, then its apiserver and node agent (the
// environment's FailZone, which kills a real one's processes).
func (f *SimFleet) LoseCluster(ctx context.Context, name string) error {
	for _, c := range f.Sim {
		if c.Name() == name {
			c.Lose()
		}
	}
	return f.Env.FailZone(ctx, name, localenv.ModeKill)
}

// SimCluster is the simulated member cluster of that name (nil: a real
// one).
func (f *SimFleet) SimCluster(name string) *simcluster.Cluster {
	for _, c := range f.Sim {
		if c.Name() == name {
			return c
		}
	}
	return nil
}

// member is the member cluster of that name in the topology.
func (f *SimFleet) member(name string) *Cluster {
	for _, c := range f.Topo.Members {
		if c.Name == name {
			return c
		}
	}
	return nil
}
