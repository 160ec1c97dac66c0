package etcdops

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/etcdfed/etcdfed/dev/testenv"
)

// startRelease runs binary (bin/etcd or bin/etcd-3.5.35) as a one-member
// cluster on dataDir, and returns a stop function.
func startRelease(t *testing.T, p *proc, binary, dataDir string) func() {
	t.Helper()
	bin, err := testenv.BinDir()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(filepath.Join(bin, binary),
		"--name", p.name, "--data-dir", dataDir,
		"--listen-peer-urls", p.peer, "--initial-advertise-peer-urls", p.peer,
		"--listen-client-urls", p.client, "--advertise-client-urls", p.client,
		"--initial-cluster", p.name+"="+p.peer, "--initial-cluster-state", "new", "--initial-cluster-token", "etcdops-versions",
		"--log-level", "error")
	log, err := os.OpenFile(filepath.Join(filepath.Dir(dataDir), binary+".log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout, cmd.Stderr = log, log
	if err := testenv.StartProcess(cmd); err != nil {
		t.Fatal(err)
	}
	// stop ends etcd the way a pod's deletion does, with SIGTERM: etcd
	// commits its backend on the way out. A SIGKILL right after a
	// downgrade's storage version was observed can lose the backend's last
	// batch (status reads it before it is committed), and the older
	// release then refuses the data: `version "3.7.0" is not supported`.
	var once sync.Once
	stop := func() {
		once.Do(func() {
			_ = cmd.Process.Signal(syscall.SIGTERM)
			done := make(chan struct{})
			go func() { _, _ = cmd.Process.Wait(); close(done) }()
			select {
			case <-done:
			case <-time.After(30 * time.Second):
				_ = cmd.Process.Kill()
				<-done
			}
		})
	}
	t.Cleanup(func() {
		stop()
		if t.Failed() {
			b, _ := os.ReadFile(log.Name())
			t.Logf("%s log:\n%s", binary, b)
		}
	})
	return stop
}

// TestVersionsAndDowngrade follows etcd's downgrade procedure on a real
// one-member cluster with the calls the hub makes: Observe reports the
// server, storage and cluster versions; a downgrade by two minors is
// refused; 3.6 -> 3.5 is validated and enabled, the cluster and storage
// versions drop to 3.5; the same data then runs on etcd 3.5.35, which
// ends the downgrade.
func TestVersionsAndDowngrade(t *testing.T) {
	testenv.SkipIfShort(t, "etcd processes")
	bin, err := testenv.BinDir()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(bin, "etcd-3.5.35")); err != nil {
		t.Skipf("bin/etcd-3.5.35 is not built (hack/tools.sh etcd35): %v", err)
	}
	ctx := context.Background()
	a := urls(t, "a")
	data := filepath.Join(t.TempDir(), "data")
	stop := startRelease(t, &a, "etcd", data)
	c, err := New(Config{Endpoints: []string{a.client}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()

	eventually(t, "3.6 versions observed", func() error {
		e := c.Observe(ctx)
		if !e.Reachable || len(e.Members) != 1 || e.Members[0].Version != "3.6.16" || e.Members[0].StorageVersion != "3.6.0" || e.ClusterVersion != "3.6.0" {
			return fmt.Errorf("observed %+v", e)
		}
		return nil
	})
	if err := c.EnableDowngrade(ctx, "3.4"); !errors.Is(err, ErrDowngradeRefused) {
		t.Errorf("downgrade to 3.4: got %v, want ErrDowngradeRefused", err)
	} else {
		t.Logf("downgrade to 3.4 refused: %v", err)
	}
	if err := c.EnableDowngrade(ctx, "3.5"); err != nil {
		t.Fatal(err)
	}
	eventually(t, "downgrade enabled, cluster and storage versions 3.5", func() error {
		e := c.Observe(ctx)
		if !e.Downgrade.Enabled || e.Downgrade.Target != "3.5.0" || e.ClusterVersion != "3.5.0" || e.Members[0].StorageVersion != "3.5.0" {
			return fmt.Errorf("observed %+v", e)
		}
		return nil
	})
	stop()
	startRelease(t, &a, "etcd-3.5.35", data)
	eventually(t, "the same data served by etcd 3.5.35, downgrade done", func() error {
		e := c.Observe(ctx)
		if !e.Reachable || len(e.Members) != 1 || e.Members[0].Version != "3.5.35" || e.ClusterVersion != "3.5.0" || e.Downgrade.Enabled {
			return fmt.Errorf("observed %+v", e)
		}
		return nil
	})
}

// TestCancelDowngrade gives a downgrade up with the hub's call: enabled to
// 3.5 on a 3.6 member (cluster version 3.5.0), then cancelled: etcd
// reports no downgrade and raises the cluster and storage versions back
// to 3.6.0 with the member never restarted.
func TestCancelDowngrade(t *testing.T) {
	testenv.SkipIfShort(t, "etcd processes")
	ctx := context.Background()
	a := urls(t, "a")
	startRelease(t, &a, "etcd", filepath.Join(t.TempDir(), "data"))
	c, err := New(Config{Endpoints: []string{a.client}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	eventually(t, "3.6 versions observed", func() error {
		if e := c.Observe(ctx); !e.Reachable || e.ClusterVersion != "3.6.0" {
			return fmt.Errorf("observed %+v", e)
		}
		return nil
	})
	if err := c.EnableDowngrade(ctx, "3.5"); err != nil {
		t.Fatal(err)
	}
	eventually(t, "downgrade enabled, cluster version 3.5.0", func() error {
		if e := c.Observe(ctx); !e.Downgrade.Enabled || e.ClusterVersion != "3.5.0" {
			return fmt.Errorf("observed %+v", e)
		}
		return nil
	})
	if err := c.CancelDowngrade(ctx); err != nil {
		t.Fatal(err)
	}
	eventually(t, "downgrade cancelled, cluster and storage versions 3.6.0", func() error {
		e := c.Observe(ctx)
		if !e.Reachable || e.Downgrade.Enabled || e.ClusterVersion != "3.6.0" || e.Members[0].StorageVersion != "3.6.0" {
			return fmt.Errorf("observed %+v", e)
		}
		return nil
	})
}
