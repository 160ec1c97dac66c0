package multicluster

import (
	"context"
	"os"
	"testing"
	"time"
)

// Versions of the upgrade scenario: the 3.5 release hack/tools.sh builds
// into bin/etcd-3.5.35, and bin/etcd's.
const (
	upgradeFrom = "3.5.35"
	upgradeTo   = "3.6.16"
)

// TestScenarioUpgrade upgrades a 5-member ring over three clusters from
// etcd 3.5 to 3.6 under a recorded workload, leader last, then sets a
// version no node can run and requires the rollout to halt on the first
// member with a condition naming it and why, touching nothing else, until
// the version is set back. Long: `make scenarios` runs it.
func TestScenarioUpgrade(t *testing.T) {
	if os.Getenv("ETCDFED_SCENARIOS") == "" {
		t.Skip("a multi-minute scenario: run it with `make scenarios` (ETCDFED_SCENARIOS=1)")
	}
	topo := hubTopology(t)
	ctx := context.Background()
	etcd := EtcdClusterSpec(ctx, EtcdClusterSpecInput{T: t, Topology: topo, Namespace: "upgrade", Name: "upgrade", Domain: "upgrade.etcd.test",
		Replicas: 5, WantZones: "2/2/1", Version: upgradeFrom})
	t.Run("3.5 to 3.6 one member at a time, leader last, under load", func(t *testing.T) {
		UpgradeSpec(ctx, UpgradeSpecInput{T: t, Topology: topo, Etcd: etcd, To: upgradeTo, Timeout: 15 * time.Minute})
	})
	t.Run("a member that cannot start on the new version halts the rollout", func(t *testing.T) {
		HaltedUpgradeSpec(ctx, HaltedUpgradeSpecInput{T: t, Topology: topo, Etcd: etcd, Broken: "3.6.99", Good: upgradeTo, Hold: 20 * time.Second})
	})
	DeleteEtcdClusterSpec(ctx, t, topo, etcd)
}
