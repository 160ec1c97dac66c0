package etcdops

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/etcdfed/etcdfed/dev/testenv"
	"github.com/etcdfed/etcdfed/pkg/etcdversion"
)

// release37 is the 3.7 binary hack/tools.sh builds, skipping the test
// when it is not there.
func release37(t *testing.T) string {
	t.Helper()
	bin, err := testenv.BinDir()
	if err != nil {
		t.Fatal(err)
	}
	name := "etcd-" + etcdversion.NewestLine().Newest.String()
	if _, err := os.Stat(filepath.Join(bin, name)); err != nil {
		t.Skipf("bin/%s is not built (hack/tools.sh etcd37): %v", name, err)
	}
	return name
}

// TestUpgradeAndDowngrade37 walks the 3.6 <-> 3.7 steps of the version
// policy on a real one-member cluster with the calls the hub makes: the
// data of etcd 3.6.16 served by etcd 3.7 (server, cluster and storage
// versions 3.7), then etcd's downgrade to 3.6 enabled (cluster and storage
// versions 3.6.0 while 3.7 still runs) and the same data served by 3.6.16
// again, which ends the downgrade.
func TestUpgradeAndDowngrade37(t *testing.T) {
	testenv.SkipIfShort(t, "etcd processes")
	r37 := release37(t)
	v37 := etcdversion.NewestLine().Newest.String()
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
		if e := c.Observe(ctx); !e.Reachable || len(e.Members) != 1 || e.ClusterVersion != "3.6.0" {
			return fmt.Errorf("observed %+v", e)
		}
		return nil
	})
	stop()
	stop = startRelease(t, &a, r37, data)
	eventually(t, "the 3.6 data served by "+v37+", cluster and storage versions 3.7.0", func() error {
		e := c.Observe(ctx)
		if !e.Reachable || len(e.Members) != 1 || e.Members[0].Version != v37 || e.ClusterVersion != "3.7.0" || e.Members[0].StorageVersion != "3.7.0" {
			return fmt.Errorf("observed %+v", e)
		}
		return nil
	})
	if err := c.EnableDowngrade(ctx, "3.6"); err != nil {
		t.Fatal(err)
	}
	eventually(t, "downgrade enabled, cluster and storage versions 3.6", func() error {
		e := c.Observe(ctx)
		if !e.Downgrade.Enabled || e.Downgrade.Target != "3.6.0" || e.ClusterVersion != "3.6.0" || e.Members[0].StorageVersion != "3.6.0" {
			return fmt.Errorf("observed %+v", e)
		}
		return nil
	})
	stop()
	startRelease(t, &a, "etcd", data)
	eventually(t, "the same data served by etcd 3.6.16, downgrade done", func() error {
		e := c.Observe(ctx)
		if !e.Reachable || len(e.Members) != 1 || e.Members[0].Version != "3.6.16" || e.ClusterVersion != "3.6.0" || e.Downgrade.Enabled {
			return fmt.Errorf("observed %+v", e)
		}
		return nil
	})
}

// TestEtcd37RefusesThe35Data is why the version policy never lets a ring
// skip 3.6 (etcdversion.Step): the data of a 3.5 member, served by etcd
// 3.7, never answers (etcd 3.7.3 panics applying the 3.5 WAL: "unmarshal
// should never fail"). A 3.7 release that serves it after all fails this
// test, and the policy may be revisited.
func TestEtcd37RefusesThe35Data(t *testing.T) {
	testenv.SkipIfShort(t, "etcd processes")
	r37 := release37(t)
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
	stop := startRelease(t, &a, "etcd-3.5.35", data)
	c, err := New(Config{Endpoints: []string{a.client}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	eventually(t, "3.5 versions observed and a key written", func() error {
		if e := c.Observe(ctx); !e.Reachable || e.ClusterVersion != "3.5.0" {
			return fmt.Errorf("observed %+v", e)
		}
		pctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		defer cancel()
		_, err := c.c.Put(pctx, "k", "v")
		return err
	})
	stop()
	startRelease(t, &a, r37, data)
	// Not a timed assertion: etcd 3.7 is given as long as a start takes
	// it on this machine many times over, and must never serve.
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		if e := c.Observe(ctx); e.Reachable && len(e.Members) == 1 && e.Members[0].Version == etcdversion.NewestLine().Newest.String() {
			t.Fatalf("etcd %s serves the data of 3.5.35 (%+v): skipping 3.6 may be possible after all", r37, e)
		}
		time.Sleep(500 * time.Millisecond)
	}
}
