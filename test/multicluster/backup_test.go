package multicluster

import (
	"context"
	"testing"

	"github.com/etcdfed/etcdfed/dev/s3test"
)

// TestEtcdClusterBackups: scheduled backups of a 3-member EtcdCluster run
// by the real hub into a real S3 server (versitygw), under a recorded
// workload; then the same store behind a proxy that refuses, then hangs,
// while the ring is scaled to five.
func TestEtcdClusterBackups(t *testing.T) {
	topo := hubTopology(t)
	ctx := context.Background()
	etcd := EtcdClusterSpec(ctx, EtcdClusterSpecInput{T: t, Topology: topo, Namespace: "backups", Name: "bk", Domain: "bk.etcd.test", Replicas: 3, WantZones: "1/1/1"})
	srv := s3test.StartT(t, "ring-backups")
	t.Run("scheduled backups under load", func(t *testing.T) {
		BackupsUnderLoadSpec(ctx, BackupsUnderLoadSpecInput{T: t, Topology: topo, Etcd: etcd,
			Store: srv.Store("ring-backups", "hub", ""), Credentials: srv.Credentials(),
			// Two backups a minute apart (the shortest schedule), one kept:
			// the spacing, a pruning and the restore are all checked in
			// about a minute of the make test budget.
			Backups: 2, Keep: 1})
	})
	t.Run("an unreachable store never blocks membership work", func(t *testing.T) {
		UnreachableStoreSpec(ctx, UnreachableStoreSpecInput{T: t, Topology: topo, Etcd: etcd, S3: srv, Bucket: "ring-backups", To: 5})
	})
	DeleteEtcdClusterSpec(ctx, t, topo, etcd)
}
