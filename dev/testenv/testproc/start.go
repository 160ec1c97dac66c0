package testproc

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"sync"
	"syscall"
)

// fixedThreads are idle goroutines, each locked to an OS thread for the
// life of the process.
var fixedThreads struct {
	sync.Mutex
	idle []chan func()
}

// OnFixedThread runs f on a goroutine locked to an OS thread that never
// exits, so that children forked inside f keep their parent thread for the
// life of this process. Calls run in parallel on as many threads as
// needed. A panic in f is re-raised in the caller (the thread survives it).
func OnFixedThread(f func()) {
	fixedThreads.Lock()
	var jobs chan func()
	if n := len(fixedThreads.idle); n > 0 {
		jobs = fixedThreads.idle[n-1]
		fixedThreads.idle = fixedThreads.idle[:n-1]
	} else {
		jobs = make(chan func())
		go func() {
			runtime.LockOSThread() // never unlocked, never returns: the thread lives as long as the process
			for job := range jobs {
				job()
			}
		}()
	}
	fixedThreads.Unlock()
	var panicked any
	done := make(chan struct{})
	jobs <- func() {
		defer close(done)
		defer func() { panicked = recover() }()
		f()
	}
	<-done
	fixedThreads.Lock()
	fixedThreads.idle = append(fixedThreads.idle, jobs)
	fixedThreads.Unlock()
	if panicked != nil {
		panic(panicked)
	}
}

// Start starts cmd so that it dies with this process (SIGKILL on the death
// of the parent, forked from a thread that never exits) and records it.
// Other SysProcAttr fields of cmd are kept.
func Start(cmd *exec.Cmd) error {
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.Pdeathsig = syscall.SIGKILL
	var err error
	OnFixedThread(func() { err = cmd.Start() })
	if err != nil {
		return err
	}
	if rerr := Record(filepath.Base(cmd.Path), cmd.Process.Pid, cmd.Path); rerr != nil {
		fmt.Fprintf(os.Stderr, "testproc: could not record pid %d: %v\n", cmd.Process.Pid, rerr)
	}
	return nil
}

// RecordStarted records a process this test binary caused to start but did
// not fork itself (for example a supervisor a CLI started in its own
// session), so that hack/leftovers stops it should the test binary die
// before it does.
func RecordStarted(name string, pid int) error {
	exe, _ := os.Readlink("/proc/" + strconv.Itoa(pid) + "/exe")
	return Record(name, pid, exe)
}

// Finish removes this process's owner directory when nothing recorded
// there still runs (testenv.RunMain calls it).
func Finish() {
	dir, err := OwnDir()
	if err != nil {
		return
	}
	recs, _ := Read(dir)
	for _, r := range recs {
		if r.Alive() {
			return
		}
	}
	_ = os.RemoveAll(dir)
}
