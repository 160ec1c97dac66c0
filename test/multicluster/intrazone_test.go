package multicluster

import (
	"context"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	etcdfedv1 "github.com/etcdfed/etcdfed/api/v1alpha1"
)

// TestScenarioMoveInsideMemberCluster: two member clusters of two zones
// each, a 3-member ring one member per zone; the zone of the member alone
// in its cluster cordoned -> it moves to the free zone of the same
// cluster make before break (its new incarnation's EtcdMember beside the
// old one's, under a name of its own), and back when that zone is
// cordoned instead; failure tolerance never 0, the workload linearizable,
// nothing lost, every watch complete (MoveInsideClusterSpec).
func TestScenarioMoveInsideMemberCluster(t *testing.T) {
	ringScenario(t, ringScenarioInput{Topology: multiZoneTopology, Ring: EtcdClusterSpecInput{Namespace: "intrazone", Name: "intra", Domain: "intra.etcd.test", Replicas: 3, WantZones: "1/1/1",
		Spec: func(s *etcdfedv1.EtcdClusterSpec) {
			// Only the cordon moves members: no replacement of a slow one.
			s.FailurePolicy.MemberGracePeriod = &metav1.Duration{Duration: time.Hour}
		}}}, func(ctx context.Context, topo *Topology, etcd *ManagedEtcd) {
		MoveInsideClusterSpec(ctx, MoveInsideClusterSpecInput{T: t, Topology: topo, Etcd: etcd})
	})
}
