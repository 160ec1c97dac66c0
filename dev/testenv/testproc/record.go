package testproc

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/etcdfed/etcdfed/dev/localenv/proc"
)

// RootEnv overrides Root (tests of this package use it).
const RootEnv = "ETCDFED_TESTRUN_DIR"

// Root is the directory holding every owner directory of this user:
// $ETCDFED_TESTRUN_DIR, or <os.TempDir()>/etcdfed-testrun-<uid>.
func Root() string {
	if d := os.Getenv(RootEnv); d != "" {
		return d
	}
	return filepath.Join(os.TempDir(), fmt.Sprintf("etcdfed-testrun-%d", os.Getuid()))
}

// OwnerDirName names the owner directory of a process.
func OwnerDirName(pid int, startTicks uint64) string {
	return fmt.Sprintf("%d-%d", pid, startTicks)
}

// ParseOwner reads the owner pid and start time from an owner directory's
// name.
func ParseOwner(name string) (pid int, startTicks uint64, ok bool) {
	a, b, found := strings.Cut(name, "-")
	if !found {
		return 0, 0, false
	}
	p, err1 := strconv.Atoi(a)
	t, err2 := strconv.ParseUint(b, 10, 64)
	if err1 != nil || err2 != nil || p <= 0 {
		return 0, 0, false
	}
	return p, t, true
}

var own struct {
	once sync.Once
	dir  string
	err  error
}

// OwnDir returns (creating it once) this process's owner directory.
func OwnDir() (string, error) {
	own.once.Do(func() {
		pid := os.Getpid()
		ticks := proc.StartTicks(pid)
		if ticks == 0 {
			own.err = errors.New("testproc: cannot read this process's start time from /proc")
			return
		}
		own.dir = filepath.Join(Root(), OwnerDirName(pid, ticks))
		own.err = os.MkdirAll(ProcsDir(own.dir), 0o755)
	})
	return own.dir, own.err
}

// ProcsDir is where an owner directory keeps its process records.
func ProcsDir(ownerDir string) string { return filepath.Join(ownerDir, "procs") }

// Write records a started process in dir (an owner's procs directory).
func Write(dir string, rec proc.PIDRecord) error {
	data, err := json.Marshal(rec)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("create record dir: %w", err)
	}
	name := filepath.Join(dir, strconv.Itoa(rec.PID)+".json")
	tmp := fmt.Sprintf("%s.%d.tmp", name, os.Getpid())
	if err := os.WriteFile(tmp, data, 0o644); err != nil {
		return fmt.Errorf("write process record: %w", err)
	}
	if err := os.Rename(tmp, name); err != nil {
		return fmt.Errorf("write process record: %w", err)
	}
	return nil
}

// Record records a process this process started (pid, its start time and
// its executable) in its own owner directory.
func Record(name string, pid int, path string) error {
	dir, err := OwnDir()
	if err != nil {
		return err
	}
	ticks := proc.StartTicks(pid)
	if ticks == 0 {
		return nil // already gone: nothing can be left behind
	}
	return Write(ProcsDir(dir), proc.PIDRecord{Name: name, PID: pid, StartTicks: ticks, Path: path})
}

// Read returns the records of an owner directory.
func Read(ownerDir string) ([]proc.PIDRecord, error) {
	entries, err := os.ReadDir(ProcsDir(ownerDir))
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var out []proc.PIDRecord
	var errs []error
	for _, e := range entries {
		if !strings.HasSuffix(e.Name(), ".json") {
			continue
		}
		data, err := os.ReadFile(filepath.Join(ProcsDir(ownerDir), e.Name()))
		if err != nil {
			errs = append(errs, err)
			continue
		}
		var rec proc.PIDRecord
		if err := json.Unmarshal(data, &rec); err != nil {
			errs = append(errs, fmt.Errorf("parse %s: %w", e.Name(), err))
			continue
		}
		out = append(out, rec)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].PID < out[j].PID })
	return out, errors.Join(errs...)
}

// Prune removes the records of processes that are gone from an owner
// directory (the owner calls it after stopping what it started).
func Prune(ownerDir string) error {
	recs, err := Read(ownerDir)
	for _, r := range recs {
		if !r.Alive() {
			_ = os.Remove(filepath.Join(ProcsDir(ownerDir), strconv.Itoa(r.PID)+".json"))
		}
	}
	return err
}

// Leftover is a process an earlier run left behind.
type Leftover struct {
	proc.PIDRecord
	// OwnerPID is the test binary that started it (gone).
	OwnerPID int
	// Stopped is true when Sweep killed it.
	Stopped bool
}

func (l Leftover) String() string {
	s := fmt.Sprintf("%s (pid %d, %s), started by test binary pid %d, which is gone", l.Name, l.PID, l.Path, l.OwnerPID)
	if l.Stopped {
		s += ": stopped"
	}
	return s
}

// Report is what Sweep found.
type Report struct {
	// Leftovers are processes of dead owners that still ran.
	Leftovers []Leftover
	// Removed counts the owner directories of dead owners removed.
	Removed int
	// Live counts owner directories of live owners (left alone).
	Live int
}

// Sweep looks at every owner directory under root. For an owner that is
// gone it reports each recorded process that still runs (same pid, same
// start time), kills it (SIGKILL to its process group and to it) when
// stop is set, and removes the directory once nothing recorded in it
// runs. Owners that still run are left alone.
func Sweep(root string, stop bool) (Report, error) {
	var rep Report
	entries, err := os.ReadDir(root)
	if errors.Is(err, os.ErrNotExist) {
		return rep, nil
	}
	if err != nil {
		return rep, err
	}
	var errs []error
	for _, e := range entries {
		pid, ticks, ok := ParseOwner(e.Name())
		if !e.IsDir() || !ok {
			continue
		}
		dir := filepath.Join(root, e.Name())
		if (proc.PIDRecord{PID: pid, StartTicks: ticks}).Alive() {
			rep.Live++
			continue
		}
		recs, err := Read(dir)
		if err != nil {
			errs = append(errs, err)
		}
		running := 0
		var killed []proc.PIDRecord
		for _, r := range recs {
			if !r.Alive() {
				continue
			}
			l := Leftover{PIDRecord: r, OwnerPID: pid}
			if stop && r.PID != os.Getpid() {
				_ = syscall.Kill(-r.PID, syscall.SIGKILL)
				_ = syscall.Kill(r.PID, syscall.SIGKILL)
				l.Stopped = true
				killed = append(killed, r)
			} else {
				running++
			}
			rep.Leftovers = append(rep.Leftovers, l)
		}
		// Killed processes are reaped by whoever adopted them; wait
		// (bounded) so their ports are free when Sweep returns.
		deadline := time.Now().Add(10 * time.Second)
		for _, r := range killed {
			for r.Alive() && time.Now().Before(deadline) {
				time.Sleep(20 * time.Millisecond)
			}
			if r.Alive() {
				running++
				errs = append(errs, fmt.Errorf("testproc: %s (pid %d) still runs after SIGKILL", r.Name, r.PID))
			}
		}
		if running == 0 {
			if err := os.RemoveAll(dir); err != nil {
				errs = append(errs, err)
			} else {
				rep.Removed++
			}
		}
	}
	return rep, errors.Join(errs...)
}
