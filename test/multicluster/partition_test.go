package multicluster

import (
	"context"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	etcdfedv1 "github.com/etcdfed/etcdfed/api/v1alpha1"
)

// TestScenarioHubWithMinority (issue 24): five members 2/2/1,
// quorumLossRecovery Automatic, graces of 30 s; the network cut between
// {the hub, the cluster of one member} and {the two clusters of two} for
// 150 s, longer than every grace -> the majority serves through its own
// DNS names, the hub forces nothing and says it sees only a minority;
// after the heal one ring of the same five members, nothing lost.
func TestScenarioHubWithMinority(t *testing.T) {
	topo := failureScenario(t)
	ctx := context.Background()
	etcd := EtcdClusterSpec(ctx, EtcdClusterSpecInput{T: t, Topology: topo, Namespace: "hub-minority", Name: "hmin", Domain: "hmin.etcd.test", Replicas: 5, WantZones: "2/2/1",
		Spec: func(s *etcdfedv1.EtcdClusterSpec) {
			s.FailurePolicy.MemberGracePeriod = &metav1.Duration{Duration: 30 * time.Second}
			s.FailurePolicy.ZoneGracePeriod = &metav1.Duration{Duration: 30 * time.Second}
			s.FailurePolicy.QuorumLossRecovery = etcdfedv1.QuorumLossRecoveryAutomatic
		}})
	deleteIfFailed(t, topo, etcd)
	HubWithMinoritySpec(ctx, HubWithMinoritySpecInput{T: t, Topology: topo, Etcd: etcd, Hold: 150 * time.Second})
	DeleteEtcdClusterSpec(ctx, t, topo, etcd)
}
