package registration_test

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr/testr"
	dto "github.com/prometheus/client_model/go"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/etcdfed/etcdfed/cli/install"
	"github.com/etcdfed/etcdfed/dev/installtest"
	"github.com/etcdfed/etcdfed/dev/testenv"
	"github.com/etcdfed/etcdfed/hub/liveness"
	"github.com/etcdfed/etcdfed/hub/registration"
	"github.com/etcdfed/etcdfed/hub/registry"
	"github.com/etcdfed/etcdfed/internal/tokenseal"
)

func TestMain(m *testing.M) { os.Exit(testenv.RunMain(m)) }

// engaged is the registry's view the test gives the runner: every cluster
// engaged (the runner reports it; deciding it is hub/registry's job).
type engaged struct{}

func (engaged) List(context.Context) ([]registry.MemberCluster, error) {
	return []registry.MemberCluster{{Name: "member-1", State: &registry.ClusterState{Engaged: true}}}, nil
}

func metric(t *testing.T, name string, labels map[string]string) (float64, bool) {
	t.Helper()
	mfs, err := metrics.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
	next:
		for _, m := range mf.GetMetric() {
			for _, lp := range m.GetLabel() {
				if v, ok := labels[lp.GetName()]; ok && v != lp.GetValue() {
					continue next
				}
			}
			return value(m), true
		}
	}
	return 0, false
}

func value(m *dto.Metric) float64 {
	if m.GetGauge() != nil {
		return m.GetGauge().GetValue()
	}
	return m.GetCounter().GetValue()
}

// TestRenewAndReport: against real apiservers, the runner renews the
// token `etcdfed cluster join` registered, with the one the spoke sealed
// to it, and the new one authenticates as the hub's ServiceAccount; it writes whether the
// cluster is engaged and the spoke seen on the Secret; and when renewal
// fails (the sealed token does not open with the hub's key), the Secret and
// the metrics say so.
func TestRenewAndReport(t *testing.T) {
	ctx := context.Background()
	hub, member := installtest.HubAndMember(t, func(o *install.JoinOptions) { o.TokenLifetime = registration.MinLifetime })
	get := func() *corev1.Secret {
		t.Helper()
		sec := &corev1.Secret{}
		if err := hub.Client.Get(ctx, client.ObjectKey{Namespace: install.Namespace, Name: "member-1"}, sec); err != nil {
			t.Fatal(err)
		}
		return sec
	}
	before := get()
	old, err := registration.ParseToken(string(before.Data[registry.TokenKey]))
	if err != nil {
		t.Fatal(err)
	}
	// The spoke seals the hub's next token.
	sealNext(t, member.Client, old.IssuedAt, time.Now().Add(registration.MinLifetime/3+time.Second))
	tracker := liveness.NewTracker(nil)
	r := &registration.Runner{
		Client: hub.Client, Reader: hub.Client, Namespace: install.Namespace,
		Registry: engaged{}, Tracker: tracker, StaleAfter: time.Minute,
		RenewAfter: 1e-9, // due at once
		Log:        testr.New(t),
	}
	r.Pass(ctx)

	after := get()
	tok := string(after.Data[registry.TokenKey])
	if tok == string(before.Data[registry.TokenKey]) {
		t.Fatal("the token was not renewed")
	}
	c, err := registration.ParseToken(tok)
	if err != nil {
		t.Fatal(err)
	}
	if c.Lifetime() != old.Lifetime() || c.IssuedAt.Before(old.IssuedAt) {
		t.Errorf("renewed token: issued %s, lifetime %s; want not before %s, lifetime %s", c.IssuedAt, c.Lifetime(), old.IssuedAt, old.Lifetime())
	}
	tr, err := kubernetes.NewForConfigOrDie(member.Config).AuthenticationV1().TokenReviews().Create(ctx,
		&authenticationv1.TokenReview{Spec: authenticationv1.TokenReviewSpec{Token: tok}}, metav1.CreateOptions{})
	if err != nil || !tr.Status.Authenticated || tr.Status.User.Username != "system:serviceaccount:etcdfed-system:etcdfed-hub" {
		t.Errorf("the renewed token authenticates as %q (%v, %v), want the hub's ServiceAccount", tr.Status.User.Username, tr.Status.Authenticated, err)
	}
	if string(after.Data[registry.KubeconfigSecretKey]) != string(before.Data[registry.KubeconfigSecretKey]) {
		t.Error("the renewal changed the kubeconfig: the hub would reconnect")
	}
	if v, _ := metric(t, "etcdfed_hub_member_credential_expiry_timestamp_seconds", map[string]string{"member_cluster": "member-1"}); v != float64(c.Expiry.Unix()) {
		t.Errorf("expiry metric %v, want %d", v, c.Expiry.Unix())
	}
	if v, _ := metric(t, "etcdfed_hub_member_credential_renewals_total", map[string]string{"member_cluster": "member-1", "result": "ok"}); v != 1 {
		t.Errorf("renewals ok %v, want 1", v)
	}
	// Exported at 0 before any failure, so that the first failure is an
	// increase (EtcdfedHubCredentialRenewalFailing).
	if v, ok := metric(t, "etcdfed_hub_member_credential_renewals_total", map[string]string{"member_cluster": "member-1", "result": "error"}); !ok || v != 0 {
		t.Errorf("renewals error %v (exported: %v) before any failure, want 0", v, ok)
	}
	s, ok := registration.StatusOf(after.Annotations)
	if !ok || !s.Engaged || s.Spoke != registration.SpokeUnseen || s.Problem != "" {
		t.Errorf("status %+v (%v), want engaged, spoke unseen", s, ok)
	}

	// The spoke's Lease seen: Alive, and its time exported.
	tracker.ObserveLease("member-1", time.Now(), "spoke-0", time.Minute)
	r.RenewAfter = registration.DefaultRenewAfter
	r.Pass(ctx)
	if s, _ := registration.StatusOf(get().Annotations); s.Spoke != registration.SpokeAlive {
		t.Errorf("spoke %s after its Lease was seen, want Alive", s.Spoke)
	}
	if v, ok := metric(t, "etcdfed_hub_spoke_last_seen_timestamp_seconds", map[string]string{"member_cluster": "member-1"}); !ok || v < float64(time.Now().Add(-time.Minute).Unix()) {
		t.Errorf("spoke last seen %v (%v), want about now", v, ok)
	}

	// Renewal fails once the hub's sealing key is not the one the spoke
	// seals to (replaced by hand): said on the Secret and counted.
	if err := hub.Client.Delete(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: install.Namespace, Name: tokenseal.KeySecret}}); err != nil {
		t.Fatal(err)
	}
	if _, err := tokenseal.EnsureKey(ctx, hub.Client, install.Namespace, nil, false); err != nil {
		t.Fatal(err)
	}
	r.RenewAfter = 1e-9
	r.Pass(ctx)
	s, _ = registration.StatusOf(get().Annotations)
	if !strings.Contains(s.Problem, "renewing the credential: open the sealed token") {
		t.Errorf("problem %q after a failed renewal, want it said", s.Problem)
	}
	if v, _ := metric(t, "etcdfed_hub_member_credential_renewals_total", map[string]string{"member_cluster": "member-1", "result": "error"}); v != 1 {
		t.Errorf("renewals error %v, want 1", v)
	}
}
