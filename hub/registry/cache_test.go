package registry

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/cluster"

	etcdfedv1 "github.com/etcdfed/etcdfed/api/v1alpha1"
	"github.com/etcdfed/etcdfed/dev/testenv"
)

// TestMemberClusterCannotFillTheHubsCache: the hub's cache of a member
// cluster holds the EtcdMembers and EtcdDNSZones etcdfed wrote for rings,
// and of those only etcdfed's labels and bounded annotations. Before, it
// held every EtcdMember and EtcdDNSZone of the ring namespace whole: a
// compromised member cluster could make the hub (512 Mi) hold any number
// of objects, each with up to 256 KiB of annotations and labels.
func TestMemberClusterCannotFillTheHubsCache(t *testing.T) {
	member := testenv.StartT(t, "member")[0]
	ctx := context.Background()
	ns := testenv.NamespaceT(t, member, "ring")
	owned := map[string]string{etcdfedv1.LabelManagedBy: etcdfedv1.ManagedByValue, etcdfedv1.LabelClusterUID: "0b5f7d1e-0000-4000-8000-000000000001"}
	big := strings.Repeat("x", 100<<10)
	mk := func(name string, labels map[string]string, annotations map[string]string) *etcdfedv1.EtcdMember {
		return &etcdfedv1.EtcdMember{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: labels, Annotations: annotations},
			Spec: etcdfedv1.EtcdMemberSpec{
				Cluster:    etcdfedv1.ClusterReference{Name: "main", Namespace: "default", UID: "0b5f7d1e-0000-4000-8000-000000000001"},
				MemberName: "main-0", Incarnation: 1, Image: "gcr.io/etcd-development/etcd:v3.6.16",
				DNSName: "main-0.etcd.example.com", TLS: etcdfedv1.MemberTLS{SecretName: "main-0-tls"},
			},
		}
	}
	withOwned := func(extra map[string]string) map[string]string {
		l := map[string]string{}
		for k, v := range owned {
			l[k] = v
		}
		for k, v := range extra {
			l[k] = v
		}
		return l
	}
	for _, o := range []*etcdfedv1.EtcdMember{
		mk("hubs", withOwned(map[string]string{"junk.example/label": "x"}), map[string]string{"etcdfed.dev/fenced": "true", "junk.example/blob": big, "etcdfed.dev/blob": big}),
		mk("foreign-0", nil, map[string]string{"junk.example/blob": big}),
		mk("foreign-1", map[string]string{etcdfedv1.LabelManagedBy: etcdfedv1.ManagedByValue}, nil),
	} {
		if err := member.Client.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	zone := &etcdfedv1.EtcdDNSZone{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "foreign-zone"},
		Spec: etcdfedv1.EtcdDNSZoneSpec{Cluster: etcdfedv1.ClusterReference{Name: "main", Namespace: "default", UID: "0b5f7d1e-0000-4000-8000-000000000001"}, Domain: "etcd.example.com"}}
	if err := member.Client.Create(ctx, zone); err != nil {
		t.Fatal(err)
	}

	c, err := cluster.New(member.Config, func(o *cluster.Options) { *o = MemberCacheOptions(testenv.Scheme(), ns, 0) })
	if err != nil {
		t.Fatal(err)
	}
	cctx, cancel := context.WithCancel(ctx)
	t.Cleanup(cancel)
	go func() { _ = c.Start(cctx) }()
	// The informers start on first read, as the hub's watches start them.
	if _, err := c.GetCache().GetInformer(cctx, &etcdfedv1.EtcdMember{}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.GetCache().GetInformer(cctx, &etcdfedv1.EtcdDNSZone{}); err != nil {
		t.Fatal(err)
	}
	sctx, scancel := context.WithTimeout(cctx, 30*time.Second)
	defer scancel()
	if !c.GetCache().WaitForCacheSync(sctx) {
		t.Fatal("member cache not synced")
	}
	var members etcdfedv1.EtcdMemberList
	if err := c.GetClient().List(ctx, &members, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, m := range members.Items {
		names = append(names, m.Name)
	}
	if len(members.Items) != 1 || members.Items[0].Name != "hubs" {
		t.Fatalf("the hub's cache holds EtcdMembers %v, want only the one etcdfed wrote (hubs)", names)
	}
	got := members.Items[0]
	if _, ok := got.Labels["junk.example/label"]; ok {
		t.Errorf("a foreign label is held: %v", got.Labels)
	}
	if got.Labels[etcdfedv1.LabelClusterUID] == "" || got.Annotations["etcdfed.dev/fenced"] != "true" {
		t.Errorf("etcdfed's own metadata lost: labels %v, annotations %v", got.Labels, keys(got.Annotations))
	}
	for k, v := range got.Annotations {
		if len(v) > MaxCachedAnnotation {
			t.Errorf("annotation %s of %d bytes held", k, len(v))
		}
	}
	var zones etcdfedv1.EtcdDNSZoneList
	if err := c.GetClient().List(ctx, &zones, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	if len(zones.Items) != 0 {
		t.Fatalf("the hub's cache holds an EtcdDNSZone etcdfed never wrote: %s", zones.Items[0].Name)
	}
}

func keys(m map[string]string) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

// TestMemberClusterCannotMakeTheHubHoldAnyNumber: a member cluster may
// label as many objects as it likes as etcdfed's own; the hub caches at
// most its bound of each kind, whether they come with the first list or
// later through the watch (issue 37: before, the filter and the trimming
// bounded each object, not their number).
func TestMemberClusterCannotMakeTheHubHoldAnyNumber(t *testing.T) {
	member := testenv.StartT(t, "member")[0]
	ctx := context.Background()
	ns := testenv.NamespaceT(t, member, "ring")
	zone := func(i int) *etcdfedv1.EtcdDNSZone {
		return &etcdfedv1.EtcdDNSZone{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("zone-%d", i),
				Labels: map[string]string{etcdfedv1.LabelManagedBy: etcdfedv1.ManagedByValue, etcdfedv1.LabelClusterUID: fmt.Sprintf("0b5f7d1e-0000-4000-8000-%012d", i)}},
			Spec: etcdfedv1.EtcdDNSZoneSpec{Cluster: etcdfedv1.ClusterReference{Name: "main", Namespace: "default", UID: "u"}, Domain: fmt.Sprintf("r%d.etcd.example.com", i)},
		}
	}
	const max = 5
	for i := range max + 2 { // listed: more than the bound
		if err := member.Client.Create(ctx, zone(i)); err != nil {
			t.Fatal(err)
		}
	}
	c, err := cluster.New(member.Config, func(o *cluster.Options) { *o = MemberCacheOptions(testenv.Scheme(), ns, max) })
	if err != nil {
		t.Fatal(err)
	}
	cctx, cancel := context.WithCancel(ctx)
	t.Cleanup(cancel)
	go func() { _ = c.Start(cctx) }()
	if _, err := c.GetCache().GetInformer(cctx, &etcdfedv1.EtcdDNSZone{}); err != nil {
		t.Fatal(err)
	}
	sctx, scancel := context.WithTimeout(cctx, 30*time.Second)
	defer scancel()
	if !c.GetCache().WaitForCacheSync(sctx) {
		t.Fatal("member cache not synced")
	}
	for i := max + 2; i < 3*max; i++ { // watched
		if err := member.Client.Create(ctx, zone(i)); err != nil {
			t.Fatal(err)
		}
	}
	// An update of a held object, made after every create: once the
	// cache shows it, it has seen every create's event.
	held := &etcdfedv1.EtcdDNSZone{}
	if err := member.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "zone-0"}, held); err != nil {
		t.Fatal(err)
	}
	held.Spec.Domain = "moved.etcd.example.com"
	if err := member.Client.Update(ctx, held); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		var zones etcdfedv1.EtcdDNSZoneList
		if err := c.GetClient().List(ctx, &zones, client.InNamespace(ns)); err != nil {
			t.Fatal(err)
		}
		seen := false
		for _, z := range zones.Items {
			seen = seen || z.Name == "zone-0" && z.Spec.Domain == "moved.etcd.example.com"
		}
		if len(zones.Items) > max {
			t.Fatalf("the hub's cache holds %d EtcdDNSZones of the member cluster's %d, bound %d", len(zones.Items), 3*max, max)
		}
		if seen {
			if len(zones.Items) != max {
				t.Fatalf("the hub's cache holds %d EtcdDNSZones, want the bound, %d", len(zones.Items), max)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the update of a held object never reached the cache (%d held)", len(zones.Items))
		}
		time.Sleep(100 * time.Millisecond)
	}
}
