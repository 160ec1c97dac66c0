package clients

import (
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	etcdfedv1 "github.com/etcdfed/etcdfed/api/v1alpha1"
	"github.com/etcdfed/etcdfed/hub/pki"
)

func TestPlan(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	ca, err := pki.NewCA("ring", now)
	if err != nil {
		t.Fatal(err)
	}
	other, err := pki.NewCA("other", now)
	if err != nil {
		t.Fatal(err)
	}
	leaf, err := ca.IssueClientFor("app", pki.LeafValidity, now)
	if err != nil {
		t.Fatal(err)
	}
	foreign, err := other.IssueClientFor("app", pki.LeafValidity, now)
	if err != nil {
		t.Fatal(err)
	}
	renamed, err := ca.IssueClientFor("app-2", pki.LeafValidity, now)
	if err != nil {
		t.Fatal(err)
	}
	const eps = "https://main-0.etcd.test:2379,https://main-1.etcd.test:2379"
	yearLong := Target{CommonName: "app", Lifetime: pki.LeafValidity}
	good := Data(ca.CertPEM, leaf, eps)
	with := func(k string, v []byte) map[string][]byte {
		d := Data(ca.CertPEM, leaf, eps)
		d[k] = v
		return d
	}
	for _, tc := range []struct {
		name  string
		found *Found
		now   time.Time
		want  Action
	}{
		{"missing", nil, now, ActIssue},
		{"current", &Found{Owner: "uid", Data: good}, now, ActNone},
		{"another EtcdCluster's", &Found{Owner: "uid-2", Data: good}, now, ActRefuse},
		{"not written by the hub", &Found{Data: good}, now, ActRefuse},
		{"due for renewal (within 30 days of expiry)", &Found{Owner: "uid", Data: good}, now.Add(pki.LeafValidity - pki.RenewBefore + time.Hour), ActIssue},
		{"just before renewal", &Found{Owner: "uid", Data: good}, now.Add(pki.LeafValidity - pki.RenewBefore - time.Hour), ActNone},
		{"another CA's certificate", &Found{Owner: "uid", Data: Data(ca.CertPEM, foreign, eps)}, now, ActIssue},
		{"key of another certificate", &Found{Owner: "uid", Data: with(etcdfedv1.ClientSecretKeyKey, foreign.KeyPEM)}, now, ActIssue},
		{"CA bundle replaced: rewritten, the certificate kept", &Found{Owner: "uid", Data: with(etcdfedv1.ClientSecretKeyCA, other.CertPEM)}, now, ActUpdate},
		{"certificate deleted", &Found{Owner: "uid", Data: with(etcdfedv1.ClientSecretKeyCert, nil)}, now, ActIssue},
		{"common name changed", &Found{Owner: "uid", Data: Data(ca.CertPEM, renamed, eps)}, now, ActIssue},
		{"endpoints changed", &Found{Owner: "uid", Data: with(etcdfedv1.ClientSecretKeyEndpoints, []byte("https://main-0.etcd.test:2379"))}, now, ActUpdate},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := Plan(&pki.Authority{Signer: ca}, "uid", yearLong, eps, tc.found, tc.now)
			if d.Action != tc.want {
				t.Fatalf("action %s (%s), want %s", d.Action, d.Reason, tc.want)
			}
			if d.Action == ActNone && !d.NotAfter.Equal(RenewAt(leaf.CertPEM).Add(pki.RenewBefore)) {
				t.Fatal("NotAfter not set")
			}
		})
	}
}

