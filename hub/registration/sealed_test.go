package registration_test

import (
	"context"
	"crypto/hpke"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr/testr"
	appsv1 "k8s.io/api/apps/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
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
	"github.com/etcdfed/etcdfed/internal/tokenseal"
	"github.com/etcdfed/etcdfed/spoke/credential"
)

// sealNext has the spoke seal the hub's next token, its clock at now (a
// third or more into the sealed token's life), a second at least after
// after (so that the next token expires later than one issued then).
func sealNext(t *testing.T, member client.Client, after, now time.Time) {
	t.Helper()
	for time.Now().Unix() <= after.Unix() {
		time.Sleep(100 * time.Millisecond)
	}
	sr := &credential.Reconciler{Client: member, Namespace: install.Namespace, Now: func() time.Time { return now }}
	if _, err := sr.Reconcile(context.Background(), ctrl.Request{NamespacedName: types.NamespacedName{Namespace: install.Namespace, Name: etcdfedv1.HubCredentialAnchor}}); err != nil {
		t.Fatal(err)
	}
}

type engagedAs string

func (e engagedAs) List(context.Context) ([]registry.MemberCluster, error) {
	return []registry.MemberCluster{{Name: string(e), State: &registry.ClusterState{Engaged: true}}}, nil
}

// TestHubTokenSealedBySpoke (issue 37): the hub renewed its own token in a
// member cluster, so whoever stole one could renew it until the chain's
// end. Against real apiservers: after `cluster join`, the hub's token
// cannot mint a token (Forbidden); the spoke mints the next one and seals
// it to the hub's public key, which join copied onto the anchor; a thief
// holding the hub's current token reads the sealed Secret but cannot open
// it (another key, or the same box for another anchor, fails), so its
// token is all it has, and that token's claims end within its lifetime;
// the hub opens the sealed token, stores it, and says plainly when the
// spoke has sealed no newer one; and the hub cannot write the sealed
// Secret.
func TestHubTokenSealedBySpoke(t *testing.T) {
	ctx := context.Background()
	const name = "sealed-1"
	hub, member := installtest.HubAndMember(t, func(o *install.JoinOptions) {
		o.TokenLifetime, o.CredentialLifetime = registration.MinLifetime, time.Hour
		o.Name = name // the metrics are the process's
	})
	ns := install.Namespace
	reg := &corev1.Secret{}
	getReg := func() *corev1.Secret {
		t.Helper()
		if err := hub.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, reg); err != nil {
			t.Fatal(err)
		}
		return reg
	}
	getReg()
	anchor := &corev1.Secret{}
	if err := member.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: etcdfedv1.HubCredentialAnchor}, anchor); err != nil {
		t.Fatal(err)
	}
	key, err := tokenseal.ReadKey(ctx, hub.Client, ns)
	if err != nil {
		t.Fatalf("join left no sealing key in the hub cluster: %v", err)
	}
	if got := anchor.Annotations[etcdfedv1.AnnotationHubSealingKey]; got != tokenseal.PublicOf(key) {
		t.Fatalf("the anchor carries sealing key %q, want the hub's %q", got, tokenseal.PublicOf(key))
	}
	stolen := string(reg.Data[registry.TokenKey])
	c0, err := registration.ParseToken(stolen)
	if err != nil {
		t.Fatal(err)
	}
	if c0.Lifetime() > registration.MinLifetime {
		t.Errorf("join's token lives %s, want at most the lifetime asked, %s", c0.Lifetime(), registration.MinLifetime)
	}

	// A thief with the hub's current token cannot mint one, even bound to
	// the anchor.
	cfg, err := registry.RESTConfig(reg)
	if err != nil {
		t.Fatal(err)
	}
	thief := kubernetes.NewForConfigOrDie(cfg)
	_, err = thief.CoreV1().ServiceAccounts(ns).CreateToken(ctx, "etcdfed-hub",
		&authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To(int64(600)),
			BoundObjectRef: &authenticationv1.BoundObjectReference{Kind: "Secret", APIVersion: "v1", Name: anchor.Name, UID: anchor.UID}}}, metav1.CreateOptions{})
	if !apierrors.IsForbidden(err) {
		t.Fatalf("the hub's token minted a token of the hub: %v, want Forbidden", err)
	}

	// Join sealed its token for the hub too: the spoke mints the next one
	// a third into its life, not at once.
	info := tokenseal.Info(ns, anchor.Name, string(anchor.UID))
	sealed, err := thief.CoreV1().Secrets(ns).Get(ctx, etcdfedv1.HubSealedToken, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("the hub's token reads the sealed Secret: %v", err)
	}
	if got, err := tokenseal.Open(key, info, sealed.Data[etcdfedv1.HubSealedTokenKey]); err != nil || got != stolen {
		t.Errorf("join sealed another token than it registered (%v)", err)
	}
	sr := &credential.Reconciler{Client: member.Client, Namespace: ns}
	res, err := sr.Reconcile(ctx, ctrl.Request{NamespacedName: types.NamespacedName{Namespace: ns, Name: anchor.Name}})
	if err != nil {
		t.Fatal(err)
	}
	if res.RequeueAfter <= 0 || res.RequeueAfter > registration.MinLifetime/3 {
		t.Errorf("the spoke comes back after %s, want within a third of the lifetime", res.RequeueAfter)
	}
	// A third has passed: the spoke mints the next token and seals it.
	sealNext(t, member.Client, c0.IssuedAt, time.Now().Add(registration.MinLifetime/3+time.Second))
	sealed, err = thief.CoreV1().Secrets(ns).Get(ctx, etcdfedv1.HubSealedToken, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("the hub's token reads the sealed Secret: %v", err)
	}
	box := sealed.Data[etcdfedv1.HubSealedTokenKey]
	if len(box) == 0 || strings.Contains(string(box), "eyJ") {
		t.Fatalf("the sealed Secret holds %q, want a sealed token", box)
	}
	otherPriv, _, err := tokenseal.GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	other, err := tokenseal.PrivateKey(otherPriv)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tokenseal.Open(other, info, box); !errors.Is(err, tokenseal.ErrOpen) {
		t.Errorf("the sealed token opened with another key: %v", err)
	}
	if _, err := tokenseal.Open(key, tokenseal.Info(ns, anchor.Name, "another-anchor"), box); !errors.Is(err, tokenseal.ErrOpen) {
		t.Errorf("the sealed token opened for another anchor: %v", err)
	}
	fresh, err := tokenseal.Open(key, info, box)
	if err != nil {
		t.Fatalf("the hub's key does not open the sealed token: %v", err)
	}
	nc, err := registration.ParseToken(fresh)
	if err != nil {
		t.Fatal(err)
	}
	if nc.ServiceAccount != "etcdfed-hub" || nc.SecretName != anchor.Name || nc.SecretUID != string(anchor.UID) || nc.Lifetime() > registration.MinLifetime {
		t.Errorf("the sealed token is of %s bound to %s %s, lives %s; want etcdfed-hub bound to the anchor, at most %s", nc.ServiceAccount, nc.SecretName, nc.SecretUID, nc.Lifetime(), registration.MinLifetime)
	}
	if v := sealed.Annotations[etcdfedv1.AnnotationSealedExpiry]; v != nc.Expiry.UTC().Format(time.RFC3339) {
		t.Errorf("the sealed Secret says it expires %q, want %s", v, nc.Expiry.UTC().Format(time.RFC3339))
	}
	tr, err := kubernetes.NewForConfigOrDie(member.Config).AuthenticationV1().TokenReviews().Create(ctx,
		&authenticationv1.TokenReview{Spec: authenticationv1.TokenReviewSpec{Token: fresh}}, metav1.CreateOptions{})
	if err != nil || !tr.Status.Authenticated || tr.Status.User.Username != "system:serviceaccount:"+ns+":etcdfed-hub" {
		t.Errorf("the sealed token authenticates as %q (%v, %v), want the hub's ServiceAccount", tr.Status.User.Username, tr.Status.Authenticated, err)
	}

	// The hub opens it and stores it; it asks no TokenRequest.
	r := &registration.Runner{Client: hub.Client, Reader: hub.Client, Namespace: ns,
		Registry: engagedAs(name), Tracker: liveness.NewTracker(nil), StaleAfter: time.Minute, RenewAfter: 1e-9, Log: testr.New(t)}
	r.Pass(ctx)
	if got := string(getReg().Data[registry.TokenKey]); got != fresh {
		t.Fatalf("the hub stored another token than the one the spoke sealed (changed: %v)", got != stolen)
	}
	if s, _ := registration.StatusOf(reg.Annotations); s.Problem != "" {
		t.Errorf("problem %q after the hub opened the sealed token", s.Problem)
	}
	if v, _ := metric(t, "etcdfed_hub_member_credential_expiry_timestamp_seconds", map[string]string{"member_cluster": name}); v != float64(nc.Expiry.Unix()) {
		t.Errorf("expiry metric %v, want %d", v, nc.Expiry.Unix())
	}

	// No newer sealed token past half the current one's life: said
	// plainly, and counted as a failed renewal.
	later := nc.IssuedAt.Add(nc.Lifetime() * 2 / 3)
	r.Now = func() time.Time { return later }
	r.Pass(ctx)
	want := "the spoke of " + name + " has not sealed a new token; the current one expires at " + nc.Expiry.UTC().Format(time.RFC3339)
	if s, _ := registration.StatusOf(getReg().Annotations); !strings.Contains(s.Problem, want) {
		t.Errorf("problem %q, want it to say %q", s.Problem, want)
	}
	if v, _ := metric(t, "etcdfed_hub_member_credential_renewals_total", map[string]string{"member_cluster": name, "result": "error"}); v != 1 {
		t.Errorf("renewals error %v, want 1", v)
	}

	// The spoke seals the next one when a third has passed; the hub takes
	// it on its next look.
	sealNext(t, member.Client, nc.IssuedAt, later.Add(time.Minute))
	r.Now = func() time.Time { return later.Add(time.Minute) }
	r.Pass(ctx)
	n2, err := registration.ParseToken(string(getReg().Data[registry.TokenKey]))
	if err != nil || !n2.Expiry.After(nc.Expiry) {
		t.Fatalf("the hub's token expires %s (%v) after the spoke sealed the next, want later than %s", n2.Expiry, err, nc.Expiry)
	}
	if s, _ := registration.StatusOf(reg.Annotations); s.Problem != "" {
		t.Errorf("problem %q after the hub opened the next sealed token", s.Problem)
	}

	// The hub may not write the sealed Secret (the admission policy,
	// which takes a moment to apply after join).
	write := func() error {
		s, err := thief.CoreV1().Secrets(ns).Get(ctx, etcdfedv1.HubSealedToken, metav1.GetOptions{})
		if err != nil {
			return err
		}
		s.Annotations[etcdfedv1.AnnotationSealedExpiry] = time.Now().Add(1000 * time.Hour).UTC().Format(time.RFC3339)
		_, err = thief.CoreV1().Secrets(ns).Update(ctx, s, metav1.UpdateOptions{})
		return err
	}
	deadline := time.Now().Add(time.Minute)
	for err = write(); !apierrors.IsForbidden(err) && time.Now().Before(deadline); err = write() {
		time.Sleep(200 * time.Millisecond)
	}
	if !apierrors.IsForbidden(err) {
		t.Errorf("the hub wrote the sealed Secret: %v, want Forbidden", err)
	}
}

