package multicluster

import (
	"context"
	"net/netip"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/etcdfed/etcdfed/dev/localenv"
	"github.com/etcdfed/etcdfed/dev/localenv/addr"
)

// TestScenarioHubStandbyWarm: a second hub process beside the leading one
// (the Deployment's second replica, leader election on) engages every
// member cluster while it waits on the Lease, so that its caches are warm
// when it takes over: its own metrics say each cluster is engaged. Before
// the registry ran on every replica, a standby engaged none.
func TestScenarioHubStandbyWarm(t *testing.T) {
	skipUnlessScenarios(t, "a standby hub engages every member cluster")
	topo := hubTopology(t)
	env := hubFx.env
	ctx := context.Background()
	args, err := env.ComponentArgs("hub")
	if err != nil {
		t.Fatal(err)
	}
	if slices.Contains(args, "--leader-elect=false") {
		t.Fatal("the environment's hub runs without leader election")
	}
	hubEnv, err := env.ComponentEnv("hub")
	if err != nil {
		t.Fatal(err)
	}
	st := env.State()
	b4 := netip.MustParseAddr(st.Hub.AgentAddress).As4()
	b4[3]++
	standby := netip.AddrFrom4(b4)
	metrics := netip.AddrPortFrom(standby, addr.AgentMetricsPort).String()
	args = append(slices.Clone(args), "--metrics-bind-address="+metrics,
		"--health-probe-bind-address="+netip.AddrPortFrom(standby, addr.AgentHealthPort).String())
	if err := env.AddComponent(localenv.ComponentSpec{Name: "hub-standby", Path: filepath.Join(hubFx.bin, "hub"), Cluster: localenv.HubClusterName, Args: args, Env: hubEnv}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.StopComponent("hub-standby", 5*time.Second) })
	start := time.Now()
	for _, m := range topo.Members {
		if err := WaitForHubEngaged(ctx, "http://"+metrics+"/metrics", m.Name, 2*time.Minute); err != nil {
			t.Fatalf("the standby hub: %v", err)
		}
	}
	t.Logf("the standby hub engaged %d member clusters %.1fs after it started", len(topo.Members), time.Since(start).Seconds())
	// The leader still leads: its own metrics still say engaged.
	for _, m := range topo.Members {
		if err := WaitForHubEngaged(ctx, topo.HubMetricsURL, m.Name, 10*time.Second); err != nil {
			t.Fatalf("the leading hub: %v", err)
		}
	}
}
