package multicluster

import (
	"context"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	etcdfedv1 "github.com/etcdfed/etcdfed/api/v1alpha1"
	"github.com/etcdfed/etcdfed/dev/localenv"
	"github.com/etcdfed/etcdfed/dev/testenv"
)

// ringScenarioInput is a ring scenario's set-up.
type ringScenarioInput struct {
	// What the scenario does, said when it is skipped.
	What string
	// Topology starts (or reuses) the clusters: hubTopology when nil.
	Topology func(t *testing.T) *Topology
	// Ring is the EtcdCluster the scenario runs on (T and Topology are
	// filled in).
	Ring EtcdClusterSpecInput
}

// ringScenario is the preamble and the end every ring scenario shares: it
// skips unless ETCDFED_SCENARIOS is set, takes the topology, creates the
// ring and waits until it is ready (EtcdClusterSpec), has it deleted
// without waiting if the test fails (deleteIfFailed: the next scenario has
// the clusters to itself), runs the scenario and deletes the ring
// (DeleteEtcdClusterSpec, which checks that its members go with it).
func ringScenario(t *testing.T, in ringScenarioInput, scenario func(ctx context.Context, topo *Topology, etcd *ManagedEtcd)) {
	t.Helper()
	ctx, topo, etcd := setUpRing(t, in)
	scenario(ctx, topo, etcd)
	DeleteEtcdClusterSpec(ctx, t, topo, etcd)
}

// setUpRing is ringScenario's preamble alone, for a scenario that ends
// the ring itself (deletes it, or checks what goes with it): it skips
// unless ETCDFED_SCENARIOS is set, takes the topology, creates the ring,
// waits until it is ready and has it deleted without waiting if the test
// fails.
func setUpRing(t *testing.T, in ringScenarioInput) (context.Context, *Topology, *ManagedEtcd) {
	t.Helper()
	skipUnlessScenarios(t, in.What)
	var topo *Topology
	if in.Topology != nil {
		topo = in.Topology(t)
	} else {
		topo = hubTopology(t)
	}
	ctx := context.Background()
	ring := in.Ring
	ring.T, ring.Topology = t, topo
	etcd := EtcdClusterSpec(ctx, ring)
	deleteIfFailed(t, topo, etcd)
	return ctx, topo, etcd
}

// deleteIfFailed deletes a failed scenario's EtcdCluster without waiting,
// so that the next scenario has the clusters to itself.
func deleteIfFailed(t *testing.T, topo *Topology, m *ManagedEtcd) {
	t.Cleanup(func() {
		if !t.Failed() {
			return
		}
		ctx := context.Background()
		if ec, err := m.Get(ctx, topo.Hub); err == nil {
			_ = topo.Hub.Client.Delete(ctx, ec)
		}
	})
}

// TestScenarioVolumeLost: a member's PVC deleted (with its pod) -> the
// member is replaced under the same name with a new incarnation in the
// same cluster, DNS follows, MemberReplaced says why.
func TestScenarioVolumeLost(t *testing.T) {
	ringScenario(t, ringScenarioInput{Ring: EtcdClusterSpecInput{Namespace: "volume-lost", Name: "vlost", Domain: "vlost.etcd.test", Replicas: 3, WantZones: "1/1/1"}}, func(ctx context.Context, topo *Topology, etcd *ManagedEtcd) {
		VolumeLostSpec(ctx, VolumeLostSpecInput{T: t, Topology: topo, Etcd: etcd, Member: "vlost-1"})
	})
}

// TestScenarioCrashLoop: a member whose etcd exits at every start, beyond
// a short memberGracePeriod -> replaced under the same name.
func TestScenarioCrashLoop(t *testing.T) {
	ringScenario(t, ringScenarioInput{Ring: EtcdClusterSpecInput{Namespace: "crash-loop", Name: "crash", Domain: "crash.etcd.test", Replicas: 3, WantZones: "1/1/1"}}, func(ctx context.Context, topo *Topology, etcd *ManagedEtcd) {
		CrashLoopSpec(ctx, CrashLoopSpecInput{T: t, Topology: topo, Etcd: etcd, Member: "crash-2", MemberGrace: 30 * time.Second})
	})
}

