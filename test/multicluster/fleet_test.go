package multicluster

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdfedv1 "github.com/etcdfed/etcdfed/api/v1alpha1"
)

// simRing is an EtcdCluster for simulated clusters: replicas members over
// the listed member clusters (all eligible when none).
func simRing(ns, name string, replicas int32, clusters []string) *etcdfedv1.EtcdCluster {
	ec := &etcdfedv1.EtcdCluster{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: etcdfedv1.EtcdClusterSpec{
			Replicas: replicas, Version: "3.6.16",
			DNS: etcdfedv1.DNSSpec{Domain: name + "." + ns + ".fleet.test", TTLSeconds: ptrTo[int32](5)},
			// Simulated members have no peer traffic to check.
			TLS: etcdfedv1.TLSSpec{PeerSkipClientSANVerification: true},
			// Manual timing: Auto would follow the round trips the
			// simulated spokes' gossip measures, and a dozen memberlist
			// agents in one busy test process measure hundreds of ms
			// (194 to 312 ms p99 in the first 100-ring run), which rolled
			// every ring onto longer timeouts, twice.
			Etcd: etcdfedv1.EtcdConfig{Timing: etcdfedv1.TimingManual},
		},
	}
	ec.Spec.Topology.Clusters = clusters
	return ec
}

// tolerantAway: Available, every member ready and FailureTolerant, no
// operation, and no member recorded in the cluster away.
func tolerantAway(ec *etcdfedv1.EtcdCluster, away string) bool {
	if !ringReady(ec) || !meta.IsStatusConditionTrue(ec.Status.Conditions, etcdfedv1.ConditionFailureTolerant) {
		return false
	}
	for _, m := range ec.Status.Members {
		if m.Cluster == away {
			return false
		}
	}
	return true
}

// TestScenarioSimulatedClustersFormRing: the real hub forms a ring of three on
// four simulated member clusters (real apiservers, the real spoke's
// EtcdSpoke, Lease, gossip and DNS, simulated etcd members) until it is
// Available and failure tolerant, with EtcdMember status as the real
// spoke writes it; then one of its member clusters is lost, and the hub
// repairs the ring into the fourth. It took 162 s of `make test` (30
// Nov): a scenario, rotated in CI.
func TestScenarioSimulatedClustersFormRing(t *testing.T) {
	skipUnlessScenarios(t, "a ring formed on four simulated member clusters, one lost and repaired")
	f := startSimFleet(t, 4, 1, 0)
	ctx := context.Background()
	const ns = "simring"
	if err := ensureNamespace(ctx, f.Topo.Hub, ns); err != nil {
		t.Fatal(err)
	}
	if err := f.Topo.Hub.Client.Create(ctx, simRing(ns, "one", 3, nil)); err != nil {
		t.Fatal(err)
	}
	ec := &etcdfedv1.EtcdCluster{}
	wait := func(what string, timeout time.Duration, ok func(*etcdfedv1.EtcdCluster) bool) {
		t.Helper()
		err := poll(ctx, timeout, what, func(ctx context.Context) (string, error) {
			if err := f.Topo.Hub.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "one"}, ec); err != nil {
				return "", err
			}
			if !ok(ec) {
				return describeEtcdCluster(ec, "waiting"), nil
			}
			return "", nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	wait("ring one Available and failure tolerant", 5*time.Minute, func(ec *etcdfedv1.EtcdCluster) bool { return tolerantAway(ec, "") })
	if r := f.Fleet.Ring(string(ec.UID)); r == nil || len(r.Members()) != 3 || r.Leader() == 0 {
		t.Fatalf("the simulated ring of %s: %v", ec.UID, r)
	}
	// Each member's EtcdMember, in its cluster, reports what the real
	// spoke reports of a ready voter. The simulated spoke writes it in its
	// own time, after the hub's last change to the object (make test under
	// load once read a status a generation behind): each is read until it
	// holds, for at most a minute.
	for _, m := range ec.Status.Members {
		mc := f.member(m.Cluster)
		err := poll(ctx, time.Minute, fmt.Sprintf("%s's EtcdMember in %s to report a ready voter", m.Name, m.Cluster), func(ctx context.Context) (string, error) {
			var list etcdfedv1.EtcdMemberList
			if err := mc.Client.List(ctx, &list, client.InNamespace(etcdfedv1.DefaultRingNamespace), client.MatchingLabels{etcdfedv1.LabelClusterUID: string(ec.UID)}); err != nil {
				return "", err
			}
			if len(list.Items) != 1 {
				return fmt.Sprintf("%d EtcdMembers of the ring in %s", len(list.Items), m.Cluster), nil
			}
			return simMemberProblems(list.Items[0], m), nil
		})
		if err != nil {
			t.Error(err)
		}
	}

	lost := ec.Status.Members[0].Cluster
	t.Logf("losing %s", lost)
	lostAt := time.Now()
	if err := f.LoseCluster(ctx, lost); err != nil {
		t.Fatal(err)
	}
	wait(fmt.Sprintf("ring one failure tolerant again without %s", lost), 10*time.Minute, func(ec *etcdfedv1.EtcdCluster) bool { return tolerantAway(ec, lost) })
	t.Logf("failure tolerant again without %s after %s", lost, time.Since(lostAt).Round(time.Second))
	if r := f.Fleet.Ring(string(ec.UID)); len(r.Members()) != 3 || r.Leader() == 0 {
		t.Fatalf("the simulated ring after the repair: %+v", r.Members())
	}
}

// simMemberProblems says what in em's status differs from what the real
// spoke reports of ring member m as a ready voter ("" when nothing).
func simMemberProblems(em etcdfedv1.EtcdMember, m etcdfedv1.MemberStatus) string {
	var out []string
	for _, c := range []string{etcdfedv1.ConditionStorageReady, etcdfedv1.ConditionExposed, etcdfedv1.ConditionPodReady, etcdfedv1.ConditionMemberHealthy, etcdfedv1.ConditionPeerConnections} {
		if !meta.IsStatusConditionTrue(em.Status.Conditions, c) {
			out = append(out, fmt.Sprintf("%s not True: %+v", c, meta.FindStatusCondition(em.Status.Conditions, c)))
		}
	}
	if v := em.Status.Etcd; v == nil || v.ID != m.ID || v.IsLearner || v.LeaderID == "" || v.Peers == nil || len(v.Peers.Active) != 2 {
		out = append(out, fmt.Sprintf("etcd view %+v, want member %s, a voter with a leader and two active peers", v, m.ID))
	}
	if em.Status.Address == "" || em.Status.ClientURL == "" || em.Status.Zone != m.Zone || em.Status.ObservedGeneration != em.Generation {
		out = append(out, fmt.Sprintf("address %q, client URL %q, zone %q (want %q), observed generation %d of %d", em.Status.Address, em.Status.ClientURL, em.Status.Zone, m.Zone, em.Status.ObservedGeneration, em.Generation))
	}
	return strings.Join(out, "; ")
}
