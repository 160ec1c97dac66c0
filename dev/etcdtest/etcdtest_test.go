package etcdtest

import (
	"context"
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"
)

// MakeFollower on the leader hands leadership to another member.
func TestMakeFollowerMovesLeadership(t *testing.T) {
	c := Start(t, Options{Members: 3, Name: "follow"})
	ctx := context.Background()
	if err := c.WaitHealthy(ctx, 30*time.Second); err != nil {
		t.Fatal(err)
	}
	leader, err := c.Leader(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.MakeFollower(ctx, leader); err != nil {
		t.Fatal(err)
	}
	now, err := c.Leader(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if now == leader {
		t.Fatalf("%s still leads after MakeFollower", leader.Name)
	}
	t.Logf("leadership moved from %s to %s", leader.Name, now.Name)
}

// fatalRecorder is a testing.TB whose Fatal ends the calling goroutine
// and keeps the message, so that a test can see Start fail.
type fatalRecorder struct {
	testing.TB
	msg string
}

func (f *fatalRecorder) Fatal(args ...any) { f.msg = fmt.Sprint(args...); runtime.Goexit() }
func (f *fatalRecorder) Fatalf(format string, args ...any) {
	f.msg = fmt.Sprintf(format, args...)
	runtime.Goexit()
}

// A member that dies at its start fails Start with its log. Before, the
// dead member counted as stopped, WaitHealthy skipped it, and Start
// handed back a "healthy" cluster of no running member (in CI: its
// client port taken before it bound it, and the test failed later on a
// refused connection).
func TestStartFailsWhenAMemberDies(t *testing.T) {
	rec := &fatalRecorder{TB: t}
	done := make(chan *Cluster, 1)
	go func() {
		defer close(done)
		done <- Start(rec, Options{Members: 1, Name: "dies", ExtraArgs: []string{"--no-such-flag"}})
	}()
	if c, ok := <-done; ok {
		t.Fatalf("Start returned a cluster of %d members, one of them dead", len(c.Members))
	}
	if !strings.Contains(rec.msg, "dies-0 exited on its own") || !strings.Contains(rec.msg, "no-such-flag") {
		t.Fatalf("Start failed with %q; want the dead member named with its log", rec.msg)
	}
	t.Logf("Start: %s", rec.msg)
}
