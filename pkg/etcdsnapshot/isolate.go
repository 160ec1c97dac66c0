package etcdsnapshot

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// A snapshot from a store or a member is input the hub does not control:
// bbolt reads it through mmap, and its consistency check runs in a
// goroutine of its own without recovery, so a crafted file can panic
// outside any recover or fault on a page past the end of the file (SIGBUS,
// which no Go code can recover). The database is therefore only ever
// opened in a child process: the running binary started again with
// childArg (any binary that links this package serves, its init sees the
// argument before main), under a memory limit (RLIMIT_DATA: the heap; the
// file's read-only mapping is not counted), a CPU limit (RLIMIT_CPU) and a
// wall-clock deadline. Whatever the child does, the caller gets an Info or
// an error wrapping ErrCorrupt.

// childArg is os.Args[1] of the checking child.
const childArg = "__etcdfed-snapshot-status"

// Limits bound one check in the child process.
type Limits struct {
	// Timeout is the wall-clock bound; the child is killed after it.
	Timeout time.Duration
	// MemoryBytes bounds the child's heap (RLIMIT_DATA). The file itself
	// is mapped read-only and is not counted.
	MemoryBytes uint64
}

// DefaultLimits bound a check: 15 minutes (a multi-gigabyte database is
// read once through by the check) and 1 GiB of heap (the check keeps a
// map entry per page; 8 GiB of 4 KiB pages is 2 million entries).
var DefaultLimits = Limits{Timeout: 15 * time.Minute, MemoryBytes: 1 << 30}

// ErrCheckerFailed: the checking child died or was killed (a crash, the
// memory, CPU or time limit). It wraps ErrCorrupt: a database that kills
// its reader is not used.
var ErrCheckerFailed = fmt.Errorf("%w: the checking process failed", ErrCorrupt)

func init() {
	if len(os.Args) >= 2 && os.Args[1] == childArg {
		os.Exit(childMain(os.Args[2:], os.Stdout))
	}
}

// childResult is what the child writes on stdout.
type childResult struct {
	Info  Info   `json:"info"`
	Error string `json:"error,omitempty"`
}

// childMain checks one file under the limits given as arguments (path,
// memory bytes, CPU seconds) and writes a childResult.
func childMain(args []string, out io.Writer) int {
	if len(args) != 3 {
		fmt.Fprintf(os.Stderr, "usage: %s PATH MEMORY_BYTES CPU_SECONDS\n", childArg)
		return 2
	}
	mem, err1 := strconv.ParseUint(args[1], 10, 64)
	cpu, err2 := strconv.ParseUint(args[2], 10, 64)
	if err := errors.Join(err1, err2); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	// The limits are set before the file is opened.
	if err := setLimits(mem, cpu); err != nil {
		fmt.Fprintf(os.Stderr, "set limits: %v\n", err)
		return 2
	}
	info, err := statusInProcess(args[0])
	res := childResult{Info: info}
	if err != nil {
		res.Error = err.Error()
	}
	if err := json.NewEncoder(out).Encode(res); err != nil {
		return 2
	}
	return 0
}

func setLimits(mem, cpu uint64) error {
	var errs []error
	if mem > 0 {
		errs = append(errs, syscall.Setrlimit(syscall.RLIMIT_DATA, &syscall.Rlimit{Cur: mem, Max: mem}))
	}
	if cpu > 0 {
		// SIGXCPU at the soft limit, SIGKILL one second later.
		errs = append(errs, syscall.Setrlimit(syscall.RLIMIT_CPU, &syscall.Rlimit{Cur: cpu, Max: cpu + 1}))
	}
	return errors.Join(errs...)
}

// selfExe is the running binary: /proc/self/exe runs even when the file
// was replaced or deleted since (an upgrade in place).
func selfExe() (string, error) {
	if runtime.GOOS == "linux" {
		return "/proc/self/exe", nil
	}
	return os.Executable()
}

