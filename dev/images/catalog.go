package images

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"

	etcdfedv1 "github.com/etcdfed/etcdfed/api/v1alpha1"
	"github.com/etcdfed/etcdfed/internal/version"
	"github.com/etcdfed/etcdfed/pkg/etcdversion"
)

// BinDir is where every image puts its binaries.
const BinDir = "/usr/local/bin"

// NonRoot is the user etcdfed's own images run as (distroless's nonroot).
const NonRoot = "65532:65532"

// Binary is one file of an image's /usr/local/bin.
type Binary struct {
	// Name is the file name in BinDir.
	Name string
	// Package is the Go main package built into it (./cmd/hub), with
	// GoBuildFlags; empty for an etcd binary, built from the image's
	// etcd tools module.
	Package string
}

// Image describes one image.
type Image struct {
	// Name picks the image on the command line and names its Dockerfile
	// stage (docker build --target <Name>).
	Name string
	// Ref is the reference it is tagged with.
	Ref string
	// Binaries go into BinDir.
	Binaries []Binary
	// User runs the entrypoint; empty is root (the official etcd image).
	User string
	// WorkDirs are created in order, the last is the working directory
	// (the official etcd image: /var/etcd/, then /var/lib/etcd/).
	WorkDirs []string
	// Entrypoint and Cmd of the image config.
	Entrypoint []string
	Cmd        []string
	// Ports are exposed ports, such as "2379/tcp".
	Ports []string
	// Default marks the images `make images` builds.
	Default bool
	// etcd names the etcd tools module (hack/tools/<etcd>) whose release
	// the image holds, for the Dockerfile's build of it.
	etcd *etcdRelease
}

// etcdRelease is one pinned etcd release and the tools module that builds
// it (hack/tools.sh builds bin/etcd from the same module, with the same
// stamp, but for this machine: cgo, dynamically linked).
type etcdRelease struct {
	Version string // v3.6.16
	Module  string // hack/tools/etcd
}

// etcdPackages are the main packages of an etcd tools module that an etcd
// image holds: etcd and etcdctl with the module's resolver change,
// upstream etcdutl.
var etcdPackages = []string{"./cmd/etcd", "./cmd/etcdctl", "go.etcd.io/etcd/etcdutl/v3"}

// Versions are the pinned etcd releases, read from hack/tools.sh (the one
// place that pins them).
type Versions struct {
	Etcd   string // ETCD_VERSION, v3.6.16
	Etcd35 string // ETCD35_VERSION, v3.5.35
	Etcd37 string // ETCD37_VERSION, v3.7.3
}

var pinRE = regexp.MustCompile(`(?m)^(ETCD_VERSION|ETCD35_VERSION|ETCD37_VERSION)=(v[0-9]+\.[0-9]+\.[0-9]+)$`)

// ReadVersions reads the pinned etcd releases from root/hack/tools.sh.
func ReadVersions(root string) (Versions, error) {
	b, err := os.ReadFile(filepath.Join(root, "hack", "tools.sh"))
	if err != nil {
		return Versions{}, err
	}
	var v Versions
	for _, m := range pinRE.FindAllStringSubmatch(string(b), -1) {
		switch m[1] {
		case "ETCD_VERSION":
			v.Etcd = m[2]
		case "ETCD35_VERSION":
			v.Etcd35 = m[2]
		case "ETCD37_VERSION":
			v.Etcd37 = m[2]
		}
	}
	if v.Etcd == "" || v.Etcd35 == "" || v.Etcd37 == "" {
		return v, fmt.Errorf("hack/tools.sh pins no ETCD_VERSION, ETCD35_VERSION or ETCD37_VERSION")
	}
	return v, nil
}

// EtcdRepository names the etcd images: the official images' repository,
// so an EtcdCluster without spec.image runs them on a node that has them
// loaded, exactly as it would run the official ones.
const EtcdRepository = etcdfedv1.DefaultImageRepository

