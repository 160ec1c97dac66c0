package nodeagent

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A failed container's termination message (FallbackToLogsOnError) is the
// end of its last run's log, bounded as kubelet bounds it.
func TestLogTail(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "restore.log")
	writeLogHeader(path, "--- t0: start 0 (etcdfed restore-snapshot) ---")
	f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprintln(f, "first run failed: store unreachable")
	_ = f.Close()
	writeLogHeader(path, "--- t1: start 1 (etcdfed restore-snapshot) ---")
	f, _ = os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0o644)
	for i := range 100 {
		fmt.Fprintf(f, "line %d\n", i)
	}
	fmt.Fprintln(f, "Error: invalid snapshot")
	_ = f.Close()

	got := logTail(path)
	if strings.Contains(got, "first run") || strings.Contains(got, "--- t1") {
		t.Errorf("tail holds an earlier run or the header: %q", got)
	}
	lines := strings.Split(got, "\n")
	if len(lines) != fallbackLogLines || lines[len(lines)-1] != "Error: invalid snapshot" || lines[0] != "line 21" {
		t.Errorf("tail has %d lines, first %q, last %q", len(lines), lines[0], lines[len(lines)-1])
	}
	if logTail(filepath.Join(dir, "missing.log")) != "" {
		t.Error("a missing log gives a message")
	}
}
