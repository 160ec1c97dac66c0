package multicluster

import (
	"context"
	"os"
	"testing"
	"time"
)

// failureScenario skips a long failure scenario unless ETCDFED_SCENARIOS is set
// (`make scenarios`): each takes minutes, and `make test` must stay under
// 30 minutes on 2 cores.
func failureScenario(t *testing.T) *Topology {
	t.Helper()
	if os.Getenv("ETCDFED_SCENARIOS") == "" {
		t.Skip("failure scenario (minutes): run `make scenarios` (ETCDFED_SCENARIOS=1)")
	}
	return hubTopology(t)
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
	topo := failureScenario(t)
	ctx := context.Background()
	etcd := EtcdClusterSpec(ctx, EtcdClusterSpecInput{T: t, Topology: topo, Namespace: "volume-lost", Name: "vlost", Domain: "vlost.etcd.test", Replicas: 3, WantZones: "1/1/1"})
	deleteIfFailed(t, topo, etcd)
	VolumeLostSpec(ctx, VolumeLostSpecInput{T: t, Topology: topo, Etcd: etcd, Member: "vlost-1"})
	DeleteEtcdClusterSpec(ctx, t, topo, etcd)
}

// TestScenarioCrashLoop: a member whose etcd exits at every start, beyond
// a short memberGracePeriod -> replaced under the same name.
func TestScenarioCrashLoop(t *testing.T) {
	topo := failureScenario(t)
	ctx := context.Background()
	etcd := EtcdClusterSpec(ctx, EtcdClusterSpecInput{T: t, Topology: topo, Namespace: "crash-loop", Name: "crash", Domain: "crash.etcd.test", Replicas: 3, WantZones: "1/1/1"})
	deleteIfFailed(t, topo, etcd)
	CrashLoopSpec(ctx, CrashLoopSpecInput{T: t, Topology: topo, Etcd: etcd, Member: "crash-2", MemberGrace: 30 * time.Second})
	DeleteEtcdClusterSpec(ctx, t, topo, etcd)
}

// TestScenarioZoneKilledAndReturned: five members 2/2/1; the cluster
// holding two is killed -> evacuated after the zone grace; it returns ->
// rebalanced to 2/2/1.
func TestScenarioZoneKilledAndReturned(t *testing.T) {
	topo := failureScenario(t)
	ctx := context.Background()
	etcd := EtcdClusterSpec(ctx, EtcdClusterSpecInput{T: t, Topology: topo, Namespace: "zone-returned", Name: "zret", Domain: "zret.etcd.test", Replicas: 5, WantZones: "2/2/1"})
	deleteIfFailed(t, topo, etcd)
	ZoneKilledAndReturnedSpec(ctx, ZoneKilledAndReturnedSpecInput{T: t, Topology: topo, Etcd: etcd, WantZones: "2/2/1"})
	DeleteEtcdClusterSpec(ctx, t, topo, etcd)
}

// TestScenarioHubPartitioned: the hub cut off from one member cluster
// only (its spoke, the other spokes and the etcd peers still reach it),
// past both grace periods -> nothing moves (rule 8).
func TestScenarioHubPartitioned(t *testing.T) {
	topo := failureScenario(t)
	ctx := context.Background()
	etcd := EtcdClusterSpec(ctx, EtcdClusterSpecInput{T: t, Topology: topo, Namespace: "hub-partition", Name: "hpart", Domain: "hpart.etcd.test", Replicas: 3, WantZones: "1/1/1"})
	deleteIfFailed(t, topo, etcd)
	if err := SetFailurePolicy(ctx, topo.Hub, etcd, 30*time.Second, 30*time.Second); err != nil {
		t.Fatal(err)
	}
	HubPartitionSpec(ctx, HubPartitionSpecInput{T: t, Topology: topo, Etcd: etcd, Cluster: "member-2", Hold: 50 * time.Second})
	DeleteEtcdClusterSpec(ctx, t, topo, etcd)
}

// TestScenarioHubDownZoneKilled: the hub stopped, then a member's cluster
// killed -> the ring serves, every surviving spoke's DNS answers, nothing
// moves past the zone grace; the hub started -> it evacuates; the cluster
// returns -> tolerant again.
func TestScenarioHubDownZoneKilled(t *testing.T) {
	topo := failureScenario(t)
	ctx := context.Background()
	etcd := EtcdClusterSpec(ctx, EtcdClusterSpecInput{T: t, Topology: topo, Namespace: "hub-down", Name: "hdown", Domain: "hdown.etcd.test", Replicas: 3, WantZones: "1/1/1"})
	deleteIfFailed(t, topo, etcd)
	HubDownZoneKillSpec(ctx, HubDownZoneKillSpecInput{T: t, Topology: topo, Etcd: etcd, Member: "hdown-0", Hold: 45 * time.Second})
	DeleteEtcdClusterSpec(ctx, t, topo, etcd)
}
