package backupstore_test

import (
	"errors"
	"testing"
	"time"

	"github.com/etcdfed/etcdfed/pkg/backupstore"
	"github.com/etcdfed/etcdfed/pkg/etcdsnapshot"
)

// TestMAC: a signed sidecar checks under its key and object key; any
// changed field, another key, another name (an old snapshot renamed to
// look newer) or no MAC at all is refused with ErrUnauthenticated, which
// wraps etcdsnapshot.ErrInvalid.
func TestMAC(t *testing.T) {
	key, err := backupstore.NewMACKey()
	if err != nil {
		t.Fatal(err)
	}
	other, _ := backupstore.NewMACKey()
	dir := backupstore.ClusterDir("team-a", "main", "8e9e05c52164694d")
	at := time.Date(2026, 11, 1, 3, 0, 0, 0, time.UTC)
	obj := backupstore.SnapshotKey(dir, at, 42)
	md := backupstore.Metadata{Namespace: "team-a", Name: "main", UID: "u-1", ClusterID: "8e9e05c52164694d", Revision: 42,
		SHA256: "ab12", SizeBytes: 4128, TakenAt: at}
	md.Sign(obj, key)
	if err := md.CheckMAC(obj, key); err != nil {
		t.Fatalf("signed sidecar refused: %v", err)
	}
	tests := map[string]struct {
		md  func(backupstore.Metadata) backupstore.Metadata
		obj string
		key []byte
	}{
		"another key":      {key: other},
		"renamed object":   {obj: backupstore.SnapshotKey(dir, at.Add(24*time.Hour), 42)},
		"sha256 changed":   {md: func(m backupstore.Metadata) backupstore.Metadata { m.SHA256 = "cd34"; return m }},
		"revision changed": {md: func(m backupstore.Metadata) backupstore.Metadata { m.Revision = 43; return m }},
		"size changed":     {md: func(m backupstore.Metadata) backupstore.Metadata { m.SizeBytes = 1; return m }},
		"ring changed":     {md: func(m backupstore.Metadata) backupstore.Metadata { m.Name = "other"; return m }},
		"no MAC":           {md: func(m backupstore.Metadata) backupstore.Metadata { m.MAC = ""; return m }},
		"garbage MAC":      {md: func(m backupstore.Metadata) backupstore.Metadata { m.MAC = "hmac-sha256:zz"; return m }},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			m, o, k := md, obj, key
			if tc.md != nil {
				m = tc.md(m)
			}
			if tc.obj != "" {
				o = tc.obj
			}
			if tc.key != nil {
				k = tc.key
			}
			err := m.CheckMAC(o, k)
			if !errors.Is(err, backupstore.ErrUnauthenticated) || !errors.Is(err, etcdsnapshot.ErrInvalid) {
				t.Fatalf("CheckMAC = %v, want ErrUnauthenticated", err)
			}
		})
	}
}
