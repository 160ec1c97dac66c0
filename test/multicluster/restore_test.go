package multicluster

import (
	"context"
	"path/filepath"
	"testing"

	etcdfedv1 "github.com/etcdfed/etcdfed/api/v1alpha1"
	"github.com/etcdfed/etcdfed/dev/s3test"
)

// TestScenarioRestoreFromSnapshot: a ring backed up to a real S3 server
// (versitygw) under a recorded workload, deleted, and restored into a new
// EtcdCluster from the latest snapshot (RestoreFromSnapshotSpec). It takes
// a few minutes: `make scenarios` runs it (ETCDFED_SCENARIOS=1).
func TestScenarioRestoreFromSnapshot(t *testing.T) {
	// The spec deletes the source itself (and the restored ring).
	ctx, topo, source := setUpRing(t, ringScenarioInput{What: "a ring backed up to S3, deleted and restored from its latest snapshot",
		Ring: EtcdClusterSpecInput{Namespace: "restore", Name: "old", Domain: "old.etcd.test", Replicas: 3, WantZones: "1/1/1"}})
	srv := s3test.StartT(t, "ring-restore")
	RestoreFromSnapshotSpec(ctx, RestoreFromSnapshotSpecInput{T: t, Topology: topo, Source: source, S3: srv, Bucket: "ring-restore",
		Namespace: "restore", Name: "new", Domain: "new.etcd.test"})
}

// TestScenarioQuorumLossFromBackup: two of the three member clusters of a
// ring killed for good and the ring recovered from its latest backup with
// `etcdfed recover --from-backup latest` (QuorumLossFromBackupSpec). Several
// minutes: `make scenarios` runs it (ETCDFED_SCENARIOS=1).
func TestScenarioQuorumLossFromBackup(t *testing.T) {
	ringScenario(t, ringScenarioInput{What: "two of three member clusters killed for good, the ring recovered from its latest backup",
		Ring: EtcdClusterSpecInput{Namespace: "frombackup", Name: "fb", Domain: "fb.etcd.test", Replicas: 3, WantZones: "1/1/1",
			// The seed's earlier volume must survive the Delete policy.
			Spec: func(s *etcdfedv1.EtcdClusterSpec) { s.Storage.VolumeReclaimPolicy = etcdfedv1.VolumeDelete }}}, func(ctx context.Context, topo *Topology, etcd *ManagedEtcd) {
		srv := s3test.StartT(t, "ring-frombackup")
		QuorumLossFromBackupSpec(ctx, QuorumLossFromBackupSpecInput{T: t, Topology: topo, Etcd: etcd, S3: srv, Bucket: "ring-frombackup", Etcdfed: filepath.Join(hubFx.bin, "etcdfed")})
	})
}
