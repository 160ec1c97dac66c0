package localenv

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"

	etcdfedv1 "github.com/etcdfed/etcdfed/api/v1alpha1"
	"github.com/etcdfed/etcdfed/internal/localenv/realnode"
)

// Images the real nodes get (imported into every node's containerd; the
// nodes have no registry to pull from).
const (
	// EtcdfedImage holds hub, spoke and the etcdfed CLI (the layout of the
	// repository's Dockerfile); the overlays of config/hub and config/spoke
	// point the manifests' ghcr.io/etcdfed/etcdfed at this tag.
	EtcdfedImageRepo = "ghcr.io/etcdfed/etcdfed"
	EtcdfedImageTag  = "localenv"
	// CoreDNSImage is the cluster DNS (bin/coredns).
	CoreDNSImage = "etcdfed.local/coredns:localenv"
)

// builtImage is an image archive ready to import.
type builtImage struct {
	Name    string
	Archive string
}

var etcdVersionRE = regexp.MustCompile(`etcd Version: (\S+)`)

// imageSet lists the images real nodes get: the pod sandbox (bin/pause),
// CoreDNS, etcdfed's, and etcd under the name the hub gives every member
// of a version (gcr.io/etcd-development/etcd:v<version>) for bin/etcd and
// each bin/etcd-<version>.
func (e *Env) imageSet() ([]realnode.Image, error) {
	bin := func(name string) string { return filepath.Join(e.bin, name) }
	imgs := []realnode.Image{
		{Name: realnode.SandboxImage, Entrypoint: []string{"/pause"},
			Files: []realnode.ImageFile{{Path: "/pause", Source: bin("pause"), Mode: 0o755}}},
		{Name: CoreDNSImage, Entrypoint: []string{"/coredns"},
			Files: []realnode.ImageFile{{Path: "/coredns", Source: bin("coredns"), Mode: 0o755}}},
	}
	if executable(bin("hub")) && executable(bin("spoke")) && executable(bin("etcdfed")) {
		// Root until the member pod spec carries a securityContext that lets
		// the init containers (uid 65532 in the Dockerfile) read the data
		// directory etcd (root) made: the images work of issue 25 fixes
		// both; this stand-in image is replaced by its images.
		imgs = append(imgs, realnode.Image{Name: EtcdfedImageRepo + ":" + EtcdfedImageTag,
			Files: []realnode.ImageFile{
				{Path: "/usr/local/bin/hub", Source: bin("hub"), Mode: 0o755},
				{Path: "/usr/local/bin/spoke", Source: bin("spoke"), Mode: 0o755},
				{Path: "/usr/local/bin/etcdfed", Source: bin("etcdfed"), Mode: 0o755},
			}})
	}
	etcds, _ := filepath.Glob(bin("etcd-*"))
	etcds = append([]string{bin("etcd")}, etcds...)
	sort.Strings(etcds[1:])
	for _, path := range etcds {
		out, err := exec.Command(path, "--version").Output()
		if err != nil {
			continue
		}
		m := etcdVersionRE.FindSubmatch(out)
		if m == nil {
			continue
		}
		files := []realnode.ImageFile{{Path: "/usr/local/bin/etcd", Source: path, Mode: 0o755}}
		if path == bin("etcd") {
			for _, t := range []string{"etcdctl", "etcdutl"} {
				if executable(bin(t)) {
					files = append(files, realnode.ImageFile{Path: "/usr/local/bin/" + t, Source: bin(t), Mode: 0o755})
				}
			}
		}
		imgs = append(imgs, realnode.Image{Name: etcdfedv1.DefaultImageRepository + ":v" + string(m[1]),
			Entrypoint: []string{"/usr/local/bin/etcd"}, Files: files})
	}
	return imgs, nil
}

// withSharedLibraries adds to an image the shared libraries (and the
// dynamic loader) its binaries need, as ldd lists them: the stand-in
// images take bin/ as it is, and `make build` and hack/tools.sh link with
// cgo (glibc). Static binaries need nothing.
func withSharedLibraries(img realnode.Image) (realnode.Image, error) {
	seen := map[string]bool{}
	for _, f := range img.Files {
		if f.Source == "" {
			continue
		}
		out, err := exec.Command("ldd", f.Source).CombinedOutput()
		if err != nil {
			continue // "not a dynamic executable"
		}
		for _, line := range strings.Split(string(out), "\n") {
			fields := strings.Fields(line)
			var lib string
			switch {
			case len(fields) >= 3 && fields[1] == "=>" && strings.HasPrefix(fields[2], "/"):
				lib = fields[2]
			case len(fields) >= 1 && strings.HasPrefix(fields[0], "/"):
				lib = fields[0]
			}
			if lib == "" || seen[lib] {
				continue
			}
			seen[lib] = true
			real, err := filepath.EvalSymlinks(lib)
			if err != nil {
				return img, fmt.Errorf("image %s: library %s: %w", img.Name, lib, err)
			}
			img.Files = append(img.Files, realnode.ImageFile{Path: lib, Source: real, Mode: 0o755})
		}
	}
	return img, nil
}

// buildImages writes every image's archive under <state>/images, named
// after a hash of the image and its files' sizes and times, so that an
// unchanged image is not written again.
func (e *Env) buildImages() error {
	imgs, err := e.imageSet()
	if err != nil {
		return err
	}
	dir := filepath.Join(e.state.Dir, "images")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	keep := map[string]bool{}
	e.images = nil
	for _, img := range imgs {
		if img, err = withSharedLibraries(img); err != nil {
			return err
		}
		h := sha256.New()
		fmt.Fprintf(h, "%s %v %v %s\n", img.Name, img.Entrypoint, img.Cmd, img.User)
		for _, f := range img.Files {
			fi, err := os.Stat(f.Source)
			if err != nil {
				return fmt.Errorf("image %s: %w", img.Name, err)
			}
			fmt.Fprintf(h, "%s %s %d %d %o\n", f.Path, f.Source, fi.Size(), fi.ModTime().UnixNano(), f.Mode)
		}
		name := strings.NewReplacer("/", "_", ":", "_").Replace(img.Name) + "-" + hex.EncodeToString(h.Sum(nil))[:12] + ".tar"
		path := filepath.Join(dir, name)
		keep[name] = true
		if _, err := os.Stat(path); err != nil {
			f, err := os.CreateTemp(dir, name+".*.tmp")
			if err != nil {
				return err
			}
			err = realnode.WriteArchive(f, img)
			if cerr := f.Close(); err == nil {
				err = cerr
			}
			if err == nil {
				err = os.Rename(f.Name(), path)
			}
			if err != nil {
				_ = os.Remove(f.Name())
				return fmt.Errorf("image %s: %w", img.Name, err)
			}
		}
		e.images = append(e.images, builtImage{Name: img.Name, Archive: path})
	}
	ents, _ := os.ReadDir(dir)
	for _, ent := range ents {
		if !keep[ent.Name()] {
			_ = os.Remove(filepath.Join(dir, ent.Name()))
		}
	}
	return nil
}
