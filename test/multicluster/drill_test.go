package multicluster

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/etcdfed/etcdfed/dev/drill"
)

// TestScenarioDrillZoneFailure runs `etcdfed drill zone-failure --json`
// (the binary, failing zones through the local environment's control
// socket) against a 3-member EtcdCluster formed by the real hub and
// spokes, in all three modes, each on the zone of a member: cordon, kill,
// partition (as root). Each drill must pass and its report must hold the
// times in order. It took 187 s of `make test` (30 Nov): one of `make
// failures`, which CI runs every time, not of `make test`.
func TestScenarioDrillZoneFailure(t *testing.T) {
	skipUnlessScenarios(t, "`etcdfed drill zone-failure` in its three modes on a 3-member ring")
	topo := hubTopology(t)
	ctx := context.Background()
	var etcd *ManagedEtcd
	if !t.Run("bootstrap 3", func(t *testing.T) {
		etcd = EtcdClusterSpec(ctx, EtcdClusterSpecInput{T: t, Topology: topo, Namespace: "drill", Name: "drill", Domain: "drill.etcd.test", Replicas: 3, WantZones: "1/1/1"})
	}) {
		t.FailNow()
	}
	for _, tc := range []struct {
		mode   drill.Mode
		member string
	}{{drill.ModeCordon, "drill-0"}, {drill.ModeKill, "drill-1"}, {drill.ModePartition, "drill-2"}} {
		if !t.Run(string(tc.mode), func(t *testing.T) {
			DrillSpec(ctx, DrillSpecInput{T: t, Topology: topo, Etcd: etcd, Member: tc.member, Mode: tc.mode,
				Etcdfed: filepath.Join(hubFx.bin, "etcdfed"), StateDir: hubFx.state})
		}) {
			break
		}
	}
	t.Run("delete", func(t *testing.T) { DeleteEtcdClusterSpec(ctx, t, topo, etcd) })
}
