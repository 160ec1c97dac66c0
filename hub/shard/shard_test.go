package shard

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	etcdfedv1 "github.com/etcdfed/etcdfed/api/v1alpha1"
	"github.com/etcdfed/etcdfed/dev/testenv"
	"github.com/etcdfed/etcdfed/hub/clients"
)

func TestParse(t *testing.T) {
	for _, tc := range []struct {
		name, selector string
		wantErr        string
		lease          string
		owns, disowns  map[string]string
	}{
		{lease: "etcdfed-hub", owns: map[string]string{"etcdfed.dev/shard": "b"}},
		{name: "a", lease: "etcdfed-hub-a", owns: map[string]string{"etcdfed.dev/shard": "a"}, disowns: map[string]string{"etcdfed.dev/shard": "b"}},
		{name: "teams", selector: "team in (x,y)", lease: "etcdfed-hub-teams", owns: map[string]string{"team": "y"}, disowns: map[string]string{}},
		{selector: "team=x", wantErr: "needs --shard"},
		{name: "A_b", wantErr: "DNS label"},
		{name: strings.Repeat("a", 41), wantErr: "DNS label"},
		{name: "a", selector: "team in (", wantErr: "parse shard selector"},
		{name: "a", selector: ",", wantErr: "parse shard selector"},
	} {
		s, err := Parse(tc.name, tc.selector)
		if tc.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("Parse(%q, %q) = %v, want an error with %q", tc.name, tc.selector, err, tc.wantErr)
			}
			continue
		}
		if err != nil {
			t.Fatalf("Parse(%q, %q): %v", tc.name, tc.selector, err)
		}
		if got := s.Lease(); got != tc.lease {
			t.Errorf("Parse(%q, %q).Lease() = %q, want %q", tc.name, tc.selector, got, tc.lease)
		}
		if ec := (&etcdfedv1.EtcdCluster{ObjectMeta: metav1.ObjectMeta{Labels: tc.owns}}); !s.Owns(ec) {
			t.Errorf("shard %s does not own a ring labelled %v", s, tc.owns)
		}
		if tc.disowns != nil {
			if ec := (&etcdfedv1.EtcdCluster{ObjectMeta: metav1.ObjectMeta{Labels: tc.disowns}}); s.Owns(ec) {
				t.Errorf("shard %s owns a ring labelled %v", s, tc.disowns)
			}
		}
	}
	if _, err := Parse("", "a=b"); !errors.Is(err, ErrNoName) {
		t.Errorf("a selector without a name: %v, want ErrNoName", err)
	}
}

// TestReaderLetsGoOfOtherShards: through Reader, the hub's sibling
// controllers (backup, restore, clients) see a ring of another shard as
// NotFound, and the clients controller, whose delete path deletes the
// consumers' Secrets and removes its finalizer, leaves a deleted ring of
// another shard as it found it: its finalizer is the other shard's hub's
// to remove. Secrets pass through.
func TestReaderLetsGoOfOtherShards(t *testing.T) {
	api := testenv.StartT(t, "hub")[0]
	ctx := context.Background()
	if err := api.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "shards"}}); err != nil {
		t.Fatal(err)
	}
	a, err := Parse("a", "")
	if err != nil {
		t.Fatal(err)
	}
	ring := func(name, shard string) *etcdfedv1.EtcdCluster {
		ec := &etcdfedv1.EtcdCluster{ObjectMeta: metav1.ObjectMeta{Namespace: "shards", Name: name, Labels: map[string]string{Label: shard},
			Finalizers: []string{clients.FinalizerClients}},
			Spec: etcdfedv1.EtcdClusterSpec{Replicas: 3, Version: "3.6.16", DNS: etcdfedv1.DNSSpec{Domain: name + ".etcd.test"}}}
		if err := api.Client.Create(ctx, ec); err != nil {
			t.Fatal(err)
		}
		return ec
	}
	mine, other := ring("mine", "a"), ring("other", "b")
	rd := Reader{Reader: api.Client, Shard: a}
	if err := rd.Get(ctx, client.ObjectKeyFromObject(mine), &etcdfedv1.EtcdCluster{}); err != nil {
		t.Fatalf("the shard's own ring: %v", err)
	}
	if err := rd.Get(ctx, client.ObjectKeyFromObject(other), &etcdfedv1.EtcdCluster{}); !apierrors.IsNotFound(err) {
		t.Fatalf("another shard's ring read %v, want NotFound", err)
	}
	var list etcdfedv1.EtcdClusterList
	if err := rd.List(ctx, &list, client.InNamespace("shards")); err != nil {
		t.Fatal(err)
	}
	if len(list.Items) != 1 || list.Items[0].Name != "mine" {
		t.Fatalf("listed %d rings, want only mine", len(list.Items))
	}
	sec := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "shards", Name: "s"}}
	if err := api.Client.Create(ctx, sec); err != nil {
		t.Fatal(err)
	}
	if err := rd.Get(ctx, client.ObjectKeyFromObject(sec), &corev1.Secret{}); err != nil {
		t.Fatalf("a Secret through the shard's Reader: %v", err)
	}

	if err := api.Client.Delete(ctx, other); err != nil {
		t.Fatal(err)
	}
	cr := &clients.Reconciler{Client: api.Client, Reader: rd}
	if _, err := cr.Reconcile(ctx, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(other)}); err != nil {
		t.Fatal(err)
	}
	got := &etcdfedv1.EtcdCluster{}
	if err := api.Client.Get(ctx, client.ObjectKeyFromObject(other), got); err != nil || !slices.Contains(got.Finalizers, clients.FinalizerClients) {
		t.Fatalf("the clients controller of shard a released shard b's deleted ring: finalizers %v, read %v", got.Finalizers, err)
	}
}

func TestExport(t *testing.T) {
	s, err := Parse("a", "")
	if err != nil {
		t.Fatal(err)
	}
	s.Export()
	if got := testutil.ToFloat64(metricInfo.WithLabelValues("a", "etcdfed.dev/shard=a")); got != 1 {
		t.Fatalf("etcdfed_hub_shard_info{shard=a} = %v, want 1", got)
	}
	Shard{}.Export()
	if n := testutil.CollectAndCount(metricInfo); n != 1 {
		t.Fatalf("%d series after the unsharded hub's export, want 1", n)
	}
}
