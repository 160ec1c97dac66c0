package multicluster

import (
	"context"
	"fmt"
	"syscall"
	"testing"
	"time"

	"github.com/etcdfed/etcdfed/dev/s3test"
	"github.com/etcdfed/etcdfed/pkg/etcdversion"
)

// Versions of the scenarios: the paths pkg/etcdversion says are tested
// (the version matrix in docs/upgrades.md lists them), each release one
// hack/tools.sh builds (bin/etcd-3.5.x, bin/etcd, bin/etcd-3.7.x).
var (
	upgradePath     = etcdversion.TestedPath("TestScenarioUpgrade")
	upgradeFrom     = etcdversion.TestedPath("TestScenarioDowngrade")[1].String()
	upgradeTo       = etcdversion.TestedPath("TestScenarioDowngrade")[0].String()
	downgrade37Path = etcdversion.TestedPath("TestScenarioDowngrade37")
)

// TestScenarioUpgrade upgrades a 5-member ring over three clusters from
// etcd 3.5 to 3.6, then to 3.7, in one run, under a recorded workload
// checked at every step, leader last, with backups configured: before
// each minor step the hub's snapshot comes first (its S3 store held for a
// while, during which no member restarts) and is verified from the store.
// Before the first step a jump from 3.5 straight to 3.7 is refused with the
// step to take first. At the end it sets a version no node can run and
// requires the rollout to halt on the first member with a condition
// naming it and why, touching nothing else, until the version is set
// back. Long: `make scenarios` runs it.
func TestScenarioUpgrade(t *testing.T) {
	ringScenario(t, ringScenarioInput{What: "a 5-member ring upgraded from etcd 3.5 to 3.6 to 3.7 under a recorded workload",
		Ring: EtcdClusterSpecInput{Namespace: "upgrade", Name: "upgrade", Domain: "upgrade.etcd.test", Replicas: 5, WantZones: "2/2/1", Version: upgradePath[0].String()}},
		func(ctx context.Context, topo *Topology, etcd *ManagedEtcd) { upgradeScenario(ctx, t, topo, etcd) })
}

// upgradeScenario is TestScenarioUpgrade on its ring.
func upgradeScenario(ctx context.Context, t *testing.T, topo *Topology, etcd *ManagedEtcd) {
	srv := s3test.StartT(t, "upgrade-backups")
	backup := func() *UpgradeBackup {
		return &UpgradeBackup{Store: srv.Store("upgrade-backups", "hub", ""), Credentials: srv.Credentials(), Hold: 10 * time.Second,
			Pause:  func() error { return syscall.Kill(srv.Pid(), syscall.SIGSTOP) },
			Resume: func() error { return syscall.Kill(srv.Pid(), syscall.SIGCONT) }}
	}
	last := upgradePath[len(upgradePath)-1]
	t.Run(fmt.Sprintf("%s straight to %s is refused with the step to take first", upgradePath[0], last), func(t *testing.T) {
		RefusedVersionSpec(ctx, RefusedVersionSpecInput{T: t, Topology: topo, Etcd: etcd, To: last.String(),
			Want: "etcd upgrades one minor version at a time: change spec.version to " + upgradePath[1].String() + " first", Watch: 10 * time.Second})
	})
	for i, to := range upgradePath[1:] {
		from := upgradePath[i]
		t.Run(fmt.Sprintf("%s to %s one member at a time, leader last, under load, a snapshot first", from.MinorString(), to.MinorString()), func(t *testing.T) {
			UpgradeSpec(ctx, UpgradeSpecInput{T: t, Topology: topo, Etcd: etcd, To: to.String(), Timeout: 15 * time.Minute, Backup: backup()})
		})
		if t.Failed() {
			break
		}
	}
	t.Run("a member that cannot start on the new version halts the rollout", func(t *testing.T) {
		broken := last
		broken.Patch = 99
		HaltedUpgradeSpec(ctx, HaltedUpgradeSpecInput{T: t, Topology: topo, Etcd: etcd, Broken: broken.String(), Good: last.String(), Hold: 20 * time.Second})
	})
}

// TestScenarioDowngrade37 downgrades a 5-member ring over three clusters
// from etcd 3.7 to 3.6 under a recorded workload, by etcd's downgrade
// procedure (etcdctl downgrade enable 3.6 through the maintenance API, the
// storage versions at 3.6 before the first member restarts), one member at
// a time, leader last. First, a downgrade of two minors (to 3.5) is
// refused with the step to take first, before anything moves. Long:
// `make scenarios` runs it.
func TestScenarioDowngrade37(t *testing.T) {
	from, to := downgrade37Path[0], downgrade37Path[1]
	ringScenario(t, ringScenarioInput{What: "a 5-member ring downgraded from etcd 3.7 to 3.6 under a recorded workload",
		Ring: EtcdClusterSpecInput{Namespace: "downgrade37", Name: "downgrade37", Domain: "downgrade37.etcd.test", Replicas: 5, WantZones: "2/2/1", Version: from.String()}},
		func(ctx context.Context, topo *Topology, etcd *ManagedEtcd) {
			t.Run("a downgrade of two minors is refused with the step to take first", func(t *testing.T) {
				RefusedVersionSpec(ctx, RefusedVersionSpecInput{T: t, Topology: topo, Etcd: etcd, To: upgradeFrom,
					Want: "etcd downgrades one minor version at a time: change spec.version to " + to.String() + " first", Watch: 10 * time.Second})
			})
			t.Run(fmt.Sprintf("%s to %s by etcd's downgrade procedure, one member at a time, leader last, under load", from.MinorString(), to.MinorString()), func(t *testing.T) {
				UpgradeSpec(ctx, UpgradeSpecInput{T: t, Topology: topo, Etcd: etcd, To: to.String(), Timeout: 15 * time.Minute})
			})
		})
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
	ringScenario(t, ringScenarioInput{What: "a 5-member ring downgraded from etcd 3.6 to 3.5 under a recorded workload",
		Ring: EtcdClusterSpecInput{Namespace: "downgrade", Name: "downgrade", Domain: "downgrade.etcd.test", Replicas: 5, WantZones: "2/2/1", Version: upgradeTo}},
		func(ctx context.Context, topo *Topology, etcd *ManagedEtcd) {
			t.Run("a downgrade of two minors is refused before anything moves", func(t *testing.T) {
				RefusedVersionSpec(ctx, RefusedVersionSpecInput{T: t, Topology: topo, Etcd: etcd, To: "3.4.37",
					Want: "etcd downgrades one minor version at a time", Watch: 10 * time.Second})
			})
			t.Run("a downgrade set back after its first member is cancelled", func(t *testing.T) {
				AbandonedDowngradeSpec(ctx, AbandonedDowngradeSpecInput{T: t, Topology: topo, Etcd: etcd, To: upgradeFrom, Back: upgradeTo})
			})
			t.Run("3.6 to 3.5 by etcd's downgrade procedure, one member at a time, leader last, under load", func(t *testing.T) {
				UpgradeSpec(ctx, UpgradeSpecInput{T: t, Topology: topo, Etcd: etcd, To: upgradeFrom, Timeout: 15 * time.Minute})
			})
		})
}
