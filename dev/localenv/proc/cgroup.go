package proc

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// Cgroup2Root returns the mount point of the cgroup v2 hierarchy (for
// example /sys/fs/cgroup, or /sys/fs/cgroup/unified on hybrid systems) when
// this process may create cgroups in it, and a reason otherwise.
func Cgroup2Root() (string, error) {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return "", fmt.Errorf("read mountinfo: %w", err)
	}
	defer f.Close()
	var root string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		// ... mountpoint ... - fstype source options
		line := sc.Text()
		sep := strings.Index(line, " - ")
		if sep < 0 {
			continue
		}
		post := strings.Fields(line[sep+3:])
		pre := strings.Fields(line[:sep])
		if len(post) > 0 && post[0] == "cgroup2" && len(pre) >= 5 {
			root = pre[4]
			break
		}
	}
	if root == "" {
		return "", errors.New("no cgroup v2 hierarchy mounted")
	}
	// Our own cgroup must be the hierarchy's root or below it; creating a
	// directory there proves we may.
	probe := filepath.Join(root, fmt.Sprintf(".etcdfed-probe-%d", os.Getpid()))
	if err := os.Mkdir(probe, 0o755); err != nil {
		return "", fmt.Errorf("cannot create cgroups under %s: %w", root, err)
	}
	_ = os.Remove(probe)
	return root, nil
}

// EnsureCgroup creates the cgroup directory dir and its parents.
func EnsureCgroup(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("create cgroup %s: %w", dir, err)
	}
	return nil
}

// RemoveCgroupTree kills every process in the cgroup dir and below it
// (cgroup.kill where the kernel has it, else SIGKILL per pid) and removes
// the directories, deepest first.
func RemoveCgroupTree(dir string) error {
	if _, err := os.Stat(dir); errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err := os.WriteFile(filepath.Join(dir, "cgroup.kill"), []byte("1"), 0o644); err != nil {
		killProcsBelow(dir)
	}
	var dirs []string
	_ = filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
		if err == nil && d.IsDir() {
			dirs = append(dirs, path)
		}
		return nil
	})
	var errs []error
	for i := len(dirs) - 1; i >= 0; i-- {
		var err error
		// rmdir fails with EBUSY until the killed processes are reaped.
		for try := 0; try < 250; try++ {
			if err = os.Remove(dirs[i]); err == nil || errors.Is(err, os.ErrNotExist) {
				err = nil
				break
			}
			time.Sleep(20 * time.Millisecond)
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("remove cgroup %s: %w", dirs[i], err))
		}
	}
	return errors.Join(errs...)
}

func killProcsBelow(dir string) {
	_ = filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
		if err != nil || !d.IsDir() {
			return nil
		}
		data, _ := os.ReadFile(filepath.Join(path, "cgroup.procs"))
		for _, l := range strings.Fields(string(data)) {
			var pid int
			if _, err := fmt.Sscan(l, &pid); err == nil && pid > 0 {
				p, _ := os.FindProcess(pid)
				_ = p.Kill()
			}
		}
		return nil
	})
}

// CgroupPIDs returns the pids in the cgroup dir and below it.
func CgroupPIDs(dir string) []int {
	var pids []int
	_ = filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
		if err != nil || !d.IsDir() {
			return nil
		}
		data, _ := os.ReadFile(filepath.Join(path, "cgroup.procs"))
		for _, l := range strings.Fields(string(data)) {
			var pid int
			if _, err := fmt.Sscan(l, &pid); err == nil && pid > 0 {
				pids = append(pids, pid)
			}
		}
		return nil
	})
	return pids
}
