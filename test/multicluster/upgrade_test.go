package multicluster

import (
	"context"
	"os"
	"syscall"
	"testing"
	"time"

	"github.com/etcdfed/etcdfed/internal/s3test"
)

// Versions of the upgrade scenario: the 3.5 release hack/tools.sh builds
// into bin/etcd-3.5.35, and bin/etcd's.
const (
	upgradeFrom = "3.5.35"
	upgradeTo   = "3.6.16"
)

// TestScenarioUpgrade upgrades a 5-member ring over three clusters from
// etcd 3.5 to 3.6 under a recorded workload, leader last, with backups
// configured: the hub's snapshot comes first (its S3 store held for a
// while, during which no member restarts) and is verified from the store.
// It then sets a version no node can run and requires the rollout to halt
// on the first member with a condition naming it and why, touching
// nothing else, until the version is set back. Long: `make scenarios`
// runs it.
func TestScenarioUpgrade(t *testing.T) {
	if os.Getenv("ETCDFED_SCENARIOS") == "" {
		t.Skip("a multi-minute scenario: run it with `make scenarios` (ETCDFED_SCENARIOS=1)")
	}
	topo := hubTopology(t)
	ctx := context.Background()
	etcd := EtcdClusterSpec(ctx, EtcdClusterSpecInput{T: t, Topology: topo, Namespace: "upgrade", Name: "upgrade", Domain: "upgrade.etcd.test",
		Replicas: 5, WantZones: "2/2/1", Version: upgradeFrom})
	srv := s3test.StartT(t, "upgrade-backups")
	t.Run("3.5 to 3.6 one member at a time, leader last, under load, a snapshot first", func(t *testing.T) {
		UpgradeSpec(ctx, UpgradeSpecInput{T: t, Topology: topo, Etcd: etcd, To: upgradeTo, Timeout: 15 * time.Minute,
			Backup: &UpgradeBackup{Store: srv.Store("upgrade-backups", "hub", ""), Credentials: srv.Credentials(), Hold: 10 * time.Second,
				Pause:  func() error { return syscall.Kill(srv.Pid(), syscall.SIGSTOP) },
				Resume: func() error { return syscall.Kill(srv.Pid(), syscall.SIGCONT) }}})
	})
	t.Run("a member that cannot start on the new version halts the rollout", func(t *testing.T) {
		HaltedUpgradeSpec(ctx, HaltedUpgradeSpecInput{T: t, Topology: topo, Etcd: etcd, Broken: "3.6.99", Good: upgradeTo, Hold: 20 * time.Second})
	})
	DeleteEtcdClusterSpec(ctx, t, topo, etcd)
}

// TestScenarioDowngrade downgrades a 5-member ring over three clusters
// from etcd 3.6 to 3.5 under a recorded workload, following etcd's
// downgrade procedure (validate and enable, storage versions at 3.5
// before the first member restarts), one member at a time, leader last.
// First, a downgrade of two minors is refused before anything moves, and
// a downgrade set back once its first member runs 3.5 is cancelled in
// etcd and rolled back.
// Long: `make scenarios` runs it.
func TestScenarioDowngrade(t *testing.T) {
	skipUnlessScenarios(t, "a 5-member ring downgraded from etcd 3.6 to 3.5 under a recorded workload")
	topo := hubTopology(t)
	ctx := context.Background()
	etcd := EtcdClusterSpec(ctx, EtcdClusterSpecInput{T: t, Topology: topo, Namespace: "downgrade", Name: "downgrade", Domain: "downgrade.etcd.test",
		Replicas: 5, WantZones: "2/2/1", Version: upgradeTo})
	t.Run("a downgrade of two minors is refused before anything moves", func(t *testing.T) {
		RefusedVersionSpec(ctx, RefusedVersionSpecInput{T: t, Topology: topo, Etcd: etcd, To: "3.4.37",
			Want: "version may go down by at most one minor version at a time", Watch: 10 * time.Second})
	})
	t.Run("a downgrade set back after its first member is cancelled", func(t *testing.T) {
		AbandonedDowngradeSpec(ctx, AbandonedDowngradeSpecInput{T: t, Topology: topo, Etcd: etcd, To: upgradeFrom, Back: upgradeTo})
	})
	t.Run("3.6 to 3.5 by etcd's downgrade procedure, one member at a time, leader last, under load", func(t *testing.T) {
		UpgradeSpec(ctx, UpgradeSpecInput{T: t, Topology: topo, Etcd: etcd, To: upgradeFrom, Timeout: 15 * time.Minute})
	})
	DeleteEtcdClusterSpec(ctx, t, topo, etcd)
}
