package images

import (
	"context"
	"crypto/sha256"
	"debug/elf"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
)

// Options of BuildAll.
type Options struct {
	// Root is the repository (its hack/tools.sh pins the etcd releases;
	// go build runs there).
	Root string
	// Version is stamped into etcdfed's binaries and tags its images.
	Version string
	// Out receives the tarballs, images.txt and the binaries (Out/bin).
	Out string
	// Arch is the images' GOARCH; empty: this machine's.
	Arch string
	// Names picks images (Select); none: the default ones.
	Names []string
	// Log receives a line per step; nil: none.
	Log func(format string, args ...any)
	// Progress is how often a step that is still running says so through
	// Log (a cold go build takes minutes); 0: every 30 seconds.
	Progress time.Duration
}

// Result is one image BuildAll wrote.
type Result struct {
	Image Image
	// File is the OCI layout tarball.
	File string
	// TarSize is the tarball's size; FilesSize the size of the files in
	// the image's root (what a node unpacks).
	TarSize, FilesSize int64
	Layers             int
	Took               time.Duration
}

// BuildAll builds the binaries of the images picked, static
// (CGO_ENABLED=0) as the Dockerfile does: etcdfed's with GoBuildFlags,
// etcd's from their tools module with EtcdLDFlags. Then it assembles each
// image and writes it as Out/<name>.tar, with Out/images.txt listing name,
// reference and file.
func BuildAll(ctx context.Context, o Options) ([]Result, error) {
	logf := o.Log
	if logf == nil {
		logf = func(string, ...any) {}
	}
	v, err := ReadVersions(o.Root)
	if err != nil {
		return nil, err
	}
	sel, err := Select(Catalog(o.Version, v), o.Names)
	if err != nil {
		return nil, err
	}
	out, err := filepath.Abs(o.Out)
	if err != nil {
		return nil, err
	}
	ownBin := filepath.Join(out, "bin")
	if err := os.MkdirAll(ownBin, 0o755); err != nil {
		return nil, err
	}
	if err := buildBinaries(ctx, o, sel, ownBin, logf); err != nil {
		return nil, err
	}
	var results []Result
	var list strings.Builder
	for _, img := range sel {
		r, err := assemble(img, o, ownBin)
		if err != nil {
			return nil, err
		}
		results = append(results, r)
		fmt.Fprintf(&list, "%s %s %s\n", img.Name, img.Ref, r.File)
		logf("%-13s %-42s %5.1f MiB tarball, %5.1f MiB of files, %d layers, %.1fs",
			img.Name, img.Ref, mib(r.TarSize), mib(r.FilesSize), r.Layers, r.Took.Seconds())
	}
	return results, os.WriteFile(filepath.Join(o.Out, "images.txt"), []byte(list.String()), 0o644)
}

// buildBinaries builds the binaries of the images sel into ownBin:
// etcdfed's with GoBuildFlags, each etcd release's (into ownBin/<image>)
// from its tools module with EtcdLDFlags.
func buildBinaries(ctx context.Context, o Options, sel []Image, ownBin string, logf func(string, ...any)) error {
	goBuild := func(dir, out string, flags []string, pkgs ...string) error {
		t := time.Now()
		args := append(append([]string{"build"}, flags...), "-o", out+string(filepath.Separator))
		cmd := exec.CommandContext(ctx, "go", append(args, pkgs...)...)
		cmd.Dir = dir
		// Static binaries: the images have no libc.
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux")
		if o.Arch != "" {
			cmd.Env = append(cmd.Env, "GOARCH="+o.Arch)
		}
		what := strings.Join(pkgs, " ")
		logf("building %s (go build with the images' flags; minutes on a cold build cache)", what)
		stop := progress(o.Progress, func(d time.Duration) { logf("still building %s (%.0fs)", what, d.Seconds()) })
		output, err := cmd.CombinedOutput()
		stop()
		if err != nil {
			return fmt.Errorf("go build %s (in %s): %w\n%s", what, dir, err, output)
		}
		logf("built %s in %.1fs", what, time.Since(t).Seconds())
		return nil
	}
	if pkgs := ownPackages(sel); len(pkgs) > 0 {
		if err := goBuild(o.Root, ownBin, GoBuildFlags(o.Version), pkgs...); err != nil {
			return err
		}
	}
	for _, img := range sel {
		r := img.etcd
		if r == nil {
			continue
		}
		dir := filepath.Join(o.Root, r.Module)
		sum, err := fileSHA256(filepath.Join(dir, "internal", "resolver", "resolver.go"))
		if err != nil {
			return err
		}
		if err := goBuild(dir, filepath.Join(ownBin, img.Name), []string{"-trimpath", "-ldflags", EtcdLDFlags(r.Version, sum[:12])}, etcdPackages...); err != nil {
			return err
		}
	}
	return nil
}

// assemble builds img from the static binaries in ownBin and writes it as
// o.Out/<name>.tar; the result says its sizes and layers.
func assemble(img Image, o Options, ownBin string) (Result, error) {
	t := time.Now()
	in := Inputs{Binaries: map[string]string{}, Arch: o.Arch}
	for _, b := range img.Binaries {
		p := filepath.Join(ownBin, filepath.Base(b.Package))
		if img.etcd != nil {
			p = filepath.Join(ownBin, img.Name, b.Name)
		}
		if err := checkStatic(p); err != nil {
			return Result{}, fmt.Errorf("image %s: %w", img.Name, err)
		}
		in.Binaries[b.Name] = p
	}
	im, err := Build(img, in)
	if err != nil {
		return Result{}, err
	}
	file := filepath.Join(o.Out, img.Name+".tar")
	if err := WriteTar(file, img.Ref, im); err != nil {
		return Result{}, fmt.Errorf("image %s: %w", img.Name, err)
	}
	r := Result{Image: img, File: file, Took: time.Since(t)}
	st, err := os.Stat(file)
	if err != nil {
		return Result{}, err
	}
	r.TarSize = st.Size()
	m, err := im.Manifest()
	if err != nil {
		return Result{}, err
	}
	r.Layers = len(m.Layers)
	tree, err := Tree(im)
	if err != nil {
		return Result{}, err
	}
	for _, l := range tree {
		var size int64
		_, _ = fmt.Sscanf(l[strings.LastIndexByte(l, ' ')+1:], "%d", &size)
		r.FilesSize += size
	}
	return r, nil
}

func mib(n int64) float64 { return float64(n) / (1 << 20) }

func fileSHA256(path string) (string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:]), nil
}

// checkStatic refuses a binary that needs a dynamic loader: the images
// have no libc, and such a binary fails at exec with "no such file or
// directory" (a host build of etcd with cgo did, in the first run of
// TestImagesRunInContainerd).
func checkStatic(path string) error {
	f, err := elf.Open(path)
	if err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			return fmt.Errorf("%s is dynamically linked (it names an ELF interpreter); build it with CGO_ENABLED=0", path)
		}
	}
	return nil
}

// progress calls say every interval (30 s when 0) until the returned stop
// is called, with the time since progress was called.
func progress(interval time.Duration, say func(time.Duration)) (stop func()) {
	if interval <= 0 {
		interval = 30 * time.Second
	}
	start, done := time.Now(), make(chan struct{})
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		tick := time.NewTicker(interval)
		defer tick.Stop()
		for {
			select {
			case <-done:
				return
			case <-tick.C:
				say(time.Since(start))
			}
		}
	}()
	return func() {
		close(done)
		<-finished
	}
}
