package proc_test

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/etcdfed/etcdfed/dev/localenv/proc"
	"github.com/etcdfed/etcdfed/dev/testenv"
)

func alive(pid int) bool {
	return proc.PIDRecord{PID: pid, StartTicks: proc.StartTicks(pid)}.Alive()
}

// Stop ends the whole process group (a shell and the child it started)
// and removes the pid file.
func TestStopKillsGroupAndRemovesPIDFile(t *testing.T) {
	testenv.SkipIfShort(t, "child processes")
	dir := t.TempDir()
	pidFile := filepath.Join(dir, "pids", "sh.pid")
	childFile := filepath.Join(dir, "child")
	p, err := proc.Start(proc.Spec{
		Name: "sh", Path: "/bin/sh",
		Args:    []string{"-c", "trap '' TERM; sleep 300 & echo $! > " + childFile + "; wait"},
		LogPath: filepath.Join(dir, "sh.log"), PIDFile: pidFile,
	})
	if err != nil {
		t.Fatal(err)
	}
	rec, err := proc.ReadPIDFile(pidFile)
	if err != nil || rec.PID != p.PID() || !rec.Alive() {
		t.Fatalf("pid file %+v: %v", rec, err)
	}
	var child int
	for child == 0 {
		data, _ := os.ReadFile(childFile)
		child, _ = strconv.Atoi(strings.TrimSpace(string(data)))
		time.Sleep(10 * time.Millisecond)
	}
	// The shell ignores SIGTERM: Stop must fall back to SIGKILL.
	p.Stop(200 * time.Millisecond)
	code, sig, _ := p.Exit()
	if sig != "killed" || code != 128+int(syscall.SIGKILL) {
		t.Errorf("exit %d %q, want SIGKILL", code, sig)
	}
	for i := 0; i < 100 && alive(child); i++ {
		time.Sleep(10 * time.Millisecond)
	}
	if alive(child) {
		t.Errorf("child %d survived its group", child)
	}
	if _, err := os.Stat(pidFile); !os.IsNotExist(err) {
		t.Errorf("pid file left: %v", err)
	}
}

// KillPIDFiles kills what pid files name, and never a process that merely
// reuses a recorded pid.
func TestKillPIDFiles(t *testing.T) {
	testenv.SkipIfShort(t, "child processes")
	dir := t.TempDir()
	p, err := proc.Start(proc.Spec{Name: "sleep", Path: "/bin/sleep", Args: []string{"300"}, PIDFile: filepath.Join(dir, "sleep.pid")})
	if err != nil {
		t.Fatal(err)
	}
	// A record whose start time does not match: an unrelated process with
	// a reused pid (here: ourselves).
	stale := proc.PIDRecord{Name: "stale", PID: os.Getpid(), StartTicks: 1}
	data := []byte(`{"name":"stale","pid":` + strconv.Itoa(stale.PID) + `,"startTicks":1}`)
	if err := os.WriteFile(filepath.Join(dir, "stale.pid"), data, 0o644); err != nil {
		t.Fatal(err)
	}
	killed, err := proc.KillPIDFiles(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(killed) != 1 || killed[0].PID != p.PID() {
		t.Fatalf("killed %+v, want only pid %d", killed, p.PID())
	}
	<-p.Done()
	if entries, _ := os.ReadDir(dir); len(entries) != 0 {
		t.Errorf("pid files left: %v", entries)
	}
}