// TestJoinedBeforeSealingRenewsItself: a member cluster joined before the
// spoke sealed the hub's tokens (no sealing key on its anchor, the hub's
// old right to mint its token, a registration marked ServiceAccountToken)
// keeps the hub's own renewal until `cluster join` runs again, and
// `cluster list` says so; join again ends it.
func TestJoinedBeforeSealingRenewsItself(t *testing.T) {
	ctx := context.Background()
	const name = "legacy-1"
	var opts install.JoinOptions
	hub, member := installtest.HubAndMember(t, func(o *install.JoinOptions) {
		o.TokenLifetime, o.Name = registration.MinLifetime, name
		opts = *o
	})
	ns := install.Namespace
	// Make it what an earlier join left.
	role := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: "legacy-token", Namespace: ns},
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"serviceaccounts/token"}, ResourceNames: []string{"etcdfed-hub"}, Verbs: []string{"create"}}}}
	rb := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "legacy-token", Namespace: ns},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: role.Name},
		Subjects: []rbacv1.Subject{{Kind: "ServiceAccount", Name: "etcdfed-hub", Namespace: ns}}}
	for _, o := range []client.Object{role, rb} {
		if err := member.Client.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	anchor := &corev1.Secret{}
	if err := member.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: etcdfedv1.HubCredentialAnchor}, anchor); err != nil {
		t.Fatal(err)
	}
	delete(anchor.Annotations, etcdfedv1.AnnotationHubSealingKey)
	if err := member.Client.Update(ctx, anchor); err != nil {
		t.Fatal(err)
	}
	reg := &corev1.Secret{}
	if err := hub.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, reg); err != nil {
		t.Fatal(err)
	}
	reg.Annotations[registration.AnnotationCredential] = registration.CredentialServiceAccountToken
	if err := hub.Client.Update(ctx, reg); err != nil {
		t.Fatal(err)
	}
	before := string(reg.Data[registry.TokenKey])

	// The spoke seals nothing for it; the hub renews itself.
	sealedBefore := &corev1.Secret{}
	if err := member.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: etcdfedv1.HubSealedToken}, sealedBefore); err != nil {
		t.Fatal(err)
	}
	if _, err := (&credential.Reconciler{Client: member.Client, Namespace: ns}).Reconcile(ctx,
		ctrl.Request{NamespacedName: types.NamespacedName{Namespace: ns, Name: anchor.Name}}); err != nil {
		t.Fatal(err)
	}
	sealed := &corev1.Secret{}
	if err := member.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: etcdfedv1.HubSealedToken}, sealed); err != nil || sealed.ResourceVersion != sealedBefore.ResourceVersion {
		t.Errorf("the spoke sealed a token for an anchor without a key (%v)", err)
	}
	r := &registration.Runner{Client: hub.Client, Reader: hub.Client, Namespace: ns,
		Registry: engagedAs(name), Tracker: liveness.NewTracker(nil), StaleAfter: time.Minute, RenewAfter: 1e-9, Log: testr.New(t)}
	r.Pass(ctx)
	if err := hub.Client.Get(ctx, client.ObjectKeyFromObject(reg), reg); err != nil {
		t.Fatal(err)
	}
	if string(reg.Data[registry.TokenKey]) == before {
		t.Fatal("the hub did not renew the token of a cluster joined before sealing")
	}
	list, err := install.List(ctx, hub.Config)
	if err != nil || len(list) != 1 || !list[0].SelfRenewing {
		t.Fatalf("cluster list: %+v (%v), want %s shown renewing its own token", list, err, name)
	}

	// Join again: sealed, and shown so.
	opts.Progress = nil
	if err := install.Join(ctx, opts); err != nil {
		t.Fatal(err)
	}
	if list, err = install.List(ctx, hub.Config); err != nil || len(list) != 1 || list[0].SelfRenewing {
		t.Fatalf("cluster list after join again: %+v (%v), want no self-renewal", list, err)
	}
	if err := member.Client.Get(ctx, client.ObjectKeyFromObject(anchor), anchor); err != nil || anchor.Annotations[etcdfedv1.AnnotationHubSealingKey] == "" {
		t.Errorf("the anchor after join again: %v (%v), want the hub's sealing key on it", anchor.Annotations, err)
	}
}

