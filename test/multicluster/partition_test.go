package multicluster

import (
	"context"
	"os"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	etcdfedv1 "github.com/etcdfed/etcdfed/api/v1alpha1"
	"github.com/etcdfed/etcdfed/dev/localenv"
)

// TestScenarioHubWithMinority (issue 24): five members 2/2/1,
// quorumLossRecovery Automatic, graces of 30 s; the network cut between
// {the hub, the cluster of one member} and {the two clusters of two} for
// 150 s, longer than every grace -> the majority serves through its own
// DNS names, the hub forces nothing and says it sees only a minority;
// after the heal one ring of the same five members, nothing lost.
func TestScenarioHubWithMinority(t *testing.T) {
	ringScenario(t, ringScenarioInput{Ring: EtcdClusterSpecInput{Namespace: "hub-minority", Name: "hmin", Domain: "hmin.etcd.test", Replicas: 5, WantZones: "2/2/1",
		Spec: func(s *etcdfedv1.EtcdClusterSpec) {
			s.FailurePolicy.MemberGracePeriod = &metav1.Duration{Duration: 30 * time.Second}
			s.FailurePolicy.ZoneGracePeriod = &metav1.Duration{Duration: 30 * time.Second}
			s.FailurePolicy.QuorumLossRecovery = etcdfedv1.QuorumLossRecoveryAutomatic
		}}}, func(ctx context.Context, topo *Topology, etcd *ManagedEtcd) {
		HubWithMinoritySpec(ctx, HubWithMinoritySpecInput{T: t, Topology: topo, Etcd: etcd, Hold: 150 * time.Second})
	})
}

// TestScenarioGossipBroken (issue 24): a ring of three on two member
// clusters (2/1); the spoke of the cluster of two restarted without its
// gossip key, then the network cut between {the hub, that cluster} and
// {the other two} for 90 s -> the spoke says GossipHealthy=False, the hub
// counts it as abstaining, nothing is evacuated, Degraded says why.
func TestScenarioGossipBroken(t *testing.T) {
	ringScenario(t, ringScenarioInput{Ring: EtcdClusterSpecInput{Namespace: "gossip-broken", Name: "gbrk", Domain: "gbrk.etcd.test", Replicas: 3, WantZones: "2/1", NotTolerant: true,
		Spec: func(s *etcdfedv1.EtcdClusterSpec) {
			s.Topology.Clusters = []string{"member-1", "member-2"}
			// The zone grace is what the abstaining witness is tested
			// against: 30 s, a third of the cut. The member grace is
			// longer: after the heal the cut-off member needs up to a TCP
			// retransmission backoff before the leader's stream reaches
			// it again (the cut drops packets, as a blackhole does; 37 s
			// measured), and a member still catching up then is not what
			// this scenario tests (its grace counts from the heal:
			// TestMemberGraceCountsFromClusterBackInView).
			s.FailurePolicy.MemberGracePeriod = &metav1.Duration{Duration: 2 * time.Minute}
			s.FailurePolicy.ZoneGracePeriod = &metav1.Duration{Duration: 30 * time.Second}
		}}}, func(ctx context.Context, topo *Topology, etcd *ManagedEtcd) {
		GossipBrokenSpec(ctx, GossipBrokenSpecInput{T: t, Topology: topo, Etcd: etcd, Hold: 90 * time.Second})
	})
}

// TestScenarioPendingRollHalts (issue 24, related path): a spec change
// that leaves a pod Pending (a nodeSelector no node matches) halts the
// rollout beyond the member grace instead of replacing the member; set
// back, the rollout ends on the same members.
func TestScenarioPendingRollHalts(t *testing.T) {
	ringScenario(t, ringScenarioInput{Ring: EtcdClusterSpecInput{Namespace: "pending-roll", Name: "pend", Domain: "pend.etcd.test", Replicas: 3, WantZones: "1/1/1",
		Spec: func(s *etcdfedv1.EtcdClusterSpec) { s.FailurePolicy.MemberGracePeriod = &pendingGrace }}}, func(ctx context.Context, topo *Topology, etcd *ManagedEtcd) {
		PendingRollSpec(ctx, PendingRollSpecInput{T: t, Topology: topo, Etcd: etcd, MemberGrace: pendingGrace.Duration, Hold: 40 * time.Second})
	})
}

// TestScenarioRegistryDropped (issue 24, related path): a member
// cluster's kubeconfig Secret deleted for 70 s (graces 30 s) -> its
// member stays (it was evacuated at once), Degraded says why; the Secret
// back, the same members ready.
func TestScenarioRegistryDropped(t *testing.T) {
	ringScenario(t, ringScenarioInput{Ring: EtcdClusterSpecInput{Namespace: "registry-dropped", Name: "regd", Domain: "regd.etcd.test", Replicas: 3, WantZones: "1/1/1",
		Spec: func(s *etcdfedv1.EtcdClusterSpec) {
			s.FailurePolicy.MemberGracePeriod = &metav1.Duration{Duration: 30 * time.Second}
			s.FailurePolicy.ZoneGracePeriod = &metav1.Duration{Duration: 30 * time.Second}
		}}}, func(ctx context.Context, topo *Topology, etcd *ManagedEtcd) {
		RegistryDroppedSpec(ctx, RegistryDroppedSpecInput{T: t, Topology: topo, Etcd: etcd, Cluster: "member-2", Hold: 70 * time.Second})
	})
}

// TestScenarioPartitionHealed (issue 35, "heal to tolerant fast"): three
// members 1/1/1, graces of 30 s, 10 ms between the member clusters; the
// network cut between {the hub, member-3} and {member-1, member-2} for
// 60 s, twice the member grace -> after the heal no member is replaced
// (member-3's member only lost its peers) and the ring is FailureTolerant
// again (the time from the heal is logged); nothing lost.
func TestScenarioPartitionHealed(t *testing.T) {
	ringScenario(t, ringScenarioInput{Ring: EtcdClusterSpecInput{Namespace: "partition-heal", Name: "pheal", Domain: "pheal.etcd.test", Replicas: 3, WantZones: "1/1/1",
		Spec: func(s *etcdfedv1.EtcdClusterSpec) {
			s.FailurePolicy.MemberGracePeriod = &metav1.Duration{Duration: 30 * time.Second}
			s.FailurePolicy.ZoneGracePeriod = &metav1.Duration{Duration: 30 * time.Second}
		}}}, func(ctx context.Context, topo *Topology, etcd *ManagedEtcd) {
		// PARTITION_HEAL_DISTANCE replaces the distance (localenv's
		// syntax; "none" for zero distance), to compare.
		text := "member-1:member-2=10ms,member-1:member-3=10ms,member-2:member-3=10ms"
		if v := os.Getenv("PARTITION_HEAL_DISTANCE"); v != "" {
			text = v
		}
		d, err := localenv.ParseDistance(text)
		if err != nil {
			t.Fatal(err)
		}
		PartitionHealSpec(ctx, PartitionHealSpecInput{T: t, Topology: topo, Etcd: etcd, Distance: d, Cut: "member-3", Hold: 60 * time.Second})
	})
}
