// Package spoketest runs a whole spoke (spoke/app) inside a test, against
// a real apiserver, and stops it when the test ends.
package spoketest

import (
	"context"
	"testing"

	"github.com/go-logr/logr/testr"
	"k8s.io/client-go/rest"

	"github.com/etcdfed/etcdfed/spoke/app"
)

// Run starts a spoke with options o (probe and metrics endpoints off, a
// test logger unless o.Log is set) and returns it with a stop function.
// Stop is idempotent and also runs at the end of the test; an error the
// spoke returns fails the test.
func Run(t *testing.T, cfg *rest.Config, o app.Options) (*app.Spoke, func()) {
	t.Helper()
	o.HealthProbeBindAddress, o.MetricsBindAddress = "0", "0"
	o.SkipControllerNameValidation = true
	if o.Log.GetSink() == nil {
		o.Log = testr.NewWithOptions(t, testr.Options{Verbosity: 0})
	}
	s, err := app.New(cfg, o)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Start(ctx) }()
	stopped := false
	stop := func() {
		if stopped {
			return
		}
		stopped = true
		cancel()
		if err := <-done; err != nil {
			t.Errorf("spoke: %v", err)
		}
	}
	t.Cleanup(stop)
	return s, stop
}
