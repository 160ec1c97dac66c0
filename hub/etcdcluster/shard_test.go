package etcdcluster

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	mcmanager "sigs.k8s.io/multicluster-runtime/pkg/manager"
	mcreconcile "sigs.k8s.io/multicluster-runtime/pkg/reconcile"

	etcdfedv1 "github.com/etcdfed/etcdfed/api/v1alpha1"
	"github.com/etcdfed/etcdfed/dev/testenv"
	"github.com/etcdfed/etcdfed/hub/shard"
)

// TestShardLetsGoOfOtherShardsRings: the hub of shard a (Owns selects
// etcdfed.dev/shard=a, as cmd/hub's --shard a does) against a real
// apiserver holding rings of shards a and b. A pass over a ring of shard b
// (member-cluster events and the staleness timer enqueue every ring named
// in labels, whatever its shard) writes nothing to it: no finalizer, no
// status, and a ring of shard b being deleted keeps the finalizer (the
// delete path would delete its objects in every member cluster and release
// it). A domain held by a ring of shard b still counts as held: the ring of
// shard a that asks for it is refused (DomainInUse). The fleet limit of
// shard a is seeded from shard a's rings only: a Roll in flight in shard b
// holds no place of shard a's limit.
func TestShardLetsGoOfOtherShardsRings(t *testing.T) {
	api := testenv.StartT(t, "hub")[0]
	ctx := context.Background()
	mgr := startHubManager(t, api)
	if err := api.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "shards"}}); err != nil {
		t.Fatal(err)
	}
	shardA := labels.SelectorFromSet(labels.Set{"etcdfed.dev/shard": "a"})
	r := &Reconciler{Manager: mgr, Registry: noMemberClusters{}, PassTimeout: 30 * time.Second, ClusterReadTimeout: 3 * time.Second,
		Owns:  func(ec *etcdfedv1.EtcdCluster) bool { return shardA.Matches(labels.Set(ec.Labels)) },
		fleet: newFleetLimit(1)}
	create := func(name, shard, domain string, finalizers ...string) *etcdfedv1.EtcdCluster {
		t.Helper()
		ec := &etcdfedv1.EtcdCluster{ObjectMeta: metav1.ObjectMeta{Namespace: "shards", Name: name, Labels: map[string]string{"etcdfed.dev/shard": shard}, Finalizers: finalizers},
			Spec: *ring().ec.Spec.DeepCopy()}
		ec.Spec.DNS.Domain = domain
		if err := api.Client.Create(ctx, ec); err != nil {
			t.Fatal(err)
		}
		return ec
	}
	get := func(ec *etcdfedv1.EtcdCluster) *etcdfedv1.EtcdCluster {
		t.Helper()
		got := &etcdfedv1.EtcdCluster{}
		if err := api.Client.Get(ctx, client.ObjectKeyFromObject(ec), got); err != nil {
			t.Fatal(err)
		}
		return got
	}
	pass := func(ec *etcdfedv1.EtcdCluster) *etcdfedv1.EtcdCluster {
		t.Helper()
		if _, err := r.Reconcile(ctx, mcreconcile.Request{Request: reconcile.Request{NamespacedName: client.ObjectKeyFromObject(ec)}}); err != nil {
			t.Fatal(err)
		}
		return get(ec)
	}

	// A live ring of shard b, formed (its domain held), a Roll in flight.
	other := create("other", "b", "shared.etcd.test", Finalizer)
	before := other.DeepCopy()
	other.Status.ClusterID = "c0ffee"
	other.Status.Operation = &etcdfedv1.MembershipOperation{Type: etcdfedv1.OperationRoll, Member: "other-0", StartedAt: metav1.Now()}
	if err := api.Client.Status().Patch(ctx, other, client.MergeFrom(before)); err != nil {
		t.Fatal(err)
	}
	waitDomainCached(t, mgr, other)
	rv := get(other).ResourceVersion
	if got := pass(other); got.ResourceVersion != rv {
		t.Fatalf("shard a's hub wrote to shard b's ring (resourceVersion %s -> %s): finalizers %v, conditions %+v", rv, got.ResourceVersion, got.Finalizers, got.Status.Conditions)
	}

	// A ring of shard a asking for the domain shard b's ring holds.
	mine := pass(create("mine", "a", "shared.etcd.test"))
	if c := meta.FindStatusCondition(mine.Status.Conditions, etcdfedv1.ConditionDegraded); c == nil || c.Reason != etcdfedv1.ReasonDomainInUse {
		t.Fatalf("shard a's ring took the domain of shard b's ring: Degraded %+v", c)
	}
	// A ring of shard a of its own domain: its pass seeded the fleet limit,
	// from shard a's rings only.
	pass(create("own", "a", "own.etcd.test"))
	r.fleet.mu.Lock()
	inFlight := r.fleet.inFlight
	r.fleet.mu.Unlock()
	if _, held := inFlight[other.UID]; held || !r.fleet.seeded {
		t.Fatalf("shard a's fleet limit (seeded %v) holds a place for shard b's Roll: %v", r.fleet.seeded, inFlight)
	}

	// Shard b's ring deleted: its finalizer is shard b's hub's to remove.
	if err := api.Client.Delete(ctx, other); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Reconcile(ctx, mcreconcile.Request{Request: reconcile.Request{NamespacedName: client.ObjectKeyFromObject(other)}}); err != nil {
		t.Fatal(err)
	}
	got := &etcdfedv1.EtcdCluster{}
	if err := api.Client.Get(ctx, client.ObjectKeyFromObject(other), got); err != nil || !slices.Contains(got.Finalizers, Finalizer) {
		t.Fatalf("shard a's hub released shard b's deleted ring: finalizers %v, read %v", got.Finalizers, err)
	}
}

