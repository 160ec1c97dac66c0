package multicluster

import (
	"context"
	"os"
	"testing"

	"k8s.io/apimachinery/pkg/api/resource"

	etcdfedv1 "github.com/etcdfed/etcdfed/api/v1alpha1"
)

// skipUnlessScenarios skips a scenario (what it does, for the message)
// unless ETCDFED_SCENARIOS is set (`make scenarios`): each takes minutes,
// and `make test` must stay under 30 minutes on 2 cores.
func skipUnlessScenarios(t *testing.T, what string) {
	t.Helper()
	if os.Getenv("ETCDFED_SCENARIOS") == "" {
		if what == "" {
			what = "a ring under a failure or an operation"
		}
		t.Skipf("scenario: %s (several minutes); run `make scenarios` (ETCDFED_SCENARIOS=1)", what)
	}
}

// TestScenarioDefrag: a ring whose members' files are fragmented (320 MiB
// written, deleted and compacted) is defragmented by the hub, one member
// at a time, the leader last, under the recorded workload (DefragSpec).
func TestScenarioDefrag(t *testing.T) {
	ringScenario(t, ringScenarioInput{What: "320 MiB written and deleted, every member defragmented under a recorded workload", Ring: EtcdClusterSpecInput{Namespace: "defrag", Name: "defrag", Domain: "defrag.etcd.test", Replicas: 3, WantZones: "1/1/1"}}, func(ctx context.Context, topo *Topology, etcd *ManagedEtcd) {
		DefragSpec(ctx, DefragSpecInput{T: t, Topology: topo, Etcd: etcd, FillMiB: 320})
	})
}

// TestScenarioNoSpace: a ring with a 32 MiB quota and auto-compaction
// settings (checked on the pods) is filled until etcd raises NOSPACE; the
// hub shows it and clears it by itself, under the recorded workload
// (NoSpaceSpec). The fill's revisions are fewer than the retention (1000),
// so the ring consents to compaction to the current revision
// (spec.defragmentation.noSpaceCompaction: CurrentRevision); without it
// the hub compacts no further than the retention and the alarm stays
// (TestNoSpaceCompactionConsent in hub/etcdcluster on a real etcd).
func TestScenarioNoSpace(t *testing.T) {
	quota := resource.MustParse("32Mi")
	ringScenario(t, ringScenarioInput{What: "a ring filled to its quota until NOSPACE, recovered by the hub under a recorded workload",
		Ring: EtcdClusterSpecInput{Namespace: "nospace", Name: "nospace", Domain: "nospace.etcd.test", Replicas: 3, WantZones: "1/1/1",
			Spec: func(s *etcdfedv1.EtcdClusterSpec) {
				s.Etcd.QuotaBackendBytes = &quota
				s.Etcd.AutoCompactionMode, s.Etcd.AutoCompactionRetention = etcdfedv1.AutoCompactionRevision, "1000"
				s.Defragmentation.NoSpaceCompaction = etcdfedv1.NoSpaceCompactionCurrentRevision
			}}}, func(ctx context.Context, topo *Topology, etcd *ManagedEtcd) {
		NoSpaceSpec(ctx, NoSpaceSpecInput{T: t, Topology: topo, Etcd: etcd,
			Flags: []string{"--quota-backend-bytes=33554432", "--auto-compaction-mode=revision", "--auto-compaction-retention=1000"}})
	})
}
