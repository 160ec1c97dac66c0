package etcdsnapshot_test

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"math/rand"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/etcdfed/etcdfed/dev/snapshottest"
	"github.com/etcdfed/etcdfed/pkg/etcdsnapshot"
)

// TestCraftedSnapshotsDoNotCrash: a crafted snapshot (truncated, random
// bytes, a corrupt page), each with a correct sha256, is refused with an
// error wrapping ErrInvalid, and the process that checked it stays up. The
// check used to run bbolt in this process: the corrupt page panicked in
// bbolt's own checking goroutine and the truncated file faulted on a page
// past the end of the file, each killing the whole process (the hub).
func TestCraftedSnapshotsDoNotCrash(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "good.db")
	if err := os.WriteFile(good, snapshottest.WithSum(snapshottest.BoltDB(t, 50)), 0o600); err != nil {
		t.Fatal(err)
	}
	if info, err := etcdsnapshot.Verify(good); err != nil || info.TotalKeys != 50 {
		t.Fatalf("the uncrafted database: %+v %v", info, err)
	}
	for name, data := range snapshottest.Crafted(t) {
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
	if err := os.WriteFile(path, snapshottest.WithSum(snapshottest.BoltDB(t, 60000)), 0o600); err != nil {
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
	f.Add(snapshottest.BoltDB(f, 20))
	for _, data := range snapshottest.Crafted(f) {
		f.Add(data[:len(data)-sha256.Size])
	}
	dir := f.TempDir()
	f.Fuzz(func(t *testing.T, db []byte) {
		// etcd's size rule: the database is a whole number of sectors.
		db = db[:len(db)/512*512]
		path := filepath.Join(dir, fmt.Sprintf("f%d.db", rand.Int63()))
		if err := os.WriteFile(path, snapshottest.WithSum(db), 0o600); err != nil {
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