// TestScenarioZoneDrained: every node of a member's cluster cordoned and
// its pod deleted (a drain of the whole zone) -> the pod cannot be
// scheduled; after memberGracePeriod the member moves to another cluster
// instead of being replaced in place; uncordoned -> back to 1/1/1.
func TestScenarioZoneDrained(t *testing.T) {
	ringScenario(t, ringScenarioInput{Ring: EtcdClusterSpecInput{Namespace: "zone-drained", Name: "drained", Domain: "drained.etcd.test", Replicas: 3, WantZones: "1/1/1"}}, func(ctx context.Context, topo *Topology, etcd *ManagedEtcd) {
		ZoneDrainedSpec(ctx, ZoneDrainedSpecInput{T: t, Topology: topo, Etcd: etcd, Member: "drained-1", MemberGrace: 30 * time.Second})
	})
}

// TestScenarioStartGivenUp: a member's volume lost while every node of
// its cluster is cordoned -> its in-place replacement cannot start; after
// memberGracePeriod the hub gives that start up and places the member in
// another cluster; uncordoned -> back to 1/1/1.
func TestScenarioStartGivenUp(t *testing.T) {
	ringScenario(t, ringScenarioInput{Ring: EtcdClusterSpecInput{Namespace: "start-given-up", Name: "giveup", Domain: "giveup.etcd.test", Replicas: 3, WantZones: "1/1/1"}}, func(ctx context.Context, topo *Topology, etcd *ManagedEtcd) {
		StartGivenUpSpec(ctx, ZoneDrainedSpecInput{T: t, Topology: topo, Etcd: etcd, Member: "giveup-1", MemberGrace: 30 * time.Second})
	})
}

// TestScenarioLeaderZoneKilledAndReturned: five members 2/2/1; etcd's
// leader moved into the cluster holding two, which is then killed (the
// leader's zone, and the worst single failure: two voters lost at once)
// -> evacuated after the zone grace; it returns -> rebalanced to 2/2/1.
func TestScenarioLeaderZoneKilledAndReturned(t *testing.T) {
	ringScenario(t, ringScenarioInput{Ring: EtcdClusterSpecInput{Namespace: "zone-returned", Name: "zret", Domain: "zret.etcd.test", Replicas: 5, WantZones: "2/2/1"}}, func(ctx context.Context, topo *Topology, etcd *ManagedEtcd) {
		ZoneKilledAndReturnedSpec(ctx, ZoneKilledAndReturnedSpecInput{T: t, Topology: topo, Etcd: etcd, WantZones: "2/2/1"})
	})
}

// TestScenarioHubPartitioned: the hub cut off from one member cluster
// only (its spoke, the other spokes and the etcd peers still reach it),
// past both grace periods -> nothing moves (rule 8).
func TestScenarioHubPartitioned(t *testing.T) {
	ringScenario(t, ringScenarioInput{Ring: EtcdClusterSpecInput{Namespace: "hub-partition", Name: "hpart", Domain: "hpart.etcd.test", Replicas: 3, WantZones: "1/1/1"}}, func(ctx context.Context, topo *Topology, etcd *ManagedEtcd) {
		if err := SetFailurePolicy(ctx, topo.Hub, etcd, 30*time.Second, 30*time.Second); err != nil {
			t.Fatal(err)
		}
		HubPartitionSpec(ctx, HubPartitionSpecInput{T: t, Topology: topo, Etcd: etcd, Cluster: "member-2", Hold: 50 * time.Second})
	})
}

// TestScenarioHubDownZoneKilled: the hub stopped, then a member's cluster
// killed -> the ring serves, every surviving spoke's DNS answers, nothing
// moves past the zone grace; the hub started -> it evacuates; the cluster
// returns -> tolerant again.
func TestScenarioHubDownZoneKilled(t *testing.T) {
	ringScenario(t, ringScenarioInput{Ring: EtcdClusterSpecInput{Namespace: "hub-down", Name: "hdown", Domain: "hdown.etcd.test", Replicas: 3, WantZones: "1/1/1"}}, func(ctx context.Context, topo *Topology, etcd *ManagedEtcd) {
		HubDownZoneKillSpec(ctx, HubDownZoneKillSpecInput{T: t, Topology: topo, Etcd: etcd, Member: "hdown-0", Hold: 45 * time.Second})
	})
}

