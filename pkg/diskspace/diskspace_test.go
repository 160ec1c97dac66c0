package diskspace_test

import (
	"errors"
	"fmt"
	"os/exec"
	"strconv"
	"strings"
	"testing"

	"github.com/etcdfed/etcdfed/pkg/diskspace"
)

// TestRealFilesystem: Available reads the real free space of a test
// directory's filesystem (as df reports it, within what other writers on
// this shared machine change meanwhile), and Check on the real filesystem
// passes a need that fits and refuses one that does not, naming both
// numbers.
func TestRealFilesystem(t *testing.T) {
	dir := t.TempDir()
	avail, err := diskspace.Available(dir)
	if err != nil {
		t.Fatal(err)
	}
	if avail <= 0 {
		t.Fatalf("Available(%s) = %d", dir, avail)
	}
	if out, err := exec.Command("df", "-B1", "--output=avail", dir).Output(); err == nil {
		lines := strings.Fields(string(out))
		df, perr := strconv.ParseInt(lines[len(lines)-1], 10, 64)
		if perr != nil {
			t.Fatalf("df: %q", out)
		}
		if diff := df - avail; diff > 256<<20 || diff < -256<<20 {
			t.Errorf("Available = %d, df says %d", avail, df)
		}
	} else {
		t.Logf("df not run (%v): the comparison is skipped", err)
	}
	if err := diskspace.Check(nil, dir, 1<<20, "a small file"); err != nil {
		t.Errorf("1 MiB on a filesystem with %d bytes free: %v", avail, err)
	}
	need := avail + 1<<40
	err = diskspace.Check(nil, dir, need, "restoring snapshot x")
	var s *diskspace.Shortage
	if !errors.Is(err, diskspace.ErrInsufficient) || !errors.As(err, &s) {
		t.Fatalf("Check of %d bytes with %d free = %v, want a Shortage", need, avail, err)
	}
	if s.Need != need || s.Available <= 0 || s.Available > avail+256<<20 || !strings.Contains(err.Error(), fmt.Sprintf("needs %d bytes", need)) ||
		!strings.Contains(err.Error(), "restoring snapshot x") || !strings.Contains(err.Error(), dir) {
		t.Errorf("shortage %+v: %v", s, err)
	}
	if err := diskspace.Check(nil, dir+"/missing/x", 1, "x"); err == nil || errors.Is(err, diskspace.ErrInsufficient) {
		t.Errorf("a path that does not exist: %v, want a statfs error", err)
	}
}
