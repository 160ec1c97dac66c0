package testproc_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/etcdfed/etcdfed/dev/localenv/proc"
	"github.com/etcdfed/etcdfed/dev/testenv/testproc"
)

// TestSweepStopsOnlyProvenLeftovers: a recorded process of an owner that is
// gone is stopped; a record whose start time does not match the process now
// holding the pid is not acted on; an owner that still runs is left alone.
func TestSweepStopsOnlyProvenLeftovers(t *testing.T) {
	root := t.TempDir()
	start := func() *exec.Cmd {
		c := exec.Command("sleep", "600")
		c.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		if err := c.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = c.Process.Kill(); _ = c.Wait() })
		return c
	}
	rec := func(c *exec.Cmd) proc.PIDRecord {
		return proc.PIDRecord{Name: "sleep", PID: c.Process.Pid, StartTicks: proc.StartTicks(c.Process.Pid), Path: c.Path}
	}
	leftover, bystander, concurrent := start(), start(), start()

	// An owner that is gone (no pid is that large).
	dead := filepath.Join(root, testproc.OwnerDirName(1<<30, 1))
	wrongTime := rec(bystander)
	wrongTime.StartTicks++
	for _, r := range []proc.PIDRecord{rec(leftover), wrongTime} {
		if err := testproc.Write(testproc.ProcsDir(dead), r); err != nil {
			t.Fatal(err)
		}
	}
	// An owner that runs: this test binary.
	live := filepath.Join(root, testproc.OwnerDirName(os.Getpid(), proc.StartTicks(os.Getpid())))
	if err := testproc.Write(testproc.ProcsDir(live), rec(concurrent)); err != nil {
		t.Fatal(err)
	}

	rep, err := testproc.Sweep(root, true)
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Leftovers) != 1 || rep.Leftovers[0].PID != leftover.Process.Pid || !rep.Leftovers[0].Stopped {
		t.Errorf("leftovers %v, want only pid %d, stopped", rep.Leftovers, leftover.Process.Pid)
	}
	if rep.Removed != 1 || rep.Live != 1 {
		t.Errorf("removed %d, live %d; want 1 and 1", rep.Removed, rep.Live)
	}
	if err := leftover.Wait(); err == nil || !strings.Contains(err.Error(), "killed") {
		t.Errorf("leftover ended with %v, want killed", err)
	}
	for _, c := range []*exec.Cmd{bystander, concurrent} {
		if !rec(c).Alive() {
			t.Errorf("pid %d was stopped but is not a proven leftover", c.Process.Pid)
		}
	}
	if _, err := os.Stat(dead); !os.IsNotExist(err) {
		t.Errorf("the dead owner's directory remains: %v", err)
	}
	if _, err := os.Stat(live); err != nil {
		t.Errorf("the live owner's directory was touched: %v", err)
	}

	// Without stop, leftovers are only reported.
	again := start()
	if err := testproc.Write(testproc.ProcsDir(dead), rec(again)); err != nil {
		t.Fatal(err)
	}
	rep, err = testproc.Sweep(root, false)
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Leftovers) != 1 || rep.Leftovers[0].Stopped || !rec(again).Alive() || rep.Removed != 0 {
		t.Errorf("report-only sweep: %+v", rep)
	}
}
