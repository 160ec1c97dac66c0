package realnode

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/etcdfed/etcdfed/dev/localenv/proc"
)

// Hierarchies lists the mount points of every cgroup hierarchy this
// process sees (v1 controllers and the v2 unified hierarchy): a kubelet's
// cgroupRoot must exist in each. On a hybrid machine (v1 controllers with
// cgroup2 mounted beside them at /sys/fs/cgroup/unified) kubelet and runc
// use the v1 controllers and mirror every cgroup into the unified one.
func Hierarchies() ([]string, error) {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		sep := strings.Index(line, " - ")
		if sep < 0 {
			continue
		}
		pre, post := strings.Fields(line[:sep]), strings.Fields(line[sep+3:])
		if len(pre) < 5 || len(post) < 1 {
			continue
		}
		if post[0] == "cgroup" || post[0] == "cgroup2" {
			out = append(out, pre[4])
		}
	}
	sort.Strings(out)
	if len(out) == 0 {
		return nil, errors.New("no cgroup hierarchy mounted")
	}
	return out, nil
}

// CgroupMode describes the machine's cgroups for kubelet: "v2" (one
// unified hierarchy), "hybrid" (v1 controllers, cgroup2 beside them) or
// "v1".
func CgroupMode() string {
	var st syscallStatfs
	if statfs("/sys/fs/cgroup", &st) == nil && isCgroup2(&st) {
		return "v2"
	}
	if fi, err := os.Stat("/sys/fs/cgroup/unified/cgroup.controllers"); err == nil && !fi.IsDir() {
		return "hybrid"
	}
	return "v1"
}

// EnsureCgroup creates the cgroup rel (e.g. etcdfed-3/member-1/node-0) in
// every hierarchy, with cpuset.cpus and cpuset.mems copied from the parent
// where the cpuset controller needs them before any task may join.
func EnsureCgroup(rel string) error {
	hs, err := Hierarchies()
	if err != nil {
		return err
	}
	for _, h := range hs {
		parts := strings.Split(strings.Trim(rel, "/"), "/")
		dir := h
		for _, p := range parts {
			parent := dir
			dir = filepath.Join(dir, p)
			if err := os.Mkdir(dir, 0o755); err != nil && !errors.Is(err, os.ErrExist) {
				return fmt.Errorf("create cgroup %s: %w", dir, err)
			}
			for _, f := range []string{"cpuset.cpus", "cpuset.mems"} {
				cur, err := os.ReadFile(filepath.Join(dir, f))
				if err != nil || strings.TrimSpace(string(cur)) != "" {
					continue
				}
				v, err := os.ReadFile(filepath.Join(parent, f))
				if err != nil {
					continue
				}
				if err := os.WriteFile(filepath.Join(dir, f), v, 0o644); err != nil {
					return fmt.Errorf("set %s of %s: %w", f, dir, err)
				}
			}
		}
	}
	return nil
}

// KillCgroup kills every process in cgroup rel and below, in every
// hierarchy, and waits (bounded) until they are gone.
func KillCgroup(rel string) error {
	hs, err := Hierarchies()
	if err != nil {
		return err
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		left := 0
		for _, h := range hs {
			root := filepath.Join(h, rel)
			if _, err := os.Stat(root); err != nil {
				continue
			}
			// cgroup.kill (cgroup2) takes the whole subtree at once.
			_ = os.WriteFile(filepath.Join(root, "cgroup.kill"), []byte("1"), 0o644)
			_ = filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
				if err != nil || !d.IsDir() {
					return nil
				}
				for _, pid := range readPIDs(filepath.Join(p, "cgroup.procs")) {
					left++
					_ = killPID(pid)
				}
				return nil
			})
		}
		if left == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("cgroup %s: %d processes still there after SIGKILL", rel, left)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// RemoveCgroup kills what runs in cgroup rel and removes it, deepest
// first, from every hierarchy. A cgroup that does not exist is fine.
func RemoveCgroup(rel string) error {
	if err := KillCgroup(rel); err != nil {
		return err
	}
	hs, err := Hierarchies()
	if err != nil {
		return err
	}
	// Every process is gone already; the directories go deepest first
	// (proc's, once per hierarchy).
	var errs []error
	for _, h := range hs {
		errs = append(errs, proc.RemoveCgroupTree(filepath.Join(h, rel)))
	}
	return errors.Join(errs...)
}

// ResetCgroup gives cgroup rel a fresh start in every hierarchy: whatever
// still runs there is killed, the directories are removed, and rel/sub
// (each of subs) created anew, as a machine starting again finds its
// cgroups. A node starting again must not reuse the cgroups of its last
// life: once cgroup.kill killed a cgroup, this kernel (Linux 6.18) kills
// every process later cloned into it with CLONE_INTO_CGROUP
// (proc.Spec.Cgroup) at once, from the forking thread before the child
// even execs (the child's cgroup kill sequence is not its parent's), so
// the node's anchor died by SIGKILL with an empty log.
func ResetCgroup(rel string, subs ...string) error {
	if err := RemoveCgroup(rel); err != nil {
		return err
	}
	for _, s := range subs {
		if err := EnsureCgroup(filepath.Join(rel, s)); err != nil {
			return err
		}
	}
	return nil
}

// CgroupPIDs lists the processes in cgroup rel and below (in the first
// hierarchy that has it).
func CgroupPIDs(rel string) []int {
	hs, _ := Hierarchies()
	seen := map[int]bool{}
	var out []int
	for _, h := range hs {
		_ = filepath.WalkDir(filepath.Join(h, rel), func(p string, d os.DirEntry, err error) error {
			if err != nil || !d.IsDir() {
				return nil
			}
			for _, pid := range readPIDs(filepath.Join(p, "cgroup.procs")) {
				if !seen[pid] {
					seen[pid] = true
					out = append(out, pid)
				}
			}
			return nil
		})
	}
	sort.Ints(out)
	return out
}

func readPIDs(file string) []int {
	data, err := os.ReadFile(file)
	if err != nil {
		return nil
	}
	var out []int
	for _, f := range strings.Fields(string(data)) {
		var pid int
		if _, err := fmt.Sscan(f, &pid); err == nil && pid > 0 {
			out = append(out, pid)
		}
	}
	return out
}
