package etcdcluster

import (
	"context"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdfedv1 "github.com/etcdfed/etcdfed/api/v1alpha1"
	"github.com/etcdfed/etcdfed/dev/testenv"

	"github.com/etcdfed/etcdfed/hub/planner"
	"github.com/etcdfed/etcdfed/pkg/topology"
)

// A member moved to another cluster keeps its DNS record, with its old
// address, until the new incarnation reports one. The record once vanished
// at the start of the move: when the moved member was etcd's leader, the
// hub could no longer reach it to move leadership away, and the move hung
// (found by the cordon scenario in test/multicluster).
func TestMovedMemberKeepsItsRecordUntilTheNewOneHasAnAddress(t *testing.T) {
	v := threeZoneView()
	for i, cv := range v.clusters {
		cv.spoke.Status.DNSAddresses = []string{"127.0.0.1:53"}
		v.ec.Status.Members[i].Address = "10.0.0." + string(rune('1'+i))
	}
	v.ec.Spec.DNS.Domain = "etcd.test"
	v.ec.UID = "uid-1"
	resolves := func(name, want string) {
		t.Helper()
		set, err := buildRecordSet(v, &v.ec.Status)
		if err != nil || set == nil {
			t.Fatalf("record set: %v (nil: %v)", err, set == nil)
		}
		for _, r := range set.Records() {
			if r.Name == name+".etcd.test." && r.Type == "A" {
				if len(r.Data) != 1 || r.Data[0] != want {
					t.Fatalf("%s resolves to %s, want %s", name, r.Data, want)
				}
				return
			}
		}
		t.Fatalf("no A record for %s in %v", name, set.Records())
	}
	resolves("main-1", "10.0.0.1")

	recordStep(v, &v.ec.Status, planner.Decision{
		Action:    planner.ActBegin,
		Operation: &planner.Operation{Type: "Replace", Member: "main-1"},
		Assign:    []planner.Assignment{{Member: "main-1", Domain: topology.Domain{Cluster: "member-2", Zone: "zone-2"}, Incarnation: 5}},
	})
	resolves("main-1", "10.0.0.1")
}

// Issue 37, "every member cluster answers for every ring": the zone's name
// servers are the clusters that host the ring's members, or that the ring
// names, never every registered cluster (before, member-4, hosting nothing
// of the ring, was one of its name servers, and its spoke answered for it).
func TestZoneServedOnlyWhereTheRingIs(t *testing.T) {
	nameServers := func(s *snapshot) []string {
		t.Helper()
		set, err := buildRecordSet(s, &s.ec.Status)
		if err != nil || set == nil {
			t.Fatalf("record set: %v (nil: %v)", err, set == nil)
		}
		var out []string
		for _, r := range set.Records() {
			if r.Type == "NS" {
				out = append(out, r.Data...)
			}
		}
		slices.Sort(out)
		return out
	}
	hosting := []string{"ns0.main.etcd.test.", "ns1.main.etcd.test.", "ns2.main.etcd.test."}
	s := ring()
	withFourthCluster(s)
	if got := nameServers(s); !slices.Equal(got, hosting) {
		t.Errorf("name servers %v, want the three hosting clusters' %v", got, hosting)
	}
	s.ec.Spec.Topology.Clusters = []string{"member-1", "member-2", "member-3", "member-4"}
	if got, want := nameServers(s), append(slices.Clone(hosting), "ns3.main.etcd.test."); !slices.Equal(got, want) {
		t.Errorf("member-4 named in spec.topology.clusters: name servers %v, want %v", got, want)
	}
	s.ec.Spec.Topology.Clusters = nil
	s.ec.Spec.Topology.ClusterSelector = &metav1.LabelSelector{}
	if got := nameServers(s); len(got) != 4 {
		t.Errorf("member-4 selected by clusterSelector: name servers %v, want four", got)
	}
	s.ec.Spec.Topology.ClusterSelector = nil
	// A declared consumer runs in member-4: it resolves the ring's names
	// through its cluster's spoke.
	s.ec.Spec.Clients = []etcdfedv1.ClientSpec{{Name: "apiserver", Cluster: "member-4"}}
	if got := nameServers(s); len(got) != 4 {
		t.Errorf("a consumer declared in member-4: name servers %v, want four", got)
	}
	s.ec.Spec.Clients = nil
	s.ec.Status.Operation = &etcdfedv1.MembershipOperation{Type: etcdfedv1.OperationMove, Member: "main-0", From: &etcdfedv1.FailureDomain{Cluster: "member-4", Zone: "zone-4"}}
	if got := nameServers(s); len(got) != 4 {
		t.Errorf("a member moving away from member-4: name servers %v, want four", got)
	}
	// An object of the ring a member cluster made itself makes it no
	// name server: the cluster could make it.
	s.ec.Status.Operation = nil
	s.byName["member-4"].members = map[string]*etcdfedv1.EtcdMember{"main-0": s.clusters[0].members["main-0"].DeepCopy()}
	if got := nameServers(s); !slices.Equal(got, hosting) {
		t.Errorf("member-4 holding an EtcdMember of the ring the ledger does not place there: name servers %v, want %v", got, hosting)
	}
}

// A member cluster that no longer hosts any of a ring's members (and is
// not named for it) loses the ring's EtcdDNSZone at the next pass, so its
// spoke stops answering for the ring (issue 37: before, every registered
// cluster kept every ring's zone). Against a real apiserver.
func TestZoneDeletedWhereTheRingIsNot(t *testing.T) {
	api := testenv.StartT(t, "member-4")[0]
	ctx := context.Background()
	if err := api.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: etcdfedv1.DefaultRingNamespace}}); err != nil {
		t.Fatal(err)
	}
	s := ring()
	withFourthCluster(s)
	for _, cs := range s.clusters[:3] {
		cs.engaged = false // only member-4 is written here
	}
	cs := s.byName["member-4"]
	cs.client = api.Client
	w := wantedRecords(s, &s.ec.Status)
	stale := desiredZone(s, cs, w.records)
	if err := api.Client.Create(ctx, stale); err != nil {
		t.Fatal(err)
	}
	cs.zones[stale.Name] = stale
	r := &Reconciler{}
	if err := r.applyDNS(ctx, s, w); err != nil {
		t.Fatal(err)
	}
	var zones etcdfedv1.EtcdDNSZoneList
	if err := api.Client.List(ctx, &zones, client.InNamespace(etcdfedv1.DefaultRingNamespace)); err != nil {
		t.Fatal(err)
	}
	if len(zones.Items) != 0 {
		t.Errorf("member-4 hosts none of %s's members and still holds its zone %s", s.ec.Name, zones.Items[0].Name)
	}

	// Named for the ring: it gets the zone again.
	s.ec.Spec.Topology.Clusters = []string{"member-1", "member-2", "member-3", "member-4"}
	cs.zones = map[string]*etcdfedv1.EtcdDNSZone{}
	if err := r.applyDNS(ctx, s, wantedRecords(s, &s.ec.Status)); err != nil {
		t.Fatal(err)
	}
	if err := api.Client.List(ctx, &zones, client.InNamespace(etcdfedv1.DefaultRingNamespace)); err != nil {
		t.Fatal(err)
	}
	if len(zones.Items) != 1 {
		t.Errorf("member-4 named in spec.topology.clusters holds %d zones of the ring, want 1", len(zones.Items))
	}
}
