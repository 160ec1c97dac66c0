package multicluster

import (
	"context"
	"fmt"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdfedv1 "github.com/etcdfed/etcdfed/api/v1alpha1"
)

// TestScenarioFleetClusterLoss: 50 simulated rings and one real ring share
// four member clusters (dev/simcluster: real apiservers, the real spoke,
// simulated etcd members for the simulated rings, real etcd pods for the
// real one), the hub run with a fleet-wide limit of 5 disruptive
// operations. The member cluster holding a member of the real ring is lost
// (apiserver, node agent, pods, spoke): every ring it held is repaired
// into the others, never more than 5 rings with a disruptive operation in
// flight at once, and the real ring's recorded workload is linearizable,
// nothing acknowledged lost, its watches complete and in order.
func TestScenarioFleetClusterLoss(t *testing.T) {
	skipUnlessScenarios(t, "50 simulated rings and a real one on four member clusters, one cluster lost, repaired under a fleet limit")
	const (
		realNS = "fleet-real"
		simNS  = "fleet-sim"
		rings  = 50
		limit  = 5
	)
	f := startSimFleetWith(t, simFleetOptions{Clusters: 4, Zones: 1, RealNamespaces: []string{realNS},
		HubArgs: []string{fmt.Sprintf("--max-fleet-disruptions=%d", limit)}})
	ctx := context.Background()
	etcd := EtcdClusterSpec(ctx, EtcdClusterSpecInput{T: t, Topology: f.Topo, Namespace: realNS, Name: "real", Domain: "real.fleet.etcd.test", Replicas: 3})
	if err := ensureNamespace(ctx, f.Topo.Hub, simNS); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	for i := range rings {
		if err := f.Topo.Hub.Client.Create(ctx, simRing(simNS, fmt.Sprintf("sim%d", i), 3, nil)); err != nil {
			t.Fatal(err)
		}
	}
	if err := waitFleet(ctx, f, simNS, rings, 15*time.Minute, ""); err != nil {
		t.Fatal(err)
	}
	t.Logf("%d simulated rings Available and failure tolerant after %s", rings, time.Since(start).Round(time.Second))
	real, err := etcd.Get(ctx, f.Topo.Hub)
	if err != nil {
		t.Fatal(err)
	}
	lost := real.Status.Members[0].Cluster
	var all etcdfedv1.EtcdClusterList
	if err := f.Topo.Hub.Client.List(ctx, &all, client.InNamespace(simNS)); err != nil {
		t.Fatal(err)
	}
	affected := map[string]bool{"real": true}
	for _, ec := range all.Items {
		for _, m := range ec.Status.Members {
			if m.Cluster == lost {
				affected[ec.Name] = true
			}
		}
	}

	w := StartWorkload(ctx, t, StartWorkloadInput{Client: etcd.Client, Prefix: "fleetloss/"})
	waitForWorkloadProgress(ctx, t, w)
	t.Logf("losing %s: it holds members of %d rings, the real one among them", lost, len(affected))
	lostAt := time.Now()
	if err := f.LoseCluster(ctx, lost); err != nil {
		t.Fatal(err)
	}
	inFlightMax, waited := 0, map[string]bool{}
	err = poll(ctx, 25*time.Minute, fmt.Sprintf("every ring failure tolerant again without %s", lost), func(ctx context.Context) (string, error) {
		var list, reals etcdfedv1.EtcdClusterList
		if err := f.Topo.Hub.Client.List(ctx, &list, client.InNamespace(simNS)); err != nil {
			return "", err
		}
		if err := f.Topo.Hub.Client.List(ctx, &reals, client.InNamespace(realNS)); err != nil {
			return "", err
		}
		items := append(list.Items, reals.Items...)
		n, pending := 0, 0
		for i := range items {
			ec := &items[i]
			if op := ec.Status.Operation; op != nil && fleetLimited[op.Type] {
				n++
			}
			if c := meta.FindStatusCondition(ec.Status.Conditions, etcdfedv1.ConditionProgressing); c != nil && c.Reason == etcdfedv1.ReasonWaitingForFleetLimit {
				waited[ec.Namespace+"/"+ec.Name] = true
			}
			if !tolerantAway(ec, lost) {
				pending++
			}
		}
		inFlightMax = max(inFlightMax, n)
		if n > limit {
			t.Errorf("%d rings with a disruptive operation in flight, over the fleet limit of %d", n, limit)
		}
		if pending > 0 {
			return fmt.Sprintf("%d rings not failure tolerant yet, %d operations in flight", pending, n), nil
		}
		return "", nil
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("every ring failure tolerant again %s after the loss; at most %d disruptive operations in flight at once (limit %d); %d rings waited for the limit",
		time.Since(lostAt).Round(time.Second), inFlightMax, limit, len(waited))
	if len(waited) == 0 {
		t.Errorf("no ring waited for the fleet limit of %d while %d rings were repaired: the limit was not exercised", limit, len(affected))
	}
	// The places that freed woke the rings they went to (a waiting ring
	// otherwise asks again only every 15 s).
	if m, err := scrape(ctx, f.Topo.HubMetricsURL); err != nil {
		t.Errorf("the hub's metrics: %v", err)
	} else if wakes := m.sum("etcdfed_hub_fleet_wakes_total"); len(waited) > 0 && wakes == 0 {
		t.Errorf("%d rings waited for the fleet limit, and no freed place woke one (etcdfed_hub_fleet_wakes_total 0)", len(waited))
	} else {
		t.Logf("freed places woke waiting rings %.0f times", wakes)
	}
	checkWorkload(ctx, t, w)
}
