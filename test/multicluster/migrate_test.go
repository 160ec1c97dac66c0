package multicluster

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	etcdfedv1 "github.com/etcdfed/etcdfed/api/v1alpha1"
	"github.com/etcdfed/etcdfed/dev/localenv"
	"github.com/etcdfed/etcdfed/dev/testenv"
)

// TestScenarioMigrate: a three-member ring on three member clusters moved
// to three others with one spec change (spec.topology.clusters) under the
// recorded workload: every member moved make before break, failure
// tolerance never 0 at any moment sampled from etcd's own member list,
// linearizable, nothing acknowledged lost, every watch complete; beside
// it, a break-before-make move of a member whose old incarnation is dead,
// for comparison (MigrateSpec); then `etcdfed drill migrate` moves it
// back, as a user would, and its report is checked (MigrateDrillSpec).
// Six member clusters, one zone each.
func TestScenarioMigrate(t *testing.T) {
	if os.Getenv("ETCDFED_SCENARIOS") == "" {
		t.Skip("failure scenario (minutes): run `make scenarios` (ETCDFED_SCENARIOS=1)")
	}
	topo := sixClusterTopology(t)
	ctx := context.Background()
	var names []string
	for _, c := range topo.Members {
		names = append(names, c.Name)
	}
	from, to := names[:3], names[3:6]
	etcd := EtcdClusterSpec(ctx, EtcdClusterSpecInput{T: t, Topology: topo, Namespace: "migrate", Name: "mig", Domain: "mig.etcd.test", Replicas: 3, WantZones: "1/1/1",
		Spec: func(s *etcdfedv1.EtcdClusterSpec) { s.Topology.Clusters = from }})
	deleteIfFailed(t, topo, etcd)
	MigrateSpec(ctx, MigrateSpecInput{T: t, Topology: topo, Etcd: etcd, From: from, To: to})
	t.Run("etcdfed drill migrate back", func(t *testing.T) {
		bin, err := freshBin()
		if err != nil {
			t.Fatal(err)
		}
		MigrateDrillSpec(ctx, MigrateDrillSpecInput{T: t, Topology: topo, Etcd: etcd, To: from, Etcdfed: filepath.Join(bin, "etcdfed")})
	})
	DeleteEtcdClusterSpec(ctx, t, topo, etcd)
}

// sixClusterTopology starts its own local environment with six
// single-zone member clusters (stopped at cleanup; kept for inspection
// when the test failed).
func sixClusterTopology(t *testing.T) *Topology {
	t.Helper()
	testenv.SkipIfShort(t, "the local environment with the hub and spokes")
	bin, err := freshBin()
	if err != nil {
		t.Fatal(err)
	}
	return ownEnvironment(t, "six", "six-cluster local environment", localenv.Config{Clusters: 6, ZonesPerCluster: 1, BinDir: bin})
}
