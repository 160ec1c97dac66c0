package testenv

import (
	"context"
	"testing"

	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/config"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
)

// StartManager runs a controller-runtime manager against c for the rest of
// the test: no metrics or health listeners, its cache limited to namespace
// ns ("" for every namespace), with the controllers setup registers. The
// manager is stopped, and its error reported, when the test ends.
func StartManager(t testing.TB, c *Cluster, ns string, setup func(ctrl.Manager) error) ctrl.Manager {
	t.Helper()
	opts := ctrl.Options{
		Scheme:                 Scheme(),
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		Controller:             config.Controller{SkipNameValidation: ptr.To(true)},
	}
	if ns != "" {
		opts.Cache = cache.Options{DefaultNamespaces: map[string]cache.Config{ns: {}}}
	}
	mgr, err := ctrl.NewManager(c.Config, opts)
	if err != nil {
		t.Fatal(err)
	}
	if err := setup(mgr); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("manager: %v", err)
		}
	})
	return mgr
}
