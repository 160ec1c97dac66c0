package multicluster

import (
	"context"
	"sync"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
)

// TestScenarioDisruptionBudget: the ring's one disruption budget under a
// recorded workload. A member's pod cannot be evicted by default; nodes of
// members in two member clusters are drained at once (cordon, then the
// Eviction API): the hub grants one, whose eviction goes through, and the
// other is refused; while the first member is away (the ring degraded)
// the second is still refused; once the first is back as a ready voter the
// hub grants the second, and its eviction goes through.
func TestScenarioDisruptionBudget(t *testing.T) {
	ringScenario(t, ringScenarioInput{Ring: EtcdClusterSpecInput{Namespace: "budget", Name: "pdb", Domain: "pdb.etcd.test", Replicas: 3, WantZones: "1/1/1"}}, func(ctx context.Context, topo *Topology, etcd *ManagedEtcd) {
		ec, err := etcd.Get(ctx, topo.Hub)
		if err != nil {
			t.Fatal(err)
		}
		// Two members in two member clusters.
		where := map[string]*Cluster{}
		var names []string
		for _, m := range ec.Status.Members {
			where[m.Name] = memberCluster(t, topo, m.Cluster)
			names = append(names, m.Name)
		}
		a, b := names[0], names[1]
		nodes := map[string]string{}
		for _, m := range []string{a, b} {
			if err := WaitForBudget(ctx, WaitForBudgetInput{Cluster: where[m], Member: etcd.ObjectName(m), Allowed: 0}); err != nil {
				t.Fatal(err)
			}
			if nodes[m], err = MemberNode(ctx, where[m], etcd.ObjectName(m)); err != nil {
				t.Fatal(err)
			}
		}
		elections := StartElectionWatch(ctx, t, etcd.Client, ec)
		w := StartWorkload(ctx, t, StartWorkloadInput{Client: etcd.Client, Prefix: "disruption-budget/", WatchEachEndpoint: true})

		if err := Evict(ctx, where[a], etcd.ObjectName(a)); !apierrors.IsTooManyRequests(err) {
			t.Fatalf("evicting %s with no drain under way: %v, want 429 (the budget blocks it)", a, err)
		}

		start := time.Now()
		for _, m := range []string{a, b} {
			if err := SetCordon(ctx, where[m], nodes[m], true); err != nil {
				t.Fatal(err)
			}
		}
		t.Cleanup(func() {
			for _, m := range []string{a, b} {
				_ = SetCordon(context.Background(), where[m], nodes[m], false)
			}
		})
		first, err := WaitForDisrupt(ctx, WaitForDisruptInput{Hub: topo.Hub, Etcd: etcd, Step: "GrantDisruption"})
		if err != nil {
			t.Fatal(err)
		}
		second := b
		if first == b {
			second = a
		} else if first != a {
			t.Fatalf("the hub granted %s, which no drain asked for", first)
		}
		if err := WaitForBudget(ctx, WaitForBudgetInput{Cluster: where[first], Member: etcd.ObjectName(first), Allowed: 1}); err != nil {
			t.Fatal(err)
		}
		granted := time.Since(start)

		// Both drains evict at once.
		errs := map[string]error{}
		var mu sync.Mutex
		var wg sync.WaitGroup
		for _, m := range []string{a, b} {
			wg.Add(1)
			go func() {
				defer wg.Done()
				err := Evict(ctx, where[m], etcd.ObjectName(m))
				mu.Lock()
				errs[m] = err
				mu.Unlock()
			}()
		}
		wg.Wait()
		if errs[first] != nil {
			t.Fatalf("eviction of the granted member %s refused: %v", first, errs[first])
		}
		if !apierrors.IsTooManyRequests(errs[second]) {
			t.Fatalf("eviction of %s while %s is granted: %v, want 429", second, first, errs[second])
		}
		t.Logf("drains of %s (%s) and %s (%s): %s granted %.1fs after the cordons and evicted; %s refused: %v",
			a, where[a].Name, b, where[b].Name, first, granted.Seconds(), second, errs[second])

		if _, err := WaitForDisrupt(ctx, WaitForDisruptInput{Hub: topo.Hub, Etcd: etcd, Step: "AwaitReturn", Member: first}); err != nil {
			t.Fatal(err)
		}
		if err := Evict(ctx, where[second], etcd.ObjectName(second)); !apierrors.IsTooManyRequests(err) {
			t.Fatalf("eviction of %s while %s is away (ring degraded): %v, want 429", second, first, err)
		}
		// Evicted: gone, terminating, or a new pod pending (its node is
		// cordoned); never a new pod running.
		if p, err := podOf(ctx, where[first], etcd.ObjectName(first)); err != nil || (p != nil && p.DeletionTimestamp == nil && p.Spec.NodeName != "") {
			t.Fatalf("%s's pod after its eviction, node cordoned: %v %v (want none, terminating, or pending)", first, p, err)
		}

		// The first node's maintenance is over.
		back := time.Now()
		if err := SetCordon(ctx, where[first], nodes[first], false); err != nil {
			t.Fatal(err)
		}
		if _, err := WaitForDisrupt(ctx, WaitForDisruptInput{Hub: topo.Hub, Etcd: etcd, Step: "GrantDisruption", Member: second, Timeout: 3 * time.Minute}); err != nil {
			t.Fatal(err)
		}
		if err := WaitForBudget(ctx, WaitForBudgetInput{Cluster: where[second], Member: etcd.ObjectName(second), Allowed: 1}); err != nil {
			t.Fatal(err)
		}
		t.Logf("%s uncordoned: back as a ready voter and %s granted %.1fs later", first, second, time.Since(back).Seconds())
		if err := Evict(ctx, where[second], etcd.ObjectName(second)); err != nil {
			t.Fatalf("eviction of %s once %s is back: %v", second, first, err)
		}
		if err := SetCordon(ctx, where[second], nodes[second], false); err != nil {
			t.Fatal(err)
		}
		if _, err := WaitForEtcdClusterReady(ctx, WaitForEtcdClusterInput{Hub: topo.Hub, Namespace: etcd.Namespace, Name: etcd.Name, Replicas: 3, Tolerant: true}); err != nil {
			t.Fatal(err)
		}
		for _, m := range []string{a, b} {
			if err := WaitForBudget(ctx, WaitForBudgetInput{Cluster: where[m], Member: etcd.ObjectName(m), Allowed: 0}); err != nil {
				t.Fatal(err)
			}
		}
		t.Logf("two drains under the workload: longest gap between acknowledged writes %s; %s", w.MaxWriteGap().Round(time.Millisecond), elections.FailuresWithinElections(t, w))
		checkWorkload(ctx, t, w)
	})
}