// zoneWitnessNodeLease and zoneWitnessNodeStale are the node Lease duration
// (renewed every quarter of it) and the hub's --node-lease-stale-after of
// the multi-zone environment: kubelet's 40s and the hub's 20s, scaled down
// so that the scenario takes minutes.
const (
	zoneWitnessNodeLease = 8 * time.Second
	zoneWitnessNodeStale = 5 * time.Second
	zoneWitnessGrace     = 30 * time.Second
)

// TestScenarioZoneOfMultiZoneClusterKilled: two member clusters of two
// zones each, a 3-member ring one member per zone; the node Leases of one
// zone stop (control: nothing moves), then that zone is killed -> Degraded
// names it, its member is replaced in the free zone of the other cluster
// after zoneGracePeriod, the ring ends with every member ready.
func TestScenarioZoneOfMultiZoneClusterKilled(t *testing.T) {
	ringScenario(t, ringScenarioInput{Topology: multiZoneTopology, Ring: EtcdClusterSpecInput{Namespace: "zone-witness", Name: "zwit", Domain: "zwit.etcd.test", Replicas: 3, WantZones: "1/1/1",
		Spec: func(s *etcdfedv1.EtcdClusterSpec) {
			// Only the zone witness may move the member: its own grace is
			// far beyond the scenario.
			s.FailurePolicy.MemberGracePeriod = &metav1.Duration{Duration: time.Hour}
			s.FailurePolicy.ZoneGracePeriod = &metav1.Duration{Duration: zoneWitnessGrace}
		}}}, func(ctx context.Context, topo *Topology, etcd *ManagedEtcd) {
		ZoneOfMultiZoneClusterKilledSpec(ctx, ZoneOfMultiZoneClusterKilledSpecInput{T: t, Topology: topo, Etcd: etcd, NodeStaleAfter: zoneWitnessNodeStale, ZoneGrace: zoneWitnessGrace})
	})
}

// multiZoneTopology starts, for one test, a local environment of two
// member clusters with two zones each (one node per zone), node Leases of
// zoneWitnessNodeLease, and the hub with --node-lease-stale-after
// zoneWitnessNodeStale. It is stopped when the test ends (its state kept
// when the test failed).
func multiZoneTopology(t *testing.T) *Topology {
	t.Helper()
	testenv.SkipIfShort(t, "the local environment with the hub and spokes")
	if realNodesAsked() {
		return realMultiZoneTopology(t)
	}
	bin, err := freshBin()
	if err != nil {
		t.Fatal(err)
	}
	return ownEnvironment(t, "zones", "multi-zone local environment", localenv.Config{
		Clusters: 2, ZonesPerCluster: 2, NodesPerZone: 1, BinDir: bin, NodeLeaseDuration: zoneWitnessNodeLease,
		Components: func(st *localenv.State, bin string) []localenv.ComponentSpec {
			specs := localenv.DefaultComponents(st, bin)
			for i := range specs {
				if specs[i].Name == "hub" {
					specs[i].Args = append(specs[i].Args, "--node-lease-stale-after="+zoneWitnessNodeStale.String())
				}
			}
			return specs
		},
	})
}

var multiZoneEnv envFixture

// realMultiZoneTopology is multiZoneTopology on real nodes
// (ETCDFED_NODES=real): two member clusters of two zones, one real node
// each, node Leases of zoneWitnessNodeLease (kubelet's
// nodeLeaseDurationSeconds), the in-cluster hub's Deployment restarted
// with --node-lease-stale-after zoneWitnessNodeStale. A test binary holds
// one real-node environment (they share its network namespace): this one
// needs a binary of its own, as make failures NODES=real runs it.
func realMultiZoneTopology(t *testing.T) *Topology {
	t.Helper()
	skipUnlessReal(t)
	bin, err := freshBin()
	if err != nil {
		t.Fatal(err)
	}
	env := startRealEnv(t, &multiZoneEnv, localenv.Config{Clusters: 2, ZonesPerCluster: 2, NodesPerZone: 1, BinDir: bin, NodeLeaseDuration: zoneWitnessNodeLease})
	topo, err := RealTopology(env)
	if err != nil {
		t.Fatal(err)
	}
	if err := topo.RestartHubWith(context.Background(), nil, "--node-lease-stale-after="+zoneWitnessNodeStale.String()); err != nil {
		t.Fatal(err)
	}
	return topo
}