// TestJoinRefusedWhileHubCannotOpenSealedTokens: `cluster join` of this
// version ends the hub's own token renewal in the member cluster, so
// joining under a hub that predates sealed tokens would cut that hub off
// from the cluster when its token expired. Against real apiservers: with a
// hub Deployment in the hub cluster and no sealing key (what an older
// `hub install` left), join refuses before it writes anything in the
// member cluster, and says to upgrade the hub; once a hub of this version
// has run (its registration runner makes the key) the same join passes.
func TestJoinRefusedWhileHubCannotOpenSealedTokens(t *testing.T) {
	ctx := context.Background()
	cs := installtest.Clusters(t, "hub", "member")
	hub, member := cs[0], cs[1]
	if err := install.InstallHub(ctx, install.HubInstallOptions{Hub: hub.Config, HubOptions: install.HubOptions{External: true}}); err != nil {
		t.Fatal(err)
	}
	ns := install.Namespace
	// What an older hub install left: the hub deployed, no sealing key.
	if err := hub.Client.Delete(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: tokenseal.KeySecret}}); err != nil {
		t.Fatal(err)
	}
	labels := map[string]string{"app.kubernetes.io/name": install.HubDeployment}
	dep := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: install.HubDeployment},
		Spec: appsv1.DeploymentSpec{Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "hub", Image: "etcdfed-hub:before-sealing"}}}}}}
	if err := hub.Client.Create(ctx, dep); err != nil {
		t.Fatal(err)
	}
	o := install.JoinOptions{MemberOptions: install.MemberOptions{Name: "skew-1", External: true}, Hub: hub.Config, Member: member.Config}
	err := install.Join(ctx, o)
	if err == nil || !strings.Contains(err.Error(), "predates sealed tokens") || !strings.Contains(err.Error(), "etcdfed hub install") {
		t.Fatalf("join under a hub without a sealing key: %v, want a refusal that says to upgrade the hub", err)
	}
	if err := member.Client.Get(ctx, client.ObjectKey{Name: ns}, &corev1.Namespace{}); !apierrors.IsNotFound(err) {
		t.Errorf("the refused join wrote in the member cluster (namespace %s: %v)", ns, err)
	}
	if err := hub.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: tokenseal.KeySecret}, &corev1.Secret{}); !apierrors.IsNotFound(err) {
		t.Errorf("the refused join made a sealing key the deployed hub cannot use (%v)", err)
	}

	// A hub of this version starts: its registration runner makes the key.
	rctx, cancel := context.WithCancel(ctx)
	r := &registration.Runner{Client: hub.Client, Reader: hub.Client, Namespace: ns, Interval: time.Hour,
		Registry: engagedAs("none"), Tracker: liveness.NewTracker(nil), StaleAfter: time.Minute, RenewAfter: registration.DefaultRenewAfter, Log: testr.New(t)}
	done := make(chan error, 1)
	go func() { done <- r.Start(rctx) }()
	var key hpke.PrivateKey
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		if k, err := tokenseal.ReadKey(ctx, hub.Client, ns); err == nil {
			key = k
			break
		} else if time.Now().After(deadline) {
			t.Fatalf("the hub's registration runner made no sealing key: %v", err)
		}
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if err := install.Join(ctx, o); err != nil {
		t.Fatalf("join after the hub made its key: %v", err)
	}
	anchor := &corev1.Secret{}
	if err := member.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: etcdfedv1.HubCredentialAnchor}, anchor); err != nil {
		t.Fatal(err)
	}
	if got := anchor.Annotations[etcdfedv1.AnnotationHubSealingKey]; got != tokenseal.PublicOf(key) {
		t.Errorf("the anchor carries sealing key %q, want the key the hub made, %q", got, tokenseal.PublicOf(key))
	}
}
