package images_test

import (
	"context"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/etcdfed/etcdfed/dev/images"
)

// checkDataDirOwnership reproduces, under runc, why member pods run every
// container as one user with fsGroup: etcd's image runs as root and makes
// its data directory 0700, and the helper image's prepare-data (uid 65532)
// cannot read it; after what the kubelet does for fsGroup 65532 (group
// ownership, group read-write, setgid directories) it can. Called by
// TestImagesRunInContainerd with its containerd.
func checkDataDirOwnership(ctx context.Context, t *testing.T, c images.Containerd, etcdRef, initRef string) {
	t.Helper()
	vol := filepath.Join(t.TempDir(), "vol")
	if err := os.Mkdir(vol, 0o755); err != nil {
		t.Fatal(err)
	}
	mount := "type=bind,src=" + vol + ",dst=/var/lib/etcd,options=rbind:rw"
	// etcd as the image runs it (root) writes its data directory. It
	// shares the host's network (a new namespace's loopback may be down
	// without a CNI plugin), on a loopback address of its own.
	id := "etcd-as-root"
	ip := "127.83.19.7"
	logFile := filepath.Join(filepath.Dir(vol), "etcd.log")
	if _, err := c.Run(ctx, "run", "-d", "--runc-root", runcRoot(c), "--net-host", "--log-uri", "file://"+logFile, "--mount", mount, etcdRef, id,
		"etcd", "--data-dir=/var/lib/etcd/data", "--name=m",
		"--listen-client-urls=http://"+ip+":2379", "--advertise-client-urls=http://"+ip+":2379",
		"--listen-peer-urls=http://"+ip+":2380", "--initial-advertise-peer-urls=http://"+ip+":2380",
		"--initial-cluster=m=http://"+ip+":2380"); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(time.Minute)
	for {
		wals, _ := filepath.Glob(filepath.Join(vol, "data", "member", "wal", "*.wal"))
		if len(wals) > 0 {
			break
		}
		if time.Now().After(deadline) {
			log, _ := os.ReadFile(logFile)
			t.Fatalf("etcd wrote no WAL into %s; its log:\n%s", vol, log)
		}
		time.Sleep(200 * time.Millisecond)
	}
	if _, err := c.Run(ctx, "task", "kill", "--signal", "SIGKILL", id); err != nil {
		t.Fatal(err)
	}
	for deadline = time.Now().Add(30 * time.Second); ; time.Sleep(200 * time.Millisecond) {
		if _, err := c.Run(ctx, "task", "rm", id); err == nil {
			break
		} else if time.Now().After(deadline) {
			t.Fatal(err)
		}
	}
	if _, err := c.Run(ctx, "containers", "rm", id); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(filepath.Join(vol, "data"))
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("etcd as root made its data directory %v", fi.Mode())

	prepare := func() (string, error) {
		args := []string{"--address", c.Address, "--namespace", images.KubernetesNamespace, "run", "--rm", "--runc-root", runcRoot(c), "--mount", mount, initRef,
			"prep-" + strings.ReplaceAll(time.Now().Format("150405.000000000"), ".", ""),
			"etcdfed-init", "prepare-data", "--data-dir=/var/lib/etcd/data", "--cluster-id=1"}
		out, err := exec.CommandContext(ctx, "ctr", args...).CombinedOutput()
		return string(out), err
	}
	// The helper, as its image runs it (65532), cannot read the data.
	out, err := prepare()
	if err == nil || !strings.Contains(out, "permission denied") {
		t.Errorf("prepare-data as 65532 on etcd's root-owned data: %v, want permission denied:\n%s", err, out)
	}
	// What the kubelet does with fsGroup 65532 (pkg/volume
	// SetVolumeOwnership): group 65532, files g+rw, directories g+rwx
	// and setgid.
	err = filepath.WalkDir(vol, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if err := os.Lchown(p, -1, 65532); err != nil {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		mode := info.Mode()
		if d.IsDir() {
			mode |= 0o770 | fs.ModeSetgid
		} else {
			mode |= 0o660
		}
		return os.Chmod(p, mode)
	})
	if err != nil {
		t.Fatal(err)
	}
	// Now it reads the WAL and refuses the data for its cluster ID, which
	// is the check it exists for (cluster 1 is not etcd's).
	out, err = prepare()
	if err == nil || strings.Contains(out, "permission denied") || !strings.Contains(out, "belongs to etcd cluster") {
		t.Errorf("prepare-data as 65532 with fsGroup 65532: %v, want the data refused for its cluster ID:\n%s", err, out)
	}
}
