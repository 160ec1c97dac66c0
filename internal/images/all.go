package images

import (
	"context"
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
	// BinDir holds the pinned tools the etcd images take.
	BinDir string
	// Arch is the images' GOARCH; empty: this machine's.
	Arch string
	// Names picks images (Select); none: the default ones.
	Names []string
	// Log receives a line per step; nil: none.
	Log func(format string, args ...any)
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

// BuildAll builds etcdfed's binaries for the images picked (CGO_ENABLED=0,
// GoBuildFlags), assembles each image and writes it as
// Out/<name>.tar, with Out/images.txt listing name, reference and file.
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
	ownBin := filepath.Join(o.Out, "bin")
	if err := os.MkdirAll(ownBin, 0o755); err != nil {
		return nil, err
	}
	if pkgs := ownPackages(sel); len(pkgs) > 0 {
		t := time.Now()
		args := append([]string{"build"}, GoBuildFlags(o.Version)...)
		args = append(args, "-o", ownBin+string(filepath.Separator))
		cmd := exec.CommandContext(ctx, "go", append(args, pkgs...)...)
		cmd.Dir = o.Root
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux")
		if o.Arch != "" {
			cmd.Env = append(cmd.Env, "GOARCH="+o.Arch)
		}
		if out, err := cmd.CombinedOutput(); err != nil {
			return nil, fmt.Errorf("go build %s: %w\n%s", strings.Join(pkgs, " "), err, out)
		}
		logf("built %s in %.1fs", strings.Join(pkgs, " "), time.Since(t).Seconds())
	}
	var results []Result
	var list strings.Builder
	for _, img := range sel {
		t := time.Now()
		in := Inputs{Binaries: map[string]string{}, Arch: o.Arch}
		for _, b := range img.Binaries {
			if b.Package != "" {
				in.Binaries[b.Name] = filepath.Join(ownBin, filepath.Base(b.Package))
				continue
			}
			p := filepath.Join(o.BinDir, b.Tool)
			if _, err := os.Stat(p); err != nil {
				return nil, fmt.Errorf("image %s needs %s: run hack/tools.sh etcd etcdctl etcdutl etcd35 etcdctl35 etcdutl35 (make images does)", img.Name, p)
			}
			in.Binaries[b.Name] = p
		}
		im, err := Build(img, in)
		if err != nil {
			return nil, err
		}
		file := filepath.Join(o.Out, img.Name+".tar")
		if err := WriteTar(file, img.Ref, im); err != nil {
			return nil, fmt.Errorf("image %s: %w", img.Name, err)
		}
		r := Result{Image: img, File: file, Took: time.Since(t)}
		st, err := os.Stat(file)
		if err != nil {
			return nil, err
		}
		r.TarSize = st.Size()
		m, err := im.Manifest()
		if err != nil {
			return nil, err
		}
		r.Layers = len(m.Layers)
		tree, err := Tree(im)
		if err != nil {
			return nil, err
		}
		for _, l := range tree {
			var size int64
			_, _ = fmt.Sscanf(l[strings.LastIndexByte(l, ' ')+1:], "%d", &size)
			r.FilesSize += size
		}
		results = append(results, r)
		fmt.Fprintf(&list, "%s %s %s\n", img.Name, img.Ref, file)
		logf("%-13s %-42s %5.1f MiB tarball, %5.1f MiB of files, %d layers, %.1fs",
			img.Name, img.Ref, mib(r.TarSize), mib(r.FilesSize), r.Layers, r.Took.Seconds())
	}
	return results, os.WriteFile(filepath.Join(o.Out, "images.txt"), []byte(list.String()), 0o644)
}

func mib(n int64) float64 { return float64(n) / (1 << 20) }
