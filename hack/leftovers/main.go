// Command leftovers reports processes that earlier test runs left behind,
// and stops those it can prove a test run started: `make test` runs it
// before the tests.
//
// Proof is a record in dev/testenv/testproc: every process a test binary
// starts through dev/testenv is recorded (pid and kernel start time)
// in a directory named after the test binary (its pid and start time).
// When that test binary is gone and a recorded process still runs with the
// same start time, the process is a leftover of that run: it is reported
// and killed (with -stop, the default), and the directory is removed.
// Directories of test binaries that still run (a concurrent run, another
// checkout) are left alone.
//
// Processes running a binary of the bin directory (kube-apiserver, etcd)
// whose parent is gone (adopted by pid 1) but that no record names are
// reported only: nothing proves who started them. Nothing is ever matched
// or killed by name.
package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/etcdfed/etcdfed/dev/localenv/proc"
	"github.com/etcdfed/etcdfed/dev/testenv/testproc"
	"github.com/etcdfed/etcdfed/internal/text"
)

func main() {
	stop := flag.Bool("stop", true, "stop proven leftovers (false: report only)")
	bin := flag.String("bin", os.Getenv("ETCDFED_BIN_DIR"), "bin directory whose orphaned processes are reported")
	flag.Parse()

	rep, err := testproc.Sweep(testproc.Root(), *stop)
	for _, l := range rep.Leftovers {
		fmt.Println(">> left over from an earlier test run:", l)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, ">> leftovers:", err)
	}
	orphans := unproven(*bin)
	for _, o := range orphans {
		fmt.Println(">> orphaned process of", *bin, "not proven to be from a test run, left alone:", o)
	}
	if len(rep.Leftovers) == 0 && len(orphans) == 0 {
		fmt.Printf(">> no processes left over from earlier test runs (%d earlier run directories cleaned, %d of runs in progress left alone)\n", rep.Removed, rep.Live)
	}
}

// unproven lists live processes whose executable lies in bin and whose
// parent is pid 1.
func unproven(bin string) []string {
	if bin == "" {
		return nil
	}
	bin, err := filepath.EvalSymlinks(bin)
	if err != nil {
		return nil
	}
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	var out []string
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		exe, err := os.Readlink("/proc/" + e.Name() + "/exe")
		if err != nil || filepath.Dir(exe) != bin {
			continue
		}
		if proc.PPID(pid) != 1 || !(proc.PIDRecord{PID: pid, StartTicks: proc.StartTicks(pid)}).Alive() {
			continue
		}
		cmd, _ := os.ReadFile("/proc/" + e.Name() + "/cmdline")
		line := strings.TrimSpace(strings.ReplaceAll(string(cmd), "\x00", " "))
		out = append(out, fmt.Sprintf("pid %d: %s", pid, text.Truncate(line, 203)))
	}
	return out
}
