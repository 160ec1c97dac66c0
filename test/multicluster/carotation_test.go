package multicluster

import (
	"context"
	"testing"
)

// TestScenarioCARotation: the CA of a 3-member ring over three clusters is
// rotated under the recorded workload (CARotationSpec): every member and
// consumer ends on the new CA alone, with no moment where two members
// distrust each other.
func TestScenarioCARotation(t *testing.T) {
	skipUnlessScenarios(t, "the ring's CA rotated in three phases, every member restarted three times, under a recorded workload")
	topo := hubTopology(t)
	ctx := context.Background()
	etcd := EtcdClusterSpec(ctx, EtcdClusterSpecInput{T: t, Topology: topo, Namespace: "carot", Name: "carot", Domain: "carot.etcd.test", Replicas: 3, WantZones: "1/1/1"})
	CARotationSpec(ctx, CARotationSpecInput{T: t, Topology: topo, Etcd: etcd})
	DeleteEtcdClusterSpec(ctx, t, topo, etcd)
}
