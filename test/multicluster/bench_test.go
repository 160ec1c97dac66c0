package multicluster

import (
	"context"
	"fmt"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdfedv1 "github.com/etcdfed/etcdfed/api/v1alpha1"
)

// Benchmarks of the hub on the local environment (hub + 3 member clusters
// in 3 zones, real etcd, real DNS). They measure; they assert nothing about
// speed. Each iteration uses a fresh EtcdCluster and deletes it after.

var benchSeq int

func benchCluster(b *testing.B, topo *Topology, replicas int, mutate func(*etcdfedv1.EtcdCluster)) (*ManagedEtcd, time.Duration) {
	b.Helper()
	ctx := context.Background()
	benchSeq++
	name := fmt.Sprintf("bench%d", benchSeq)
	ns := "bench"
	if err := ensureNamespace(ctx, topo.Hub, ns); err != nil {
		b.Fatal(err)
	}
	ec := &etcdfedv1.EtcdCluster{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: etcdfedv1.EtcdClusterSpec{
			Replicas: int32(replicas), Version: "3.6.16",
			DNS: etcdfedv1.DNSSpec{Domain: name + ".etcd.test", TTLSeconds: ptrTo[int32](5)},
			TLS: etcdfedv1.TLSSpec{PeerSkipClientSANVerification: !topo.PeerSourceIsPodIP},
		},
	}
	if mutate != nil {
		mutate(ec)
	}
	start := time.Now()
	if err := topo.Hub.Client.Create(ctx, ec); err != nil {
		b.Fatal(err)
	}
	got, err := WaitForEtcdClusterReady(ctx, WaitForEtcdClusterInput{Hub: topo.Hub, Namespace: ns, Name: name, Replicas: replicas, Tolerant: true})
	if err != nil {
		b.Fatal(err)
	}
	took := time.Since(start)
	tlsCfg, err := ClientTLS(ctx, topo.Hub, got)
	if err != nil {
		b.Fatal(err)
	}
	return &ManagedEtcd{Namespace: ns, Name: name, Domain: ec.Spec.DNS.Domain,
		Client: EtcdClientConfig{Endpoints: got.Status.Endpoints, DNSServers: topo.DNSServers, TLS: tlsCfg}}, took
}

// BenchmarkBootstrap: from EtcdCluster creation to Available with every
// member a ready voter and the placement failure tolerant.
func BenchmarkBootstrap(b *testing.B) {
	topo := hubTopology(b)
	for _, replicas := range []int{3, 5} {
		b.Run(fmt.Sprintf("replicas=%d", replicas), func(b *testing.B) {
			var total time.Duration
			for range b.N {
				m, took := benchCluster(b, topo, replicas, nil)
				total += took
				b.StopTimer()
				DeleteEtcdClusterSpec(context.Background(), b, topo, m)
				b.StartTimer()
			}
			b.ReportMetric(total.Seconds()/float64(b.N), "s/available")
		})
	}
}

// BenchmarkScaleUpStep: one membership addition, from the moment etcd lists
// the new learner to the moment it is a voter, sampled every 50 ms from
// etcd's member list; and the whole 3 -> 5 scale-up (two steps) from the
// spec change to every member ready.
func BenchmarkScaleUpStep(b *testing.B) {
	topo := hubTopology(b)
	ctx := context.Background()
	m, _ := benchCluster(b, topo, 3, nil)
	defer DeleteEtcdClusterSpec(ctx, b, topo, m)
	c, err := EtcdClient(m.Client)
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	var steps []time.Duration
	var scale time.Duration
	b.ResetTimer()
	for range b.N {
		seen := map[uint64]time.Time{}
		promoted := map[uint64]time.Duration{}
		sctx, stop := context.WithCancel(ctx)
		done := make(chan struct{})
		go func() {
			defer close(done)
			for sctx.Err() == nil {
				lctx, cancel := context.WithTimeout(sctx, time.Second)
				resp, err := c.MemberList(lctx, clientv3.WithSerializable())
				cancel()
				if err == nil {
					for _, mem := range resp.Members {
						if mem.IsLearner {
							if _, ok := seen[mem.ID]; !ok {
								seen[mem.ID] = time.Now()
							}
						} else if t, ok := seen[mem.ID]; ok {
							if _, ok := promoted[mem.ID]; !ok {
								promoted[mem.ID] = time.Since(t)
							}
						}
					}
				}
				sleepCtx(sctx, 50*time.Millisecond)
			}
		}()
		start := time.Now()
		if err := SetReplicas(ctx, topo.Hub, m, 5); err != nil {
			b.Fatal(err)
		}
		if _, err := WaitForEtcdClusterReady(ctx, WaitForEtcdClusterInput{Hub: topo.Hub, Namespace: m.Namespace, Name: m.Name, Replicas: 5, Tolerant: true}); err != nil {
			b.Fatal(err)
		}
		scale += time.Since(start)
		stop()
		<-done
		for _, d := range promoted {
			steps = append(steps, d)
		}
		b.StopTimer()
		if err := SetReplicas(ctx, topo.Hub, m, 3); err != nil {
			b.Fatal(err)
		}
		if _, err := WaitForEtcdClusterReady(ctx, WaitForEtcdClusterInput{Hub: topo.Hub, Namespace: m.Namespace, Name: m.Name, Replicas: 3, Tolerant: true}); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
	}
	if len(steps) == 0 {
		b.Fatal("no learner was observed being promoted")
	}
	var sum time.Duration
	for _, d := range steps {
		sum += d
	}
	b.ReportMetric(sum.Seconds()/float64(len(steps)), "s/learner-to-voter")
	b.ReportMetric(scale.Seconds()/float64(b.N), "s/scale-3-to-5")
}

