package images_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/etcdfed/etcdfed/dev/images"
	"github.com/etcdfed/etcdfed/internal/repo"
)

// EnvContainerdTest turns on TestImagesRunInContainerd (make test-images):
// it builds every image, starts a containerd and runs containers, minutes
// of work that `make test` leaves out.
const EnvContainerdTest = "ETCDFED_IMAGES_TEST"

// TestImagesRunInContainerd builds the default images and hack/kind's one
// (all of them, as `make images IMAGES=all` does), loads them into a
// private containerd (Debian's, its own root, state and socket under a
// temporary directory, never the machine's default socket) with the
// loader etcdfed's real-node environment uses, and runs each image's
// binaries with `ctr run`: etcd, etcdctl and etcdutl of both etcd images
// report their pinned release, the helper's help names its two commands,
// hub and spoke print their usage. etcdfed's images run as the nonroot
// user, the etcd images as root like the official one.
func TestImagesRunInContainerd(t *testing.T) {
	if os.Getenv(EnvContainerdTest) == "" {
		t.Skipf("builds every image and starts containerd: set %s=1 (make test-images)", EnvContainerdTest)
	}
	if os.Geteuid() != 0 {
		t.Skip("containerd and runc need root")
	}
	for _, c := range []string{"containerd", "ctr", "runc"} {
		if _, err := exec.LookPath(c); err != nil {
			t.Fatalf("%s not found: hack/system-deps.sh images installs containerd and runc", c)
		}
	}
	root, err := repo.Root()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	out := t.TempDir()
	start := time.Now()
	res, err := images.BuildAll(ctx, images.Options{Root: root, Version: "test", Out: out, Names: []string{"all"}, Log: t.Logf})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("built %d images in %.1fs", len(res), time.Since(start).Seconds())

	c := startContainerd(t)
	var files []string
	for _, r := range res {
		files = append(files, r.File)
	}
	start = time.Now()
	if err := c.Load(ctx, files...); err != nil {
		t.Fatal(err)
	}
	t.Logf("loaded %d images in %.1fs", len(files), time.Since(start).Seconds())
	listed, err := c.Run(ctx, "images", "list", "--quiet")
	if err != nil {
		t.Fatal(err)
	}
	v, err := images.ReadVersions(root)
	if err != nil {
		t.Fatal(err)
	}
	refs := map[string]string{}
	for _, r := range res {
		refs[r.Image.Name] = r.Image.Ref
		if !strings.Contains(listed, r.Image.Ref) {
			t.Errorf("containerd does not list %s after the import:\n%s", r.Image.Ref, listed)
		}
	}
	for _, tc := range []struct {
		image string
		cmd   []string
		want  []string
	}{
		{"etcd-3.6", []string{"etcd", "--version"}, []string{"etcd Version: " + strings.TrimPrefix(v.Etcd, "v")}},
		{"etcd-3.6", []string{"etcdctl", "version"}, []string{"etcdctl version: " + strings.TrimPrefix(v.Etcd, "v")}},
		{"etcd-3.6", []string{"etcdutl", "version"}, []string{"etcdutl version: " + strings.TrimPrefix(v.Etcd, "v")}},
		{"etcd-3.5", []string{"etcd", "--version"}, []string{"etcd Version: " + strings.TrimPrefix(v.Etcd35, "v")}},
		{"etcd-3.5", []string{"etcdctl", "version"}, []string{"etcdctl version: " + strings.TrimPrefix(v.Etcd35, "v")}},
		{"etcd-3.5", []string{"etcdutl", "version"}, []string{"etcdutl version: " + strings.TrimPrefix(v.Etcd35, "v")}},
		{"etcd-3.7", []string{"etcd", "--version"}, []string{"etcd Version: " + strings.TrimPrefix(v.Etcd37, "v")}},
		{"etcd-3.7", []string{"etcdctl", "version"}, []string{"etcdctl version: " + strings.TrimPrefix(v.Etcd37, "v")}},
		{"etcd-3.7", []string{"etcdutl", "version"}, []string{"etcdutl version: " + strings.TrimPrefix(v.Etcd37, "v")}},
		// The official image's user and working directory.
		{"etcd-3.6", []string{"etcdctl", "--help"}, []string{"etcdctl"}},
		{"etcdfed-init", []string{"etcdfed-init", "--help"}, []string{"wait-dns", "prepare-data"}},
		{"etcdfed-init", []string{"etcdfed-init", "--version"}, []string{"test"}},
		{"hub", []string{"hub", "--help"}, []string{"Usage: hub", "-kubeconfig"}},
		{"spoke", []string{"spoke", "--help"}, []string{"--helper-image"}},
		{"etcdfed", []string{"etcdfed", "--help"}, []string{"dev"}},
		{"etcdfed", []string{"etcdfed-init", "--help"}, []string{"wait-dns"}},
	} {
		t.Run(tc.image+"/"+strings.Join(tc.cmd, " "), func(t *testing.T) {
			got := ctrRun(ctx, t, c, refs[tc.image], tc.cmd...)
			for _, w := range tc.want {
				if !strings.Contains(got, w) {
					t.Errorf("%s %v: output lacks %q:\n%s", tc.image, tc.cmd, w, got)
				}
			}
		})
	}
	t.Run("data directory ownership", func(t *testing.T) {
		checkDataDirOwnership(ctx, t, c, refs["etcd-3.6"], refs["etcdfed-init"])
	})
	// Who runs, and where: the image config as containerd applies it, in
	// the OCI spec of a container created from each image.
	for _, tc := range []struct {
		image, user, cwd string
	}{
		{"etcd-3.6", "0:0", "/var/lib/etcd/"},
		{"etcd-3.5", "0:0", "/var/lib/etcd/"},
		{"etcd-3.7", "0:0", "/var/lib/etcd/"},
		{"hub", "65532:65532", "/"},
		{"spoke", "65532:65532", "/"},
		{"etcdfed-init", "65532:65532", "/"},
	} {
		id := "spec-" + strings.ReplaceAll(tc.image, ".", "-")
		if _, err := c.Run(ctx, "containers", "create", refs[tc.image], id); err != nil {
			t.Fatal(err)
		}
		info, err := c.Run(ctx, "containers", "info", id)
		if _, rmErr := c.Run(ctx, "containers", "rm", id); rmErr != nil {
			t.Error(rmErr)
		}
		if err != nil {
			t.Fatal(err)
		}
		var ci struct {
			Spec struct {
				Process struct {
					User struct{ UID, GID int }
					Cwd  string
				}
			}
		}
		if err := json.Unmarshal([]byte(info), &ci); err != nil {
			t.Fatalf("containers info %s: %v\n%s", id, err, info)
		}
		u := fmt.Sprintf("%d:%d", ci.Spec.Process.User.UID, ci.Spec.Process.User.GID)
		if u != tc.user || ci.Spec.Process.Cwd != tc.cwd {
			t.Errorf("%s runs as %s in %s; want %s in %s", tc.image, u, ci.Spec.Process.Cwd, tc.user, tc.cwd)
		}
	}
}

