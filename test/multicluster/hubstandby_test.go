package multicluster

import (
	"context"
	"io"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/etcdfed/etcdfed/dev/localenv"
	"github.com/etcdfed/etcdfed/dev/localenv/addr"
)

// TestScenarioHubStandbyWarm: a second hub process beside the leading one
// (the Deployment's second replica, leader election on) engages every
// member cluster while it waits on the Lease, so that its caches are warm
// when it takes over: its own metrics say each cluster is engaged while
// controller-runtime's gauge says it does not lead, and its log says the
// informers of the kinds the hub watches are open in every member
// cluster. Before the registry ran on every replica, a standby engaged
// none.
func TestScenarioHubStandbyWarm(t *testing.T) {
	skipUnlessScenarios(t, "a standby hub engages every member cluster")
	topo := hubTopology(t)
	env := hubFx.env
	ctx := context.Background()
	start := time.Now()
	url := addStandbyHub(t, env, "hub-standby", 1)
	for _, m := range topo.Members {
		if err := WaitForHubEngaged(ctx, url, m.Name, time.Minute); err != nil {
			t.Fatalf("the standby hub: %v", err)
		}
	}
	t.Logf("the standby hub engaged %d member clusters %.1fs after it started", len(topo.Members), time.Since(start).Seconds())
	// It did so as the standby: controller-runtime's own gauge says it
	// does not lead, and its log says its informers are open.
	if err := poll(ctx, 10*time.Second, "the second hub is the standby", func(context.Context) (string, error) {
		v, err := metricValue(url, `leader_election_master_status{name="etcdfed-hub"}`)
		if err != nil {
			return "", err
		}
		if v != "0" {
			return "leader_election_master_status " + v, nil
		}
		return "", nil
	}); err != nil {
		t.Fatal(err)
	}
	logPath := filepath.Join(env.State().Dir, "logs", "hub-standby.log")
	if err := poll(ctx, time.Minute, "the standby's informers warm in every member cluster", func(context.Context) (string, error) {
		raw, err := os.ReadFile(logPath)
		if err != nil {
			return "", err
		}
		warm := map[string]bool{}
		for _, l := range strings.Split(string(raw), "\n") {
			for _, m := range topo.Members {
				if strings.Contains(l, `"Informers warm"`) && strings.Contains(l, `"cluster":"`+m.Name+`"`) {
					warm[m.Name] = true
				}
			}
		}
		for _, m := range topo.Members {
			if !warm[m.Name] {
				return "no \"Informers warm\" line for " + m.Name, nil
			}
		}
		return "", nil
	}); err != nil {
		t.Fatal(err)
	}
}

// addStandbyHub runs a second hub process beside the environment's (the
// Deployment's second replica: the same flags, leader election on), its
// metrics and health on the hub's agent address plus offset, and stops it
// when the test ends. It returns the standby's metrics URL.
func addStandbyHub(t *testing.T, env *localenv.Env, name string, offset byte) string {
	t.Helper()
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
	b4 := netip.MustParseAddr(env.State().Hub.AgentAddress).As4()
	b4[3] += offset
	standby := netip.AddrFrom4(b4)
	metrics := netip.AddrPortFrom(standby, addr.AgentMetricsPort).String()
	args = append(slices.Clone(args), "--metrics-bind-address="+metrics,
		"--health-probe-bind-address="+netip.AddrPortFrom(standby, addr.AgentHealthPort).String())
	if err := env.AddComponent(localenv.ComponentSpec{Name: name, Path: filepath.Join(hubFx.bin, "hub"), Cluster: localenv.HubClusterName, Args: args, Env: hubEnv}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.StopComponent(name, 5*time.Second) })
	return "http://" + metrics + "/metrics"
}

// metricValue reads one sample (its name with labels, as exposed) from a
// Prometheus endpoint; "" when it is not there.
func metricValue(url, sample string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return "", err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		return "", err
	}
	for _, l := range strings.Split(string(raw), "\n") {
		if v, ok := strings.CutPrefix(l, sample+" "); ok {
			return v, nil
		}
	}
	return "", nil
}