// BenchmarkZoneFailure: five members over three zones (2/2/1), a recorded
// workload, then the zone holding two members is killed. Reported: the
// longest gap between acknowledged writes, and the time from the failure
// until five ready voters run in the surviving zones again (zone grace
// period 30 s included). The history is checked for linearizability.
func BenchmarkZoneFailure(b *testing.B) {
	topo := hubTopology(b)
	if topo.FailZone == nil {
		b.Skip("the topology cannot fail zones")
	}
	ctx := context.Background()
	var gaps, redundant time.Duration
	for range b.N {
		b.StopTimer()
		m, _ := benchCluster(b, topo, 5, func(ec *etcdfedv1.EtcdCluster) {
			ec.Spec.FailurePolicy.ZoneGracePeriod = &metav1.Duration{Duration: 30 * time.Second}
		})
		ec, err := m.Get(ctx, topo.Hub)
		if err != nil {
			b.Fatal(err)
		}
		perZone := map[string]int{}
		for _, mem := range ec.Status.Members {
			perZone[mem.Zone]++
		}
		victim := ""
		for z, n := range perZone {
			if n == 2 && (victim == "" || z < victim) {
				victim = z
			}
		}
		w := StartWorkload(ctx, b, StartWorkloadInput{Client: m.Client, Prefix: "zonefail/", WatchEachEndpoint: true})
		pctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		if err := w.WaitForProgress(pctx, 50); err != nil {
			b.Fatal(err)
		}
		cancel()
		b.StartTimer()
		start := time.Now()
		if err := topo.FailZone(ctx, victim, "kill"); err != nil {
			b.Fatal(err)
		}
		err = poll(ctx, 5*time.Minute, "five ready voters outside "+victim, func(ctx context.Context) (string, error) {
			got := &etcdfedv1.EtcdCluster{}
			if err := topo.Hub.Client.Get(ctx, client.ObjectKey{Namespace: m.Namespace, Name: m.Name}, got); err != nil {
				return "", err
			}
			ready := 0
			for _, mem := range got.Status.Members {
				if mem.Ready && mem.Zone != victim {
					ready++
				}
			}
			if ready != 5 || got.Status.Operation != nil {
				return describeEtcdCluster(got, fmt.Sprintf("%d ready outside %s", ready, victim)), nil
			}
			return "", nil
		})
		if err != nil {
			b.Fatal(err)
		}
		redundant += time.Since(start)
		b.StopTimer()
		w.Stop()
		gaps += w.MaxWriteGap()
		checkWorkload(ctx, b, w)
		if err := topo.RestoreZone(ctx, victim); err != nil {
			b.Fatal(err)
		}
		if _, err := WaitForEtcdClusterReady(ctx, WaitForEtcdClusterInput{Hub: topo.Hub, Namespace: m.Namespace, Name: m.Name, Replicas: 5, Tolerant: true, Timeout: 5 * time.Minute}); err != nil {
			b.Fatal(err)
		}
		DeleteEtcdClusterSpec(ctx, b, topo, m)
		b.StartTimer()
	}
	b.ReportMetric(gaps.Seconds()/float64(b.N), "s/max-write-gap")
	b.ReportMetric(redundant.Seconds()/float64(b.N), "s/to-full-redundancy")
}
