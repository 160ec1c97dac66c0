package multicluster

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/etcdfed/etcdfed/dev/localenv"
	"github.com/etcdfed/etcdfed/dev/s3test"
	"github.com/etcdfed/etcdfed/dev/testenv"
)

// TestScenarioHubLost: the hub cluster of a running ring destroyed for
// good under the recorded workload, rebuilt with the documented commands
// and the escrow, the ring taken over with no member restarted, then a
// member cluster killed and repaired by the new hub, and the backup from
// before the loss restored (HubLostSpec). Its own environment (the hub
// cluster is destroyed): four single-zone member clusters, one region
// apart (1 to 2 ms between them).
func TestScenarioHubLost(t *testing.T) {
	skipUnlessScenarios(t, "the hub cluster lost for good and rebuilt; the running ring taken over")
	testenv.SkipIfShort(t, "the local environment with the hub and spokes")
	bin, err := freshBin()
	if err != nil {
		t.Fatal(err)
	}
	cfg := localenv.Config{Clusters: 4, ZonesPerCluster: 1, BinDir: bin, Distance: &localenv.Distance{Preset: localenv.PresetOneRegion}}
	topo, env := ownEnvironmentWithEnv(t, "hublost", "four-cluster local environment, one region", cfg)
	ctx := context.Background()
	srv := s3test.StartT(t, "hub-lost")
	HubLostSpec(ctx, HubLostSpecInput{T: t, Topology: topo, Etcdfed: filepath.Join(bin, "etcdfed"),
		HubKubeconfig:    env.Kubeconfig(localenv.HubClusterName),
		MemberKubeconfig: env.Kubeconfig,
		DestroyHub:       env.DestroyHubCluster,
		NewHub:           env.StartNewHubCluster,
		StartHub:         func() error { return env.StartComponent("hub") },
		Ring:             EtcdClusterSpecInput{Namespace: "lost", Name: "lost", Domain: "lost.etcd.test", Replicas: 3, WantZones: "1/1/1"},
		S3:               srv, Bucket: "hub-lost",
	})
}
