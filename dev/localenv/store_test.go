package localenv

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The apiservers' store runs the binary a ring of the release runs on a
// process node (the node agent's choice): etcd-<release> when built, else
// etcd; a state written before the choice existed keeps etcd.
func TestStoreEtcd(t *testing.T) {
	bin := t.TempDir()
	for name, mode := range map[string]os.FileMode{"etcd": 0o755, "etcd-3.7.3": 0o755, "etcd-3.5.35": 0o644} {
		if err := os.WriteFile(filepath.Join(bin, name), nil, mode); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct{ release, want string }{
		{"3.7.3", "etcd-3.7.3"},
		{"3.6.16", "etcd"}, // no etcd-3.6.16: bin/etcd is the 3.6 build
		{"3.5.35", "etcd"}, // not executable
		{"", "etcd"},
	} {
		if got := StoreEtcd(bin, tc.release); got != tc.want {
			t.Errorf("StoreEtcd(%q) = %q, want %q", tc.release, got, tc.want)
		}
	}

	st := newState(t.TempDir(), 3, Config{Clusters: 1, ZonesPerCluster: 1, NodesPerZone: 1, Members: 1, StoreEtcd: "etcd-3.7.3"})
	if got := st.StoreBinary(); got != "etcd-3.7.3" {
		t.Errorf("a new state's store runs %q, want etcd-3.7.3", got)
	}
	if got := (&State{}).StoreBinary(); got != "etcd" {
		t.Errorf("a state written before StoreEtcd runs %q, want etcd", got)
	}
}

// A bin directory without the store's binary is refused before anything
// starts, naming the binary (a demo bin/ has etcd-3.7.3 and no etcd).
func TestStartRefusesAMissingStore(t *testing.T) {
	bin := t.TempDir()
	if err := os.WriteFile(filepath.Join(bin, "kube-apiserver"), nil, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(bin, "etcd"), nil, 0o755); err != nil {
		t.Fatal(err)
	}
	_, err := Start(context.Background(), Config{StateDir: filepath.Join(t.TempDir(), "state"), BinDir: bin, StoreEtcd: "etcd-3.7.3"})
	if err == nil || !strings.Contains(err.Error(), "etcd-3.7.3 (the apiservers' store) missing") {
		t.Fatalf("Start with no etcd-3.7.3 in its bin directory: %v, want the store's binary named missing", err)
	}
}