// During a CA rotation a consumer's Secret follows the CA Secret: the
// bundle when the new CA is added (the certificate kept), a certificate
// of the new CA when it issues, the new CA alone when the old is dropped.
func TestPlanCARotation(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	old, err := pki.NewCA("old", now)
	if err != nil {
		t.Fatal(err)
	}
	next, err := pki.NewCA("new", now)
	if err != nil {
		t.Fatal(err)
	}
	const eps = "https://main-0.etcd.test:2379"
	leaf, err := old.IssueClient("app", now)
	if err != nil {
		t.Fatal(err)
	}
	data := Data(old.CertPEM, leaf, eps)
	a := &pki.Authority{Signer: old}
	steps := []struct {
		name string
		to   func(*pki.Authority) *pki.Authority
		want Action
	}{
		{"new CA added", func(a *pki.Authority) *pki.Authority { return a.BeginRotation(next) }, ActUpdate},
		{"new CA issues", func(a *pki.Authority) *pki.Authority {
			b, err := a.SwitchSigner()
			if err != nil {
				t.Fatal(err)
			}
			return b
		}, ActIssue},
		{"old CA dropped", func(a *pki.Authority) *pki.Authority { return a.DropPrevious() }, ActUpdate},
	}
	for _, s := range steps {
		a = s.to(a)
		d := Plan(a, "uid", Target{CommonName: "app", Lifetime: pki.LeafValidity}, eps, &Found{Owner: "uid", Data: data}, now)
		if d.Action != s.want {
			t.Fatalf("%s: action %s (%s), want %s", s.name, d.Action, d.Reason, s.want)
		}
		switch d.Action {
		case ActIssue:
			l, err := a.Signer.IssueClient("app", now)
			if err != nil {
				t.Fatal(err)
			}
			data = Data(a.Bundle(), l, eps)
		case ActUpdate:
			data = Data(a.Bundle(), &pki.Leaf{CertPEM: data[etcdfedv1.ClientSecretKeyCert], KeyPEM: data[etcdfedv1.ClientSecretKeyKey]}, eps)
		}
		if got := CAHash(data); got != a.Trust() {
			t.Fatalf("%s: the Secret's caHash %s, want the CA Secret's %s", s.name, got, a.Trust())
		}
		if d := Plan(a, "uid", Target{CommonName: "app", Lifetime: pki.LeafValidity}, eps, &Found{Owner: "uid", Data: data}, now); d.Action != ActNone {
			t.Fatalf("%s: after the write, action %s (%s)", s.name, d.Action, d.Reason)
		}
	}
}

func TestTargetDefaults(t *testing.T) {
	ec := &etcdfedv1.EtcdCluster{}
	ec.Name, ec.Namespace = "main", "etcd"
	got := TargetOf(ec, etcdfedv1.ClientSpec{Name: "app"})
	want := Target{Name: "app", Namespace: "etcd", SecretName: "main-app-etcd-client", CommonName: "app", Lifetime: etcdfedv1.DefaultClientCertificateLifetime}
	if got != want {
		t.Fatalf("got %+v, want %+v", got, want)
	}
	got = TargetOf(ec, etcdfedv1.ClientSpec{Name: "kas", Cluster: "member-1", Namespace: "kube-system", SecretName: "etcd", CommonName: "kube-apiserver",
		CertificateLifetime: &metav1.Duration{Duration: 24 * time.Hour}})
	want = Target{Name: "kas", Cluster: "member-1", Namespace: "kube-system", SecretName: "etcd", CommonName: "kube-apiserver", Lifetime: 24 * time.Hour}
	if got != want {
		t.Fatalf("got %+v, want %+v", got, want)
	}
}

