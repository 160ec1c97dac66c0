package testenv

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// Binaries built just now (newer than every source of the tree) stand for
// the tree; one older than a Go source, go.mod or go.sum does not, nor
// does a missing one. Directories that hold no build input (bin/, out/,
// testdata, dot directories) do not count.
func TestBuiltBinariesFreshOnlyWhenNewerThanEverySource(t *testing.T) {
	root, built := t.TempDir(), t.TempDir()
	old := time.Now().Add(-time.Hour)
	write := func(path string, at time.Time) {
		t.Helper()
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Chtimes(path, at, at); err != nil {
			t.Fatal(err)
		}
	}
	write(filepath.Join(root, "go.mod"), old)
	write(filepath.Join(root, "hub", "hub.go"), old)
	write(filepath.Join(built, "hub"), old.Add(time.Minute))
	write(filepath.Join(built, "spoke"), old.Add(2*time.Minute))
	// Newer, but not build inputs: never a reason to build again.
	write(filepath.Join(root, "bin", "x.go"), time.Now())
	write(filepath.Join(root, ".git", "x.go"), time.Now())
	write(filepath.Join(root, "docs", "x.md"), time.Now())

	fresh := func(names ...string) string {
		t.Helper()
		why, err := builtFresh(root, built, names)
		if err != nil {
			t.Fatal(err)
		}
		return why
	}
	if why := fresh("hub", "spoke"); why != "" {
		t.Errorf("binaries newer than every source refused: %s", why)
	}
	if why := fresh("hub", "etcdfed"); !strings.Contains(why, "etcdfed") {
		t.Errorf("a missing binary gave %q, want its name", why)
	}
	// Edited between the two builds: older than spoke, newer than hub.
	write(filepath.Join(root, "hub", "hub.go"), old.Add(90*time.Second))
	if why := fresh("spoke"); why != "" {
		t.Errorf("spoke, built after the edit, refused: %s", why)
	}
	if why := fresh("hub", "spoke"); why != "hub/hub.go is newer than the build" {
		t.Errorf("hub built before an edit of hub/hub.go: got %q", why)
	}
	write(filepath.Join(root, "go.sum"), time.Now())
	if why := fresh("spoke"); why != "go.sum is newer than the build" {
		t.Errorf("go.sum changed after the build: got %q", why)
	}
}

// With BuiltBinEnv set to binaries newer than the tree, BuildOurs copies
// them: regular files of the same content, and writing over the copy
// leaves the original as it was. An unknown name is refused.
func TestBuildOursTakesTheBuiltBinaries(t *testing.T) {
	built, dir := t.TempDir(), t.TempDir()
	want := []byte("#!/bin/sh\necho built by make\n")
	if err := os.WriteFile(filepath.Join(built, "etcdfed-init"), want, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv(BuiltBinEnv, built)
	if err := BuildOurs(dir, "etcdfed-init"); err != nil {
		t.Fatal(err)
	}
	dst := filepath.Join(dir, "etcdfed-init")
	fi, err := os.Lstat(dst)
	if err != nil {
		t.Fatal(err)
	}
	if !fi.Mode().IsRegular() || fi.Mode().Perm()&0o100 == 0 {
		t.Fatalf("%s: mode %v, want a regular executable file", dst, fi.Mode())
	}
	if got, _ := os.ReadFile(dst); !bytes.Equal(got, want) {
		t.Fatalf("copy holds %q, want %q", got, want)
	}
	if err := os.WriteFile(dst, []byte("changed"), 0o755); err != nil {
		t.Fatal(err)
	}
	if got, _ := os.ReadFile(filepath.Join(built, "etcdfed-init")); !bytes.Equal(got, want) {
		t.Fatalf("writing the copy changed the original: %q", got)
	}
	if err := BuildOurs(dir, "kube-apiserver"); err == nil {
		t.Error("BuildOurs accepted kube-apiserver, not a command of ./cmd")
	}
}
