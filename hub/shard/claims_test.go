package shard

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdfedv1 "github.com/etcdfed/etcdfed/api/v1alpha1"
	"github.com/etcdfed/etcdfed/dev/testenv"
)

// TestClaimsFindOverlaps: claims of shards a (team=x), b (team in (x,y))
// and the unsharded hub, in a real apiserver. Each case is a hub's check
// of rings labelled team=x and team=y against the claims live then.
func TestClaimsFindOverlaps(t *testing.T) {
	api := testenv.StartT(t, "hub")[0]
	ctx := context.Background()
	for _, ns := range []string{"shards", "etcdfed-system"} {
		if err := api.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
			t.Fatal(err)
		}
	}
	parse := func(name, sel string) Shard {
		s, err := Parse(name, sel)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	now := time.Now()
	clock := func() time.Time { return now }
	claims := func(s Shard, id string) *Claims {
		return &Claims{Shard: s, Client: api.Client, Namespace: "etcdfed-system", Identity: id, Now: clock}
	}
	a, b, u := claims(parse("a", "team=x"), "hub-a"), claims(parse("b", "team in (x,y)"), "hub-b"), claims(Shard{}, "hub-u")
	ring := func(team string) *etcdfedv1.EtcdCluster {
		return &etcdfedv1.EtcdCluster{ObjectMeta: metav1.ObjectMeta{Namespace: "shards", Name: team, Labels: map[string]string{"team": team}},
			Spec: etcdfedv1.EtcdClusterSpec{Replicas: 3, Version: "3.6.16", DNS: etcdfedv1.DNSSpec{Domain: team + ".etcd.test"}}}
	}
	x, y := ring("x"), ring("y")
	check := func(c *Claims, ec *etcdfedv1.EtcdCluster, overlap bool, why string) {
		t.Helper()
		h := c.Conflict(ctx, ec)
		if h.Overlap != overlap || !strings.Contains(h.Why, why) || (why == "") != (h.Why == "") {
			t.Fatalf("%s's check of ring %s: %+v, want overlap %v and a reason with %q", c.Identity, ec.Name, h, overlap, why)
		}
	}

	// Not claimed yet: a hub acts on nothing before it reads its own
	// claim back.
	check(a, x, false, "not read back yet")
	for _, c := range []*Claims{a, b} {
		if err := c.Renew(ctx); err != nil {
			t.Fatal(err)
		}
	}
	check(a, x, true, `shard "b" (team in (x,y)), held by hub hub-b`)
	check(b, x, true, `shard "a" (team=x), held by hub hub-a`)
	check(b, y, false, "")
	if got := testutil.ToFloat64(metricConflicts); got != 1 {
		t.Fatalf("etcdfed_hub_shard_conflicts = %v, want 1 (ring x, held by b's check last)", got)
	}
	// Renewed twice: still one claim per shard.
	if err := a.Renew(ctx); err != nil {
		t.Fatal(err)
	}
	var leases coordinationv1.LeaseList
	if err := api.Client.List(ctx, &leases, client.InNamespace("etcdfed-system"), client.MatchingLabels{ClaimLabel: "true"}); err != nil || len(leases.Items) != 2 {
		t.Fatalf("claims: %d (%v), want 2", len(leases.Items), err)
	}

	// b's hub stopped without releasing: its claim goes stale.
	now = now.Add(31 * time.Second)
	if err := a.Renew(ctx); err != nil {
		t.Fatal(err)
	}
	check(a, x, false, "")
	now = now.Add(-31 * time.Second)
	check(a, x, true, "hub-b")
	// b released: a acts.
	if err := b.Release(ctx); err != nil {
		t.Fatal(err)
	}
	check(a, x, false, "")
	if got := testutil.ToFloat64(metricConflicts); got != 0 {
		t.Fatalf("etcdfed_hub_shard_conflicts = %v after the release, want 0", got)
	}
	// A release by a hub that no longer holds the claim leaves it.
	stale := claims(parse("a", "team=x"), "hub-a-old")
	if err := stale.Release(ctx); err != nil {
		t.Fatal(err)
	}
	check(a, x, false, "")

	// a's process restarted under the same name (its pod's) reads its
	// claim as its own at once; restarted with another selector, it waits
	// for its own renewal, which says the new selector to the other hubs.
	check(claims(parse("a", "team=x"), "hub-a"), x, false, "")
	again := claims(parse("a", "team in (x,z)"), "hub-a")
	check(again, x, false, "not read back yet")
	if err := again.Renew(ctx); err != nil {
		t.Fatal(err)
	}
	check(again, x, false, "")
	if err := a.Renew(ctx); err != nil { // back to team=x
		t.Fatal(err)
	}

	// The unsharded hub owns every ring: beside a shard, the shard's
	// rings are held on both sides, the others are the unsharded hub's.
	if err := u.Renew(ctx); err != nil {
		t.Fatal(err)
	}
	check(a, x, true, "the unsharded hub (every ring), held by hub hub-u")
	check(u, x, true, `shard "a" (team=x)`)
	check(u, y, false, "")

	// The shard's Reader hides a held ring as it hides another shard's.
	rd := Reader{Reader: api.Client, Shard: a.Shard, Claims: a}
	held := ring("x")
	if err := api.Client.Create(ctx, held); err != nil {
		t.Fatal(err)
	}
	if err := rd.Get(ctx, client.ObjectKeyFromObject(held), &etcdfedv1.EtcdCluster{}); !apierrors.IsNotFound(err) {
		t.Fatalf("a held ring read through the shard's Reader: %v, want NotFound", err)
	}
	if err := u.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if err := rd.Get(ctx, client.ObjectKeyFromObject(held), &etcdfedv1.EtcdCluster{}); err != nil {
		t.Fatalf("the ring, no longer held, through the shard's Reader: %v", err)
	}
}