// Catalog is every image, etcdfed's tagged with tag (the version).
func Catalog(tag string, v Versions) []Image {
	ref := func(name string) string { return version.Registry + "/" + name + ":" + tag }
	own := func(name, pkg string, dflt bool) Image {
		bin := BinDir + "/" + name
		return Image{
			Name: name, Ref: ref(name), Default: dflt,
			Binaries:   []Binary{{Name: name, Package: pkg}},
			User:       NonRoot,
			Entrypoint: []string{bin},
		}
	}
	etcd := func(r etcdRelease) Image {
		rel := strings.TrimPrefix(r.Version, "v")
		minor := rel[:strings.LastIndexByte(rel, '.')]
		return Image{
			// Laid out like the official image (etcd's Dockerfile):
			// etcd, etcdctl and etcdutl in /usr/local/bin, root, working
			// directories /var/etcd/ then /var/lib/etcd/, ports 2379
			// and 2380, CMD etcd.
			Name: "etcd-" + minor, Ref: EtcdRepository + ":" + r.Version, Default: true,
			Binaries: []Binary{{Name: "etcd"}, {Name: "etcdctl"}, {Name: "etcdutl"}},
			WorkDirs: []string{"/var/etcd/", "/var/lib/etcd/"},
			Ports:    []string{"2379/tcp", "2380/tcp"},
			Cmd:      []string{BinDir + "/etcd"},
			etcd:     &r,
		}
	}
	return []Image{
		own("hub", "./cmd/hub", true),
		own("spoke", "./cmd/spoke", true),
		own("etcdfed-init", "./cmd/etcdfed-init", true),
		etcd(etcdRelease{Version: v.Etcd, Module: "hack/tools/etcd"}),
		etcd(etcdRelease{Version: v.Etcd35, Module: "hack/tools/etcd35"}),
		etcd(etcdRelease{Version: v.Etcd37, Module: "hack/tools/etcd37"}),
		{
			// hack/kind's one image: every etcdfed binary, no entrypoint
			// (the manifests give the command). The Dockerfile's last
			// stage, so `docker build .` builds it.
			Name: "etcdfed", Ref: ref("etcdfed"),
			Binaries: []Binary{
				{Name: "hub", Package: "./cmd/hub"},
				{Name: "spoke", Package: "./cmd/spoke"},
				{Name: "etcdfed", Package: "./cmd/etcdfed"},
				{Name: "etcdfed-init", Package: "./cmd/etcdfed-init"},
			},
			User: NonRoot,
		},
	}
}

// Demo picks what a ring of the default etcd release runs (`make demo
// NODES=real`): etcdfed's hub, spoke and etcdfed-init images and the one
// etcd image of etcdversion.Default. A cold first run builds no other
// release's etcd (two more compiles of etcd, etcdctl and etcdutl).
const Demo = "demo"

// Select returns the images named, or the default ones when names is
// empty; "all" is every image, Demo the default release's.
func Select(cat []Image, names []string) ([]Image, error) {
	if len(names) == 0 {
		return slices.DeleteFunc(slices.Clone(cat), func(i Image) bool { return !i.Default }), nil
	}
	if slices.Contains(names, "all") {
		return cat, nil
	}
	if i := slices.Index(names, Demo); i >= 0 {
		ref := EtcdRepository + ":v" + etcdversion.Default().String()
		etcd := slices.IndexFunc(cat, func(im Image) bool { return im.etcd != nil && im.Ref == ref })
		if etcd < 0 {
			return nil, fmt.Errorf("no etcd image %s, the default release's, in the catalog (hack/tools.sh's pins)", ref)
		}
		names = slices.Concat(names[:i], []string{"hub", "spoke", "etcdfed-init", cat[etcd].Name}, names[i+1:])
	}
	var out []Image
	for _, n := range names {
		i := slices.IndexFunc(cat, func(im Image) bool { return im.Name == n })
		if i < 0 {
			var known []string
			for _, im := range cat {
				known = append(known, im.Name)
			}
			return nil, fmt.Errorf("no image %q (images: %s, all, %s)", n, strings.Join(known, ", "), Demo)
		}
		if !slices.ContainsFunc(out, func(im Image) bool { return im.Name == n }) {
			out = append(out, cat[i])
		}
	}
	return out, nil
}