// StatusWithLimits is Status with explicit limits.
func StatusWithLimits(ctx context.Context, path string, lim Limits) (Info, error) {
	if lim.Timeout <= 0 {
		lim.Timeout = DefaultLimits.Timeout
	}
	if _, err := os.Stat(path); err != nil {
		return Info{}, fmt.Errorf("%w: %s: %w", ErrCorrupt, path, err)
	}
	exe, err := selfExe()
	if err != nil {
		return Info{}, fmt.Errorf("snapshot check: find the running binary: %w", err)
	}
	ctx, cancel := context.WithTimeout(ctx, lim.Timeout)
	defer cancel()
	cpu := uint64(lim.Timeout/time.Second) + 1
	cmd := exec.CommandContext(ctx, exe, childArg, path, strconv.FormatUint(lim.MemoryBytes, 10), strconv.FormatUint(cpu, 10))
	// The child's Go runtime collects before it reaches the hard limit.
	env := slicesWithout(os.Environ(), "GOMEMLIMIT=", "GOTRACEBACK=")
	if lim.MemoryBytes > 0 {
		env = append(env, fmt.Sprintf("GOMEMLIMIT=%d", lim.MemoryBytes*3/4))
	}
	cmd.Env = append(env, "GOTRACEBACK=single")
	cmd.Stdin = nil
	var stdout bytes.Buffer
	stderr := &tailBuffer{max: 4096}
	cmd.Stdout = &limitedWriter{w: &stdout, n: 1 << 20}
	cmd.Stderr = stderr
	cmd.SysProcAttr = childProcAttr()
	cmd.WaitDelay = 5 * time.Second
	runErr := cmd.Run()
	var res childResult
	if runErr == nil {
		if err := json.Unmarshal(stdout.Bytes(), &res); err != nil {
			runErr = fmt.Errorf("unreadable result: %w", err)
		}
	}
	if runErr != nil {
		why := runErr.Error()
		if ctx.Err() != nil {
			why = fmt.Sprintf("killed after %s (time limit)", lim.Timeout)
		}
		if t := strings.TrimSpace(stderr.String()); t != "" {
			why += ": " + firstLines(t, 3)
		}
		return Info{}, fmt.Errorf("%w: %s: %s", ErrCheckerFailed, path, why)
	}
	if res.Error != "" {
		// The child's errors are already ErrCorrupt's text.
		return Info{}, fmt.Errorf("%w: %s", ErrCorrupt, strings.TrimPrefix(res.Error, ErrCorrupt.Error()+": "))
	}
	return res.Info, nil
}

func slicesWithout(env []string, prefixes ...string) []string {
	out := env[:0:0]
	for _, e := range env {
		keep := true
		for _, p := range prefixes {
			if strings.HasPrefix(e, p) {
				keep = false
			}
		}
		if keep {
			out = append(out, e)
		}
	}
	return out
}

// firstLines joins the first n non-empty lines of s.
func firstLines(s string, n int) string {
	var lines []string
	for _, l := range strings.Split(s, "\n") {
		if l = strings.TrimSpace(l); l != "" && len(lines) < n {
			lines = append(lines, l)
		}
	}
	return strings.Join(lines, " | ")
}

// tailBuffer keeps the first max bytes written.
type tailBuffer struct {
	buf bytes.Buffer
	max int
}

func (t *tailBuffer) Write(p []byte) (int, error) {
	if room := t.max - t.buf.Len(); room > 0 {
		t.buf.Write(p[:min(room, len(p))])
	}
	return len(p), nil
}

func (t *tailBuffer) String() string { return t.buf.String() }

// limitedWriter drops what goes beyond n bytes.
type limitedWriter struct {
	w io.Writer
	n int
}

func (l *limitedWriter) Write(p []byte) (int, error) {
	if l.n <= 0 {
		return len(p), nil
	}
	k := min(l.n, len(p))
	l.n -= k
	if _, err := l.w.Write(p[:k]); err != nil {
		return 0, err
	}
	return len(p), nil
}
