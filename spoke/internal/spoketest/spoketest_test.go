package spoketest

import (
	"sync/atomic"
	"testing"

	"github.com/go-logr/logr"
)

// countingSink counts the lines that reach it.
type countingSink struct {
	n *atomic.Int64
}

func (s countingSink) Init(logr.RuntimeInfo)          {}
func (s countingSink) Enabled(int) bool               { return true }
func (s countingSink) Info(int, string, ...any)       { s.n.Add(1) }
func (s countingSink) Error(error, string, ...any)    { s.n.Add(1) }
func (s countingSink) WithValues(...any) logr.LogSink { return s }
func (s countingSink) WithName(string) logr.LogSink   { return s }
func (s countingSink) WithCallDepth(int) logr.LogSink { return s }
func (s countingSink) GetCallStackHelper() func()     { return func() {} }

// TestNoLogReachesTheTestAfterStop: the spoke/member package failed with
// "panic: Log in goroutine after TestLostVolumeIsNotRecreated has
// completed": controller-runtime's manager logged "Stopping and waiting for
// warmup runnables" from a goroutine Start does not wait for, through the
// test's logger, after the test returned. Run closes the gate once the
// spoke stopped; no line, from any derived logger, gets through after.
func TestNoLogReachesTheTestAfterStop(t *testing.T) {
	var n atomic.Int64
	g := &gate{}
	log := logr.New(&gatedSink{gate: g, sink: countingSink{n: &n}})
	derived := log.WithName("manager").WithValues("controller", "etcdmember")
	log.Info("Before stop")
	derived.Error(nil, "Before stop")
	if got := n.Load(); got != 2 {
		t.Fatalf("%d lines before stop, want 2", got)
	}
	g.close()
	log.Info("Stopping and waiting for warmup runnables")
	derived.Info("Stopping and waiting for warmup runnables")
	derived.V(0).Error(nil, "Late error")
	if got := n.Load(); got != 2 {
		t.Errorf("%d lines reached the test's logger after stop, want none", got-2)
	}
}
