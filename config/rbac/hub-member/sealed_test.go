package hubmemberrbac_test

import (
	"context"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdfedv1 "github.com/etcdfed/etcdfed/api/v1alpha1"
	hubmemberrbac "github.com/etcdfed/etcdfed/config/rbac/hub-member"
)

// TestHubCannotMintOrSealItsOwnToken (issue 37): the hub's identity in a
// member cluster may not mint a token of its own ServiceAccount, even one
// bound to the chain's anchor (the spoke mints them), nor write the
// Secret where the spoke seals them, nor the anchor that carries the
// hub's public key: a thief holding one of the hub's tokens can neither
// renew it nor swap in a key or a token of its own.
func TestHubCannotMintOrSealItsOwnToken(t *testing.T) {
	as, admin, ring, _ := asHub(t)
	ctx := context.Background()
	anchor := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: etcdfedv1.HubCredentialAnchor, Namespace: ring,
		Annotations: map[string]string{etcdfedv1.AnnotationHubSealingKey: "the hub's key"}}}
	sealed := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: etcdfedv1.HubSealedToken, Namespace: ring}}
	for _, s := range []*corev1.Secret{anchor, sealed} {
		if err := admin.Create(ctx, s); err != nil {
			t.Fatal(err)
		}
	}
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: hubmemberrbac.ServiceAccountName, Namespace: ring}}
	tr := &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To(int64(600)),
		BoundObjectRef: &authenticationv1.BoundObjectReference{Kind: "Secret", APIVersion: "v1", Name: anchor.Name, UID: anchor.UID}}}
	forbidden(t, "mint a token of its own bound to the anchor", as.SubResource("token").Create(ctx, sa, tr))

	// The admission policy takes a moment to apply after it is created.
	write := func() error {
		s := &corev1.Secret{}
		if err := admin.Get(ctx, client.ObjectKeyFromObject(sealed), s); err != nil {
			t.Fatal(err)
		}
		s.Data = map[string][]byte{etcdfedv1.HubSealedTokenKey: []byte("a token of the thief's choosing")}
		return as.Update(ctx, s)
	}
	deadline := time.Now().Add(time.Minute)
	err := write()
	for ; !apierrors.IsForbidden(err) && time.Now().Before(deadline); err = write() {
		time.Sleep(200 * time.Millisecond)
	}
	if !apierrors.IsForbidden(err) {
		t.Fatalf("write the sealed token's Secret: got %v, want Forbidden", err)
	}
	// What it wrote before the policy applied, undone.
	if err := admin.Get(ctx, client.ObjectKeyFromObject(sealed), sealed); err != nil {
		t.Fatal(err)
	}
	sealed.Data = nil
	if err := admin.Update(ctx, sealed); err != nil {
		t.Fatal(err)
	}
	forbidden(t, "write the sealed token's Secret", write())
	forbidden(t, "delete the sealed token's Secret", as.Delete(ctx, sealed))
	a := &corev1.Secret{}
	if err := admin.Get(ctx, client.ObjectKeyFromObject(anchor), a); err != nil {
		t.Fatal(err)
	}
	a.Annotations[etcdfedv1.AnnotationHubSealingKey] = "the thief's key"
	forbidden(t, "replace the hub's public key on the anchor", as.Update(ctx, a))
	if err := admin.Get(ctx, client.ObjectKeyFromObject(sealed), sealed); err != nil || len(sealed.Data) != 0 {
		t.Errorf("the sealed token's Secret after the hub's writes: %v %v, want untouched", sealed.Data, err)
	}
}
