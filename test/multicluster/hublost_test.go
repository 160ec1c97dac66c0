package multicluster

import (
	"context"
	"fmt"
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
	hubLostEnvironment(t, "hublost", 4, func(ctx context.Context, in HubLostSpecInput) {
		srv := s3test.StartT(t, "hub-lost")
		in.Ring = EtcdClusterSpecInput{Namespace: "lost", Name: "lost", Domain: "lost.etcd.test", Replicas: 3, WantZones: "1/1/1"}
		in.S3, in.Bucket = srv, "hub-lost"
		HubLostSpec(ctx, in)
	})
}

// TestScenarioHubLostWithoutEscrow: the hub cluster lost with the ring's
// CA key and rebuilt without the escrow; the ring held, then taken over
// on its members' CA and rotated onto a new one (HubLostWithoutEscrowSpec).
func TestScenarioHubLostWithoutEscrow(t *testing.T) {
	skipUnlessScenarios(t, "the hub cluster lost with the ring's CA key, rebuilt without the escrow; the ring taken over and rotated onto a new CA")
	hubLostEnvironment(t, "hubkeyless", 3, func(ctx context.Context, in HubLostSpecInput) {
		in.Ring = EtcdClusterSpecInput{Namespace: "keyless", Name: "keyless", Domain: "keyless.etcd.test", Replicas: 3, WantZones: "1/1/1"}
		HubLostWithoutEscrowSpec(ctx, in)
	})
}

// hubLostEnvironment runs spec on an environment of its own (clusters
// member clusters, one region apart) whose hub cluster can be destroyed
// and started anew.
func hubLostEnvironment(t *testing.T, name string, clusters int, spec func(context.Context, HubLostSpecInput)) {
	testenv.SkipIfShort(t, "the local environment with the hub and spokes")
	bin, err := freshBin()
	if err != nil {
		t.Fatal(err)
	}
	cfg := localenv.Config{Clusters: clusters, ZonesPerCluster: 1, BinDir: bin, Distance: &localenv.Distance{Preset: localenv.PresetOneRegion}}
	topo, env := ownEnvironmentWithEnv(t, name, fmt.Sprintf("%d-cluster local environment, one region", clusters), cfg)
	spec(context.Background(), HubLostSpecInput{T: t, Topology: topo, Etcdfed: filepath.Join(bin, "etcdfed"),
		HubKubeconfig:    env.Kubeconfig(localenv.HubClusterName),
		MemberKubeconfig: env.Kubeconfig,
		DestroyHub:       env.DestroyHubCluster,
		NewHub:           env.StartNewHubCluster,
		StartHub:         func() error { return env.StartComponent("hub") },
	})
}
