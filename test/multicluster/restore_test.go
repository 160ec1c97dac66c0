package multicluster

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/etcdfed/etcdfed/dev/s3test"
)

// TestScenarioRestoreFromSnapshot: a ring backed up to a real S3 server
// (versitygw) under a recorded workload, deleted, and restored into a new
// EtcdCluster from the latest snapshot (RestoreFromSnapshotSpec). It takes
// a few minutes: `make scenarios` runs it (ETCDFED_SCENARIOS=1).
func TestScenarioRestoreFromSnapshot(t *testing.T) {
	if os.Getenv("ETCDFED_SCENARIOS") == "" {
		t.Skip("a long scenario (a few minutes): run it with `make scenarios` (ETCDFED_SCENARIOS=1)")
	}
	topo := hubTopology(t)
	ctx := context.Background()
	srv := s3test.StartT(t, "ring-restore")
	source := EtcdClusterSpec(ctx, EtcdClusterSpecInput{T: t, Topology: topo, Namespace: "restore", Name: "old", Domain: "old.etcd.test", Replicas: 3, WantZones: "1/1/1"})
	RestoreFromSnapshotSpec(ctx, RestoreFromSnapshotSpecInput{T: t, Topology: topo, Source: source, S3: srv, Bucket: "ring-restore",
		Namespace: "restore", Name: "new", Domain: "new.etcd.test"})
}

// TestScenarioQuorumLossFromBackup: two of the three member clusters of a
// ring killed for good and the ring recovered from its latest backup with
// `etcdfed recover --from-backup latest` (QuorumLossFromBackupSpec). Several
// minutes: `make scenarios` runs it (ETCDFED_SCENARIOS=1).
func TestScenarioQuorumLossFromBackup(t *testing.T) {
	if os.Getenv("ETCDFED_SCENARIOS") == "" {
		t.Skip("a long failure scenario (several minutes): run it with `make scenarios` (ETCDFED_SCENARIOS=1)")
	}
	topo := hubTopology(t)
	ctx := context.Background()
	srv := s3test.StartT(t, "ring-frombackup")
	etcd := EtcdClusterSpec(ctx, EtcdClusterSpecInput{T: t, Topology: topo, Namespace: "frombackup", Name: "fb", Domain: "fb.etcd.test", Replicas: 3, WantZones: "1/1/1"})
	QuorumLossFromBackupSpec(ctx, QuorumLossFromBackupSpecInput{T: t, Topology: topo, Etcd: etcd, S3: srv, Bucket: "ring-frombackup", Etcdfed: filepath.Join(hubFx.bin, "etcdfed")})
	DeleteEtcdClusterSpec(ctx, t, topo, etcd)
}
