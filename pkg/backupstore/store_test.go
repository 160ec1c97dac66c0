package backupstore_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	etcdfedv1 "github.com/etcdfed/etcdfed/api/v1alpha1"
	"github.com/etcdfed/etcdfed/dev/s3test"
	"github.com/etcdfed/etcdfed/pkg/backupstore"
)

type storeCase struct {
	name  string
	spec  etcdfedv1.BackupStore
	creds map[string][]byte
	// objectPath is where a key's bytes land on disk, to look behind the API.
	objectPath func(key string) string
}

// stores returns the same test store twice: a real S3 server (versitygw)
// and a directory. Every store test runs on both.
func stores(t *testing.T) []storeCase {
	t.Helper()
	srv := s3test.StartT(t, "etcd-backups")
	dir := t.TempDir()
	return []storeCase{
		{
			name: "s3", spec: srv.Store("etcd-backups", "ring/eu", "unused"), creds: srv.Credentials(),
			objectPath: func(key string) string { return filepath.Join(srv.Dir, "etcd-backups", "ring/eu", key) },
		},
		{
			name: "file", spec: etcdfedv1.BackupStore{URL: "file://" + dir + "/backups"},
			objectPath: func(key string) string { return filepath.Join(dir, "backups", key) },
		},
	}
}

