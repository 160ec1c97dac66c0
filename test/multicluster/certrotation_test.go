package multicluster

import (
	"context"
	"testing"
)

// TestScenarioMemberCertRotation: every member's certificate is renewed by
// the hub before expiry, one member at a time, under the recorded
// workload, with no pod restarted and no client request failed beyond one
// election (MemberCertRotationSpec).
func TestScenarioMemberCertRotation(t *testing.T) {
	ringScenario(t, ringScenarioInput{What: "every member's certificate renewed by the hub under a recorded workload", Ring: EtcdClusterSpecInput{Namespace: "certs", Name: "certs", Domain: "certs.etcd.test", Replicas: 3, WantZones: "1/1/1"}}, func(ctx context.Context, topo *Topology, etcd *ManagedEtcd) {
		MemberCertRotationSpec(ctx, MemberCertRotationSpecInput{T: t, Topology: topo, Etcd: etcd})
	})
}
