package etcdsnapshot_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/etcdfed/etcdfed/dev/etcdtest"
	"github.com/etcdfed/etcdfed/dev/testenv"
	"github.com/etcdfed/etcdfed/pkg/etcdsnapshot"
	"github.com/etcdfed/etcdfed/pkg/etcdversion"
)

// A ring of every line etcdfed runs can be backed up and restored with the
// etcdutl library this module links (the 3.6 one): a snapshot of each
// line's newest release is saved and verified, restored into a new data
// directory, and served by that same release with every key.
func TestRestoreSnapshotOfEveryLine(t *testing.T) {
	testenv.SkipIfShort(t, "etcd processes")
	bin, err := testenv.BinDir()
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range etcdversion.Lines() {
		v := l.Newest.String()
		t.Run(v, func(t *testing.T) {
			binary := "etcd-" + v
			if _, err := os.Stat(filepath.Join(bin, binary)); err != nil {
				binary = "etcd" // bin/etcd is the 3.6 line's
				if v != "3.6.16" {
					t.Skipf("bin/etcd-%s is not built (hack/tools.sh)", v)
				}
			}
			c := etcdtest.Start(t, etcdtest.Options{Members: 1, Binary: binary})
			put(t, c.NewClient(), 100, "k/")
			path := filepath.Join(t.TempDir(), "snap.db")
			info, _ := snapshotOf(t, c, path)
			if _, err := etcdsnapshot.Verify(path); err != nil {
				t.Fatalf("verify the snapshot of %s: %v", v, err)
			}
			peer, client := etcdtest.FreeURL(t), etcdtest.FreeURL(t)
			dataDir := filepath.Join(t.TempDir(), "data")
			if _, err := etcdsnapshot.Restore(etcdsnapshot.RestoreInput{
				SnapshotPath: path, Name: "restored-0", PeerURLs: []string{peer},
				InitialCluster: "restored-0=" + peer, Token: "restore-" + v, DataDir: dataDir,
			}); err != nil {
				t.Fatalf("restore the snapshot of %s: %v", v, err)
			}
			r := etcdtest.StartMemberOn(t, binary, "restored-0", dataDir, peer, client)
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			got, err := r.NewClient().Get(ctx, "k/", clientv3.WithPrefix(), clientv3.WithCountOnly())
			if err != nil {
				t.Fatal(err)
			}
			if got.Count != 100 {
				t.Errorf("etcd %s restored from its snapshot (revision %d, storage version %q) holds %d keys, want 100", v, info.Revision, info.StorageVersion, got.Count)
			}
			t.Logf("etcd %s: snapshot at revision %d, storage version %q, restored and served", v, info.Revision, info.StorageVersion)
		})
	}
}
