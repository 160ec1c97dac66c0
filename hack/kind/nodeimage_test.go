package kind_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// node-image.sh --missing lists the pieces of its cache a build would
// still make, one a line, so that .ci/run can tell a complete kind cache
// from one to warm, and print what a time-limited build made and what it
// left: a Go build counts once its directory says .done (one cut short
// does not), the root filesystem once its tar is there, the image once
// its docker-saved tar of the current inputs is there. Run on a cache in
// a temporary directory; nothing is built.
func TestNodeImageMissing(t *testing.T) {
	cache := t.TempDir()
	missing := func() []string {
		t.Helper()
		cmd := exec.Command("./node-image.sh", "--missing")
		cmd.Env = append(os.Environ(), "ETCDFED_KIND_NODE_CACHE="+cache)
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("node-image.sh --missing: %v\n%s", err, out)
		}
		var lines []string
		for _, l := range strings.Split(strings.TrimSpace(string(out)), "\n") {
			// The tools in bin/ are this checkout's, not the test's.
			if l != "" && !strings.HasPrefix(l, "tool ") {
				lines = append(lines, l)
			}
		}
		return lines
	}
	kind := func(lines []string, k string) []string {
		var out []string
		for _, l := range lines {
			if name, ok := strings.CutPrefix(l, k+" "); ok {
				out = append(out, name)
			}
		}
		return out
	}

	cold := missing()
	bits := kind(cold, "bit")
	if len(bits) != 5 || len(kind(cold, "rootfs")) != 1 || len(kind(cold, "image")) != 1 {
		t.Fatalf("an empty cache: %q; want five Go builds, the root filesystem and the image", cold)
	}
	// Two builds done, one cut short (its files there, no .done).
	for i, b := range bits[:3] {
		dir := filepath.Join(cache, "bits", b)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "prog"), []byte(b), 0o755); err != nil {
			t.Fatal(err)
		}
		if i < 2 {
			if err := os.WriteFile(filepath.Join(dir, ".done"), nil, 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	if got := kind(missing(), "bit"); !slices.Equal(got, bits[2:]) {
		t.Fatalf("after two builds and one cut short: bits %q missing, want %q", got, bits[2:])
	}
	for _, b := range bits[2:] {
		dir := filepath.Join(cache, "bits", b)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, ".done"), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(kind(cold, "rootfs")[0], nil, 0o644); err != nil {
		t.Fatal(err)
	}
	warm := missing()
	image := kind(warm, "image")
	if len(warm) != 1 || len(image) != 1 {
		t.Fatalf("every build and the root filesystem there: %q missing, want the image alone", warm)
	}
	if strings.Contains(image[0], "<inputs>") {
		t.Skipf("this checkout's bin/ lacks tools the image holds (node-image.sh --missing names them): the image's name, %s, is not known", image[0])
	}
	if err := os.WriteFile(image[0], nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if got := missing(); len(got) != 0 {
		t.Fatalf("with the saved image: %q missing, want nothing", got)
	}
	// Another input (here a Go build's bytes): another image.
	if err := os.WriteFile(filepath.Join(cache, "bits", bits[0], "prog"), []byte("rebuilt"), 0o755); err != nil {
		t.Fatal(err)
	}
	if got := kind(missing(), "image"); len(got) != 1 || got[0] == image[0] {
		t.Fatalf("after an input changed: image %q missing, want one other than %s", got, image[0])
	}
}
