package backup

import (
	"context"
	"crypto/rand"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sync/errgroup"

	etcdfedv1 "github.com/etcdfed/etcdfed/api/v1alpha1"
	"github.com/etcdfed/etcdfed/dev/etcdtest"
	"github.com/etcdfed/etcdfed/dev/s3test"
	"github.com/etcdfed/etcdfed/dev/testenv"
	"github.com/etcdfed/etcdfed/hub/etcdops"
	"github.com/etcdfed/etcdfed/pkg/backupstore"
	"github.com/etcdfed/etcdfed/pkg/etcdsnapshot"
)

// benchDBBytes is the size of the database the snapshot benchmarks fill:
// 1 GiB of 4 MiB values (etcd's --max-request-bytes raised to take them).
const (
	benchDBBytes = 1 << 30
	benchValue   = 4 << 20
)

// bigEtcd starts one etcd member and fills it with about 1 GiB (4 MiB
// values, four writers). Filling is not part of any timing.
func bigEtcd(b *testing.B) *etcdtest.Cluster {
	b.Helper()
	start := time.Now()
	c := etcdtest.Start(b, etcdtest.Options{Members: 1, Name: "big", ExtraArgs: []string{
		"--quota-backend-bytes=" + fmt.Sprint(4*benchDBBytes), "--max-request-bytes=" + fmt.Sprint(2*benchValue),
	}})
	cl := c.NewClient()
	value := make([]byte, benchValue)
	_, _ = rand.Read(value)
	var g errgroup.Group
	g.SetLimit(4)
	for i := range benchDBBytes / benchValue {
		g.Go(func() error {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			_, err := cl.Put(ctx, fmt.Sprintf("big/%05d", i), string(value))
			return err
		})
	}
	if err := g.Wait(); err != nil {
		b.Fatal(err)
	}
	b.Logf("filled etcd with %d MiB in %.1fs", benchDBBytes>>20, time.Since(start).Seconds())
	return c
}

// BenchmarkSnapshot1GiB times the hub's snapshot of a 1 GiB database
// (stream from the member, sha256 checked on the way, bbolt checked and
// revision read afterwards) beside the same work done by hand with
// etcdctl snapshot save and etcdutl snapshot status on the same machine,
// then the upload to a file:// store and to versitygw, and a restore with
// etcdfed's library beside etcdutl snapshot restore.
func BenchmarkSnapshot1GiB(b *testing.B) {
	testenv.SkipIfShort(b, "etcd with a 1 GiB database")
	e := bigEtcd(b)
	bin, err := testenv.BinDir()
	if err != nil {
		b.Fatal(err)
	}
	m := e.Members[0]
	scratch := b.TempDir()
	var snap string
	var size int64

	b.Run("etcdfed-stream-and-check", func(b *testing.B) {
		ops, err := etcdops.New(etcdops.Config{Endpoints: e.Endpoints()})
		if err != nil {
			b.Fatal(err)
		}
		defer ops.Close()
		for i := range b.N {
			path := filepath.Join(scratch, fmt.Sprintf("etcdfed-%d.db", i))
			var info etcdsnapshot.Info
			_, err := ops.Snapshot(context.Background(), []string{m.ClientURL}, func(r io.Reader, rev int64) error {
				var err error
				info, err = etcdsnapshot.Save(r, path, rev)
				return err
			})
			if err != nil {
				b.Fatal(err)
			}
			size = info.Size
			b.SetBytes(info.Size)
			if snap == "" {
				snap = path
			} else {
				_ = os.Remove(path)
			}
		}
	})
	b.Run("etcdctl-snapshot-save", func(b *testing.B) {
		for i := range b.N {
			path := filepath.Join(scratch, fmt.Sprintf("etcdctl-%d.db", i))
			run(b, filepath.Join(bin, "etcdctl"), "--endpoints", m.ClientURL, "snapshot", "save", path)
			fi, _ := os.Stat(path)
			b.SetBytes(fi.Size())
			_ = os.Remove(path)
		}
	})
	b.Run("etcdutl-snapshot-status", func(b *testing.B) {
		b.SetBytes(size)
		for range b.N {
			run(b, filepath.Join(bin, "etcdutl"), "snapshot", "status", snap, "-w", "json")
		}
	})
	b.Run("etcdfed-verify-only", func(b *testing.B) {
		b.SetBytes(size)
		for range b.N {
			if _, err := etcdsnapshot.Verify(snap); err != nil {
				b.Fatal(err)
			}
		}
	})
	info, err := etcdsnapshot.Verify(snap)
	if err != nil {
		b.Fatal(err)
	}
	md := backupstore.Metadata{Revision: info.Revision, SHA256: info.SHA256, SizeBytes: info.Size, Hash: info.HashHex()}
	upload := func(b *testing.B, spec etcdfedv1.BackupStore, creds map[string][]byte) {
		store, err := backupstore.Open(context.Background(), spec, creds)
		if err != nil {
			b.Fatal(err)
		}
		defer store.Close()
		b.SetBytes(size)
		for i := range b.N {
			key := backupstore.SnapshotKey("bench/", time.Now(), int64(i))
			if _, err := store.Upload(context.Background(), key, snap, md); err != nil {
				b.Fatal(err)
			}
			_ = store.Delete(context.Background(), key)
		}
	}
	b.Run("upload-file", func(b *testing.B) {
		upload(b, etcdfedv1.BackupStore{URL: "file://" + filepath.Join(scratch, "store")}, nil)
	})
	b.Run("upload-versitygw", func(b *testing.B) {
		srv := s3test.StartT(b, "bench")
		upload(b, srv.Store("bench", "", ""), srv.Credentials())
	})
	b.Run("etcdfed-restore", func(b *testing.B) {
		b.SetBytes(size)
		for i := range b.N {
			dir := filepath.Join(scratch, fmt.Sprintf("restore-etcdfed-%d", i))
			if _, err := etcdsnapshot.Restore(etcdsnapshot.RestoreInput{SnapshotPath: snap, Name: "r", PeerURLs: []string{"http://127.0.0.1:2380"},
				InitialCluster: "r=http://127.0.0.1:2380", Token: "bench", DataDir: dir, BumpRevision: 1000, MarkCompacted: true}); err != nil {
				b.Fatal(err)
			}
			_ = os.RemoveAll(dir)
		}
	})
	b.Run("etcdutl-snapshot-restore", func(b *testing.B) {
		b.SetBytes(size)
		for i := range b.N {
			dir := filepath.Join(scratch, fmt.Sprintf("restore-etcdutl-%d", i))
			run(b, filepath.Join(bin, "etcdutl"), "snapshot", "restore", snap, "--name", "r", "--data-dir", dir,
				"--initial-cluster", "r=http://127.0.0.1:2380", "--initial-advertise-peer-urls", "http://127.0.0.1:2380",
				"--initial-cluster-token", "bench", "--bump-revision", "1000", "--mark-compacted")
			_ = os.RemoveAll(dir)
		}
	})
}

func run(b *testing.B, name string, args ...string) {
	b.Helper()
	out, err := exec.Command(name, args...).CombinedOutput()
	if err != nil {
		b.Fatalf("%s %s: %v\n%s", filepath.Base(name), strings.Join(args, " "), err, out)
	}
}
