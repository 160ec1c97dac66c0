// Command pdeathsig runs a program so that it dies with the process that
// started it. dev/testenv points envtest at it (envtest starts
// kube-apiserver and etcd without a parent-death signal, so a test binary
// that panics or is killed by -timeout would leave them running):
//
//	pdeathsig -parent PID -record DIR -- /path/to/kube-apiserver ARGS...
//
// It asks the kernel for SIGKILL on the death of its parent
// (PR_SET_PDEATHSIG, kept across execve), checks that the parent is still
// PID (so a parent that died before the request cannot be missed), writes a
// record of itself (a testproc record: pid and kernel start time, which the
// program keeps) into DIR/<pid>.json, and then replaces itself with the
// program: same pid, no process in between.
//
// The request is an attribute of the calling THREAD, and execve keeps only
// the thread that calls it: this command requests and execs from its main
// thread (locked in init), or a Go runtime that moved main between threads
// would exec from one that never asked, and the program would outlive its
// parent (seen in CI: etcd left running, parent 1, no signal pending).
//
// The parent-death signal fires when the parent THREAD that forked this
// process exits, not only when the whole parent process does. Go retires
// an OS thread whenever a goroutine locked to it returns, so the caller
// must fork from a thread that lives as long as its process
// (dev/testenv starts envtest from goroutines locked to threads that
// never exit).
package main

import (
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"syscall"

	"github.com/etcdfed/etcdfed/dev/localenv/proc"
	"github.com/etcdfed/etcdfed/dev/testenv/testproc"
)

// init locks the main goroutine to the main thread, so that the prctl and
// the execve below run on one thread.
func init() { runtime.LockOSThread() }

func main() {
	parent := flag.Int("parent", 0, "pid of the process that must be the parent (required)")
	record := flag.String("record", "", "directory to write <pid>.json into before exec (optional)")
	flag.Parse()
	args := flag.Args()
	if *parent <= 0 || len(args) == 0 {
		fmt.Fprintln(os.Stderr, "usage: pdeathsig -parent PID [-record DIR] -- PROGRAM [ARGS...]")
		os.Exit(2)
	}
	if _, _, errno := syscall.RawSyscall(syscall.SYS_PRCTL, syscall.PR_SET_PDEATHSIG, uintptr(syscall.SIGKILL), 0); errno != 0 {
		fail("prctl(PR_SET_PDEATHSIG): %v", errno)
	}
	// Checked after the request: a parent that dies from here on kills us.
	if ppid := os.Getppid(); ppid != *parent {
		fail("parent %d is gone (parent now %d)", *parent, ppid)
	}
	path, err := exec.LookPath(args[0])
	if err != nil {
		fail("%v", err)
	}
	if *record != "" {
		if err := writeRecord(*record, path); err != nil {
			fail("%v", err)
		}
	}
	if err := syscall.Exec(path, args, os.Environ()); err != nil {
		fail("exec %s: %v", path, err)
	}
}

func writeRecord(dir, path string) error {
	pid := os.Getpid()
	return testproc.Write(dir, proc.PIDRecord{Name: filepath.Base(path), PID: pid, StartTicks: proc.StartTicks(pid), Path: path})
}

func fail(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "pdeathsig: "+format+"\n", args...)
	os.Exit(126)
}
