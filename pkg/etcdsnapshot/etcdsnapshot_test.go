package etcdsnapshot_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/etcdfed/etcdfed/dev/etcdtest"
	"github.com/etcdfed/etcdfed/pkg/etcdsnapshot"
)

// snapshotOf streams a snapshot from the first member into path with Save.
func snapshotOf(t *testing.T, c *etcdtest.Cluster, path string) (etcdsnapshot.Info, int64) {
	t.Helper()
	cl := c.NewClient(c.Members[0].ClientURL)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	// A linearizable read on the member waits until it applied every
	// write acknowledged so far (it may be a follower a write went past).
	if _, err := cl.Get(ctx, "sync", clientv3.WithCountOnly()); err != nil {
		t.Fatal(err)
	}
	st, err := cl.Status(ctx, c.Members[0].ClientURL)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := cl.SnapshotWithVersion(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Snapshot.Close()
	info, err := etcdsnapshot.Save(resp.Snapshot, path, st.Header.Revision)
	if err != nil {
		t.Fatalf("save: %v", err)
	}
	return info, st.Header.Revision
}

func put(t *testing.T, cl *clientv3.Client, n int, prefix string) int64 {
	t.Helper()
	var rev int64
	for i := range n {
		resp, err := cl.Put(context.Background(), fmt.Sprintf("%s%04d", prefix, i), strings.Repeat("v", 100))
		if err != nil {
			t.Fatal(err)
		}
		rev = resp.Header.Revision
	}
	return rev
}

// TestSaveChecksAndReads streams a real snapshot through Save and reads it
// back like etcdutl snapshot status.
func TestSaveChecksAndReads(t *testing.T) {
	c := etcdtest.Start(t, etcdtest.Options{Members: 1})
	lastRev := put(t, c.NewClient(), 500, "k/")
	path := filepath.Join(t.TempDir(), "snap.db")
	info, before := snapshotOf(t, c, path)
	if info.Revision < lastRev || info.Revision < before {
		t.Errorf("snapshot revision %d, last write at %d, member reported %d", info.Revision, lastRev, before)
	}
	if info.TotalKeys != 500 {
		t.Errorf("total keys %d, want 500", info.TotalKeys)
	}
	fi, _ := os.Stat(path)
	if info.Size != fi.Size() || !etcdsnapshot.HasChecksum(fi.Size()) {
		t.Errorf("info size %d, file %d", info.Size, fi.Size())
	}
	data, _ := os.ReadFile(path)
	sum := sha256.Sum256(data[:len(data)-sha256.Size])
	if fmt.Sprintf("%x", sum) != info.SHA256 || !bytes.Equal(sum[:], data[len(data)-sha256.Size:]) {
		t.Errorf("sha256 %s, file's appended %x", info.SHA256, data[len(data)-sha256.Size:])
	}
	again, err := etcdsnapshot.Verify(path)
	if err != nil || again != info {
		t.Errorf("Verify = %+v, %v; Save said %+v", again, err, info)
	}
	if info.StorageVersion == "" {
		t.Errorf("no storage version in %+v", info)
	}
}

// TestCorruptedSnapshotsRefused: a flipped byte, a cut stream and a database
// damaged before etcd hashed it are each refused with their own error, and
// Save leaves no file behind.
func TestCorruptedSnapshotsRefused(t *testing.T) {
	c := etcdtest.Start(t, etcdtest.Options{Members: 1})
	put(t, c.NewClient(), 300, "k/")
	good := filepath.Join(t.TempDir(), "good.db")
	snapshotOf(t, c, good)
	data, err := os.ReadFile(good)
	if err != nil {
		t.Fatal(err)
	}
	dbLen := len(data) - sha256.Size

	flipped := bytes.Clone(data)
	flipped[dbLen/2] ^= 0x40
	truncated := bytes.Clone(data[:len(data)-1000])
	// Damage bbolt's first meta page (its checksum no longer matches) and
	// the second one, then append a valid sha256 of the damaged data, as if
	// the member's own disk had rotted: only the database check sees it.
	rotten := bytes.Clone(data[:dbLen])
	for _, off := range []int{20, 4096 + 20} {
		for i := range 16 {
			rotten[off+i] ^= 0xff
		}
	}
	rsum := sha256.Sum256(rotten)
	rotten = append(rotten, rsum[:]...)

	for _, tc := range []struct {
		name string
		data []byte
		want error
		text string
	}{
		{"byte flipped in transit", flipped, etcdsnapshot.ErrChecksumMismatch, "does not match the checksum etcd appended"},
		{"stream cut short", truncated, etcdsnapshot.ErrNoChecksum, "no sha256 appended"},
		{"database rotten before hashing", rotten, etcdsnapshot.ErrCorrupt, "database check failed"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "s.db")
			_, err := etcdsnapshot.Save(bytes.NewReader(tc.data), path, 0)
			if !errors.Is(err, tc.want) || !errors.Is(err, etcdsnapshot.ErrInvalid) || !strings.Contains(err.Error(), tc.text) {
				t.Fatalf("Save: %v, want %v", err, tc.want)
			}
			if _, serr := os.Stat(path); !os.IsNotExist(serr) {
				t.Errorf("refused snapshot left on disk: %v", serr)
			}
			if err := os.WriteFile(path, tc.data, 0o600); err != nil {
				t.Fatal(err)
			}
			if _, err := etcdsnapshot.Verify(path); !errors.Is(err, tc.want) {
				t.Errorf("Verify: %v, want %v", err, tc.want)
			}
		})
	}
	t.Run("revision below what the member reported", func(t *testing.T) {
		_, err := etcdsnapshot.Save(bytes.NewReader(data), filepath.Join(t.TempDir(), "s.db"), 1<<40)
		if !errors.Is(err, etcdsnapshot.ErrStaleRevision) {
			t.Fatalf("Save: %v, want ErrStaleRevision", err)
		}
	})
	t.Run("stream error", func(t *testing.T) {
		_, err := etcdsnapshot.Save(io.MultiReader(bytes.NewReader(data[:5000]), errReader{}), filepath.Join(t.TempDir(), "s.db"), 0)
		if err == nil || errors.Is(err, etcdsnapshot.ErrInvalid) || !strings.Contains(err.Error(), "after 5000 bytes") {
			t.Fatalf("Save: %v, want the stream's error", err)
		}
	})
}

