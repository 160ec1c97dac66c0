// Package repo finds the etcdfed repository a command runs in and its bin/
// directory of pinned tools (kube-apiserver, etcd, ...). It serves the
// local-environment commands and the tests; production code paths never
// depend on it.
package repo

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
)

// ErrNoBinaries says bin/ lacks kube-apiserver or etcd.
var ErrNoBinaries = errors.New(" kube-apiserver and etcd not found; run `make tools` (or set ETCDFED_BIN_DIR)")

// Root walks up from the working directory to the directory holding the
// etcdfed go.mod.
func Root() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if data, err := os.ReadFile(filepath.Join(dir, "go.mod")); err == nil &&
			len(data) > 0 && containsModule(data) {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("not inside the etcdfed repository")
		}
		dir = parent
	}
}

func containsModule(gomod []byte) bool {
	const want = "module github.com/etcdfed/etcdfed\n"
	return len(gomod) >= len(want) && string(gomod[:len(want)]) == want
}

// BinDir returns the directory with kube-apiserver and etcd: ETCDFED_BIN_DIR
// when set, else <repo>/bin.
func BinDir() (string, error) {
	dir := os.Getenv("ETCDFED_BIN_DIR")
	if dir == "" {
		root, err := Root()
		if err != nil {
			return "", err
		}
		dir = filepath.Join(root, "bin")
	}
	for _, b := range []string{"kube-apiserver", "etcd"} {
		if _, err := os.Stat(filepath.Join(dir, b)); err != nil {
			return "", fmt.Errorf("%w: %s missing in %s", ErrNoBinaries, b, dir)
		}
	}
	return dir, nil
}
