package images

import (
	"archive/tar"
	"bytes"
	"fmt"
	"io"
	"os"
	"path"
	"runtime"
	"slices"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// epoch is every file's and the config's time: the same inputs give the
// same image digest.
var epoch = time.Unix(0, 0).UTC()

// Inputs are the host files an image is built from.
type Inputs struct {
	// Binaries maps a Binary's Name to the host file built for it.
	Binaries map[string]string
	// Arch is the images' architecture (the binaries'); empty: this
	// machine's.
	Arch string
}

// Build assembles img: the base layer (the same for every image, so a
// node stores it once), then a layer with the binaries and working
// directories, and the config.
func Build(img Image, in Inputs) (v1.Image, error) {
	base, err := layer(BaseEntries())
	if err != nil {
		return nil, fmt.Errorf("base layer: %w", err)
	}
	var own []Entry
	for _, b := range img.Binaries {
		src, ok := in.Binaries[b.Name]
		if !ok {
			return nil, fmt.Errorf("image %s: no file for %s", img.Name, b.Name)
		}
		own = append(own, Entry{Path: BinDir + "/" + b.Name, Mode: 0o755, Source: src})
	}
	for _, d := range img.WorkDirs {
		own = append(own, parents(d)...)
	}
	top, err := layer(dedupe(own))
	if err != nil {
		return nil, fmt.Errorf("image %s: %w", img.Name, err)
	}
	out := mutate.MediaType(empty.Image, types.OCIManifestSchema1)
	out = mutate.ConfigMediaType(out, types.OCIConfigJSON)
	out, err = mutate.Append(out,
		mutate.Addendum{Layer: base, History: v1.History{Created: v1.Time{Time: epoch}, CreatedBy: "etcdfed base: passwd, group, nsswitch.conf, CA bundle, /tmp", Comment: "hack/images"}},
		mutate.Addendum{Layer: top, History: v1.History{Created: v1.Time{Time: epoch}, CreatedBy: "etcdfed " + img.Name + ": " + names(img.Binaries), Comment: "hack/images"}},
	)
	if err != nil {
		return nil, err
	}
	cf, err := out.ConfigFile()
	if err != nil {
		return nil, err
	}
	cf = cf.DeepCopy()
	arch := in.Arch
	if arch == "" {
		arch = runtime.GOARCH
	}
	cf.OS, cf.Architecture, cf.Created = "linux", arch, v1.Time{Time: epoch}
	cf.Config = Config(img)
	return mutate.ConfigFile(out, cf)
}

// Config is img's runtime configuration, as its Dockerfile stage sets it.
func Config(img Image) v1.Config {
	c := v1.Config{
		Env:        slices.Clone(BaseEnv),
		User:       img.User,
		Entrypoint: img.Entrypoint,
		Cmd:        img.Cmd,
		Labels:     map[string]string{"org.opencontainers.image.source": "https://github.com/etcdfed/etcdfed"},
	}
	if n := len(img.WorkDirs); n > 0 {
		c.WorkingDir = img.WorkDirs[n-1]
	}
	if len(img.Ports) > 0 {
		c.ExposedPorts = map[string]struct{}{}
		for _, p := range img.Ports {
			c.ExposedPorts[p] = struct{}{}
		}
	}
	return c
}

func names(bs []Binary) string {
	var n []string
	for _, b := range bs {
		n = append(n, b.Name)
	}
	return strings.Join(n, ", ")
}

// parents is dir and each directory above it, as 0755 directory entries
// (what a Dockerfile's WORKDIR creates).
func parents(dir string) []Entry {
	var out []Entry
	p := "/"
	for _, part := range strings.Split(strings.Trim(dir, "/"), "/") {
		p += part + "/"
		out = append(out, Entry{Path: p, Mode: 0o755})
	}
	return out
}

func dedupe(es []Entry) []Entry {
	seen := map[string]bool{}
	return slices.DeleteFunc(es, func(e Entry) bool {
		dup := seen[e.Path]
		seen[e.Path] = true
		return dup
	})
}

// layer writes entries as one uncompressed tar (owned by root, every time
// the epoch) and wraps it as an OCI layer (gzip).
func layer(entries []Entry) (v1.Layer, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, e := range entries {
		name := strings.TrimPrefix(e.Path, "/")
		if e.Dir() {
			if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: name, Mode: e.Mode, ModTime: epoch, Format: tar.FormatPAX}); err != nil {
				return nil, err
			}
			continue
		}
		data := []byte(e.Content)
		if e.Source != "" {
			b, err := os.ReadFile(e.Source)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", e.Path, err)
			}
			data = b
		}
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: name, Mode: e.Mode, Size: int64(len(data)), ModTime: epoch, Format: tar.FormatPAX}); err != nil {
			return nil, err
		}
		if _, err := tw.Write(data); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	b := buf.Bytes()
	return tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(b)), nil
	}, tarball.WithMediaType(types.OCILayer))
}

// Tree lists the files of an image's flattened root as "path mode uid:gid
// size" lines, sorted: what a test compares.
func Tree(img v1.Image) ([]string, error) {
	rc := mutate.Extract(img)
	defer rc.Close()
	tr := tar.NewReader(rc)
	var out []string
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, err
		}
		p := "/" + path.Clean(h.Name)
		if h.Typeflag == tar.TypeDir {
			p = strings.TrimSuffix(p, "/") + "/"
		}
		out = append(out, fmt.Sprintf("%s %04o %d:%d %d", p, h.Mode&0o7777, h.Uid, h.Gid, h.Size))
	}
	slices.Sort(out)
	return out, nil
}
