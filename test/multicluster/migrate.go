package multicluster

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdfedv1 "github.com/etcdfed/etcdfed/api/v1alpha1"
)

// toleranceSampler samples, every interval, the failure tolerance etcd's
// own member list gives (healthy voters minus the quorum of all voters,
// each voter asked for its status) and the operation in the EtcdCluster's
// status, until stopped.
type toleranceSampler struct {
	mu sync.Mutex
	// samples is the number of moments sampled; zero lists the ones with
	// no failure tolerance, listFailed how often the member list did not
	// answer (no sample).
	samples, listFailed int
	zero                []string
	minTol              int
	maxVoters           int
	// ops are the operations seen, in order: key -> first and last seen.
	ops   []string
	first map[string]time.Time
	last  map[string]time.Time

	stop func()
	done chan struct{}
}

func startToleranceSampler(ctx context.Context, t testing.TB, hub *Cluster, m *ManagedEtcd, interval time.Duration) *toleranceSampler {
	t.Helper()
	c, err := EtcdClient(m.Client)
	if err != nil {
		t.Fatal(err)
	}
	s := &toleranceSampler{minTol: 1 << 30, first: map[string]time.Time{}, last: map[string]time.Time{}, done: make(chan struct{})}
	sctx, cancel := context.WithCancel(ctx)
	s.stop = cancel
	go func() {
		defer close(s.done)
		defer func() { _ = c.Close() }()
		for sctx.Err() == nil {
			at := time.Now()
			s.sample(sctx, hub, m, func(ctx context.Context) (voters, healthy int, desc string, err error) {
				lctx, cancel := context.WithTimeout(ctx, 3*time.Second)
				defer cancel()
				list, err := c.MemberList(lctx)
				if err != nil {
					return 0, 0, "", err
				}
				var parts []string
				for _, mem := range list.Members {
					if mem.IsLearner || len(mem.ClientURLs) == 0 {
						continue
					}
					voters++
					scctx, scancel := context.WithTimeout(ctx, 2*time.Second)
					_, serr := c.Status(scctx, mem.ClientURLs[0])
					scancel()
					state := "ok"
					if serr == nil {
						healthy++
					} else {
						state = "down"
					}
					parts = append(parts, fmt.Sprintf("%s[%x]=%s", mem.Name, mem.ID, state))
				}
				return voters, healthy, strings.Join(parts, " "), nil
			})
			select {
			case <-sctx.Done():
			case <-time.After(time.Until(at.Add(interval))):
			}
		}
	}()
	return s
}

func (s *toleranceSampler) sample(ctx context.Context, hub *Cluster, m *ManagedEtcd, list func(context.Context) (int, int, string, error)) {
	voters, healthy, desc, err := list(ctx)
	ec := &etcdfedv1.EtcdCluster{}
	gerr := hub.Client.Get(ctx, client.ObjectKey{Namespace: m.Namespace, Name: m.Name}, ec)
	now := time.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	if gerr == nil && ec.Status.Operation != nil {
		op := ec.Status.Operation
		key := fmt.Sprintf("%s %s (%s) %s->%s", op.Type, op.Member, op.Reason, domainOf(op.From), domainOf(op.To))
		if _, ok := s.first[key]; !ok {
			s.ops = append(s.ops, key)
			s.first[key] = op.StartedAt.Time
		}
		s.last[key] = now
	}
	if ctx.Err() != nil {
		return
	}
	if err != nil {
		s.listFailed++
		return
	}
	tol := healthy - (voters/2 + 1)
	s.samples++
	s.minTol = min(s.minTol, tol)
	s.maxVoters = max(s.maxVoters, voters)
	if tol <= 0 {
		s.zero = append(s.zero, fmt.Sprintf("%s: %d voters, %d healthy: %s", now.Format("15:04:05.000"), voters, healthy, desc))
	}
}

func domainOf(d *etcdfedv1.FailureDomain) string {
	if d == nil {
		return "-"
	}
	return d.Cluster
}

