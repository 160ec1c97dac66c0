package nodeagent

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestImageRelease(t *testing.T) {
	for image, want := range map[string]string{
		"gcr.io/etcd-development/etcd:v3.5.35": "3.5.35",
		"registry.k8s.io/etcd:3.6.16-0":        "3.6.16",
		"localhost:5000/etcd:v3.6.16":          "3.6.16",
		"registry.k8s.io/etcd:3.6":             "",
		"etcd":                                 "",
		"etcd:latest":                          "",
		"etcd@sha256:0123":                     "",
		"localhost:5000/etcd":                  "",
	} {
		if got := imageRelease(image); got != want {
			t.Errorf("imageRelease(%q) = %q, want %q", image, got, want)
		}
	}
}

// The image's release picks bin/<name>-<release>, else bin/<name> when it
// is that release (or says no release); any other release fails the
// container, naming what was asked for and what there is.
func TestContainerBinaryByImageRelease(t *testing.T) {
	dir := t.TempDir()
	script := func(name, out string) {
		t.Helper()
		if err := os.WriteFile(filepath.Join(dir, name), []byte("#!/bin/sh\necho '"+out+"'\n"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	script("etcd", "etcd Version: 3.6.16")
	script("etcd-3.5.35", "etcd Version: 3.5.35")
	script("tool", "no version here")
	a := &Agent{cfg: Config{BinDir: dir}}

	for _, tc := range []struct {
		argv0, image, want, err string
	}{
		{"/usr/local/bin/etcd", "gcr.io/etcd-development/etcd:v3.5.35", "etcd-3.5.35", ""},
		{"/usr/local/bin/etcd", "gcr.io/etcd-development/etcd:v3.6.16", "etcd", ""},
		{"/usr/local/bin/etcd", "registry.k8s.io/etcd:3.6.16-0", "etcd", ""},
		{"/usr/local/bin/etcd", "registry.k8s.io/etcd:latest", "etcd", ""},
		{"/usr/local/bin/etcd", "gcr.io/etcd-development/etcd:v3.5.99", "", "asks for etcd 3.5.99: " + filepath.Join(dir, "etcd-3.5.99") + " does not exist and " + filepath.Join(dir, "etcd") + " is 3.6.16"},
		{"tool", "example/tool:v1.2.3", "tool", ""},
		{"missing", "example/missing:v1.2.3", "", "neither"},
		{"missing", "example/missing:latest", "", "no binary for command"},
	} {
		got, err := a.containerBinary(tc.argv0, tc.image)
		if tc.err != "" {
			var ce *configError
			if !errors.As(err, &ce) || ce.reason != reasonCreateContainerError || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%s with %s: got %q, %v; want CreateContainerError containing %q", tc.argv0, tc.image, got, err, tc.err)
			}
			continue
		}
		if err != nil || got != filepath.Join(dir, tc.want) {
			t.Errorf("%s with %s: got %q, %v; want %s", tc.argv0, tc.image, got, err, tc.want)
		}
	}
}
