package etcdcluster

import (
	"context"
	"testing"

	"sigs.k8s.io/controller-runtime/pkg/manager"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	mcmanager "sigs.k8s.io/multicluster-runtime/pkg/manager"

	"github.com/etcdfed/etcdfed/dev/testenv"
)

// startHubManager runs a hub manager on api, with the indexes of the hub's
// cache a pass reads rival rings through (domains and CAs: admit.go), until
// the test ends; it returns once the cache is synced.
func startHubManager(t *testing.T, api *testenv.Cluster) mcmanager.Manager {
	t.Helper()
	ctx := context.Background()
	mgr, err := mcmanager.New(api.Config, nil, manager.Options{Scheme: testenv.Scheme(),
		Metrics: metricsserver.Options{BindAddress: "0"}, HealthProbeBindAddress: "0"})
	if err != nil {
		t.Fatal(err)
	}
	if err := indexDomains(ctx, mgr); err != nil {
		t.Fatal(err)
	}
	if err := indexCAs(ctx, mgr); err != nil {
		t.Fatal(err)
	}
	mctx, stop := context.WithCancel(ctx)
	t.Cleanup(stop)
	go func() { _ = mgr.Start(mctx) }()
	if !mgr.GetLocalManager().GetCache().WaitForCacheSync(mctx) {
		t.Fatal("hub cache not synced")
	}
	return mgr
}
