package install

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdfedv1 "github.com/etcdfed/etcdfed/api/v1alpha1"
	"github.com/etcdfed/etcdfed/dev/testenv"
)

// TestUnjoinWaitsForGossipRevocation (issue 37): unjoin says whether the
// hub revoked the cluster's gossip identity (its line left the hub's
// table), warns when it did not in time, and says when there was none.
func TestUnjoinWaitsForGossipRevocation(t *testing.T) {
	hub := testenv.StartT(t, "hub")[0].Client
	ctx := context.Background()
	if err := hub.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: Namespace}}); err != nil {
		t.Fatal(err)
	}
	sec := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: Namespace, Name: GossipSecret},
		Data: map[string][]byte{etcdfedv1.GossipSecretKey: make([]byte, 32), etcdfedv1.GossipSecretPeers: []byte("m1 AAAA\nm2 BBBB\n")}}
	if err := hub.Create(ctx, sec); err != nil {
		t.Fatal(err)
	}
	if msg := waitGossipRevoked(ctx, hub, "m3", time.Second); !strings.Contains(msg, "no gossip identity") {
		t.Errorf("a cluster without an identity: %s", msg)
	}
	if msg := waitGossipRevoked(ctx, hub, "m2", 1500*time.Millisecond); !strings.HasPrefix(msg, "WARNING") {
		t.Errorf("an identity the hub did not revoke: %s", msg)
	}
	go func() {
		time.Sleep(time.Second)
		cur := &corev1.Secret{}
		if err := hub.Get(ctx, client.ObjectKeyFromObject(sec), cur); err == nil {
			cur.Data[etcdfedv1.GossipSecretPeers] = []byte("m1 AAAA\n")
			_ = hub.Update(ctx, cur)
		}
	}()
	if msg := waitGossipRevoked(ctx, hub, "m2", 30*time.Second); !strings.Contains(msg, "revoked its gossip identity") {
		t.Errorf("an identity the hub revoked: %s", msg)
	}
}
