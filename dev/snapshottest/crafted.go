package snapshottest

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"google.golang.org/protobuf/proto"
	"math/rand"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"
	"go.etcd.io/etcd/api/v3/mvccpb"

	etcdfedv1 "github.com/etcdfed/etcdfed/api/v1alpha1"
	"github.com/etcdfed/etcdfed/pkg/backupstore"
)

// Crafted snapshots: what an attacker who can write to a store (or a
// compromised member streaming a "snapshot") hands the hub. Each carries
// a correct appended sha256, so it passes the checksum and reaches bbolt.

// PageSize of the databases BoltDB writes.
const PageSize = 4096

// BoltDB writes a database with etcd's layout (a key bucket of revision
// keys and KeyValues, a meta bucket) of keys keys, without a freelist
// page (a reader rebuilds the freelist by walking every page), and
// returns its bytes.
func BoltDB(t testing.TB, keys int) []byte {
	t.Helper()
	path := filepath.Join(t.TempDir(), "db")
	db, err := bolt.Open(path, 0o600, &bolt.Options{PageSize: PageSize, NoFreelistSync: true})
	if err != nil {
		t.Fatal(err)
	}
	err = db.Update(func(tx *bolt.Tx) error {
		kb, err := tx.CreateBucket([]byte("key"))
		if err != nil {
			return err
		}
		if _, err := tx.CreateBucket([]byte("meta")); err != nil {
			return err
		}
		for i := 1; i <= keys; i++ {
			rev := make([]byte, 17)
			binary.BigEndian.PutUint64(rev, uint64(i))
			rev[8] = '_'
			kv := &mvccpb.KeyValue{Key: []byte(fmt.Sprintf("k/%05d", i)), Value: []byte(strings.Repeat("v", 100)), CreateRevision: int64(i), ModRevision: int64(i), Version: 1}
			v, err := proto.Marshal(kv)
			if err != nil {
				return err
			}
			if err := kb.Put(rev, v); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// WithSum appends the sha256 etcd appends to a snapshot.
func WithSum(db []byte) []byte {
	s := sha256.Sum256(db)
	return append(append([]byte(nil), db...), s[:]...)
}

// Crafted returns crafted snapshots, each with a correct appended sha256:
//
//   - truncated: cut just past half of bbolt's mapping (it maps the file
//     rounded up to a power of two), so the pages the meta page points at
//     are past the end of the file and inside the mapping: reading them is
//     a SIGBUS, which no Go code recovers;
//   - random: random bytes sized like a database;
//   - corrupt page: every branch and leaf page claims the most elements a
//     page header can, so bbolt walks off the page (a panic in its own
//     checking goroutine, outside any recover).
func Crafted(t testing.TB) map[string][]byte {
	db := BoltDB(t, 2000)
	out := map[string][]byte{}
	mapped := 32 << 10
	for mapped < len(db) {
		mapped *= 2
	}
	cut := mapped/2 + PageSize
	if cut >= len(db) {
		t.Fatalf("the database is %d bytes: no cut inside its mapping of %d", len(db), mapped)
	}
	out["truncated"] = WithSum(db[:cut])
	rnd := make([]byte, 8*PageSize)
	rand.New(rand.NewSource(1)).Read(rnd)
	out["random"] = WithSum(rnd)
	out["corrupt page"] = WithSum(corruptPages(t, db))
	return out
}

func corruptPages(t testing.TB, db []byte) []byte {
	b := append([]byte(nil), db...)
	n := 0
	for off := 2 * PageSize; off+PageSize <= len(b); off += PageSize {
		flags := binary.LittleEndian.Uint16(b[off+8:])
		if flags&0x01 != 0 || flags&0x02 != 0 { // branch or leaf page
			binary.LittleEndian.PutUint16(b[off+10:], 0xffff)
			n++
		}
	}
	if n == 0 {
		t.Fatal("no branch or leaf page to corrupt")
	}
	return b
}

// StoreBytes uploads data (a snapshot file, appended sha256 included) as
// the snapshot of namespace/name taken at at, with a sidecar that
// describes it truthfully (sha256, size, revision rev), signed under
// macKey when it is not nil. It returns the object's key.
func StoreBytes(t testing.TB, spec etcdfedv1.BackupStore, creds map[string][]byte, namespace, name, id string, at time.Time, rev int64, data []byte, macKey []byte) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	path := filepath.Join(t.TempDir(), "crafted.db")
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	s, err := backupstore.Open(ctx, spec, creds)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = s.Close() }()
	sum := data[len(data)-sha256.Size:]
	key := backupstore.SnapshotKey(backupstore.ClusterDir(namespace, name, id), at, rev)
	md := backupstore.Metadata{Namespace: namespace, Name: name, ClusterID: id, Revision: rev, SHA256: hex.EncodeToString(sum), SizeBytes: int64(len(data)), TakenAt: at}
	if macKey != nil {
		md.Sign(key, macKey)
	}
	if _, err := s.Upload(ctx, key, path, md); err != nil {
		t.Fatal(err)
	}
	return key
}
