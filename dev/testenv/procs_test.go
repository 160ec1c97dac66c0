package testenv

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/etcdfed/etcdfed/dev/localenv/proc"
	"github.com/etcdfed/etcdfed/dev/testenv/testproc"
)

// childModeEnv makes this test binary a child of TestNoProcessOutlivesTestBinary.
const childModeEnv = "ETCDFED_TESTENV_CHILD"

func TestMain(m *testing.M) {
	if mode := os.Getenv(childModeEnv); mode != "" {
		os.Exit(child(mode))
	}
	os.Exit(RunMain(m))
}

// child starts an apiserver (with its etcd) and a plain process, says
// READY, waits for stdin to close, then dies the way mode says: "panic" panics, "kill" waits for
// SIGKILL, "exit" exits without stopping anything after 64 goroutines
// locked to OS threads returned (so the runtime retired 64 threads while
// the children ran).
func child(mode string) int {
	cs, err := Start(context.Background(), Options{WithoutCRDs: true}, "orphan")
	if err != nil {
		fmt.Println("ERROR", err)
		return 1
	}
	sleep := exec.Command("sleep", "600")
	if err := StartProcess(sleep); err != nil {
		fmt.Println("ERROR", err)
		return 1
	}
	if mode == "exit" {
		var wg sync.WaitGroup
		for range 64 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				runtime.LockOSThread() // returning while locked ends the thread
			}()
		}
		wg.Wait()
		// The apiserver must still answer: no retired thread was the
		// parent thread of a child.
		if err := cs[0].Client.List(context.Background(), &corev1.NamespaceList{}); err != nil {
			fmt.Println("ERROR apiserver after threads exited:", err)
			return 1
		}
	}
	fmt.Println("READY")
	// The parent looks at the children, then closes stdin: die now.
	_, _ = io.Copy(io.Discard, os.Stdin)
	switch mode {
	case "panic":
		panic("the child test binary panics on purpose")
	case "exit":
		return 0
	}
	select {}
}

// TestNoProcessOutlivesTestBinary runs a child test binary that starts an
// apiserver with its etcd (through envtest) and a plain process, and then
// panics, is killed with SIGKILL, or exits without stopping them. Every
// process it started is gone afterwards, and hack/leftovers' sweep finds
// nothing to stop.
func TestNoProcessOutlivesTestBinary(t *testing.T) {
	SkipIfShort(t, "kube-apiserver and etcd")
	if _, err := BinDir(); err != nil {
		t.Fatal(err)
	}
	for _, mode := range []string{"panic", "kill", "exit"} {
		t.Run(mode, func(t *testing.T) {
			root := t.TempDir()
			cmd := exec.Command(os.Args[0], "-test.run=^$")
			cmd.Env = append(os.Environ(), childModeEnv+"="+mode, testproc.RootEnv+"="+root)
			cmd.Stderr = os.Stderr
			in, err := cmd.StdinPipe()
			if err != nil {
				t.Fatal(err)
			}
			out, err := cmd.StdoutPipe()
			if err != nil {
				t.Fatal(err)
			}
			if err := StartProcess(cmd); err != nil {
				t.Fatal(err)
			}
			lines := make(chan string)
			go func() {
				sc := bufio.NewScanner(out)
				for sc.Scan() {
					lines <- sc.Text()
				}
				close(lines)
			}()
			select {
			case l := <-lines:
				if l != "READY" {
					_ = cmd.Process.Kill()
					t.Fatalf("child: %s", l)
				}
			case <-time.After(3 * time.Minute):
				_ = cmd.Process.Kill()
				t.Fatal("child did not start its apiserver within 3m")
			}
			// envtest also runs `etcd --help` (recorded, gone by now).
			recs := childRecords(t, root, cmd.Process.Pid)
			running := map[string]bool{}
			for _, r := range recs {
				if r.Alive() {
					running[r.Name] = true
				}
			}
			for _, want := range []string{"kube-apiserver", "etcd", "sleep"} {
				if !running[want] {
					t.Errorf("no running %s recorded while the child runs: %v", want, recs)
				}
			}
			if mode == "kill" {
				if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
					t.Fatal(err)
				}
			}
			_ = in.Close()
			for range lines { //nolint:revive // drain until the child's stdout closes
			}
			err = cmd.Wait()
			t.Logf("child (%s) ended: %v", mode, err)
			// The kernel kills the orphans at once; they are reaped by
			// whoever adopted them, which takes a moment.
			// A kube-apiserver busy writing under a loaded machine's disk
			// has once taken longer than 30 s to go: 60 s, and the state
			// of any that is still there is logged.
			deadline := time.Now().Add(60 * time.Second)
			for _, r := range recs {
				for r.Alive() && time.Now().Before(deadline) {
					time.Sleep(20 * time.Millisecond)
				}
				if r.Alive() {
					t.Errorf("%s (pid %d) outlived the test binary that started it: %s", r.Name, r.PID, procState(r.PID))
					_ = syscall.Kill(r.PID, syscall.SIGKILL)
				}
			}
			rep, err := testproc.Sweep(root, true)
			if err != nil {
				t.Fatal(err)
			}
			if len(rep.Leftovers) != 0 || rep.Removed != 1 || rep.Live != 0 {
				t.Errorf("sweep after the child: %+v, want no leftovers and its directory removed", rep)
			}
		})
	}
}

func childRecords(t *testing.T, root string, pid int) []proc.PIDRecord {
	t.Helper()
	dir := filepath.Join(root, testproc.OwnerDirName(pid, proc.StartTicks(pid)))
	recs, err := testproc.Read(dir)
	if err != nil {
		t.Fatal(err)
	}
	return recs
}

// procState is what /proc says of pid: its state, parent and pending and
// blocked signals, for a process that should have died.
func procState(pid int) string {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return err.Error()
	}
	var keep []string
	for _, l := range strings.Split(string(data), "\n") {
		for _, k := range []string{"State:", "PPid:", "SigPnd:", "ShdPnd:", "SigBlk:"} {
			if strings.HasPrefix(l, k) {
				keep = append(keep, strings.Join(strings.Fields(l), " "))
			}
		}
	}
	return strings.Join(keep, "; ")
}
