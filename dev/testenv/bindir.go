package testenv

import (
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/etcdfed/etcdfed/internal/fileinstall"
)

// BuiltBinEnv names the directory that `make test` (and every make target
// that runs tests after `build`) filled with hub, spoke, etcdfed and
// etcdfed-init from this tree just before the tests started. When it is
// set, BuildOurs takes the binaries from there instead of linking them
// again in each test package that runs one: the same four links cost
// about a minute of the two cores in test/multicluster alone, and
// hack/kind, cmd/etcdfed, config/rbac/hub and spoke/app each linked one
// more. A binary older than any Go source, go.mod or go.sum of the tree
// is not taken (a file edited after the build): BuildOurs builds it.
const BuiltBinEnv = "ETCDFED_TEST_BUILT_BIN"

// ourCommands are the commands of ./cmd that BuildOurs builds.
var ourCommands = map[string]bool{"hub": true, "spoke": true, "etcdfed": true, "etcdfed-init": true}

// FreshBinDir fills dir with the pinned tools of BinDir() (kube-apiserver,
// etcd, etcdctl, ...) as symlinks, plus hub, spoke, etcdfed and
// etcdfed-init from this checkout (BuildOurs). Tests that run our
// binaries as processes use it so that they never test a stale bin/hub
// left by an earlier `make build`.
func FreshBinDir(dir string) error {
	tools, err := BinDir()
	if err != nil {
		return err
	}
	entries, err := os.ReadDir(tools)
	if err != nil {
		return err
	}
	for _, e := range entries {
		if e.IsDir() || ourCommands[e.Name()] {
			continue
		}
		if err := os.Symlink(filepath.Join(tools, e.Name()), filepath.Join(dir, e.Name())); err != nil {
			return err
		}
	}
	return BuildOurs(dir, "hub", "spoke", "etcdfed", "etcdfed-init")
}

// BuildOurs puts the named commands of ./cmd (hub, spoke, etcdfed,
// etcdfed-init) into dir as regular files built from this checkout: from
// BuiltBinEnv's directory when it is set and none of them is older than
// the tree's sources, else by go build.
func BuildOurs(dir string, names ...string) error {
	for _, n := range names {
		if !ourCommands[n] {
			return fmt.Errorf("BuildOurs: %q is not one of the commands of ./cmd", n)
		}
	}
	root, err := RepoRoot()
	if err != nil {
		return err
	}
	if built := os.Getenv(BuiltBinEnv); built != "" {
		why, err := builtFresh(root, built, names)
		if err != nil {
			return err
		}
		if why == "" {
			for _, n := range names {
				// A copy, not a link: a test may write over what it was
				// given, and a link would carry that into bin/; unlike a
				// symlink, os.Executable of it names dir, as go build -o
				// would.
				if err := fileinstall.CopyExecutable(filepath.Join(built, n), filepath.Join(dir, n), 0o755); err != nil {
					return err
				}
			}
			return nil
		}
		fmt.Fprintf(os.Stderr, "testenv: %s=%s not used (%s): building %s\n", BuiltBinEnv, built, why, strings.Join(names, ", "))
	}
	args := []string{"build", "-o", dir + string(filepath.Separator)}
	for _, n := range names {
		args = append(args, "./cmd/"+n)
	}
	cmd := exec.Command("go", args...)
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("go %s: %w\n%s", strings.Join(args, " "), err, out)
	}
	return nil
}

// builtFresh says why the binaries names in built may not stand for this
// tree ("" when they may): one is missing, or a Go source, go.mod or
// go.sum under root (bin/, out/ and dot directories aside) was modified
// after the oldest of them.
func builtFresh(root, built string, names []string) (string, error) {
	var oldest time.Time
	for _, n := range names {
		fi, err := os.Stat(filepath.Join(built, n))
		if err != nil {
			return fmt.Sprintf("%s: %v", n, err), nil
		}
		if oldest.IsZero() || fi.ModTime().Before(oldest) {
			oldest = fi.ModTime()
		}
	}
	var newer string
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		name := d.Name()
		if d.IsDir() {
			if path != root && (strings.HasPrefix(name, ".") || name == "bin" || name == "out" || name == "testdata") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(name, ".go") && name != "go.mod" && name != "go.sum" {
			return nil
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		if fi.ModTime().After(oldest) {
			newer = path
			return filepath.SkipAll
		}
		return nil
	})
	if err != nil {
		return "", err
	}
	if newer != "" {
		rel, _ := filepath.Rel(root, newer)
		return rel + " is newer than the build", nil
	}
	return "", nil
}
