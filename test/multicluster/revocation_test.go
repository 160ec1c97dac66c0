package multicluster

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// TestScenarioRevocation: a ring made by a hub from before revocation
// lists is rolled onto them when the hub is upgraded (each member
// restarted once), then a root certificate from `etcdfed client-cert` is
// revoked with `etcdfed client-cert revoke`: every member refuses its
// next connection, another root certificate keeps working, a connection
// opened before stays open; under the recorded workload
// (RevocationSpec). The hub from before is built from the tree before the
// commit that added spec.tls.revocationList (or taken from
// $ETCDFED_HUB_BEFORE_REVOCATION).
func TestScenarioRevocation(t *testing.T) {
	skipUnlessScenarios(t, "a ring rolled onto revocation lists, then a root certificate revoked, under a recorded workload")
	topo := hubTopology(t)
	env := hubFx.env
	if env == nil {
		t.Skip("needs the local environment's hub process")
	}
	ctx := context.Background()
	oldHub := os.Getenv("ETCDFED_HUB_BEFORE_REVOCATION")
	if oldHub == "" {
		oldHub = filepath.Join(t.TempDir(), "hub")
		start := time.Now()
		if err := buildHubBefore(oldHub, "api/v1alpha1/etcdmember_types.go", "RevocationList bool"); err != nil {
			t.Fatal(err)
		}
		t.Logf("built the hub from before revocation lists in %.1fs", time.Since(start).Seconds())
	}
	bin, err := freshBin()
	if err != nil {
		t.Fatal(err)
	}
	restartHub := func(ctx context.Context, path string) error {
		if _, err := env.SetComponentPath("hub", path); err != nil {
			return err
		}
		if err := env.StopComponent("hub", 5*time.Second); err != nil {
			return err
		}
		if err := env.StartComponent("hub"); err != nil {
			return err
		}
		for _, m := range topo.Members {
			if err := WaitForHubEngaged(ctx, topo.HubMetricsURL, m.Name, 2*time.Minute); err != nil {
				return err
			}
		}
		return nil
	}
	newHub, err := env.SetComponentPath("hub", oldHub) // the hub under test
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := restartHub(context.Background(), newHub); err != nil {
			t.Errorf("the hub under test again: %v", err)
		}
	})
	if err := restartHub(ctx, oldHub); err != nil {
		t.Fatal(err)
	}
	etcd := EtcdClusterSpec(ctx, EtcdClusterSpecInput{T: t, Topology: topo, Namespace: "revocation", Name: "rev", Domain: "rev.etcd.test", Replicas: 3, WantZones: "1/1/1"})
	deleteIfFailed(t, topo, etcd)
	RevocationSpec(ctx, RevocationSpecInput{T: t, Topology: topo, Etcd: etcd, Etcdfed: filepath.Join(bin, "etcdfed"),
		UpgradeHub: func(ctx context.Context) error { return restartHub(ctx, newHub) }})
	DeleteEtcdClusterSpec(ctx, t, topo, etcd)
}