// Short-lived certificates: a 7-day certificate is renewed when a third of
// it is left, and a certificate longer than the consumer's lifetime (the
// year-long ones issued before lifetimes existed) is reissued at once.
func TestPlanLifetime(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	ca, err := pki.NewCA("ring", now)
	if err != nil {
		t.Fatal(err)
	}
	const eps = "https://main-0.etcd.test:2379"
	week := Target{CommonName: "app", Lifetime: 7 * 24 * time.Hour}
	short, err := ca.IssueClientFor("app", week.Lifetime, now)
	if err != nil {
		t.Fatal(err)
	}
	year, err := ca.IssueClientFor("app", pki.LeafValidity, now)
	if err != nil {
		t.Fatal(err)
	}
	a := &pki.Authority{Signer: ca}
	renew := RenewAt(short.CertPEM)
	// A third of 7 days and the 5 minutes the certificate is backdated.
	if got := expiry(short.CertPEM).Sub(renew); got < 56*time.Hour || got > 56*time.Hour+5*time.Minute {
		t.Errorf("a 7-day certificate is renewed %s before it expires, want about 56h", got)
	}
	for _, tc := range []struct {
		name string
		leaf *pki.Leaf
		at   time.Time
		want Action
	}{
		{"fresh", short, now, ActNone},
		{"just before a third is left", short, renew.Add(-time.Minute), ActNone},
		{"a third left", short, renew, ActIssue},
		{"year-long certificate of a 7-day consumer", year, now, ActIssue},
	} {
		d := Plan(a, "uid", week, eps, &Found{Owner: "uid", Data: Data(ca.CertPEM, tc.leaf, eps)}, tc.at)
		if d.Action != tc.want {
			t.Errorf("%s: action %s (%s), want %s", tc.name, d.Action, d.Reason, tc.want)
		}
	}
}

// Refusal: a spec writes consumers' Secrets in its own namespace only
// (hub or member cluster) unless the hub's policy allows more, never in a
// member cluster's ring namespace, and never under a name the hub keeps
// for its own Secrets (another ring's CA, say) unless it is the entry's
// own default.
func TestRefusal(t *testing.T) {
	ec := &etcdfedv1.EtcdCluster{}
	ec.Name, ec.Namespace = "main", "team-a"
	strict := Policy{RingNamespace: "etcdfed-system"}
	open := Policy{RingNamespace: "etcdfed-system", OtherNamespaces: true}
	for _, tc := range []struct {
		name   string
		c      etcdfedv1.ClientSpec
		policy Policy
		says   string // "" for allowed
	}{
		{"default", etcdfedv1.ClientSpec{Name: "app"}, strict, ""},
		{"own namespace in a member cluster", etcdfedv1.ClientSpec{Name: "kas", Cluster: "m1", Namespace: "team-a"}, strict, ""},
		{"another namespace in the hub", etcdfedv1.ClientSpec{Name: "app", Namespace: "team-b"}, strict, "is not the EtcdCluster's own (team-a)"},
		{"another namespace in a member cluster", etcdfedv1.ClientSpec{Name: "kas", Cluster: "m1", Namespace: "kube-system"}, strict, "is not the EtcdCluster's own"},
		{"another namespace, allowed by the policy", etcdfedv1.ClientSpec{Name: "kas", Cluster: "m1", Namespace: "kube-system"}, open, ""},
		{"the ring namespace of a member cluster", etcdfedv1.ClientSpec{Name: "kas", Cluster: "m1", Namespace: "etcdfed-system"}, open, "is the ring namespace"},
		{"another ring's CA Secret", etcdfedv1.ClientSpec{Name: "app", SecretName: "other-ca"}, strict, "ends in -ca"},
		{"another ring's hub client Secret", etcdfedv1.ClientSpec{Name: "app", SecretName: "other-hub-client"}, strict, "ends in -hub-client"},
		{"another ring's consumer default", etcdfedv1.ClientSpec{Name: "app", SecretName: "other-app-etcd-client"}, strict, "ends in -etcd-client"},
		{"a member certificate's name", etcdfedv1.ClientSpec{Name: "kas", Cluster: "m1", Namespace: "team-a", SecretName: "main-0-tls"}, strict, "ends in -tls"},
		{"its own default, spelled out", etcdfedv1.ClientSpec{Name: "app", SecretName: "main-app-etcd-client"}, strict, ""},
		{"a name of its own", etcdfedv1.ClientSpec{Name: "app", SecretName: "etcd-credentials"}, strict, ""},
	} {
		got := Refusal(ec, tc.c, TargetOf(ec, tc.c), tc.policy)
		switch {
		case tc.says == "" && got != "":
			t.Errorf("%s: refused: %s", tc.name, got)
		case tc.says != "" && !strings.Contains(got, tc.says):
			t.Errorf("%s: %q, want a refusal saying %q", tc.name, got, tc.says)
		}
	}
}
