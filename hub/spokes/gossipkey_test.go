package spokes

import (
	"bytes"
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdfedv1 "github.com/etcdfed/etcdfed/api/v1alpha1"
	"github.com/etcdfed/etcdfed/dev/testenv"
)

// TestGossipKeyHandedToSpokes, against a real hub apiserver and two real
// member apiservers: the hub creates the ring's gossip key once (32
// random bytes, the same on every later pass), writes it into every
// member cluster's ring namespace, follows an edit of its own Secret (a
// rotation's accepted key), leaves a Secret it did not write alone while
// it holds another key, and takes it over once the hub's holds the same.
func TestGossipKeyHandedToSpokes(t *testing.T) {
	cls := testenv.StartT(t, "hub", "member-a", "member-b")
	ctx := context.Background()
	for _, c := range cls {
		if err := c.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "etcdfed-system"}}); err != nil {
			t.Fatal(err)
		}
	}
	hub := cls[0].Client
	r := &Reconciler{RingNamespace: "etcdfed-system", HubNamespace: "etcdfed-system", HubClient: hub, HubReader: hub}
	data, err := r.hubGossipKey(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if k := data[etcdfedv1.GossipSecretKey]; len(k) != 32 {
		t.Fatalf("a key of %d bytes", len(k))
	}
	again, err := r.hubGossipKey(ctx)
	if err != nil || !bytes.Equal(again[etcdfedv1.GossipSecretKey], data[etcdfedv1.GossipSecretKey]) {
		t.Fatalf("the key changed on the second pass (%v)", err)
	}
	// member-b holds a key an operator distributed by hand.
	human := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "etcdfed-system", Name: etcdfedv1.GossipSecretName}, Data: map[string][]byte{etcdfedv1.GossipSecretKey: bytes.Repeat([]byte{7}, 32)}}
	if err := cls[2].Client.Create(ctx, human); err != nil {
		t.Fatal(err)
	}
	copyOf := func(c client.Client) map[string][]byte {
		sec := &corev1.Secret{}
		if err := c.Get(ctx, client.ObjectKey{Namespace: "etcdfed-system", Name: etcdfedv1.GossipSecretName}, sec); err != nil {
			t.Fatal(err)
		}
		return sec.Data
	}
	write := func() {
		t.Helper()
		d, err := r.hubGossipKey(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range cls[1:] {
			if err := writeGossipKey(ctx, c.Client, c.Client, "etcdfed-system", d); err != nil {
				t.Fatal(err)
			}
		}
	}
	write()
	if got := copyOf(cls[1].Client); !bytes.Equal(got[etcdfedv1.GossipSecretKey], data[etcdfedv1.GossipSecretKey]) {
		t.Error("member-a did not get the hub's key")
	}
	if got := copyOf(cls[2].Client); !bytes.Equal(got[etcdfedv1.GossipSecretKey], human.Data[etcdfedv1.GossipSecretKey]) {
		t.Error("the hub overwrote a key it did not write")
	}
	// Rotation, first step: the hub's Secret accepts a new key.
	sec := &corev1.Secret{}
	if err := hub.Get(ctx, client.ObjectKey{Namespace: "etcdfed-system", Name: etcdfedv1.GossipSecretName}, sec); err != nil {
		t.Fatal(err)
	}
	next := bytes.Repeat([]byte{9}, 32)
	sec.Data[etcdfedv1.GossipSecretAccept] = next
	if err := hub.Update(ctx, sec); err != nil {
		t.Fatal(err)
	}
	write()
	if got := copyOf(cls[1].Client); !bytes.Equal(got[etcdfedv1.GossipSecretAccept], next) {
		t.Error("member-a's copy does not accept the rotation's new key")
	}
	if got := copyOf(cls[2].Client); len(got[etcdfedv1.GossipSecretAccept]) != 0 {
		t.Error("the hub wrote into a key it did not write")
	}

	// The hand-over the log line asks for: the operator puts member-b's
	// key into the hub's Secret; member-b's copy is then the hub's, and
	// the next change of the hub's Secret reaches it.
	if err := hub.Get(ctx, client.ObjectKey{Namespace: "etcdfed-system", Name: etcdfedv1.GossipSecretName}, sec); err != nil {
		t.Fatal(err)
	}
	sec.Data = map[string][]byte{etcdfedv1.GossipSecretKey: human.Data[etcdfedv1.GossipSecretKey]}
	if err := hub.Update(ctx, sec); err != nil {
		t.Fatal(err)
	}
	write()
	if err := hub.Get(ctx, client.ObjectKey{Namespace: "etcdfed-system", Name: etcdfedv1.GossipSecretName}, sec); err != nil {
		t.Fatal(err)
	}
	sec.Data[etcdfedv1.GossipSecretAccept] = next
	if err := hub.Update(ctx, sec); err != nil {
		t.Fatal(err)
	}
	write()
	if got := copyOf(cls[2].Client); !bytes.Equal(got[etcdfedv1.GossipSecretAccept], next) {
		t.Error("member-b's copy, handed over, does not follow the hub's Secret")
	}
}
