package multicluster

import (
	"context"
	"fmt"
	"testing"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdfedv1 "github.com/etcdfed/etcdfed/api/v1alpha1"
	"github.com/etcdfed/etcdfed/spoke/etcdstatus"
)

// WaitForRoundTripsInput says which ring's matrix to wait for.
type WaitForRoundTripsInput struct {
	Hub  *Cluster
	Etcd *ManagedEtcd
	// Clusters are the member clusters between which every ordered pair
	// must be in the matrix.
	Clusters []string
	Timeout  time.Duration
}

// WaitForRoundTrips waits until the EtcdCluster's status.roundTrips holds
// every ordered pair of Clusters and status.timing is set (rule 15), and
// returns the EtcdCluster.
func WaitForRoundTrips(ctx context.Context, in WaitForRoundTripsInput) (*etcdfedv1.EtcdCluster, error) {
	var ec *etcdfedv1.EtcdCluster
	err := poll(ctx, orDefault(in.Timeout, time.Minute), fmt.Sprintf("EtcdCluster %s/%s with a round trip between every two of %v", in.Etcd.Namespace, in.Etcd.Name, in.Clusters), func(ctx context.Context) (string, error) {
		ec = &etcdfedv1.EtcdCluster{}
		if err := in.Hub.Client.Get(ctx, client.ObjectKey{Namespace: in.Etcd.Namespace, Name: in.Etcd.Name}, ec); err != nil {
			return "", err
		}
		have := map[[2]string]bool{}
		for _, r := range ec.Status.RoundTrips {
			have[[2]string{r.From, r.To}] = true
		}
		for _, from := range in.Clusters {
			for _, to := range in.Clusters {
				if from != to && !have[[2]string{from, to}] {
					return fmt.Sprintf("no round trip from %s to %s in %v", from, to, ec.Status.RoundTrips), nil
				}
			}
		}
		if ec.Status.Timing == nil {
			return "no status.timing", nil
		}
		return "", nil
	})
	return ec, err
}

// ZeroDistanceTimingSpecInput is a ring on the local environment.
type ZeroDistanceTimingSpecInput struct {
	T        testing.TB
	Topology *Topology
	Etcd     *ManagedEtcd
}

// ZeroDistanceTimingSpec: on loopback (zero distance), the hub measures a
// round trip between every two member clusters of the ring, chooses
// etcd's defaults (100 and 1000 ms, source Auto) and renders no timing
// flag into any EtcdMember, so that a ring that ran before rule 15 does
// not roll.
func ZeroDistanceTimingSpec(ctx context.Context, in ZeroDistanceTimingSpecInput) {
	t := in.T
	t.Helper()
	var clusters []string
	for _, c := range in.Topology.Members {
		clusters = append(clusters, c.Name)
	}
	start := time.Now()
	ec, err := WaitForRoundTrips(ctx, WaitForRoundTripsInput{Hub: in.Topology.Hub, Etcd: in.Etcd, Clusters: clusters})
	if err != nil {
		t.Fatal(err)
	}
	tm := ec.Status.Timing
	t.Logf("round trips between %v in status %v after the ring was ready; timing %d/%d %s: %s", clusters, time.Since(start).Round(100*time.Millisecond),
		tm.HeartbeatIntervalMillis, tm.ElectionTimeoutMillis, tm.Source, tm.Message)
	if tm.HeartbeatIntervalMillis != etcdfedv1.DefaultHeartbeatIntervalMillis || tm.ElectionTimeoutMillis != etcdfedv1.DefaultElectionTimeoutMillis || tm.Source != etcdfedv1.TimingSourceAuto {
		t.Errorf("timing at zero distance %+v, want etcd's defaults from Auto", tm)
	}
	for _, m := range ec.Status.Members {
		obj := &etcdfedv1.EtcdMember{}
		if err := memberCluster(t, in.Topology, m.Cluster).Client.Get(ctx, client.ObjectKey{Namespace: etcdfedv1.DefaultRingNamespace, Name: in.Etcd.ObjectName(m.Name)}, obj); err != nil {
			t.Fatal(err)
		}
		if e := obj.Spec.Etcd; e.HeartbeatIntervalMillis != nil || e.ElectionTimeoutMillis != nil || e.Timing != "" {
			t.Errorf("EtcdMember of %s renders timing at zero distance: %+v", m.Name, e)
		}
	}
	walFsyncReported(ctx, t, in.Topology, in.Etcd, ec)
}

// walFsyncReported: every member's spoke reports the tail of its WAL
// syncs (status.etcd.walFsync), read from the member's own metrics, once
// the warmup after its etcd started (etcdstatus.DiskWarmup) is over.
func walFsyncReported(ctx context.Context, t testing.TB, topo *Topology, etcd *ManagedEtcd, ec *etcdfedv1.EtcdCluster) {
	t.Helper()
	for _, m := range ec.Status.Members {
		key := client.ObjectKey{Namespace: etcdfedv1.DefaultRingNamespace, Name: etcd.ObjectName(m.Name)}
		c := memberCluster(t, topo, m.Cluster)
		var view etcdfedv1.MemberDiskView
		if err := poll(ctx, etcdstatus.DiskWarmup+2*time.Minute, m.Name+"'s WAL sync view", func(ctx context.Context) (string, error) {
			obj := &etcdfedv1.EtcdMember{}
			if err := c.Client.Get(ctx, key, obj); err != nil {
				return err.Error(), nil
			}
			v := obj.Status.Etcd
			if v == nil || v.WALFsync == nil {
				return "no status.etcd.walFsync", nil
			}
			if d := v.WALFsync; d.Syncs < 0 || d.P99Millis < 0 || d.MaxMillis < d.P99Millis || (d.Syncs > 0) != (d.P99Millis > 0) {
				return "", fmt.Errorf("status.etcd.walFsync of %s: %+v, want 0 <= p99 <= max, both 0 only without a sync", m.Name, *d)
			}
			view = *v.WALFsync
			return "", nil
		}); err != nil {
			t.Fatal(err)
		}
		t.Logf("%s's WAL syncs: p99 up to %d ms, slowest up to %d ms, %d syncs in %d s", m.Name, view.P99Millis, view.MaxMillis, view.Syncs, view.WindowSeconds)
	}
}