// finish stops the sampler and returns how long each operation took
// (from its startedAt to the last sample that showed it).
func (s *toleranceSampler) finish() map[string]time.Duration {
	s.stop()
	<-s.done
	s.mu.Lock()
	defer s.mu.Unlock()
	out := map[string]time.Duration{}
	for _, k := range s.ops {
		out[k] = s.last[k].Sub(s.first[k])
	}
	return out
}

// setAllowedClusters sets spec.topology.clusters.
func setAllowedClusters(ctx context.Context, hub *Cluster, m *ManagedEtcd, clusters []string) error {
	ec, err := m.Get(ctx, hub)
	if err != nil {
		return err
	}
	before := ec.DeepCopy()
	ec.Spec.Topology.Clusters = clusters
	return hub.Client.Patch(ctx, ec, client.MergeFrom(before))
}

// waitPlacedIn waits until the ring is ready with replicas members, all
// in clusters, no operation in flight.
func waitPlacedIn(ctx context.Context, hub *Cluster, m *ManagedEtcd, replicas int, clusters []string, timeout time.Duration) (*etcdfedv1.EtcdCluster, error) {
	var ec *etcdfedv1.EtcdCluster
	err := poll(ctx, timeout, fmt.Sprintf("every member of %s in %v", m.Name, clusters), func(pctx context.Context) (string, error) {
		got, err := WaitForEtcdClusterReady(pctx, WaitForEtcdClusterInput{Hub: hub, Namespace: m.Namespace, Name: m.Name, Replicas: replicas, Timeout: 2 * time.Second})
		if err != nil {
			return "not ready", nil
		}
		for _, mem := range got.Status.Members {
			if !slices.Contains(clusters, mem.Cluster) {
				return fmt.Sprintf("%s still in %s", mem.Name, mem.Cluster), nil
			}
		}
		ec = got
		return "", nil
	})
	return ec, err
}

// MigrateSpecInput is a ring of three members in From, moved to To.
type MigrateSpecInput struct {
	T        testing.TB
	Topology *Topology
	Etcd     *ManagedEtcd
	From, To []string
}

