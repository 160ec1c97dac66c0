// Package spoketest runs a whole spoke (spoke/app) inside a test, against
// a real apiserver, and stops it when the test ends.
package spoketest

import (
	"context"
	"sync"
	"testing"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/testr"
	"k8s.io/client-go/rest"

	"github.com/etcdfed/etcdfed/spoke/app"
)

// Run starts a spoke with options o (probe and metrics endpoints off, a
// test logger unless o.Log is set) and returns it with a stop function.
// Stop is idempotent and also runs at the end of the test; an error the
// spoke returns fails the test.
//
// The test logger is closed once the spoke has stopped: controller-runtime's
// manager returns from Start while a goroutine of its stop procedure may
// still log ("Stopping and waiting for warmup runnables"), and a log call
// through the test's logger after the test completed panics the whole test
// binary. Lines logged after stop are dropped.
func Run(t *testing.T, cfg *rest.Config, o app.Options) (*app.Spoke, func()) {
	t.Helper()
	o.HealthProbeBindAddress, o.MetricsBindAddress = "0", "0"
	o.SkipControllerNameValidation = true
	var g *gate
	if o.Log.GetSink() == nil {
		o.Log, g = testLogger(t)
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
		err := <-done
		g.close()
		if err != nil {
			t.Errorf("spoke: %v", err)
		}
	}
	t.Cleanup(stop)
	return s, stop
}

// testLogger logs through t until the gate is closed.
func testLogger(t *testing.T) (logr.Logger, *gate) {
	g := &gate{}
	return logr.New(&gatedSink{gate: g, sink: testr.NewWithOptions(t, testr.Options{Verbosity: 0}).GetSink()}), g
}

// gate is open until close; a closed gate drops log lines.
type gate struct {
	mu     sync.RWMutex
	closed bool
}

// close waits for log calls in progress and drops every later one.
func (g *gate) close() {
	if g == nil {
		return
	}
	g.mu.Lock()
	g.closed = true
	g.mu.Unlock()
}

// gatedSink forwards to sink through gate.
type gatedSink struct {
	gate *gate
	sink logr.LogSink
}

var (
	_ logr.CallDepthLogSink       = (*gatedSink)(nil)
	_ logr.CallStackHelperLogSink = (*gatedSink)(nil)
)

func (s *gatedSink) Init(info logr.RuntimeInfo) { s.sink.Init(info) }

func (s *gatedSink) Enabled(level int) bool { return s.sink.Enabled(level) }

// Info and Error hold the gate open (read lock) while they log, so close
// waits for them.
func (s *gatedSink) Info(level int, msg string, kv ...any) {
	s.GetCallStackHelper()()
	s.gate.mu.RLock()
	defer s.gate.mu.RUnlock()
	if !s.gate.closed {
		s.sink.Info(level, msg, kv...)
	}
}

func (s *gatedSink) Error(err error, msg string, kv ...any) {
	s.GetCallStackHelper()()
	s.gate.mu.RLock()
	defer s.gate.mu.RUnlock()
	if !s.gate.closed {
		s.sink.Error(err, msg, kv...)
	}
}

func (s *gatedSink) WithValues(kv ...any) logr.LogSink {
	return &gatedSink{gate: s.gate, sink: s.sink.WithValues(kv...)}
}

func (s *gatedSink) WithName(name string) logr.LogSink {
	return &gatedSink{gate: s.gate, sink: s.sink.WithName(name)}
}

func (s *gatedSink) WithCallDepth(depth int) logr.LogSink {
	if cd, ok := s.sink.(logr.CallDepthLogSink); ok {
		return &gatedSink{gate: s.gate, sink: cd.WithCallDepth(depth)}
	}
	return s
}

func (s *gatedSink) GetCallStackHelper() func() {
	if h, ok := s.sink.(logr.CallStackHelperLogSink); ok {
		return h.GetCallStackHelper()
	}
	return func() {}
}