// ctrRun runs cmd in a new container of ref and returns what it printed
// (standard output and error: usage goes to standard error).
func ctrRun(ctx context.Context, t *testing.T, c images.Containerd, ref string, cmd ...string) string {
	t.Helper()
	id := fmt.Sprintf("t%d", time.Now().UnixNano())
	args := append([]string{"--address", c.Address, "--namespace", images.KubernetesNamespace, "run", "--rm", "--runc-root", runcRoot(c), ref, id}, cmd...)
	out, err := exec.CommandContext(ctx, "ctr", args...).CombinedOutput()
	if err != nil {
		t.Fatalf("ctr run %s %v: %v\n%s", ref, cmd, err, out)
	}
	return string(out)
}

// runcRoot is runc's state directory for the containers of c: its own,
// beside c's socket. runc's default (/run/containerd/runc/<namespace>) is
// shared by every containerd of the machine, so a container ID of another
// containerd's (another engineer's nodes) would collide.
func runcRoot(c images.Containerd) string { return filepath.Join(filepath.Dir(c.Address), "runc") }

// startContainerd starts Debian's containerd with everything under a
// temporary directory and stops it (by its pid) when the test ends.
func startContainerd(t *testing.T) images.Containerd {
	t.Helper()
	dir, err := os.MkdirTemp("", "ctrd-")
	if err != nil {
		t.Fatal(err)
	}
	sock := filepath.Join(dir, "c.sock")
	cfg := fmt.Sprintf(`version = 2
root = %[1]q
state = %[2]q
disabled_plugins = ["io.containerd.grpc.v1.cri"]
[grpc]
  address = %[3]q
[ttrpc]
  address = %[4]q
[debug]
  address = ""
[metrics]
  address = ""
[plugins."io.containerd.internal.v1.opt"]
  path = %[5]q
`, filepath.Join(dir, "root"), filepath.Join(dir, "state"), sock, sock+".ttrpc", filepath.Join(dir, "opt"))
	cfgFile := filepath.Join(dir, "config.toml")
	if err := os.WriteFile(cfgFile, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	logf, err := os.Create(filepath.Join(dir, "containerd.log"))
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("containerd", "--config", cfgFile)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	c := images.Containerd{Address: sock}
	t.Cleanup(func() {
		// A task a failed test left would keep its shim and its rootfs
		// mount after containerd stops: kill and delete every one first.
		ctx := context.Background()
		if ids, err := c.Run(ctx, "tasks", "list", "--quiet"); err == nil {
			for _, id := range strings.Fields(ids) {
				_, _ = c.Run(ctx, "tasks", "kill", "--signal", "SIGKILL", id)
				for i := 0; i < 50; i++ {
					if _, err := c.Run(ctx, "tasks", "delete", id); err == nil {
						break
					}
					time.Sleep(100 * time.Millisecond)
				}
				_, _ = c.Run(ctx, "containers", "delete", id)
			}
		}
		_ = cmd.Process.Signal(syscall.SIGTERM)
		done := make(chan struct{})
		go func() { _ = cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(20 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
		_ = logf.Close()
		if t.Failed() {
			t.Logf("containerd state kept in %s", dir)
			return
		}
		// Snapshots are plain directories once no container runs.
		_ = os.RemoveAll(dir)
	})
	deadline := time.Now().Add(30 * time.Second)
	for {
		if _, err := c.Run(context.Background(), "version"); err == nil {
			return c
		} else if time.Now().After(deadline) {
			log, _ := os.ReadFile(filepath.Join(dir, "containerd.log"))
			t.Fatalf("containerd did not answer on %s: %v\n%s", sock, err, log)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