// waitDomainCached waits until the hub's cache holds ec as a formed ring
// of its domain.
func waitDomainCached(t *testing.T, mgr mcmanager.Manager, ec *etcdfedv1.EtcdCluster) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		var list etcdfedv1.EtcdClusterList
		if err := mgr.GetLocalManager().GetClient().List(context.Background(), &list, client.MatchingFields{indexDomain: ec.Spec.DNS.Domain}); err == nil {
			for _, o := range list.Items {
				if o.UID == ec.UID && o.Status.ClusterID == ec.Status.ClusterID {
					return
				}
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("the hub's cache never showed %s/%s with its domain", ec.Namespace, ec.Name)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestShardOverlapHoldsTheRing: the hubs of shards a (team=x) and b (team
// in (x,y)) each claim their shard against a real apiserver. A ring
// labelled team=x is of both: shard a's hub writes nothing to it (no
// finalizer, no status) and tells why once (ShardConflict, naming shard b
// and its hub); once shard b's hub releases its claim, the next pass takes
// the ring on. Without the claims (today's hub before them) shard a's hub
// acted on a ring shard b's hub acted on too.
func TestShardOverlapHoldsTheRing(t *testing.T) {
	api := testenv.StartT(t, "hub")[0]
	ctx := context.Background()
	mgr := startHubManager(t, api)
	for _, ns := range []string{"shards", "etcdfed-system"} {
		if err := api.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
			t.Fatal(err)
		}
	}
	a, err := shard.Parse("a", "team=x")
	if err != nil {
		t.Fatal(err)
	}
	b, err := shard.Parse("b", "team in (x,y)")
	if err != nil {
		t.Fatal(err)
	}
	claimsA := &shard.Claims{Shard: a, Client: api.Client, Namespace: "etcdfed-system", Identity: "hub-a"}
	claimsB := &shard.Claims{Shard: b, Client: api.Client, Namespace: "etcdfed-system", Identity: "hub-b"}
	for _, c := range []*shard.Claims{claimsA, claimsB} {
		if err := c.Renew(ctx); err != nil {
			t.Fatal(err)
		}
	}
	rec := events.NewFakeRecorder(10)
	r := &Reconciler{Manager: mgr, Registry: noMemberClusters{}, PassTimeout: 30 * time.Second, ClusterReadTimeout: 3 * time.Second,
		Owns: a.Owns, Claims: claimsA, Recorder: rec}
	ec := &etcdfedv1.EtcdCluster{ObjectMeta: metav1.ObjectMeta{Namespace: "shards", Name: "both", Labels: map[string]string{"team": "x"}},
		Spec: *ring().ec.Spec.DeepCopy()}
	ec.Spec.DNS.Domain = "both.etcd.test"
	if err := api.Client.Create(ctx, ec); err != nil {
		t.Fatal(err)
	}
	pass := func() (*etcdfedv1.EtcdCluster, reconcile.Result) {
		t.Helper()
		res, err := r.Reconcile(ctx, mcreconcile.Request{Request: reconcile.Request{NamespacedName: client.ObjectKeyFromObject(ec)}})
		if err != nil {
			t.Fatal(err)
		}
		got := &etcdfedv1.EtcdCluster{}
		if err := api.Client.Get(ctx, client.ObjectKeyFromObject(ec), got); err != nil {
			t.Fatal(err)
		}
		return got, res
	}
	rv := ec.ResourceVersion
	for range 2 {
		got, res := pass()
		if got.ResourceVersion != rv || len(got.Finalizers) > 0 {
			t.Fatalf("shard a's hub acted on a ring shard b claims too: resourceVersion %s -> %s, finalizers %v", rv, got.ResourceVersion, got.Finalizers)
		}
		if res.RequeueAfter == 0 {
			t.Fatal("a held ring is not looked at again")
		}
	}
	if e := drain(rec); len(e) != 1 || !strings.Contains(e[0], etcdfedv1.EventShardConflict) || !strings.Contains(e[0], `shard "b" (team in (x,y))`) || !strings.Contains(e[0], "hub-b") {
		t.Fatalf("events over two held passes: %q, want one ShardConflict naming shard b and its hub", e)
	}
	if err := claimsB.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if got, _ := pass(); !slices.Contains(got.Finalizers, Finalizer) {
		t.Fatalf("shard b's claim released, shard a's hub still holds the ring: finalizers %v", got.Finalizers)
	}
	if e := drain(rec); len(e) != 1 || !strings.Contains(e[0], "acts on it again") {
		t.Fatalf("events after the release: %q, want the hold's end", e)
	}
}

func drain(rec *events.FakeRecorder) []string {
	var out []string
	for {
		select {
		case e := <-rec.Events:
			out = append(out, e)
		default:
			return out
		}
	}
}
