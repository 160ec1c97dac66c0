package multicluster

import (
	"context"
	"os"
	"testing"

	"github.com/etcdfed/etcdfed/dev/s3test"
)

// TestScenarioTenantCannotReachAnotherTenant: on the local environment, with the
// hub run under a shared hub's tenancy policy, a tenant tries each path of
// issue 37 against another tenant's ring in turn (the hub's identity
// through a store, the other's snapshot restored however it is named, the
// other's domain and its parents, the other's CA); each is refused with
// its condition and a message naming what was refused, and writes
// nothing; the other ring keeps its members, pods, data and recorded
// workload. A scenario (the hub restarted twice, three rings): `make
// tenancy` runs it (ETCDFED_SCENARIOS=1).
func TestScenarioTenantCannotReachAnotherTenant(t *testing.T) {
	if os.Getenv("ETCDFED_SCENARIOS") == "" {
		t.Skip("a scenario (minutes, the hub restarted with other flags): run `make tenancy` (ETCDFED_SCENARIOS=1)")
	}
	topo := hubTopology(t)
	srv := s3test.StartT(t, "tenants")
	TenantCannotReachAnotherTenantSpec(context.Background(), TenantAttackInput{T: t, Topology: topo,
		Victim: "victim", Attacker: "attacker", Other: "bystander", S3: srv, Bucket: "tenants"})
}
