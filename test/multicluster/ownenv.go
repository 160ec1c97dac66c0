package multicluster

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/go-logr/logr/funcr"

	"github.com/etcdfed/etcdfed/dev/localenv"
)

// ownEnvironment starts a local environment of one test's own from cfg
// (its state directory under a temporary "multicluster-<name>-", the
// restart back-off of the shared fixtures, and a log shown with
// MULTICLUSTER_LOG filled in), stops it when the test ends (its state kept
// for inspection when the test failed, removed otherwise) and returns its
// topology. what names it in messages ("six-cluster local environment").
func ownEnvironment(t *testing.T, name, what string, cfg localenv.Config) *Topology {
	t.Helper()
	topo, _ := ownEnvironmentWithEnv(t, name, what, cfg)
	return topo
}

// ownEnvironmentWithEnv is ownEnvironment, with the environment itself
// for a test that acts on it beyond the topology (destroys its hub
// cluster).
func ownEnvironmentWithEnv(t *testing.T, name, what string, cfg localenv.Config) (*Topology, *localenv.Env) {
	t.Helper()
	state, err := os.MkdirTemp("", "multicluster-"+name+"-")
	if err != nil {
		t.Fatal(err)
	}
	verbose := os.Getenv("MULTICLUSTER_LOG") != ""
	cfg.StateDir = state
	cfg.BackoffBase, cfg.BackoffMax = time.Second, 5*time.Second
	cfg.Log = funcr.New(func(prefix, args string) {
		if verbose {
			fmt.Fprintln(os.Stderr, prefix, args)
		}
	}, funcr.Options{})
	start := time.Now()
	env, err := startLocalEnv(context.Background(), cfg)
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	t.Cleanup(func() {
		if err := env.Stop(); err != nil {
			t.Logf("stop the %s: %v", what, err)
		}
		if t.Failed() {
			t.Logf("kept for inspection: %s", state)
			return
		}
		_ = os.RemoveAll(state)
	})
	t.Logf("%s ready in %.1fs%s (logs in %s)", what, time.Since(start).Seconds(), distanceNote(env), filepath.Join(state, "logs"))
	topo, err := LocalTopology(env, nil)
	if err != nil {
		t.Fatal(err)
	}
	return topo, env
}
