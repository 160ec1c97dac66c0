package multicluster

import (
	"context"
	"testing"
	"time"
)

// TestScenarioTimingAuto: three members over three single-zone clusters
// with spec.etcd.timing Auto (the default), at zero distance on etcd's
// defaults; 150 ms put live between every pair of member clusters; the
// spokes measure it, the hub chooses a longer heartbeat and election
// timeout and rolls them onto the members one at a time, leader last,
// with no election but the roll's own hand-off; the recorded workload
// loses nothing.
func TestScenarioTimingAuto(t *testing.T) {
	skipUnlessScenarios(t, "spec.etcd.timing Auto: a distance raised live, the timing follows by a roll")
	topo := hubTopology(t)
	ringScenario(t, ringScenarioInput{
		Topology: func(*testing.T) *Topology { return topo },
		Ring:     EtcdClusterSpecInput{Namespace: "timing-auto", Name: "far", Domain: "far.etcd.test", Replicas: 3, WantZones: "1/1/1"},
	}, func(ctx context.Context, topo *Topology, etcd *ManagedEtcd) {
		TimingAutoSpec(ctx, TimingAutoSpecInput{T: t, Topology: topo, Etcd: etcd, RoundTrip: 150 * time.Millisecond})
	})
}
