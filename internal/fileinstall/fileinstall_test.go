package fileinstall

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
)

// The copy lands with the content and mode asked for, in a directory made
// for it, over a file already there, and leaves no temporary file behind;
// writing the copy leaves the source as it was.
func TestCopyExecutable(t *testing.T) {
	dir := t.TempDir()
	src := filepath.Join(dir, "src")
	want := []byte("#!/bin/sh\necho hi\n")
	if err := os.WriteFile(src, want, 0o600); err != nil {
		t.Fatal(err)
	}
	dst := filepath.Join(dir, "shared", "bin", "tool")
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(dst, []byte("old"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := CopyExecutable(src, dst, 0o555); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(dst)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o555 {
		t.Errorf("mode %v, want 0555", fi.Mode().Perm())
	}
	if got, _ := os.ReadFile(dst); !bytes.Equal(got, want) {
		t.Errorf("copy holds %q, want %q", got, want)
	}
	entries, _ := os.ReadDir(filepath.Dir(dst))
	if len(entries) != 1 {
		t.Errorf("%d files beside the copy, want none: %v", len(entries)-1, entries)
	}
	if err := os.Chmod(dst, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(dst, []byte("changed"), 0o755); err != nil {
		t.Fatal(err)
	}
	if got, _ := os.ReadFile(src); !bytes.Equal(got, want) {
		t.Errorf("writing the copy changed the source: %q", got)
	}
	if err := CopyExecutable(filepath.Join(dir, "missing"), filepath.Join(dir, "x"), 0o555); err == nil {
		t.Error("a missing source was copied")
	}
}
