package testenv

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
)

// FreshBinDir fills dir with the pinned tools of BinDir() (kube-apiserver,
// etcd, etcdctl, ...) as symlinks, plus hub, spoke, etcdfed and
// etcdfed-init built now from this checkout. Tests that run our binaries as processes use it so
// that they never test a stale bin/hub left by an earlier `make build`.
func FreshBinDir(dir string) error {
	tools, err := BinDir()
	if err != nil {
		return err
	}
	root, err := RepoRoot()
	if err != nil {
		return err
	}
	entries, err := os.ReadDir(tools)
	if err != nil {
		return err
	}
	ours := map[string]bool{"hub": true, "spoke": true, "etcdfed": true, "etcdfed-init": true}
	for _, e := range entries {
		if e.IsDir() || ours[e.Name()] {
			continue
		}
		if err := os.Symlink(filepath.Join(tools, e.Name()), filepath.Join(dir, e.Name())); err != nil {
			return err
		}
	}
	cmd := exec.Command("go", "build", "-o", dir+string(filepath.Separator), "./cmd/hub", "./cmd/spoke", "./cmd/etcdfed", "./cmd/etcdfed-init")
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("go build ./cmd/...: %w\n%s", err, out)
	}
	return nil
}
