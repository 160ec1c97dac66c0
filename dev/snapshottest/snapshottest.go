// Package snapshottest puts snapshots of a real etcd (bin/etcd) into an
// object store the way the hub's backups do: streamed and checked with
// pkg/etcdsnapshot, uploaded with their sidecar by pkg/backupstore.
// Test-only: production code never imports it.
package snapshottest

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	etcdfedv1 "github.com/etcdfed/etcdfed/api/v1alpha1"
	"github.com/etcdfed/etcdfed/dev/etcdtest"
	"github.com/etcdfed/etcdfed/pkg/backupstore"
	"github.com/etcdfed/etcdfed/pkg/etcdsnapshot"
)

// Stored is one snapshot in a store.
type Stored struct {
	// Key of the object; Info what the snapshot holds.
	Key  string
	Info etcdsnapshot.Info
	// LastWrite is the revision of the last key written before it.
	LastWrite int64
}

// Store writes n keys k/0000... into a real one-member etcd, streams a
// snapshot from it and uploads it with its sidecar into store, under the
// directory of the EtcdCluster namespace/name with etcd cluster ID id,
// named as taken at at.
func Store(t testing.TB, spec etcdfedv1.BackupStore, creds map[string][]byte, namespace, name, id string, at time.Time, n int) Stored {
	t.Helper()
	return StoreSigned(t, spec, creds, namespace, name, id, at, n, nil)
}

// StoreSigned is Store with the sidecar signed under macKey, as the hub
// signs its backups (nil: unsigned, as before snapshots were signed).
func StoreSigned(t testing.TB, spec etcdfedv1.BackupStore, creds map[string][]byte, namespace, name, id string, at time.Time, n int, macKey []byte) Stored {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c := etcdtest.Start(t, etcdtest.Options{Members: 1})
	cl := c.NewClient()
	var last int64
	for i := range n {
		resp, err := cl.Put(ctx, fmt.Sprintf("k/%04d", i), strings.Repeat("v", 64))
		if err != nil {
			t.Fatal(err)
		}
		last = resp.Header.Revision
	}
	resp, err := cl.SnapshotWithVersion(ctx)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "snap.db")
	info, err := etcdsnapshot.Save(resp.Snapshot, path, last)
	_ = resp.Snapshot.Close()
	if err != nil {
		t.Fatal(err)
	}
	s, err := backupstore.Open(ctx, spec, creds)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = s.Close() }()
	key := backupstore.SnapshotKey(backupstore.ClusterDir(namespace, name, id), at, info.Revision)
	md := backupstore.Metadata{Namespace: namespace, Name: name, ClusterID: id, Revision: info.Revision, Hash: info.HashHex(),
		TotalKeys: info.TotalKeys, SHA256: info.SHA256, SizeBytes: info.Size, TakenAt: at, StorageVersion: info.StorageVersion}
	if macKey != nil {
		md.Sign(key, macKey)
	}
	if _, err := s.Upload(ctx, key, path, md); err != nil {
		t.Fatal(err)
	}
	return Stored{Key: key, Info: info, LastWrite: last}
}