// MigrateSpec moves the ring from In.From to In.To with one spec change
// (spec.topology.clusters) under the recorded workload: every member
// moved make-before-break, one at a time, the leader last; failure
// tolerance, sampled from etcd's own member list and every voter's status
// call, is never 0; linearizable, nothing acknowledged lost, every watch
// complete. Then, beside it, today's break-before-make move for
// comparison: one member's pod deleted and its cluster cordoned (the old
// incarnation dead), and the ring moved back into a From cluster. It
// reports the longest write gap and the time per member moved of both.
func MigrateSpec(ctx context.Context, in MigrateSpecInput) {
	t := in.T
	t.Helper()
	hub := in.Topology.Hub
	replicas := 3

	// Make before break: the whole ring to other clusters.
	w := startScenarioWorkload(ctx, t, in.Etcd, "migrate")
	ec, err := in.Etcd.Get(ctx, hub)
	if err != nil {
		t.Fatal(err)
	}
	leader := ec.Status.Leader
	sampler := startToleranceSampler(ctx, t, hub, in.Etcd, 200*time.Millisecond)
	start := time.Now()
	if err := setAllowedClusters(ctx, hub, in.Etcd, in.To); err != nil {
		t.Fatal(err)
	}
	got, err := waitPlacedIn(ctx, hub, in.Etcd, replicas, in.To, 10*time.Minute)
	if err != nil {
		sampler.finish()
		t.Fatal(err)
	}
	total := time.Since(start)
	progress(ctx, t, w, 50, 30*time.Second)
	ops := sampler.finish()
	w.Stop()
	gap, gapAt := w.MaxWriteGapAt()
	t.Logf("make before break: %d members moved from %v to %v in %.1fs; longest gap between acknowledged writes %s (at %s); %d samples of etcd's member list, min failure tolerance %d, at most %d voters, member list unanswered %d times",
		replicas, in.From, in.To, total.Seconds(), gap.Round(time.Millisecond), gapAt.Format("15:04:05.000"), sampler.samples, sampler.minTol, sampler.maxVoters, sampler.listFailed)
	var moved []string
	for _, k := range sampler.ops {
		t.Logf("  %s: %.1fs", k, ops[k].Seconds())
		if strings.HasPrefix(k, string(etcdfedv1.OperationMove)+" ") {
			moved = append(moved, strings.Fields(k)[1])
		} else {
			t.Errorf("operation %s during the migration: every member must move make before break", k)
		}
	}
	if len(moved) != replicas {
		t.Errorf("moves seen %v, want every one of the %d members moved once", moved, replicas)
	} else if moved[len(moved)-1] != leader {
		t.Logf("the leader at the start, %s, was not moved last (%v): leadership may have changed during the migration", leader, moved)
	}
	if sampler.samples == 0 {
		t.Errorf("no sample of etcd's member list")
	}
	for _, z := range sampler.zero {
		t.Errorf("no failure tolerance at %s", z)
	}
	if sampler.maxVoters != replicas+1 {
		t.Errorf("at most %d voters sampled, want %d (the surge voter of each move)", sampler.maxVoters, replicas+1)
	}
	checkWorkload(ctx, t, w)
	for _, m := range got.Status.Members {
		t.Logf("  %s in %s, incarnation %d, dnsName %q", m.Name, m.Cluster, m.Incarnation, m.DNSName)
	}

	// Break before make, for comparison: the old incarnation dead first.
	victim := got.Status.Members[0]
	cl := clusterNamed(in.Topology, victim.Cluster)
	if cl == nil {
		t.Fatalf("no cluster %s", victim.Cluster)
	}
	w2 := startScenarioWorkload(ctx, t, in.Etcd, "migrate-bbm")
	cordon := cordonCluster(ctx, t, cl)
	cordon(true)
	defer cordon(false)
	if err := cl.Clientset.CoreV1().Pods(etcdfedv1.DefaultRingNamespace).Delete(ctx, in.Etcd.ObjectName(victim.Name), metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	err = poll(ctx, 2*time.Minute, victim.Name+" not ready", func(pctx context.Context) (string, error) {
		ec, err := in.Etcd.Get(pctx, hub)
		if err != nil {
			return "", err
		}
		if m, _ := memberOf(ec, victim.Name); m.Ready {
			return "still ready", nil
		}
		return "", nil
	})
	if err != nil {
		t.Fatal(err)
	}
	back := slices.Clone(in.To)
	back[slices.Index(back, victim.Cluster)] = in.From[0]
	sampler2 := startToleranceSampler(ctx, t, hub, in.Etcd, 200*time.Millisecond)
	start = time.Now()
	if err := setAllowedClusters(ctx, hub, in.Etcd, back); err != nil {
		t.Fatal(err)
	}
	if _, err := waitPlacedIn(ctx, hub, in.Etcd, replicas, back, 5*time.Minute); err != nil {
		sampler2.finish()
		t.Fatal(err)
	}
	total = time.Since(start)
	progress(ctx, t, w2, 50, 30*time.Second)
	ops2 := sampler2.finish()
	w2.Stop()
	gap2, gapAt2 := w2.MaxWriteGapAt()
	t.Logf("break before make (old incarnation of %s dead first): moved from %s to %s in %.1fs; longest gap between acknowledged writes %s (at %s); min failure tolerance %d over %d samples",
		victim.Name, victim.Cluster, in.From[0], total.Seconds(), gap2.Round(time.Millisecond), gapAt2.Format("15:04:05.000"), sampler2.minTol, sampler2.samples)
	sawReplace := false
	for _, k := range sampler2.ops {
		t.Logf("  %s: %.1fs", k, ops2[k].Seconds())
		sawReplace = sawReplace || strings.HasPrefix(k, string(etcdfedv1.OperationReplace)+" ")
	}
	if !sawReplace {
		t.Errorf("operations %v: want a Replace (break before make) for a member whose old incarnation is dead", sampler2.ops)
	}
	checkWorkload(ctx, t, w2)
}
