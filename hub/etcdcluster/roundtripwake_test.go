package etcdcluster

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/priorityqueue"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	mcreconcile "sigs.k8s.io/multicluster-runtime/pkg/reconcile"

	etcdfedv1 "github.com/etcdfed/etcdfed/api/v1alpha1"
	"github.com/etcdfed/etcdfed/dev/testenv"
	"github.com/etcdfed/etcdfed/hub/liveness"
	"github.com/etcdfed/etcdfed/hub/registry"
)

// TestSpokeNewsWakesOnlyTheRingsItConcerns: against a real hub
// apiserver, eight rings: "near" passed over once with members in member-1
// and member-2 and their round trip recorded (1/2 ms), "leader" the same
// with leader placement Auto, "manual" the same with timing Manual (its
// matrix is read by nothing), "elsewhere" passed over with members in
// member-4 and member-5, "fresh" never passed over. An update of
// member-1's EtcdSpoke that moves only its round trips wakes the rings
// that record it: jitter wakes only "fresh" (its matrix is not known
// yet); a loaded prober's median at loopback (30 ms, then 54 ms: what
// twenty simulated spokes in one busy process measured) asks for etcd's
// default heartbeat as 1 ms does, so it wakes "leader" (Auto compares
// medians) and "fresh" but not "near", whose timing it cannot move (it
// used to wake "near" too, and the ring recorded it: the fleet at rest was
// not quiet); a distance of 100 ms to member-2 wakes "near", "leader" and
// "fresh", never "elsewhere" nor "manual" (a pair it recorded is not
// recorded again). Three rings have members in member-4 and member-5:
// "client" (a declared client of it runs in member-1), "selected" (it
// selects member-1 by label) and "unselected" (its label selects
// member-4 only). A round trip from member-1 to member-4 wakes "selected",
// whose matrix spans the pair. A change of member-1's gossip view wakes
// the rings that member-1 and a peer whose entry moved both concern:
// member-2 seen gone wakes the four with members in both, member-4 seen
// gone "client" and "selected" ("elsewhere" and "unselected" have nothing
// in member-1, the four nothing in member-4). Any other change of the spoke (a condition) wakes the rings member-1
// concerns: the four, "client" and "selected", not "elsewhere" nor
// "unselected". Every spoke update used to wake every ring: with 20
// member clusters, the hub's queue never emptied after a restart, and one
// cluster lost kept the whole fleet queued through the repair. The same
// rule wakes rings when a spoke Lease goes stale: member-4's wakes the
// four rings with members there.
func TestSpokeNewsWakesOnlyTheRingsItConcerns(t *testing.T) {
	api := testenv.StartT(t, "hub")[0]
	ctx := context.Background()
	mgr := startHubManager(t, api)
	if err := api.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "wake"}}); err != nil {
		t.Fatal(err)
	}
	r := &Reconciler{Manager: mgr, Registry: labelledClusters{"member-1": {"tier": "gold"}, "member-4": {"tier": "silver"}}, Tracker: liveness.NewTracker(nil), NodeTracker: liveness.NewTracker(nil), RingNamespace: etcdfedv1.DefaultRingNamespace,
		PassTimeout: 30 * time.Second, ClusterReadTimeout: 3 * time.Second, fleet: newFleetLimit(0)}
	at := metav1.NewTime(time.Now().Add(-time.Hour).Truncate(time.Second))
	create := func(name string, clusters []string, roundTrips []etcdfedv1.RoundTrip) *etcdfedv1.EtcdCluster {
		t.Helper()
		ec := &etcdfedv1.EtcdCluster{ObjectMeta: metav1.ObjectMeta{Namespace: "wake", Name: name, Finalizers: []string{Finalizer}},
			Spec: *ring().ec.Spec.DeepCopy()}
		ec.Spec.DNS.Domain = name + ".etcd.test"
		ec.Spec.Topology.Clusters = clusters
		if err := api.Client.Create(ctx, ec); err != nil {
			t.Fatal(err)
		}
		before := ec.DeepCopy()
		ec.Status.ClusterID, ec.Status.LastIncarnation = "c0ffee", int64(len(clusters))
		for i, c := range clusters {
			ec.Status.Members = append(ec.Status.Members, etcdfedv1.MemberStatus{Name: name + "-" + string(rune('0'+i)), Cluster: c, Zone: "zone-" + c, Incarnation: int64(i + 1), Ready: true})
		}
		ec.Status.RoundTrips = roundTrips
		if err := api.Client.Status().Patch(ctx, ec, client.MergeFrom(before)); err != nil {
			t.Fatal(err)
		}
		return ec
	}
	pass := func(ec *etcdfedv1.EtcdCluster) {
		t.Helper()
		if _, err := r.Reconcile(ctx, mcreconcile.Request{Request: reconcile.Request{NamespacedName: client.ObjectKeyFromObject(ec)}}); err != nil {
			t.Fatal(err)
		}
		if _, ok := r.matrices.get(ec.UID); !ok {
			t.Fatalf("%s: its pass left no matrix in memory", ec.Name)
		}
	}
	near := create("near", []string{"member-1", "member-2"}, []etcdfedv1.RoundTrip{
		{From: "member-1", To: "member-2", MedianMicros: 1000, P99Micros: 2000, ObservedAt: &at},
		{From: "member-2", To: "member-1", MedianMicros: 1000, P99Micros: 2000, ObservedAt: &at}})
	pass(near)
	leader := create("leader", []string{"member-1", "member-2"}, near.Status.RoundTrips)
	leader.Spec.Leader = &etcdfedv1.LeaderSpec{Placement: etcdfedv1.LeaderPlacementAuto}
	if err := api.Client.Update(ctx, leader); err != nil {
		t.Fatal(err)
	}
	pass(leader)
	manual := create("manual", []string{"member-1", "member-2"}, near.Status.RoundTrips)
	manual.Spec.Etcd.Timing = etcdfedv1.TimingManual
	if err := api.Client.Update(ctx, manual); err != nil {
		t.Fatal(err)
	}
	pass(manual)
	pass(create("elsewhere", []string{"member-4", "member-5"}, nil))
	create("fresh", []string{"member-1", "member-2"}, nil)
	for _, c := range []struct {
		name   string
		change func(*etcdfedv1.EtcdCluster)
	}{
		{"client", func(ec *etcdfedv1.EtcdCluster) {
			ec.Spec.Clients = []etcdfedv1.ClientSpec{{Name: "apiserver", Cluster: "member-1", Namespace: "default"}}
		}},
		{"selected", func(ec *etcdfedv1.EtcdCluster) {
			ec.Spec.Topology.Clusters, ec.Spec.Topology.ClusterSelector = nil, &metav1.LabelSelector{MatchLabels: map[string]string{"tier": "gold"}}
		}},
		{"unselected", func(ec *etcdfedv1.EtcdCluster) {
			ec.Spec.Topology.Clusters, ec.Spec.Topology.ClusterSelector = nil, &metav1.LabelSelector{MatchLabels: map[string]string{"tier": "silver"}}
		}},
	} {
		ec := create(c.name, []string{"member-4", "member-5"}, nil)
		c.change(ec)
		if err := api.Client.Update(ctx, ec); err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		pass(ec)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		var list etcdfedv1.EtcdClusterList
		if err := r.hub().List(ctx, &list, client.InNamespace("wake")); err == nil && len(list.Items) == 8 && cachedSelectors(list.Items) == 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the hub's cache does not hold the eight rings as updated")
		}
		time.Sleep(50 * time.Millisecond)
	}

	h := r.spokeEvents()("member-1", nil)
	spoke := &etcdfedv1.EtcdSpoke{ObjectMeta: metav1.ObjectMeta{Namespace: etcdfedv1.DefaultRingNamespace, Name: etcdfedv1.SpokeObjectName, ResourceVersion: "1"},
		Status: etcdfedv1.EtcdSpokeStatus{Zones: []string{"zone-member-1"}, ObservedAt: &at,
			Conditions: []metav1.Condition{{Type: etcdfedv1.ConditionGossipHealthy, Status: metav1.ConditionTrue, Reason: "Healthy", LastTransitionTime: at}},
			RoundTrips: []etcdfedv1.PeerRoundTrip{{Cluster: "member-2", MedianMicros: 1000, P99Micros: 2000, Samples: 128, ObservedAt: &at}}}}
	woken := func(change func(*etcdfedv1.EtcdSpoke)) []string {
		t.Helper()
		q := workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[mcreconcile.Request]())
		defer q.ShutDown()
		n := spoke.DeepCopy()
		n.ResourceVersion = "2"
		change(n)
		h.Update(ctx, event.TypedUpdateEvent[client.Object]{ObjectOld: spoke, ObjectNew: n}, q)
		var out []string
		for q.Len() > 0 {
			req, _ := q.Get()
			out = append(out, req.Name)
			q.Done(req)
		}
		slices.Sort(out)
		return out
	}
	later := metav1.NewTime(at.Add(time.Minute))
	for _, tc := range []struct {
		name   string
		change func(*etcdfedv1.EtcdSpoke)
		want   []string
	}{
		{"jitter of the round trip to member-2", func(s *etcdfedv1.EtcdSpoke) {
			s.Status.RoundTrips[0].MedianMicros, s.Status.RoundTrips[0].P99Micros, s.Status.RoundTrips[0].ObservedAt, s.Status.ObservedAt = 1300, 2600, &later, &later
		}, []string{"fresh"}},
		{"a loaded prober at loopback: member-2 at 30 ms", func(s *etcdfedv1.EtcdSpoke) {
			s.Status.RoundTrips[0].MedianMicros, s.Status.RoundTrips[0].P99Micros, s.Status.RoundTrips[0].ObservedAt, s.Status.ObservedAt = 30_000, 40_000, &later, &later
		}, []string{"fresh", "leader"}},
		{"a loaded prober at loopback: member-2 at 54 ms, p99 150 ms", func(s *etcdfedv1.EtcdSpoke) {
			s.Status.RoundTrips[0].MedianMicros, s.Status.RoundTrips[0].P99Micros, s.Status.RoundTrips[0].ObservedAt, s.Status.ObservedAt = 54_000, 150_000, &later, &later
		}, []string{"fresh", "leader"}},
		{"member-2 100 ms away", func(s *etcdfedv1.EtcdSpoke) {
			s.Status.RoundTrips[0].MedianMicros, s.Status.RoundTrips[0].P99Micros, s.Status.RoundTrips[0].ObservedAt, s.Status.ObservedAt = 100_000, 110_000, &later, &later
		}, []string{"fresh", "leader", "near"}},
		{"a round trip to member-4, which only \"selected\" spans with member-1", func(s *etcdfedv1.EtcdSpoke) {
			s.Status.RoundTrips = append(s.Status.RoundTrips, etcdfedv1.PeerRoundTrip{Cluster: "member-4", MedianMicros: 30_000, P99Micros: 40_000, Samples: 10, ObservedAt: &later})
		}, []string{"fresh", "selected"}},
		{"member-2 seen gone", func(s *etcdfedv1.EtcdSpoke) {
			s.Status.GossipView = []etcdfedv1.GossipPeerStatus{{Cluster: "member-2", Alive: false, Since: &later}}
		}, []string{"fresh", "leader", "manual", "near"}},
		{"member-4 seen gone", func(s *etcdfedv1.EtcdSpoke) {
			s.Status.GossipView = []etcdfedv1.GossipPeerStatus{{Cluster: "member-4", Alive: false, Since: &later}}
		}, []string{"client", "selected"}},
		{"gossip no longer healthy", func(s *etcdfedv1.EtcdSpoke) {
			s.Status.Conditions[0].Status = metav1.ConditionFalse
		}, []string{"client", "fresh", "leader", "manual", "near", "selected"}},
	} {
		if got := woken(tc.change); !slices.Equal(got, tc.want) {
			t.Errorf("%s: woke %v, want %v", tc.name, got, tc.want)
		}
	}
	// The spoke in a cache's first list (a hub starting) wakes the same
	// rings, low, as controller-runtime's handlers queue a first list;
	// created later, at the default.
	for _, initial := range []bool{true, false} {
		pq := priorityqueue.New[mcreconcile.Request]("wake")
		h.Create(ctx, event.TypedCreateEvent[client.Object]{Object: spoke, IsInInitialList: initial}, pq)
		var got []string
		for pq.Len() > 0 {
			req, priority, _ := pq.GetWithPriority()
			pq.Done(req)
			got = append(got, req.Name)
			if want := map[bool]int{true: handler.LowPriority, false: 0}[initial]; priority != want {
				t.Errorf("spoke created (first list %v): %s queued at %d, want %d", initial, req.Name, priority, want)
			}
		}
		pq.ShutDown()
		slices.Sort(got)
		if want := []string{"client", "fresh", "leader", "manual", "near", "selected"}; !slices.Equal(got, want) {
			t.Errorf("spoke created (first list %v): woke %v, want %v", initial, got, want)
		}
	}
	var stale []string
	for _, req := range r.ringsForScope(ctx, "member-4") {
		stale = append(stale, req.Name)
	}
	slices.Sort(stale)
	if want := []string{"client", "elsewhere", "selected", "unselected"}; !slices.Equal(stale, want) {
		t.Errorf("member-4's Lease stale: woke %v, want %v", stale, want)
	}
}

// labelledClusters is a registry of clusters with labels and no
// connection.
type labelledClusters map[string]map[string]string

func (l labelledClusters) List(context.Context) ([]registry.MemberCluster, error) {
	out := make([]registry.MemberCluster, 0, len(l))
	for name, labels := range l {
		out = append(out, registry.MemberCluster{Name: name, Labels: labels})
	}
	slices.SortFunc(out, func(a, b registry.MemberCluster) int { return strings.Compare(a.Name, b.Name) })
	return out, nil
}

func cachedSelectors(rings []etcdfedv1.EtcdCluster) int {
	n := 0
	for i := range rings {
		if rings[i].Spec.Topology.ClusterSelector != nil {
			n++
		}
	}
	return n
}
