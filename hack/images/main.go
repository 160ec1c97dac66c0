// Command images builds etcdfed's container images without a Docker daemon
// (dev/images), loads them into a containerd, and renders the
// Dockerfile that builds the same images with docker.
//
//	go run ./hack/images build [--version V] [--out out/images] [IMAGE...]
//	go run ./hack/images load --address /run/x/containerd.sock [TARBALL...]
//	go run ./hack/images dockerfile [--out Dockerfile]
//
// build writes one OCI layout tarball per image into --out (IMAGE: a
// name from the catalog, "all", or "demo": hub, spoke, etcdfed-init and
// the etcd image of the default release; none: hub, spoke, etcdfed-init
// and the etcd images), and images.txt beside them (name, reference, file). The
// etcd images hold etcd, etcdctl and etcdutl built from hack/tools/etcd and
// hack/tools/etcd35 (statically, unlike bin/etcd). load imports tarballs
// (default: every one in out/images) into the containerd at --address,
// namespace k8s.io.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"time"

	"github.com/etcdfed/etcdfed/dev/images"
)

func main() {
	if len(os.Args) < 2 {
		usage()
	}
	var err error
	switch os.Args[1] {
	case "build":
		err = build(os.Args[2:])
	case "load":
		err = load(os.Args[2:])
	case "dockerfile":
		err = dockerfile(os.Args[2:])
	default:
		usage()
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "images:", err)
		os.Exit(1)
	}
}

func usage() {
	fmt.Fprintln(os.Stderr, "usage: images build|load|dockerfile [flags] (see go doc ./hack/images)")
	os.Exit(2)
}

func repoRoot() (string, error) {
	out, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}").Output()
	if err != nil {
		return "", fmt.Errorf("find the module root: %w", err)
	}
	return strings.TrimSpace(string(out)), nil
}

func catalog(root, tag string) ([]images.Image, error) {
	v, err := images.ReadVersions(root)
	if err != nil {
		return nil, err
	}
	return images.Catalog(tag, v), nil
}

func build(args []string) error {
	fs := flag.NewFlagSet("build", flag.ExitOnError)
	o := images.Options{Log: func(format string, a ...any) { fmt.Printf(format+"\n", a...) }}
	fs.StringVar(&o.Version, "version", "dev", "etcdfed's version: stamped into the binaries and the tag of etcdfed's images")
	fs.StringVar(&o.Out, "out", "out/images", "directory for the tarballs")
	fs.StringVar(&o.Arch, "arch", runtime.GOARCH, "GOARCH of the images")
	_ = fs.Parse(args)
	o.Names = fs.Args()
	var err error
	if o.Root, err = repoRoot(); err != nil {
		return err
	}
	start := time.Now()
	if _, err := images.BuildAll(context.Background(), o); err != nil {
		return err
	}
	fmt.Printf("images ready in %s in %.1fs\n", o.Out, time.Since(start).Seconds())
	return nil
}

func load(args []string) error {
	fs := flag.NewFlagSet("load", flag.ExitOnError)
	var c images.Containerd
	fs.StringVar(&c.Address, "address", "", "containerd socket (required)")
	fs.StringVar(&c.Namespace, "namespace", images.KubernetesNamespace, "containerd namespace")
	fs.StringVar(&c.Ctr, "ctr", "ctr", "ctr binary")
	fs.StringVar(&c.Snapshotter, "snapshotter", "", "snapshotter to unpack into (default: containerd's)")
	out := fs.String("out", "out/images", "where build wrote the tarballs (when none are named)")
	_ = fs.Parse(args)
	files := fs.Args()
	if len(files) == 0 {
		var err error
		if files, err = filepath.Glob(filepath.Join(*out, "*.tar")); err != nil {
			return err
		}
		if len(files) == 0 {
			return fmt.Errorf("no tarballs in %s: run make images", *out)
		}
	}
	t := time.Now()
	if err := c.Load(context.Background(), files...); err != nil {
		return err
	}
	fmt.Printf("loaded %d images into %s in %.1fs\n", len(files), c.Address, time.Since(t).Seconds())
	return nil
}

func dockerfile(args []string) error {
	fs := flag.NewFlagSet("dockerfile", flag.ExitOnError)
	out := fs.String("out", "", "file to write (default: stdout)")
	_ = fs.Parse(args)
	root, err := repoRoot()
	if err != nil {
		return err
	}
	cat, err := catalog(root, "dev")
	if err != nil {
		return err
	}
	s, err := images.Dockerfile(cat)
	if err != nil {
		return err
	}
	if *out == "" {
		_, err = os.Stdout.WriteString(s)
		return err
	}
	return os.WriteFile(*out, []byte(s), 0o644)
}
