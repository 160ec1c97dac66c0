package restore_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"

	etcdfedv1 "github.com/etcdfed/etcdfed/api/v1alpha1"
	"github.com/etcdfed/etcdfed/dev/etcdtest"
	"github.com/etcdfed/etcdfed/dev/s3test"
	"github.com/etcdfed/etcdfed/dev/snapshottest"
	"github.com/etcdfed/etcdfed/pkg/diskspace"
	"github.com/etcdfed/etcdfed/pkg/etcdsnapshot"
	"github.com/etcdfed/etcdfed/spoke/restore"
)

// storeSnapshot puts a snapshot of n keys of a real etcd into the store.
func storeSnapshot(t *testing.T, spec etcdfedv1.BackupStore, creds map[string][]byte, n int) snapshottest.Stored {
	return snapshottest.Store(t, spec, creds, "team-a", "main", "8e9e05c52164694d", time.Now(), n)
}

func input(spec etcdfedv1.BackupStore, st snapshottest.Stored, dataDir, peer string) restore.Input {
	return restore.Input{Store: spec, Object: st.Key, SHA256: st.Info.SHA256, Name: "main-0", PeerURL: peer,
		InitialCluster: "main-0=" + peer, Token: "restored-token", DataDir: dataDir, RevisionBump: etcdfedv1.DefaultRestoreRevisionBump}
}

