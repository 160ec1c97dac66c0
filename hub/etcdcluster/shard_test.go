package etcdcluster

import (
	"context"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	mcmanager "sigs.k8s.io/multicluster-runtime/pkg/manager"
	mcreconcile "sigs.k8s.io/multicluster-runtime/pkg/reconcile"

	etcdfedv1 "github.com/etcdfed/etcdfed/api/v1alpha1"
	"github.com/etcdfed/etcdfed/dev/testenv"
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
	mgr, err := mcmanager.New(api.Config, nil, manager.Options{Scheme: testenv.Scheme(),
		Metrics: metricsserver.Options{BindAddress: "0"}, HealthProbeBindAddress: "0"})
	if err != nil {
		t.Fatal(err)
	}
	if err := indexDomains(ctx, mgr); err != nil {
		t.Fatal(err)
	}
	if err := indexCAs(ctx, mgr); err != nil {
		t.Fatal(err)
	}
	mctx, stop := context.WithCancel(ctx)
	t.Cleanup(stop)
	go func() { _ = mgr.Start(mctx) }()
	if !mgr.GetLocalManager().GetCache().WaitForCacheSync(mctx) {
		t.Fatal("hub cache not synced")
	}
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
