package multicluster

import (
	"context"
	"fmt"
	"testing"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdfedv1 "github.com/etcdfed/etcdfed/api/v1alpha1"
	"github.com/etcdfed/etcdfed/pkg/timing"
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
// round trip between every two member clusters of the ring, chooses Auto's
// floors (timing.MinHeartbeat and timing.MinElection, source Auto) and
// renders them into every EtcdMember.
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
	if tm.HeartbeatIntervalMillis != timing.MinHeartbeat || tm.ElectionTimeoutMillis != timing.MinElection || tm.Source != etcdfedv1.TimingSourceAuto {
		t.Errorf("timing at zero distance %+v, want Auto's floors %d/%d", tm, timing.MinHeartbeat, timing.MinElection)
	}
	for _, m := range ec.Status.Members {
		obj := &etcdfedv1.EtcdMember{}
		if err := memberCluster(t, in.Topology, m.Cluster).Client.Get(ctx, client.ObjectKey{Namespace: etcdfedv1.DefaultRingNamespace, Name: in.Etcd.ObjectName(m.Name)}, obj); err != nil {
			t.Fatal(err)
		}
		if e := obj.Spec.Etcd; deref(e.HeartbeatIntervalMillis) != fmt.Sprint(timing.MinHeartbeat) || deref(e.ElectionTimeoutMillis) != fmt.Sprint(timing.MinElection) || e.Timing != "" {
			t.Errorf("EtcdMember of %s renders %s/%s (timing %q) at zero distance, want %d/%d", m.Name, deref(e.HeartbeatIntervalMillis), deref(e.ElectionTimeoutMillis), e.Timing, timing.MinHeartbeat, timing.MinElection)
		}
	}
}