func randomFile(t *testing.T, size int) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "snap.db")
	data := make([]byte, size)
	_, _ = rand.Read(data)
	if err := os.WriteFile(p, data, 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func open(t *testing.T, sc storeCase) *backupstore.Store {
	t.Helper()
	s, err := backupstore.Open(context.Background(), sc.spec, sc.creds)
	if err != nil {
		t.Fatalf("open %s: %v", sc.spec.URL, err)
	}
	t.Cleanup(func() { _ = s.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := s.Check(ctx); err != nil {
		t.Fatalf("check %s: %v", sc.spec.URL, err)
	}
	return s
}

// TestUploadListDownload writes snapshots (one larger than a multipart
// part), reads the history back in order with sizes and metadata, and
// downloads one byte for byte.
func TestUploadListDownload(t *testing.T) {
	for _, sc := range stores(t) {
		t.Run(sc.name, func(t *testing.T) {
			ctx := context.Background()
			s := open(t, sc)
			dir := backupstore.ClusterDir("team-a", "main", "8e9e05c52164694d")
			base := time.Date(2026, 1, 2, 3, 0, 0, 0, time.UTC)
			sizes := []int{4096 + 32, 40<<20 + 32, 1024 + 32}
			var keys []string
			for i, size := range sizes {
				p := randomFile(t, size)
				key := backupstore.SnapshotKey(dir, base.Add(time.Duration(i)*time.Hour), int64(100+i))
				md := backupstore.Metadata{Namespace: "team-a", Name: "main", ClusterID: "8e9e05c52164694d", Revision: int64(100 + i), SizeBytes: int64(size), SHA256: "x", TakenAt: base}
				got, err := s.Upload(ctx, key, p, md)
				if err != nil {
					t.Fatalf("upload %s: %v", key, err)
				}
				if got != int64(size) {
					t.Errorf("upload %s: size %d, want %d", key, got, size)
				}
				keys = append(keys, key)
			}
			// A foreign object in the same directory is not a snapshot.
			if _, err := s.Upload(ctx, dir+"manual-copy.db", randomFile(t, 100), backupstore.Metadata{SizeBytes: 100}); err != nil {
				t.Fatal(err)
			}
			list, err := s.List(ctx, dir)
			if err != nil {
				t.Fatal(err)
			}
			if len(list) != 3 || list[0].Key != keys[2] || list[2].Key != keys[0] || list[1].Size != int64(sizes[1]) {
				t.Fatalf("list = %+v, want the three snapshots newest first", list)
			}
			latest, err := s.Latest(ctx, dir)
			if err != nil || latest.Revision != 102 {
				t.Fatalf("latest = %+v, %v", latest, err)
			}
			md, err := s.ReadMetadata(ctx, keys[1])
			if err != nil || md.Revision != 101 || md.SizeBytes != int64(sizes[1]) {
				t.Fatalf("metadata = %+v, %v", md, err)
			}
			out := filepath.Join(t.TempDir(), "down.db")
			if err := s.Download(ctx, keys[1], out); err != nil {
				t.Fatal(err)
			}
			want, _ := os.ReadFile(sc.objectPath(keys[1]))
			got, _ := os.ReadFile(out)
			if len(want) != sizes[1] || !bytes.Equal(got, want) {
				t.Fatalf("downloaded %d bytes, stored %d, equal %v", len(got), len(want), bytes.Equal(got, want))
			}
			if err := s.Download(ctx, dir+"20990101T000000.000Z-rev1.db", filepath.Join(t.TempDir(), "x")); !errors.Is(err, backupstore.ErrNotFound) {
				t.Errorf("download of a missing snapshot: %v, want ErrNotFound", err)
			}
			if !strings.HasPrefix(s.Location(keys[0]), sc.spec.URL+"/") {
				t.Errorf("location %q not under %q", s.Location(keys[0]), sc.spec.URL)
			}
		})
	}
}

// TestPrune deletes what retention no longer keeps, with sidecars, and
// leaves foreign objects and other clusters' snapshots alone.
func TestPrune(t *testing.T) {
	for _, sc := range stores(t) {
		t.Run(sc.name, func(t *testing.T) {
			ctx := context.Background()
			s := open(t, sc)
			dir := backupstore.ClusterDir("ns", "main", "aaaa")
			other := backupstore.ClusterDir("ns", "main", "bbbb")
			now := time.Date(2026, 1, 10, 0, 0, 0, 0, time.UTC)
			var keys []string
			for i := range 5 {
				key := backupstore.SnapshotKey(dir, now.Add(-time.Duration(i)*24*time.Hour), int64(50-i))
				if _, err := s.Upload(ctx, key, randomFile(t, 544), backupstore.Metadata{SizeBytes: 544}); err != nil {
					t.Fatal(err)
				}
				keys = append(keys, key)
			}
			otherKey := backupstore.SnapshotKey(other, now.Add(-100*24*time.Hour), 1)
			foreign := dir + "keep-me.txt"
			for _, k := range []string{otherKey, foreign} {
				if _, err := s.Upload(ctx, k, randomFile(t, 10), backupstore.Metadata{SizeBytes: 10}); err != nil {
					t.Fatal(err)
				}
			}
			deleted, remaining, err := s.Prune(ctx, dir, backupstore.Retention{MaxCount: 4, MaxAge: 60 * time.Hour}, now)
			if err != nil {
				t.Fatal(err)
			}
			if len(deleted) != 2 || deleted[0].Key != keys[4] || deleted[1].Key != keys[3] || remaining != 3 {
				t.Fatalf("deleted %+v, remaining %d; want the 4- and 3-day-old ones, 3 left", deleted, remaining)
			}
			for i, k := range keys {
				_, err := os.Stat(sc.objectPath(k))
				_, mderr := os.Stat(sc.objectPath(backupstore.MetadataKey(k)))
				if gone := i >= 3; gone != os.IsNotExist(err) || gone != os.IsNotExist(mderr) {
					t.Errorf("%s: stat %v, sidecar %v; want gone=%v", k, err, mderr, gone)
				}
			}
			for _, k := range []string{otherKey, foreign} {
				if _, err := os.Stat(sc.objectPath(k)); err != nil {
					t.Errorf("%s was touched: %v", k, err)
				}
			}
		})
	}
}

// TestUnreachableStores: a store that does not answer, refuses the
// credentials or lacks the bucket fails Check with ErrUnreachable and a
// message that says which, within the caller's deadline.
func TestUnreachableStores(t *testing.T) {
	srv := s3test.StartT(t, "exists")
	dead := srv.Store("exists", "", "")
	dead.S3.Endpoint = "http://127.0.0.1:1" // nothing listens on port 1
	wrongCreds := srv.Credentials()
	wrongCreds[etcdfedv1.BackupSecretAWSSecretAccessKey] = []byte("not-the-secret")
	notDir := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(notDir, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name  string
		spec  etcdfedv1.BackupStore
		creds map[string][]byte
		want  string
	}{
		{"nothing listening", dead, srv.Credentials(), "connection refused"},
		{"wrong secret", srv.Store("exists", "", ""), wrongCreds, "SignatureDoesNotMatch"},
		{"no such bucket", srv.Store("missing", "", ""), srv.Credentials(), "bucket does not exist"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, err := backupstore.Open(context.Background(), tc.spec, tc.creds)
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			err = s.Check(ctx)
			if !errors.Is(err, backupstore.ErrUnreachable) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("check: %v, want ErrUnreachable with %q", err, tc.want)
			}
		})
	}
	t.Run("file path is a file", func(t *testing.T) {
		_, err := backupstore.Open(context.Background(), etcdfedv1.BackupStore{URL: "file://" + notDir}, nil)
		if !errors.Is(err, backupstore.ErrUnreachable) {
			t.Fatalf("open: %v, want ErrUnreachable", err)
		}
	})
}

func TestIncompleteCredentials(t *testing.T) {
	for _, tc := range []struct {
		spec  etcdfedv1.BackupStore
		creds map[string][]byte
	}{
		{etcdfedv1.BackupStore{URL: "s3://bkt"}, map[string][]byte{etcdfedv1.BackupSecretAWSAccessKeyID: []byte("id")}},
		{etcdfedv1.BackupStore{URL: "s3://bkt"}, map[string][]byte{etcdfedv1.BackupSecretAWSSecretAccessKey: []byte("s")}},
		{etcdfedv1.BackupStore{URL: "gs://bkt"}, map[string][]byte{etcdfedv1.BackupSecretGCPServiceAccount: []byte("{not json")}},
		{etcdfedv1.BackupStore{URL: "azblob://cnt"}, map[string][]byte{etcdfedv1.BackupSecretAzureKey: []byte("a2V5")}},
	} {
		t.Setenv(etcdfedv1.BackupSecretAzureAccount, "")
		if _, err := backupstore.Open(context.Background(), tc.spec, tc.creds); !errors.Is(err, backupstore.ErrCredentials) {
			t.Errorf("%s with %v: %v, want ErrCredentials", tc.spec.URL, keys(tc.creds), err)
		}
	}
}

func keys(m map[string][]byte) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

// TestFutureDatedNameDoesNotStayLatest: an object named as taken in 2099
// (a writer's wrong clock, or one planted to stay "latest" and be restored
// instead of every later backup) counts as taken when the store received
// it: the snapshot written after it is the latest, and retention prunes
// it like any other. The name alone made it latest for ever before.
func TestFutureDatedNameDoesNotStayLatest(t *testing.T) {
	for _, sc := range stores(t) {
		t.Run(sc.name, func(t *testing.T) {
			ctx := context.Background()
			s := open(t, sc)
			dir := backupstore.ClusterDir("team-a", "main", "8e9e05c52164694d")
			upload := func(at time.Time, rev int64) string {
				key := backupstore.SnapshotKey(dir, at, rev)
				if _, err := s.Upload(ctx, key, randomFile(t, 4096+32), backupstore.Metadata{Revision: rev, SizeBytes: 4096 + 32}); err != nil {
					t.Fatal(err)
				}
				return key
			}
			planted := upload(time.Date(2099, 1, 1, 0, 0, 0, 0, time.UTC), 5)
			// The store's clock has whole seconds on some backends.
			time.Sleep(1100 * time.Millisecond)
			real := upload(time.Now(), 7)
			latest, err := s.Latest(ctx, dir)
			if err != nil {
				t.Fatal(err)
			}
			if latest.Key != real {
				t.Fatalf("latest is %s (size %d), want %s written after it", latest.Key, latest.Size, real)
			}
			_, remaining, err := s.Prune(ctx, dir, backupstore.Retention{MaxCount: 1}, time.Now())
			if err != nil || remaining != 1 {
				t.Fatalf("prune: %d remaining, %v", remaining, err)
			}
			list, err := s.List(ctx, dir)
			if err != nil || len(list) != 1 || list[0].Key != real {
				t.Fatalf("after pruning to one: %+v %v (the planted %s must go)", list, err, planted)
			}
		})
	}
}