// TestClaimNews: which changes of a claim wake the hub's rings. A renewal
// does not (every hub renews every 5 s); a claim made, dropped, given
// another selector or holder, or renewed after it went stale does
// (TestScenarioHubShards' third hub went unnoticed by the quiet rings of
// the hub it overlapped without them).
func TestClaimNews(t *testing.T) {
	c := &Claims{StaleAfter: 30 * time.Second}
	at := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	claim := func(sel, holder string, renewed time.Duration) *coordinationv1.Lease {
		return &coordinationv1.Lease{
			ObjectMeta: metav1.ObjectMeta{Name: "etcdfed-hub-claim-c", Annotations: map[string]string{SelectorAnnotation: sel}, Labels: map[string]string{ClaimLabel: "true"}},
			Spec:       coordinationv1.LeaseSpec{HolderIdentity: &holder, RenewTime: &metav1.MicroTime{Time: at.Add(renewed)}},
		}
	}
	base := claim("etcdfed.dev/shard in (a,c)", "hub-c-1", 0)
	for _, tc := range []struct {
		name     string
		old, new *coordinationv1.Lease
		want     bool
	}{
		{"made", nil, base, true},
		{"dropped", base, nil, true},
		{"renewed", base, claim("etcdfed.dev/shard in (a,c)", "hub-c-1", 5*time.Second), false},
		{"renewed late but within StaleAfter", base, claim("etcdfed.dev/shard in (a,c)", "hub-c-1", 29*time.Second), false},
		{"renewed after it went stale", base, claim("etcdfed.dev/shard in (a,c)", "hub-c-1", 31*time.Second), true},
		{"another selector", base, claim("etcdfed.dev/shard=c", "hub-c-1", 5*time.Second), true},
		{"another holder", base, claim("etcdfed.dev/shard in (a,c)", "hub-c-2", 5*time.Second), true},
	} {
		if got := c.ClaimNews(tc.old, tc.new); got != tc.want {
			t.Errorf("%s: ClaimNews = %v, want %v", tc.name, got, tc.want)
		}
	}
}
