package multicluster

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/etcdfed/etcdfed/dev/workload"
)

// The recorded client workload lives in dev/workload (etcdfed drill
// runs it too); these names keep the scenarios short.
type (
	// EtcdClientConfig says how to reach an etcd cluster.
	EtcdClientConfig = workload.ClientConfig
	// Workload is a running recorded client workload.
	Workload = workload.Workload
)

// EtcdClient returns an etcd client that resolves every endpoint through
// the configured DNS servers at each dial, as etcd's own peers do.
var EtcdClient = workload.NewClient

// Resolver returns a resolver asking the given DNS servers in turn.
var Resolver = workload.Resolver

// ArtifactsDir is where scenarios write files worth keeping: $ARTIFACTS
// when set, else dir.
var ArtifactsDir = workload.ArtifactsDir

// StartWorkloadInput configures StartWorkload.
type StartWorkloadInput struct {
	Client EtcdClientConfig
	// Prefix of the workload's keys, distinct per scenario.
	Prefix string
	// WatchEachEndpoint adds a watcher per endpoint: set it only when
	// every endpoint answers again by the end of the scenario.
	WatchEachEndpoint bool
}

// StartWorkload starts the recorded workload (puts, linearizable gets,
// watchers); checkWorkload checks it.
func StartWorkload(ctx context.Context, t testing.TB, in StartWorkloadInput) *Workload {
	t.Helper()
	w, err := workload.Run(ctx, workload.Input{Client: in.Client, Prefix: in.Prefix, WatchEachEndpoint: in.WatchEachEndpoint})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(w.Stop)
	return w
}

// checkWorkload stops the workload and runs every check of its run in one
// call: linearizable (porcupine), no acknowledged write lost, every
// watcher complete and in order. It returns the passed result.
func checkWorkload(ctx context.Context, t testing.TB, w *Workload) *workload.Result {
	t.Helper()
	r, err := workloadVerdict(ctx, t, w)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// workloadVerdict is checkWorkload for a caller that goes on after a
// failed check: the result, and the failure (nil when all passed).
func workloadVerdict(ctx context.Context, t testing.TB, w *Workload) (*workload.Result, error) {
	t.Helper()
	start := time.Now()
	r := w.Check(ctx, ArtifactsDir(t.TempDir()))
	if err := r.Err(); err != nil {
		return r, fmt.Errorf("workload check: %w (%s)", err, r.Stats)
	}
	t.Logf("workload: %s (checked in %.1fs)", r, time.Since(start).Seconds())
	return r, nil
}

// waitForWorkloadProgress waits up to 30s for w to have 50 operations done,
// so a scenario disturbs a ring that is already under load.
func waitForWorkloadProgress(ctx context.Context, t testing.TB, w *Workload) {
	t.Helper()
	pctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if err := w.WaitForProgress(pctx, 50); err != nil {
		t.Fatal(err)
	}
}