// TestRestoreFromS3 restores a member's data directory from a snapshot in
// a real S3 server (versitygw), the credentials read from a mounted-Secret
// directory, and starts a real etcd on it: every key written before the
// snapshot is there, the revision went up by the bump, a watch from an old
// revision is told it was compacted, and a second run leaves the data
// alone.
func TestRestoreFromS3(t *testing.T) {
	srv := s3test.StartT(t, "backups")
	spec := srv.Store("backups", "hub", "creds")
	st := storeSnapshot(t, spec, srv.Credentials(), 300)

	creds := t.TempDir()
	for k, v := range srv.Credentials() {
		if err := os.WriteFile(filepath.Join(creds, k), v, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	// What the kubelet leaves in a Secret volume besides the keys.
	if err := os.Mkdir(filepath.Join(creds, "..2026_11_23_12_00_00.000"), 0o700); err != nil {
		t.Fatal(err)
	}
	peer, clientURL := etcdtest.FreeURL(t), etcdtest.FreeURL(t)
	dataDir := filepath.Join(t.TempDir(), "data")
	in := input(spec, st, dataDir, peer)
	in.CredentialsDir = creds
	ctx := context.Background()
	res, err := restore.Run(ctx, in, func(s string) { t.Log(s) })
	if err != nil {
		t.Fatal(err)
	}
	if res.Skipped || res.Info.SHA256 != st.Info.SHA256 || res.Info.Revision != st.Info.Revision {
		t.Fatalf("Run = %+v, want the snapshot %+v restored", res, st.Info)
	}
	if entries, _ := os.ReadDir(filepath.Dir(dataDir)); len(entries) != 1 {
		t.Errorf("the volume holds %v, want the data directory alone (download and staging removed)", entries)
	}

	m := etcdtest.StartMember(t, "main-0", dataDir, peer, clientURL)
	cl := m.NewClient()
	cctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	got, err := cl.Get(cctx, "k/", clientv3.WithPrefix(), clientv3.WithCountOnly())
	if err != nil {
		t.Fatal(err)
	}
	if got.Count != 300 {
		t.Errorf("restored member holds %d keys, want 300", got.Count)
	}
	if id, ok, err := restore.DataClusterID(dataDir); err != nil || !ok || id != got.Header.ClusterId {
		t.Errorf("restored data's cluster ID %x (%v, %v), etcd reports %x", id, ok, err, got.Header.ClusterId)
	}
	if min := st.Info.Revision + etcdfedv1.DefaultRestoreRevisionBump; got.Header.Revision < min {
		t.Errorf("restored revision %d, want at least %d (snapshot %d + bump)", got.Header.Revision, min, st.Info.Revision)
	}
	w := cl.Watch(cctx, "k/", clientv3.WithPrefix(), clientv3.WithRev(st.LastWrite))
	select {
	case wr := <-w:
		if !errors.Is(wr.Err(), rpctypes.ErrCompacted) {
			t.Errorf("watch from the old revision %d: %v (compact revision %d), want compacted", st.LastWrite, wr.Err(), wr.CompactRevision)
		}
	case <-cctx.Done():
		t.Fatal("watch from an old revision got no answer")
	}
	if _, err := cl.Put(cctx, "after-restore", "x"); err != nil {
		t.Fatal(err)
	}
	m.Members[0].Stop()

	// A restarted pod: the data is kept as it is.
	res, err = restore.Run(ctx, in, func(s string) { t.Log(s) })
	if err != nil || !res.Skipped {
		t.Fatalf("second Run = %+v, %v; want skipped", res, err)
	}
	m.Restart(m.Members[0])
	if err := m.WaitHealthy(cctx, time.Minute); err != nil {
		t.Fatal(err)
	}
	if r, err := m.NewClient().Get(cctx, "after-restore"); err != nil || r.Count != 1 {
		t.Errorf("the write after the restore is gone after a second run: %v, %v", r, err)
	}
}

// TestRestoreRefusesBadSnapshots: a stored object with a flipped byte, and
// a sound snapshot that is not the one the hub verified, are refused and
// leave no data directory; a data directory that holds data is never
// restored over, even from a good snapshot.
func TestRestoreRefusesBadSnapshots(t *testing.T) {
	root := t.TempDir()
	spec := etcdfedv1.BackupStore{URL: "file://" + root}
	st := storeSnapshot(t, spec, nil, 100)
	ctx := context.Background()
	quiet := func(string) {}

	t.Run("corrupted in the store", func(t *testing.T) {
		obj := filepath.Join(root, st.Key)
		data, err := os.ReadFile(obj)
		if err != nil {
			t.Fatal(err)
		}
		bad := append([]byte(nil), data...)
		bad[len(bad)/2] ^= 0xff
		if err := os.WriteFile(obj, bad, 0o600); err != nil {
			t.Fatal(err)
		}
		defer func() { _ = os.WriteFile(obj, data, 0o600) }()
		dataDir := filepath.Join(t.TempDir(), "data")
		_, err = restore.Run(ctx, input(spec, st, dataDir, "http://127.0.0.1:1"), quiet)
		if !errors.Is(err, etcdsnapshot.ErrChecksumMismatch) {
			t.Fatalf("Run = %v, want ErrChecksumMismatch", err)
		}
		if _, serr := os.Stat(dataDir); !errors.Is(serr, os.ErrNotExist) {
			t.Errorf("a refused snapshot left %s (%v)", dataDir, serr)
		}
		t.Logf("refused: %v", err)
	})
	t.Run("not the snapshot the hub verified", func(t *testing.T) {
		dataDir := filepath.Join(t.TempDir(), "data")
		in := input(spec, st, dataDir, "http://127.0.0.1:1")
		in.SHA256 = strings.Repeat("0", 64)
		_, err := restore.Run(ctx, in, quiet)
		if !errors.Is(err, restore.ErrMismatch) || !errors.Is(err, etcdsnapshot.ErrInvalid) {
			t.Fatalf("Run = %v, want ErrMismatch", err)
		}
		if _, serr := os.Stat(dataDir); !errors.Is(serr, os.ErrNotExist) {
			t.Errorf("a refused snapshot left %s (%v)", dataDir, serr)
		}
	})
	t.Run("data already there", func(t *testing.T) {
		dataDir := filepath.Join(t.TempDir(), "data")
		if err := os.MkdirAll(filepath.Join(dataDir, "member"), 0o700); err != nil {
			t.Fatal(err)
		}
		res, err := restore.Run(ctx, input(spec, st, dataDir, "http://127.0.0.1:1"), quiet)
		if err != nil || !res.Skipped {
			t.Fatalf("Run = %+v, %v; want skipped", res, err)
		}
		if entries, _ := os.ReadDir(filepath.Join(dataDir, "member")); len(entries) != 0 {
			t.Errorf("the existing data directory was written into: %v", entries)
		}
	})
}

// TestRestoreChecksFreeSpace: a restore whose volume has less free space
// than RestoreNeed (the download, the restored database, etcd's first WAL
// file, a margin) is refused before anything is written, naming the bytes
// needed and available; with exactly that much it restores. The free
// space is the statfs seam's (a real small filesystem needs root); the
// real statfs is TestRealFilesystem's (pkg/diskspace), and every other
// restore here runs with it.
func TestRestoreChecksFreeSpace(t *testing.T) {
	root := t.TempDir()
	spec := etcdfedv1.BackupStore{URL: "file://" + root}
	st := storeSnapshot(t, spec, nil, 50)
	need := restore.RestoreNeed(st.Info.Size)
	ctx := context.Background()
	quiet := func(string) {}
	for _, tc := range []struct {
		name string
		free int64
		ok   bool
	}{{"one byte short", need - 1, false}, {"exactly enough", need, true}} {
		t.Run(tc.name, func(t *testing.T) {
			volume := t.TempDir()
			dataDir := filepath.Join(volume, "data")
			in := input(spec, st, dataDir, "http://127.0.0.1:1")
			var asked string
			in.FreeSpace = func(path string) (int64, error) { asked = path; return tc.free, nil }
			_, err := restore.Run(ctx, in, quiet)
			if asked != volume {
				t.Errorf("free space read of %q, want the data directory's volume %s", asked, volume)
			}
			if tc.ok {
				if err != nil {
					t.Fatalf("with %d bytes free (need %d): %v", tc.free, need, err)
				}
				return
			}
			if !errors.Is(err, diskspace.ErrInsufficient) || !strings.Contains(err.Error(), fmt.Sprintf("needs %d bytes", need)) ||
				!strings.Contains(err.Error(), fmt.Sprintf("%d bytes (", tc.free)) || !strings.Contains(err.Error(), "nothing was written") {
				t.Fatalf("Run with %d bytes free (need %d) = %v; want a refusal naming both", tc.free, need, err)
			}
			if entries, err := os.ReadDir(volume); err != nil || len(entries) != 0 {
				t.Errorf("a refused restore left %v in the volume (%v)", entries, err)
			}
			t.Logf("refused: %v", err)
		})
	}
}

// The command line the spoke renders reads back as the same input.
func TestArgsRoundTrip(t *testing.T) {
	for _, in := range []restore.Input{
		{Store: etcdfedv1.BackupStore{URL: "s3://b/p", S3: &etcdfedv1.S3StoreOptions{Endpoint: "http://127.0.0.1:9000", Region: "eu-west-1", ForcePathStyle: true}},
			CredentialsDir: "/etc/etcdfed/store", Object: "a/b/c/x.db", SHA256: strings.Repeat("ab", 32), Name: "main-0",
			PeerURL: "https://main-0.etcd.test:2380", InitialCluster: "main-0=https://main-0.etcd.test:2380,main-1=https://main-1.etcd.test:2380",
			Token: "uid-1", DataDir: "/var/lib/etcd/data", RevisionBump: 7, ClusterID: "8e9e05c52164694d"},
		{DataDir: "/var/lib/etcd/data", ClusterID: "c1"},
		{Store: etcdfedv1.BackupStore{URL: "file:///backups"}, Object: "x.db", SHA256: "s", Name: "n", PeerURL: "p", InitialCluster: "n=p", Token: "t", DataDir: "/d", RevisionBump: 1},
	} {
		fs := pflag.NewFlagSet("restore-snapshot", pflag.ContinueOnError)
		var got restore.Input
		restore.BindFlags(fs, &got)
		if err := fs.Parse(restore.Args(in)); err != nil {
			t.Fatal(err)
		}
		got.Finish()
		if !reflect.DeepEqual(got, in) {
			t.Errorf("Args %v read back as %+v, want %+v", restore.Args(in), got, in)
		}
	}
}

// Fencing: the cluster ID read from a real etcd's WAL is the one etcd
// reports; a member of another cluster ID is refused on that data, naming
// both IDs, and the data is left exactly as it was; its own cluster's
// member passes.
func TestFencesDataOfAnotherCluster(t *testing.T) {
	c := etcdtest.Start(t, etcdtest.Options{Members: 1})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	st, err := c.NewClient().Status(ctx, c.Members[0].ClientURL)
	if err != nil {
		t.Fatal(err)
	}
	m := c.Members[0]
	m.Stop()
	id, ok, err := restore.DataClusterID(m.DataDir)
	if err != nil || !ok || id != st.Header.ClusterId {
		t.Fatalf("DataClusterID = %x, %v, %v; etcd reports %x", id, ok, err, st.Header.ClusterId)
	}
	before := tree(t, m.DataDir)

	own := fmt.Sprintf("%x", st.Header.ClusterId)
	if res, err := restore.Run(ctx, restore.Input{DataDir: m.DataDir, ClusterID: own}, func(string) {}); err != nil || !res.Skipped {
		t.Errorf("own cluster's data: %+v, %v", res, err)
	}
	other := "8e9e05c52164694d"
	_, err = restore.Run(ctx, restore.Input{DataDir: m.DataDir, ClusterID: other}, func(string) {})
	if !errors.Is(err, restore.ErrOtherCluster) || !strings.Contains(err.Error(), own) || !strings.Contains(err.Error(), other) {
		t.Fatalf("another cluster's data: %v, want ErrOtherCluster naming %s and %s", err, own, other)
	}
	t.Logf("refused: %v", err)
	if after := tree(t, m.DataDir); !reflect.DeepEqual(before, after) {
		t.Errorf("the refused data changed:\nbefore %v\nafter  %v", before, after)
	}
	// A directory that was never an etcd data directory has nothing to
	// refuse.
	if _, ok, err := restore.DataClusterID(t.TempDir()); ok || err != nil {
		t.Errorf("empty directory: ok %v, %v", ok, err)
	}
}

// tree lists the files under dir with their sizes.
func tree(t *testing.T, dir string) map[string]int64 {
	t.Helper()
	out := map[string]int64{}
	err := filepath.Walk(dir, func(p string, fi os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		if !fi.IsDir() {
			out[p] = fi.Size()
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}
