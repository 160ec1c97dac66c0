package localenv

import (
	"testing"
	"time"

	"github.com/go-logr/logr"

	"github.com/etcdfed/etcdfed/dev/localenv/proc"
)

// TestServiceKill: a crash (Kill(false)) is restarted after a back-off that
// doubles while the process keeps dying young; a replaced pod (Kill(true))
// is restarted at once even with a long back-off owed.
func TestServiceKill(t *testing.T) {
	sleep := "/bin/sleep"
	s, err := startService("sleeper", func() proc.Spec {
		return proc.Spec{Name: "sleeper", Path: sleep, Args: []string{"600"}}
	}, true, logr.Discard())
	if err != nil {
		t.Skipf("cannot start %s: %v", sleep, err)
	}
	t.Cleanup(func() { s.Stop(time.Second) })

	// newPID waits up to d for a running process other than old.
	newPID := func(old int, d time.Duration) int {
		deadline := time.Now().Add(d)
		for time.Now().Before(deadline) {
			if pid, _, _ := s.Info(); pid != 0 && pid != old {
				return pid
			}
			time.Sleep(20 * time.Millisecond)
		}
		return 0
	}
	pid := newPID(0, 10*time.Second)
	// Three crashes in a row: back-offs of 1s, 2s, then 4s owed.
	for i, owed := range []time.Duration{time.Second, 2 * time.Second, 4 * time.Second} {
		if s.Kill(false) != pid {
			t.Fatalf("crash %d: Kill did not kill pid %d", i+1, pid)
		}
		// Never earlier than the back-off: half of it is a safe lower bound.
		if p := newPID(pid, owed/2); p != 0 {
			t.Fatalf("crash %d: restarted (pid %d) within %s, before its %s back-off", i+1, p, owed/2, owed)
		}
		if pid = newPID(pid, owed+30*time.Second); pid == 0 {
			t.Fatalf("crash %d: not restarted", i+1)
		}
	}
	// 8s owed now; a replaced pod does not wait for it.
	if s.Kill(true) != pid {
		t.Fatalf("Kill(true) did not kill pid %d", pid)
	}
	start := time.Now()
	if pid = newPID(pid, 4*time.Second); pid == 0 {
		t.Fatal("not restarted within 4s of Kill(true): it waited for the 8s back-off a crash would")
	}
	t.Logf("restarted %.2fs after Kill(true), with an 8s back-off owed before", time.Since(start).Seconds())
	// And the back-off started over: a crash now waits 1s, not 16s.
	if s.Kill(false) != pid {
		t.Fatal("Kill(false) missed")
	}
	if pid = newPID(pid, 8*time.Second); pid == 0 {
		t.Fatal("not restarted within 8s of the crash that followed Kill(true): the back-off did not start over")
	}
	_, restarts, _ := s.Info()
	if restarts != 5 {
		t.Errorf("restarts = %d, want 5", restarts)
	}
}

// TestServicePIDOnStart: Info gives the process's pid as soon as
// startService returns (a real node's restart read pid 0 there under load,
// took its anchor for exited and left the node down).
func TestServicePIDOnStart(t *testing.T) {
	sleep := "/bin/sleep"
	for i := range 100 {
		s, err := startService("sleeper", func() proc.Spec {
			return proc.Spec{Name: "sleeper", Path: sleep, Args: []string{"600"}}
		}, false, logr.Discard())
		if err != nil {
			t.Skipf("cannot start %s: %v", sleep, err)
		}
		pid, _, _ := s.Info()
		s.Stop(time.Second)
		if pid == 0 {
			t.Fatalf("start %d: Info gave no pid right after startService", i+1)
		}
	}
}
