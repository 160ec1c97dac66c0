package multicluster

import (
	"context"
	"path/filepath"
	"testing"

	etcdfedv1 "github.com/etcdfed/etcdfed/api/v1alpha1"
)

// TestScenarioQuorumLossRecovery: two of the three member clusters of a
// ring killed, the ring recovered from the survivor with `etcdfed
// recover`, the killed clusters back afterwards, under a recorded workload
// (QuorumLossRecoverySpec). It takes several minutes: `make scenarios`
// runs it (ETCDFED_SCENARIOS=1).
func TestScenarioQuorumLossRecovery(t *testing.T) {
	ringScenario(t, ringScenarioInput{Ring: EtcdClusterSpecInput{Namespace: "recover", Name: "rc", Domain: "rc.etcd.test", Replicas: 3, WantZones: "1/1/1"}}, func(ctx context.Context, topo *Topology, etcd *ManagedEtcd) {
		QuorumLossRecoverySpec(ctx, QuorumLossRecoverySpecInput{T: t, Topology: topo, Etcd: etcd, Etcdfed: filepath.Join(hubFx.bin, "etcdfed")})
	})
}

// TestScenarioQuorumLossHubRestarted: as TestScenarioQuorumLossRecovery,
// with the hub killed right after the loss. The new hub has never seen the
// killed clusters' spokes; it judges them from when it started looking
// (and by the surviving spoke's gossip), so it still declares the loss and
// recovers.
func TestScenarioQuorumLossHubRestarted(t *testing.T) {
	ringScenario(t, ringScenarioInput{Ring: EtcdClusterSpecInput{Namespace: "recover-hub", Name: "rh", Domain: "rh.etcd.test", Replicas: 3, WantZones: "1/1/1"}}, func(ctx context.Context, topo *Topology, etcd *ManagedEtcd) {
		QuorumLossRecoverySpec(ctx, QuorumLossRecoverySpecInput{T: t, Topology: topo, Etcd: etcd, Etcdfed: filepath.Join(hubFx.bin, "etcdfed"), KillHubAfterLoss: true})
	})
}

// TestScenarioQuorumLossAutomatic: as TestScenarioQuorumLossRecovery with
// failurePolicy.quorumLossRecovery: Automatic and no `etcdfed recover`:
// the hub declares the loss and recovers by itself from the freshest
// survivor (RPO 0) once a fencing controller (the test) confirms the killed
// clusters' members fenced, the ring back to three, the returning clusters
// fenced, their volumes kept despite the Delete reclaim policy.
func TestScenarioQuorumLossAutomatic(t *testing.T) {
	// With the Delete reclaim policy: the old incarnations' volumes must be
	// kept all the same once their clusters come back.
	ringScenario(t, ringScenarioInput{Ring: EtcdClusterSpecInput{Namespace: "recover-auto", Name: "ra", Domain: "ra.etcd.test", Replicas: 3, WantZones: "1/1/1",
		Spec: func(s *etcdfedv1.EtcdClusterSpec) { s.Storage.VolumeReclaimPolicy = etcdfedv1.VolumeDelete }}}, func(ctx context.Context, topo *Topology, etcd *ManagedEtcd) {
		QuorumLossRecoverySpec(ctx, QuorumLossRecoverySpecInput{T: t, Topology: topo, Etcd: etcd, Etcdfed: filepath.Join(hubFx.bin, "etcdfed"), Automatic: true})
	})
}
