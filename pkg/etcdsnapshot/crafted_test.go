package etcdsnapshot_test

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"
	"go.etcd.io/etcd/api/v3/mvccpb"

	"github.com/etcdfed/etcdfed/pkg/etcdsnapshot"
)

// Crafted snapshots: what an attacker who can write to the store (or a
// compromised member streaming a "snapshot") hands the hub. Each carries a
// correct appended sha256, so it passes the checksum and reaches bbolt.

const pageSize = 4096

// boltDB writes a small database with etcd's layout (a key bucket of
// revision keys and KeyValues, a meta bucket) and returns its bytes.
func boltDB(t testing.TB, keys int) []byte {
	t.Helper()
	path := filepath.Join(t.TempDir(), "db")
	// No freelist page (as etcd's own --experimental-backend-bbolt-freelist
	// ... sync off writes it): a reader rebuilds the freelist by walking
	// every page.
	db, err := bolt.Open(path, 0o600, &bolt.Options{PageSize: pageSize, NoFreelistSync: true})
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
			kv := mvccpb.KeyValue{Key: []byte(fmt.Sprintf("k/%05d", i)), Value: []byte(strings.Repeat("v", 100)), CreateRevision: int64(i), ModRevision: int64(i), Version: 1}
			v, err := kv.Marshal()
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

// withSum appends the sha256 etcd appends to a snapshot.
func withSum(db []byte) []byte {
	s := sha256.Sum256(db)
	return append(db, s[:]...)
}

// craftedSnapshots are the files of TestCraftedSnapshotsDoNotCrash, each a
// snapshot an attacker can write, with a correct appended sha256.
func craftedSnapshots(t testing.TB) map[string][]byte {
	db := boltDB(t, 2000)
	if len(db) < 16*pageSize {
		t.Fatalf("the database is %d bytes, too small to cut", len(db))
	}
	out := map[string][]byte{}
	// Cut just past half of bbolt's mapping (it maps the file rounded up
	// to a power of two): the pages the meta page points at are past the
	// end of the file and inside the mapping, where a read is a SIGBUS.
	mapped := 32 << 10
	for mapped < len(db) {
		mapped *= 2
	}
	cut := mapped/2 + pageSize
	if cut >= len(db) {
		t.Fatalf("the database is %d bytes: no cut inside its mapping of %d", len(db), mapped)
	}
	out["truncated"] = withSum(db[:cut])
	// Random bytes, sized like a database.
	rnd := make([]byte, 8*pageSize)
	rand.New(rand.NewSource(1)).Read(rnd)
	out["random"] = withSum(rnd)
	// A corrupt branch page: the root bucket's element count raised so
	// that bbolt's check walks off the page.
	out["corrupt page"] = withSum(corruptRoot(t, db))
	return out
}

// corruptRoot returns db with every branch and leaf page's element count
// set to its maximum: the first page bbolt's check reads below the root
// sends it reading elements far past the page (and past the mapping).
func corruptRoot(t testing.TB, db []byte) []byte {
	b := append([]byte(nil), db...)
	n := 0
	for off := 2 * pageSize; off+pageSize <= len(b); off += pageSize {
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

// TestCraftedSnapshotsDoNotCrash: a crafted snapshot (truncated, random
// bytes, a corrupt page), each with a correct sha256, is refused with an
// error wrapping ErrInvalid, and the process that checked it stays up. The
// check used to run bbolt in this process: the corrupt page panicked in
// bbolt's own checking goroutine and the truncated file faulted on a page
// past the end of the file, each killing the whole process (the hub).
func TestCraftedSnapshotsDoNotCrash(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "good.db")
	if err := os.WriteFile(good, withSum(boltDB(t, 50)), 0o600); err != nil {
		t.Fatal(err)
	}
	if info, err := etcdsnapshot.Verify(good); err != nil || info.TotalKeys != 50 {
		t.Fatalf("the uncrafted database: %+v %v", info, err)
	}
	for name, data := range craftedSnapshots(t) {
		t.Run(name, func(t *testing.T) {
			path := filepath.Join(dir, strings.ReplaceAll(name, " ", "-")+".db")
			if err := os.WriteFile(path, data, 0o600); err != nil {
				t.Fatal(err)
			}
			info, err := etcdsnapshot.Verify(path)
			if !errors.Is(err, etcdsnapshot.ErrInvalid) {
				t.Fatalf("Verify = %+v, %v; want an error wrapping ErrInvalid", info, err)
			}
			t.Logf("refused: %v", err)
		})
	}
}

// TestCheckLimits: the child's limits hold. A heap limit below what the
// check needs and a deadline shorter than it takes each end the check
// with ErrCheckerFailed (wrapping ErrInvalid) instead of the caller's
// memory or time.
func TestCheckLimits(t *testing.T) {
	path := filepath.Join(t.TempDir(), "big.db")
	if err := os.WriteFile(path, withSum(boltDB(t, 60000)), 0o600); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if _, err := etcdsnapshot.StatusWithLimits(ctx, path, etcdsnapshot.DefaultLimits); err != nil {
		t.Fatalf("within the default limits: %v", err)
	}
	for name, lim := range map[string]etcdsnapshot.Limits{
		"memory": {Timeout: time.Minute, MemoryBytes: 4 << 20},
		"time":   {Timeout: time.Millisecond, MemoryBytes: 1 << 30},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := etcdsnapshot.StatusWithLimits(ctx, path, lim)
			if !errors.Is(err, etcdsnapshot.ErrCheckerFailed) || !errors.Is(err, etcdsnapshot.ErrInvalid) {
				t.Fatalf("err = %v, want ErrCheckerFailed", err)
			}
			t.Logf("%v", err)
		})
	}
}

// FuzzStatus: any database behind a correct sha256 is checked without
// harm to the caller: an Info, or an error wrapping ErrInvalid. Seeds are
// a good database and the crafted ones. Each input is checked in its own
// child process (a few milliseconds each).
func FuzzStatus(f *testing.F) {
	f.Add(boltDB(f, 20))
	for _, data := range craftedSnapshots(f) {
		f.Add(data[:len(data)-sha256.Size])
	}
	dir := f.TempDir()
	f.Fuzz(func(t *testing.T, db []byte) {
		// etcd's size rule: the database is a whole number of sectors.
		db = db[:len(db)/512*512]
		path := filepath.Join(dir, fmt.Sprintf("f%d.db", rand.Int63()))
		if err := os.WriteFile(path, withSum(db), 0o600); err != nil {
			t.Fatal(err)
		}
		defer os.Remove(path)
		_, err := etcdsnapshot.StatusWithLimits(context.Background(), path, etcdsnapshot.Limits{Timeout: 20 * time.Second, MemoryBytes: 256 << 20})
		if err != nil && !errors.Is(err, etcdsnapshot.ErrInvalid) {
			t.Fatalf("an error that does not wrap ErrInvalid: %v", err)
		}
		if _, err := etcdsnapshot.Verify(path); err != nil && !errors.Is(err, etcdsnapshot.ErrInvalid) {
			t.Fatalf("Verify: an error that does not wrap ErrInvalid: %v", err)
		}
	})
}
