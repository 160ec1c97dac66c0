package localenv

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/etcdfed/etcdfed/dev/images"
	"github.com/etcdfed/etcdfed/dev/localenv/realnode"
	"github.com/etcdfed/etcdfed/internal/version"
)

// Images the real nodes get (imported into every node's containerd; the
// nodes have no registry to pull from):
//
//   - etcdfed's and etcd's images as `make images` builds them
//     (dev/images: hub, spoke, etcdfed-init, etcd 3.7, 3.6 and 3.5 laid out
//     like the official image), from Config.ImagesDir or built by the
//     environment with the same code;
//   - the cluster's own infrastructure, which stands in for images a
//     cluster pulls from registry.k8s.io: the pod sandbox (bin/pause) and
//     CoreDNS (bin/coredns), both static binaries.
const (
	// CoreDNSImage is the cluster DNS (bin/coredns).
	CoreDNSImage = "etcdfed.local/coredns:localenv"
	// ImageTag tags etcdfed's images the environment builds itself (and
	// is stamped into their binaries as their version).
	ImageTag = "localenv"
)

// builtImage is an image archive ready to import.
type builtImage struct {
	// Ref is the image's reference.
	Ref     string
	Archive string
	// Digest is the archive's SHA-256 (a node imports each once).
	Digest string
}

// infraImages are the stand-ins for the cluster's infrastructure images.
func (e *Env) infraImages() []realnode.Image {
	bin := func(name string) string { return filepath.Join(e.bin, name) }
	return []realnode.Image{
		{Name: realnode.SandboxImage, Entrypoint: []string{"/pause"},
			Files: []realnode.ImageFile{{Path: "/pause", Source: bin("pause"), Mode: 0o755}}},
		{Name: CoreDNSImage, Entrypoint: []string{"/coredns"},
			Files: []realnode.ImageFile{{Path: "/coredns", Source: bin("coredns"), Mode: 0o755}}},
	}
}

// buildImages prepares every image's archive: the infrastructure images
// under <state>/images, and etcdfed's and etcd's from Config.ImagesDir or
// built into <state>/images/oci. It sets e.images and e.imageTag.
func (e *Env) buildImages(ctx context.Context) error {
	dir := filepath.Join(e.state.Dir, "images")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	e.images = nil
	for _, img := range e.infraImages() {
		path := filepath.Join(dir, strings.NewReplacer("/", "_", ":", "_").Replace(img.Name)+".tar")
		f, err := os.Create(path)
		if err != nil {
			return err
		}
		err = realnode.WriteArchive(f, img)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return fmt.Errorf("image %s: %w", img.Name, err)
		}
		e.images = append(e.images, builtImage{Ref: img.Name, Archive: path})
	}
	oci := e.cfg.ImagesDir
	if oci == "" {
		oci = filepath.Join(dir, "oci")
		src := e.cfg.SourceDir
		if src == "" {
			src = filepath.Dir(e.bin)
		}
		e.progress("building etcdfed's and etcd's images from "+src+" (dev/images, as make images does)", false)
		if _, err := images.BuildAll(ctx, images.Options{Root: src, Version: ImageTag, Out: oci,
			Log: func(format string, args ...any) { e.log.Info(fmt.Sprintf(format, args...)) }}); err != nil {
			return fmt.Errorf("localenv: build the images: %w", err)
		}
	}
	own, err := readImageList(oci)
	if err != nil {
		return err
	}
	e.images = append(e.images, own...)
	for i := range e.images {
		if e.images[i].Digest, err = fileDigest(e.images[i].Archive); err != nil {
			return err
		}
	}
	e.imageTag = ""
	for _, img := range own {
		if i := strings.LastIndexByte(img.Ref, ':'); i > 0 && img.Ref[:i] == version.Registry+"/hub" {
			e.imageTag = img.Ref[i+1:]
		}
	}
	if e.imageTag == "" {
		return fmt.Errorf("localenv: %s has no %s/hub image (make images)", oci, version.Registry)
	}
	return nil
}

// readImageList reads images.txt (name, reference, file per line) of a
// directory `make images` wrote.
func readImageList(dir string) ([]builtImage, error) {
	f, err := os.Open(filepath.Join(dir, "images.txt"))
	if err != nil {
		return nil, fmt.Errorf("localenv: images: %w (make images writes it)", err)
	}
	defer func() { _ = f.Close() }()
	var out []builtImage
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) != 3 {
			continue
		}
		file := fields[2]
		if !filepath.IsAbs(file) {
			// make images writes paths relative to the repository.
			if _, err := os.Stat(file); err != nil {
				file = filepath.Join(dir, filepath.Base(file))
			} else if file, err = filepath.Abs(file); err != nil {
				return nil, err
			}
		}
		out = append(out, builtImage{Ref: fields[1], Archive: file})
	}
	return out, sc.Err()
}

func fileDigest(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer func() { _ = f.Close() }()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// ctr runs ctr against a node's containerd in the CRI namespace, in the
// node's namespaces (anchor is its anchor's pid).
func (e *Env) ctr(ctx context.Context, s *realnode.Node, anchor int, args ...string) (string, error) {
	path, argv := s.NodeCommand(anchor, append([]string{filepath.Join(e.bin, "ctr"), "--address", s.ContainerdSocket(), "--namespace", "k8s.io"}, args...)...)
	cmd := exec.CommandContext(ctx, path, argv...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	return out.String(), err
}

// loadImages waits for the node's containerd and imports every image the
// environment built that it does not have yet.
func (e *Env) loadImages(ctx context.Context, s *realnode.Node, anchor int) error {
	if err := waitFor(ctx, time.Minute, "containerd of "+s.Name, func() (bool, error) {
		_, err := e.ctr(ctx, s, anchor, "version")
		return err == nil, nil
	}); err != nil {
		return fmt.Errorf("%w: %s", err, tail(filepath.Join(s.LogDir(), "containerd.log"), 10))
	}
	// The archives this containerd imported already, by digest.
	record := filepath.Join(s.Dir, "imported-images")
	have, _ := os.ReadFile(record)
	for _, img := range e.images {
		key := img.Digest + " " + img.Ref
		if strings.Contains("\n"+string(have), "\n"+key+"\n") {
			continue
		}
		if out, err := e.ctr(ctx, s, anchor, "images", "import", "--local", img.Archive); err != nil {
			return fmt.Errorf("import %s into %s: %w: %s", img.Ref, s.Name, err, out)
		}
		have = append(have, []byte(key+"\n")...)
		if err := os.WriteFile(record, have, 0o644); err != nil {
			return err
		}
	}
	return nil
}
