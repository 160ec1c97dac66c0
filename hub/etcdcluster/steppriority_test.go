package etcdcluster

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/priorityqueue"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	mcreconcile "sigs.k8s.io/multicluster-runtime/pkg/reconcile"

	etcdfedv1 "github.com/etcdfed/etcdfed/api/v1alpha1"
	"github.com/etcdfed/etcdfed/dev/testenv"
	"github.com/etcdfed/etcdfed/hub/planner"
)

// TestPassPriority: the pass after a step taken goes ahead of the default,
// a wait or a poll does not, and a ring waiting for the fleet limit goes
// behind everything.
func TestPassPriority(t *testing.T) {
	for _, tc := range []struct {
		name string
		d    decision
		want int
	}{
		{"a learner added", decision{plan: planner.Decision{Action: planner.ActAddLearner}}, stepPriority},
		{"a member removed", decision{plan: planner.Decision{Action: planner.ActRemoveMember}}, stepPriority},
		{"objects written", decision{plan: planner.Decision{Action: planner.ActCreateObjects}}, stepPriority},
		{"an operation begun", decision{plan: planner.Decision{Action: planner.ActBegin}}, stepPriority},
		{"a wait for a learner", decision{plan: planner.Decision{Action: planner.ActWait}}, 0},
		{"nothing to do", decision{plan: planner.Decision{Action: planner.ActNone}}, 0},
		{"waiting for the fleet limit", decision{plan: planner.Decision{Action: planner.ActWait}, fleetWait: true}, fleetWaitPriority},
	} {
		if got := *passPriority(&tc.d); got != tc.want {
			t.Errorf("%s: priority %d, want %d", tc.name, got, tc.want)
		}
	}
}

// TestMemberNewsOfARingInAnOperationGoesFirst: against a real hub
// apiserver, an EtcdMember event of a ring with an operation in flight
// queues the ring at stepPriority, ahead of a ring queued earlier at the
// default; one of a ring at rest at the default, behind it.
func TestMemberNewsOfARingInAnOperationGoesFirst(t *testing.T) {
	api := testenv.StartT(t, "hub")[0]
	ctx := context.Background()
	mgr := startHubManager(t, api)
	if err := api.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "step"}}); err != nil {
		t.Fatal(err)
	}
	r := &Reconciler{Manager: mgr, RingNamespace: etcdfedv1.DefaultRingNamespace}
	for _, name := range []string{"rest", "moving"} {
		ec := &etcdfedv1.EtcdCluster{ObjectMeta: metav1.ObjectMeta{Namespace: "step", Name: name}, Spec: *ring().ec.Spec.DeepCopy()}
		ec.Spec.DNS.Domain = name + ".etcd.test"
		if err := api.Client.Create(ctx, ec); err != nil {
			t.Fatal(err)
		}
		if name == "moving" {
			before := ec.DeepCopy()
			ec.Status.ClusterID = "c0ffee"
			ec.Status.Operation = &etcdfedv1.MembershipOperation{Type: etcdfedv1.OperationMove, Member: "moving-0", Step: "AddLearner", Incarnation: 2, StartedAt: metav1.Now(),
				From: &etcdfedv1.FailureDomain{Cluster: "member-1", Zone: "a"}, To: &etcdfedv1.FailureDomain{Cluster: "member-2", Zone: "b"}}
			if err := api.Client.Status().Patch(ctx, ec, client.MergeFrom(before)); err != nil {
				t.Fatal(err)
			}
		}
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		ec := &etcdfedv1.EtcdCluster{}
		if err := r.hub().Get(ctx, client.ObjectKey{Namespace: "step", Name: "moving"}, ec); err == nil && ec.Status.Operation != nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the hub's cache does not show the operation")
		}
		time.Sleep(50 * time.Millisecond)
	}
	member := func(ring, rv string) *etcdfedv1.EtcdMember {
		return &etcdfedv1.EtcdMember{ObjectMeta: metav1.ObjectMeta{Namespace: etcdfedv1.DefaultRingNamespace, Name: ring + "-0", ResourceVersion: rv,
			Labels: map[string]string{etcdfedv1.LabelClusterName: ring, etcdfedv1.LabelClusterNamespace: "step"}}}
	}
	h := r.mapByClusterLabel()("member-2", nil)
	q := priorityqueue.New[mcreconcile.Request]("step")
	defer q.ShutDown()
	h.Update(ctx, event.TypedUpdateEvent[client.Object]{ObjectOld: member("rest", "1"), ObjectNew: member("rest", "2")}, q)
	h.Update(ctx, event.TypedUpdateEvent[client.Object]{ObjectOld: member("moving", "1"), ObjectNew: member("moving", "2")}, q)
	want := []struct {
		ring     string
		priority int
	}{{"moving", stepPriority}, {"rest", 0}}
	for _, w := range want {
		req, priority, _ := q.GetWithPriority()
		q.Done(req)
		if req.Name != w.ring || priority != w.priority {
			t.Errorf("queued %s at %d, want %s at %d", req.Name, priority, w.ring, w.priority)
		}
	}
	// A resync of the moving ring's member (same version) is no news.
	h.Update(ctx, event.TypedUpdateEvent[client.Object]{ObjectOld: member("moving", "2"), ObjectNew: member("moving", "2")}, q)
	if req, priority, _ := q.GetWithPriority(); priority != handler.LowPriority {
		t.Errorf("a resync queued %s at %d, want %d", req.Name, priority, handler.LowPriority)
	}
}
