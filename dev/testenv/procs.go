package testenv

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"sync"

	"github.com/etcdfed/etcdfed/dev/testenv/testproc"
)

// Every process testenv starts dies with the test binary (see package
// testproc). envtest starts kube-apiserver and etcd itself, without a
// parent-death signal, so it is pointed at wrapper scripts that run the
// real binaries through the pdeathsig command, and Start calls envtest
// from a thread that never exits.

// StartProcess starts cmd so that it dies with the test binary and is
// recorded for hack/leftovers (testproc.Start).
func StartProcess(cmd *exec.Cmd) error { return testproc.Start(cmd) }

var wrappers struct {
	sync.Mutex
	dirs map[string]string // bin dir -> wrapper dir
}

// wrapperDir returns a directory with kube-apiserver and etcd scripts that
// run bin's binaries through pdeathsig with this process as the parent
// that must live.
func wrapperDir(bin string) (string, error) {
	wrappers.Lock()
	defer wrappers.Unlock()
	if d, ok := wrappers.dirs[bin]; ok {
		return d, nil
	}
	exe, err := pdeathsigBinary()
	if err != nil {
		return "", err
	}
	own, err := testproc.OwnDir()
	if err != nil {
		return "", err
	}
	dir, err := os.MkdirTemp(own, "bin-")
	if err != nil {
		return "", err
	}
	for _, name := range []string{"kube-apiserver", "etcd"} {
		script := fmt.Sprintf("#!/bin/sh\n# Written by dev/testenv: %s dies with test binary %d.\nexec %s -parent %d -record %s -- %s \"$@\"\n",
			name, os.Getpid(), shellQuote(exe), os.Getpid(), shellQuote(testproc.ProcsDir(own)), shellQuote(filepath.Join(bin, name)))
		if err := os.WriteFile(filepath.Join(dir, name), []byte(script), 0o755); err != nil {
			return "", err
		}
	}
	if wrappers.dirs == nil {
		wrappers.dirs = map[string]string{}
	}
	wrappers.dirs[bin] = dir
	return dir, nil
}

func shellQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

var pdeathsig struct {
	once sync.Once
	path string
	err  error
}

// pdeathsigSources are the packages the pdeathsig command is built from.
var pdeathsigSources = []string{"dev/testenv/pdeathsig", "dev/testenv/testproc", "dev/localenv/proc"}

// pdeathsigBinary builds the pdeathsig command once per source version
// into the user's cache directory and returns its path.
func pdeathsigBinary() (string, error) {
	pdeathsig.once.Do(func() {
		pdeathsig.path, pdeathsig.err = buildPdeathsig()
	})
	return pdeathsig.path, pdeathsig.err
}

func buildPdeathsig() (string, error) {
	root, err := RepoRoot()
	if err != nil {
		return "", err
	}
	h := sha256.New()
	_, _ = io.WriteString(h, runtime.Version())
	for _, pkg := range pdeathsigSources {
		files, err := filepath.Glob(filepath.Join(root, pkg, "*.go"))
		if err != nil {
			return "", err
		}
		sort.Strings(files)
		for _, f := range files {
			if strings.HasSuffix(f, "_test.go") {
				continue
			}
			data, err := os.ReadFile(f)
			if err != nil {
				return "", err
			}
			_, _ = io.WriteString(h, f[len(root):])
			_, _ = h.Write(data)
		}
	}
	cache, err := os.UserCacheDir()
	if err != nil {
		cache = os.TempDir()
	}
	dir := filepath.Join(cache, "etcdfed", "testenv")
	path := filepath.Join(dir, "pdeathsig-"+hex.EncodeToString(h.Sum(nil))[:16])
	if fi, err := os.Stat(path); err == nil && fi.Mode()&0o111 != 0 {
		return path, nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	tmp := fmt.Sprintf("%s.%d.tmp", path, os.Getpid())
	cmd := exec.Command("go", "build", "-o", tmp, "./dev/testenv/pdeathsig")
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("build dev/testenv/pdeathsig: %w\n%s", err, out)
	}
	if err := os.Rename(tmp, path); err != nil {
		return "", errors.Join(fmt.Errorf("install pdeathsig: %w", err), os.Remove(tmp))
	}
	return path, nil
}
