package multicluster

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/etcdfed/etcdfed/dev/etcdtest"
)

// BenchmarkQuorumLossRecovery: a three-member ring over three clusters
// loses two of them under a recorded workload and is recovered from the
// survivor with `etcdfed recover --from-member` (QuorumLossRecoverySpec,
// which also checks the workload). It reports the time from the command to
// the first acknowledged write and to three ready members. In the same
// run, the baseline a human gets by hand: a bare three-member etcd on this
// machine, all three processes killed, the survivor started again with
// --force-new-cluster, and the time from that start to the first write it
// accepts.
func BenchmarkQuorumLossRecovery(b *testing.B) {
	topo := hubTopology(b)
	ctx := context.Background()
	for i := 0; i < b.N; i++ {
		m, _ := benchCluster(b, topo, 3, nil)
		times := QuorumLossRecoverySpec(ctx, QuorumLossRecoverySpecInput{T: b, Topology: topo, Etcd: m, Etcdfed: filepath.Join(hubFx.bin, "etcdfed")})
		b.ReportMetric(times.Writable.Seconds(), "s-recover-to-write")
		b.ReportMetric(times.Whole.Seconds(), "s-recover-to-3-ready")
		b.ReportMetric(times.Declared.Seconds(), "s-loss-to-declared")
		DeleteEtcdClusterSpec(ctx, b, topo, m)

		bare := bareForceNewCluster(b)
		b.ReportMetric(bare.Seconds(), "s-bare-force-new-cluster-to-write")
		b.Logf("etcdfed recover: first write after %.1fs, 3 ready after %.1fs (loss declared %.1fs after the kill, 30 s grace); bare etcd --force-new-cluster by hand: first write %.1fs after its start",
			times.Writable.Seconds(), times.Whole.Seconds(), times.Declared.Seconds(), bare.Seconds())
	}
}

// bareForceNewCluster is the by-hand baseline: the time from starting the
// survivor of a dead three-member etcd with --force-new-cluster to its
// first acknowledged write.
func bareForceNewCluster(b *testing.B) time.Duration {
	b.Helper()
	c := etcdtest.Start(b, etcdtest.Options{Members: 3, Name: "bare"})
	cl := c.NewClient()
	defer cl.Close()
	ctx := context.Background()
	for i := 0; i < 100; i++ {
		pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		_, err := cl.Put(pctx, "k", "v")
		cancel()
		if err != nil {
			b.Fatal(err)
		}
	}
	for _, m := range c.Members {
		m.Stop()
	}
	survivor := c.Members[0]
	start := time.Now()
	c.RestartWith(survivor, "--force-new-cluster")
	sc := c.NewClient(survivor.ClientURL)
	defer sc.Close()
	for {
		pctx, cancel := context.WithTimeout(ctx, time.Second)
		_, err := sc.Put(pctx, "k", "after")
		cancel()
		if err == nil {
			return time.Since(start)
		}
		if time.Since(start) > 2*time.Minute {
			b.Fatalf("bare survivor started with --force-new-cluster took no write in 2 min: %v", err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
