package multicluster

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	etcdfedv1 "github.com/etcdfed/etcdfed/api/v1alpha1"
)

// TestScenarioLeaderPlacement: five members over three single-zone
// clusters, spec.leader preferring the zone that sorts last: the
// placement gives it two members (2/2/1); leadership moved out by hand is
// brought back by the hub; the zone killed and restored -> the leader is
// back there; the recorded workload loses nothing. At zero distance.
func TestScenarioLeaderPlacement(t *testing.T) {
	skipUnlessScenarios(t, "spec.leader: the leader moved to its preferred zone, and back after that zone's failure")
	topo := hubTopology(t)
	preferred := topo.Members[len(topo.Members)-1].Name
	zone := clusterZone(t, topo, preferred)
	ringScenario(t, ringScenarioInput{
		Topology: func(*testing.T) *Topology { return topo },
		Ring: EtcdClusterSpecInput{Namespace: "leader-placement", Name: "lead", Domain: "lead.etcd.test", Replicas: 5, WantZones: "2/2/1",
			Spec: func(s *etcdfedv1.EtcdClusterSpec) {
				s.Leader = &etcdfedv1.LeaderSpec{
					Preferred:          []etcdfedv1.LeaderPreference{{Zone: zone}},
					SettleSeconds:      ptrTo[int32](5),
					MinIntervalSeconds: ptrTo[int32](10),
				}
			}},
	}, func(ctx context.Context, topo *Topology, etcd *ManagedEtcd) {
		LeaderPlacementSpec(ctx, LeaderPlacementSpecInput{T: t, Topology: topo, Etcd: etcd, PreferredCluster: preferred, Zone: zone, WantZones: "2/2/1"})
	})
}

// clusterZone is the zone of a single-zone member cluster's nodes.
func clusterZone(t *testing.T, topo *Topology, cluster string) string {
	t.Helper()
	for _, c := range topo.Members {
		if c.Name != cluster {
			continue
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		var nodes corev1.NodeList
		if err := c.Client.List(ctx, &nodes); err != nil {
			t.Fatal(err)
		}
		for _, n := range nodes.Items {
			if z := n.Labels[corev1.LabelTopologyZone]; z != "" {
				return z
			}
		}
	}
	t.Fatalf("no zone found for member cluster %s", cluster)
	return ""
}