type errReader struct{}

func (errReader) Read([]byte) (int, error) { return 0, errors.New("connection reset") }

// TestRestoreBumpsAndCompacts restores a snapshot into a new data
// directory with a bumped, compacted revision and starts a real etcd on
// it: every key is there, revisions went up, and a watch from an old
// revision is told it was compacted instead of silently missing events.
func TestRestoreBumpsAndCompacts(t *testing.T) {
	c := etcdtest.Start(t, etcdtest.Options{Members: 3})
	lastRev := put(t, c.NewClient(), 200, "k/")
	path := filepath.Join(t.TempDir(), "snap.db")
	info, _ := snapshotOf(t, c, path)

	peer, client := etcdtest.FreeURL(t), etcdtest.FreeURL(t)
	dataDir := filepath.Join(t.TempDir(), "data")
	const bump = 1_000_000
	restored, err := etcdsnapshot.Restore(etcdsnapshot.RestoreInput{
		SnapshotPath: path, Name: "restored-0", PeerURLs: []string{peer},
		InitialCluster: "restored-0=" + peer, Token: "restore-test",
		DataDir: dataDir, BumpRevision: bump, MarkCompacted: true,
	})
	if err != nil {
		t.Fatal(err)
	}
	if restored.Revision != info.Revision || restored.SHA256 != info.SHA256 {
		t.Errorf("restored %+v, snapshot %+v", restored, info)
	}
	r := etcdtest.StartMember(t, "restored-0", dataDir, peer, client)
	cl := r.NewClient()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	got, err := cl.Get(ctx, "k/", clientv3.WithPrefix(), clientv3.WithCountOnly())
	if err != nil {
		t.Fatal(err)
	}
	if got.Count != 200 {
		t.Errorf("restored cluster holds %d keys, want 200", got.Count)
	}
	resp, err := cl.Put(ctx, "after-restore", "x")
	if err != nil {
		t.Fatal(err)
	}
	if resp.Header.Revision <= lastRev+bump {
		t.Errorf("first write after restore at revision %d, want above %d (snapshot %d + bump %d)", resp.Header.Revision, lastRev+bump, lastRev, bump)
	}
	wctx, wcancel := context.WithTimeout(ctx, 10*time.Second)
	defer wcancel()
	wr, ok := <-cl.Watch(wctx, "k/", clientv3.WithPrefix(), clientv3.WithRev(lastRev))
	if !ok || !errors.Is(wr.Err(), rpctypes.ErrCompacted) || wr.CompactRevision <= lastRev {
		t.Errorf("watch from old revision %d: ok=%v err=%v compactRevision=%d; want ErrCompacted", lastRev, ok, wr.Err(), wr.CompactRevision)
	}
}

func TestRestoreRefusesBadInput(t *testing.T) {
	for _, tc := range []struct {
		name string
		in   etcdsnapshot.RestoreInput
		want string
	}{
		{"compacted without bump", etcdsnapshot.RestoreInput{SnapshotPath: "x", Name: "a", DataDir: "d", PeerURLs: []string{"http://a:2380"}, InitialCluster: "a=http://a:2380", MarkCompacted: true}, "needs a revision bump"},
		{"member not in initial cluster", etcdsnapshot.RestoreInput{SnapshotPath: "x", Name: "a", DataDir: "d", PeerURLs: []string{"http://a:2380"}, InitialCluster: "b=http://b:2380"}, `member "a" is not in the initial cluster`},
		{"no data dir", etcdsnapshot.RestoreInput{SnapshotPath: "x", Name: "a", PeerURLs: []string{"http://a:2380"}, InitialCluster: "a=http://a:2380"}, "a data directory is required"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := etcdsnapshot.Restore(tc.in)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Restore: %v, want %q", err, tc.want)
			}
		})
	}
}

// TestRevisionOfEmptyAndCompactedStores: a ring never written to (member at
// revision 1, no key in the snapshot) and one whose newest revisions were
// deletions compacted away both give a snapshot at the member's revision,
// not the lower one etcdutl prints, so neither is refused as stale.
func TestRevisionOfEmptyAndCompactedStores(t *testing.T) {
	c := etcdtest.Start(t, etcdtest.Options{Members: 1})
	empty, before := snapshotOf(t, c, filepath.Join(t.TempDir(), "empty.db"))
	if before != 1 || empty.Revision != 1 || empty.TotalKeys != 0 {
		t.Errorf("empty ring: member at %d, snapshot %+v; want both at revision 1, no keys", before, empty)
	}

	cl := c.NewClient()
	put(t, cl, 10, "gone/")
	del, err := cl.Delete(context.Background(), "gone/", clientv3.WithPrefix())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cl.Compact(context.Background(), del.Header.Revision, clientv3.WithCompactPhysical()); err != nil {
		t.Fatal(err)
	}
	compacted, before := snapshotOf(t, c, filepath.Join(t.TempDir(), "compacted.db"))
	if compacted.Revision != del.Header.Revision || before != del.Header.Revision || compacted.TotalKeys != 0 {
		t.Errorf("after deleting every key and compacting at %d: member at %d, snapshot %+v", del.Header.Revision, before, compacted)
	}
}
