package multicluster

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/go-logr/logr/funcr"

	"github.com/etcdfed/etcdfed/dev/localenv"
	"github.com/etcdfed/etcdfed/dev/testenv"
)

// sharedSourceTopology starts a local environment of its own for one test:
// a hub cluster and one member cluster with three zones, the real hub and
// spoke, and every pod connecting from one shared source address (as on a
// machine without root or iptables) even where this machine could give
// each its own. It is stopped when the test ends; its state (logs of the
// hub, spoke, apiservers and pods) is kept when the test failed.
func sharedSourceTopology(t *testing.T) *Topology {
	t.Helper()
	testenv.SkipIfShort(t, "the local environment with the hub and a spoke (kube-apiservers, node agent, etcd)")
	bin, err := freshBin()
	if err != nil {
		t.Fatal(err)
	}
	state, err := os.MkdirTemp("", "multicluster-shared-source-")
	if err != nil {
		t.Fatal(err)
	}
	verbose := os.Getenv("MULTICLUSTER_LOG") != ""
	start := time.Now()
	env, err := startLocalEnv(context.Background(), localenv.Config{
		StateDir: state, Clusters: 1, ZonesPerCluster: 3, BinDir: bin, SharedSourceAddress: true,
		BackoffBase: time.Second, BackoffMax: 5 * time.Second,
		Log: funcr.New(func(prefix, args string) {
			if verbose {
				fmt.Fprintln(os.Stderr, prefix, args)
			}
		}, funcr.Options{}),
	})
	if err != nil {
		t.Fatalf("local environment in shared source address mode: %v", err)
	}
	t.Cleanup(func() {
		if err := env.Stop(); err != nil {
			t.Errorf("stop environment: %v", err)
		}
		if t.Failed() {
			t.Logf("kept for inspection: %s", state)
			return
		}
		_ = os.RemoveAll(state)
	})
	t.Logf("local environment (hub + 1 member cluster, 3 zones, shared source address) ready in %.1fs (logs in %s): %s",
		time.Since(start).Seconds(), filepath.Join(state, "logs"), env.SharedSourceAddress())
	topo, err := LocalTopology(env, nil)
	if err != nil {
		t.Fatal(err)
	}
	return topo
}

// TestRingExplainsRejectedPeers: members whose peers connect from one
// shared address while etcd checks each peer's address against its
// certificate reject each other, and the ring cannot form. The cause and
// the fix show in the EtcdCluster's conditions (the measured time is
// logged) and in every EtcdMember; the named fix forms the ring.
func TestRingExplainsRejectedPeers(t *testing.T) {
	topo := sharedSourceTopology(t)
	ctx := context.Background()
	etcd := PeerRejectionSpec(ctx, PeerRejectionSpecInput{T: t, Topology: topo, Namespace: "rejected", Name: "rejected", Domain: "rejected.etcd.test", Replicas: 3})
	DeleteEtcdClusterSpec(ctx, t, topo, etcd)
}
