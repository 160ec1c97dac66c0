package registration_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/go-logr/logr/testr"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdfedv1 "github.com/etcdfed/etcdfed/api/v1alpha1"
	"github.com/etcdfed/etcdfed/cli/install"
	"github.com/etcdfed/etcdfed/dev/installtest"
	"github.com/etcdfed/etcdfed/hub/liveness"
	"github.com/etcdfed/etcdfed/hub/registration"
	"github.com/etcdfed/etcdfed/hub/registry"
	"github.com/etcdfed/etcdfed/spoke/credential"
)

// TestCredentialChainEnds (issue 37): the hub renews its own token in a
// member cluster, so a stolen token renewed itself until `cluster unjoin`.
// Against real apiservers: `cluster join` binds the hub's token to the
// Secret etcdfed-hub-credential, which carries the chain's end; the hub's
// identity cannot mint a token bound to nothing (the member cluster's
// admission policy) nor move the end (write that Secret); the renewal
// stays bound to it; and once the end has passed, the spoke deletes it and
// no token of the chain authenticates any more, nor can the hub renew.
func TestCredentialChainEnds(t *testing.T) {
	ctx := context.Background()
	hub, member := installtest.HubAndMember(t, func(o *install.JoinOptions) {
		o.TokenLifetime, o.CredentialLifetime = registration.MinLifetime, time.Hour
		o.Name = "chain-1" // the renewal metrics are the process's: not TestRenewAndReport's member-1
	})
	reg := &corev1.Secret{}
	if err := hub.Client.Get(ctx, client.ObjectKey{Namespace: install.Namespace, Name: "chain-1"}, reg); err != nil {
		t.Fatal(err)
	}
	anchor := &corev1.Secret{}
	if err := member.Client.Get(ctx, client.ObjectKey{Namespace: install.Namespace, Name: etcdfedv1.HubCredentialAnchor}, anchor); err != nil {
		t.Fatalf("join made no credential anchor: %v", err)
	}
	end, err := time.Parse(time.RFC3339, anchor.Annotations[etcdfedv1.AnnotationCredentialNotAfter])
	if err != nil || end.Before(time.Now().Add(50*time.Minute)) || end.After(time.Now().Add(time.Hour)) {
		t.Fatalf("the chain ends at %q (%v), want in an hour", anchor.Annotations[etcdfedv1.AnnotationCredentialNotAfter], err)
	}
	tok := string(reg.Data[registry.TokenKey])
	if c, err := registration.ParseToken(tok); err != nil || c.SecretName != anchor.Name || c.SecretUID != string(anchor.UID) {
		t.Fatalf("join's token is bound to %q %q (%v), want the anchor %s", c.SecretName, c.SecretUID, err, anchor.UID)
	}

	// As the hub, with its own token.
	cfg, err := registry.RESTConfig(reg)
	if err != nil {
		t.Fatal(err)
	}
	asHub := kubernetes.NewForConfigOrDie(cfg)
	unbound := func() error {
		_, err := asHub.CoreV1().ServiceAccounts(install.Namespace).CreateToken(ctx, "etcdfed-hub",
			&authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To(int64(600))}}, metav1.CreateOptions{})
		return err
	}
	deadline := time.Now().Add(time.Minute)
	for err := unbound(); !apierrors.IsForbidden(err); err = unbound() {
		if time.Now().After(deadline) {
			t.Fatalf("the hub minted a token bound to nothing: %v, want Forbidden", err)
		}
		time.Sleep(200 * time.Millisecond) // the admission policy takes effect
	}
	own := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "mine", Namespace: install.Namespace}}
	if own, err = asHub.CoreV1().Secrets(install.Namespace).Create(ctx, own, metav1.CreateOptions{}); err != nil {
		t.Fatalf("the hub creates Secrets in the ring namespace: %v", err)
	}
	_, err = asHub.CoreV1().ServiceAccounts(install.Namespace).CreateToken(ctx, "etcdfed-hub",
		&authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To(int64(600)),
			BoundObjectRef: &authenticationv1.BoundObjectReference{Kind: "Secret", APIVersion: "v1", Name: own.Name, UID: own.UID}}}, metav1.CreateOptions{})
	if !apierrors.IsForbidden(err) {
		t.Errorf("the hub minted a token bound to a Secret of its own: %v, want Forbidden", err)
	}
	moved := anchor.DeepCopy()
	moved.Annotations[etcdfedv1.AnnotationCredentialNotAfter] = time.Now().Add(1000 * time.Hour).UTC().Format(time.RFC3339)
	// The admission policy takes a moment to apply after join: probe it
	// with a dry run (RBAC alone refuses the hub a token already).
	probe := func() error {
		_, err := asHub.CoreV1().Secrets(install.Namespace).Update(ctx, moved, metav1.UpdateOptions{DryRun: []string{metav1.DryRunAll}})
		return err
	}
	deadline = time.Now().Add(time.Minute)
	for err := probe(); !apierrors.IsForbidden(err) && time.Now().Before(deadline); err = probe() {
		time.Sleep(200 * time.Millisecond)
	}
	if _, err := asHub.CoreV1().Secrets(install.Namespace).Update(ctx, moved, metav1.UpdateOptions{}); !apierrors.IsForbidden(err) {
		t.Errorf("the hub moved its chain's end: %v, want Forbidden", err)
	}
	if err := asHub.CoreV1().Secrets(install.Namespace).Delete(ctx, anchor.Name, metav1.DeleteOptions{}); !apierrors.IsForbidden(err) {
		t.Errorf("the hub deleted its chain's anchor: %v, want Forbidden", err)
	}

	// The renewal (the spoke mints and seals, the hub opens): bound to
	// the anchor, never past the end.
	c0, _ := registration.ParseToken(tok)
	sealNext(t, member.Client, c0.IssuedAt, time.Now().Add(registration.MinLifetime/3+time.Second))
	r := &registration.Runner{Client: hub.Client, Reader: hub.Client, Namespace: install.Namespace,
		Registry: engaged{}, Tracker: liveness.NewTracker(nil), StaleAfter: time.Minute, RenewAfter: 1e-9, Log: testr.New(t)}
	r.Pass(ctx)
	if err := hub.Client.Get(ctx, client.ObjectKeyFromObject(reg), reg); err != nil {
		t.Fatal(err)
	}
	renewed := string(reg.Data[registry.TokenKey])
	c, err := registration.ParseToken(renewed)
	if err != nil || renewed == tok {
		t.Fatalf("not renewed (%v)", err)
	}
	if c.SecretName != anchor.Name || c.SecretUID != string(anchor.UID) || c.Expiry.After(end) {
		t.Errorf("renewed token bound to %q %q, expires %s; want the anchor, by %s", c.SecretName, c.SecretUID, c.Expiry, end)
	}
	if v, _ := metric(t, "etcdfed_hub_member_credential_chain_end_timestamp_seconds", map[string]string{"member_cluster": "chain-1"}); v != float64(end.Unix()) {
		t.Errorf("chain end metric %v, want %d", v, end.Unix())
	}

	// The end passes: the spoke deletes the anchor, and no token of the
	// chain authenticates; the hub cannot renew.
	sr := &credential.Reconciler{Client: member.Client, Namespace: install.Namespace, Now: func() time.Time { return end.Add(time.Second) }}
	if _, err := sr.Reconcile(ctx, ctrl.Request{NamespacedName: types.NamespacedName{Namespace: install.Namespace, Name: anchor.Name}}); err != nil {
		t.Fatal(err)
	}
	if err := member.Client.Get(ctx, client.ObjectKeyFromObject(anchor), &corev1.Secret{}); !apierrors.IsNotFound(err) {
		t.Fatalf("the anchor after the chain's end: %v, want it deleted", err)
	}
	review := kubernetes.NewForConfigOrDie(member.Config).AuthenticationV1().TokenReviews()
	for _, tk := range []string{tok, renewed} {
		deadline := time.Now().Add(time.Minute)
		for {
			tr, err := review.Create(ctx, &authenticationv1.TokenReview{Spec: authenticationv1.TokenReviewSpec{Token: tk}}, metav1.CreateOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if !tr.Status.Authenticated {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("a token of the ended chain still authenticates as %s", tr.Status.User.Username)
			}
			time.Sleep(200 * time.Millisecond) // the authenticator's cache
		}
	}
	if _, err := asHub.CoreV1().ServiceAccounts(install.Namespace).CreateToken(ctx, "etcdfed-hub",
		&authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To(int64(600)),
			BoundObjectRef: &authenticationv1.BoundObjectReference{Kind: "Secret", APIVersion: "v1", Name: anchor.Name, UID: anchor.UID}}}, metav1.CreateOptions{}); err == nil {
		t.Error("the hub renewed after its chain ended")
	}
}

func TestNextLifetime(t *testing.T) {
	now := time.Date(2026, 11, 29, 6, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		name     string
		want     time.Duration
		notAfter time.Time
		got      time.Duration
		ends     bool
	}{
		{"no end known", 24 * time.Hour, time.Time{}, 24 * time.Hour, false},
		{"far end", 24 * time.Hour, now.Add(90 * 24 * time.Hour), 24 * time.Hour, false},
		{"cut to the end", 24 * time.Hour, now.Add(3 * time.Hour), 3 * time.Hour, false},
		{"below the API's minimum asked: the minimum", time.Minute, time.Time{}, registration.MinLifetime, false},
		{"the end closer than the minimum", 24 * time.Hour, now.Add(5 * time.Minute), 0, true},
		{"the end passed", 24 * time.Hour, now.Add(-time.Hour), 0, true},
	} {
		got, err := registration.NextLifetime(tc.want, now, tc.notAfter)
		if got != tc.got || errors.Is(err, registration.ErrChainEnds) != tc.ends {
			t.Errorf("%s: %s %v, want %s (chain ends: %v)", tc.name, got, err, tc.got, tc.ends)
		}
	}
}
