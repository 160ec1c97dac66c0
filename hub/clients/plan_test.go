package clients

import (
	"testing"
	"time"

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
	leaf, err := ca.IssueClient("app", now)
	if err != nil {
		t.Fatal(err)
	}
	foreign, err := other.IssueClient("app", now)
	if err != nil {
		t.Fatal(err)
	}
	renamed, err := ca.IssueClient("app-2", now)
	if err != nil {
		t.Fatal(err)
	}
	const eps = "https://main-0.etcd.test:2379,https://main-1.etcd.test:2379"
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
			d := Plan(&pki.Authority{Signer: ca}, "uid", "app", eps, tc.found, tc.now)
			if d.Action != tc.want {
				t.Fatalf("action %s (%s), want %s", d.Action, d.Reason, tc.want)
			}
			if d.Action == ActNone && !d.NotAfter.Equal(RenewAt(d.NotAfter).Add(pki.RenewBefore)) {
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
		d := Plan(a, "uid", "app", eps, &Found{Owner: "uid", Data: data}, now)
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
		if d := Plan(a, "uid", "app", eps, &Found{Owner: "uid", Data: data}, now); d.Action != ActNone {
			t.Fatalf("%s: after the write, action %s (%s)", s.name, d.Action, d.Reason)
		}
	}
}

func TestTargetDefaults(t *testing.T) {
	ec := &etcdfedv1.EtcdCluster{}
	ec.Name, ec.Namespace = "main", "etcd"
	got := TargetOf(ec, etcdfedv1.ClientSpec{Name: "app"})
	want := Target{Name: "app", Namespace: "etcd", SecretName: "main-app-etcd-client", CommonName: "app"}
	if got != want {
		t.Fatalf("got %+v, want %+v", got, want)
	}
	got = TargetOf(ec, etcdfedv1.ClientSpec{Name: "kas", Cluster: "member-1", Namespace: "kube-system", SecretName: "etcd", CommonName: "kube-apiserver"})
	want = Target{Name: "kas", Cluster: "member-1", Namespace: "kube-system", SecretName: "etcd", CommonName: "kube-apiserver"}
	if got != want {
		t.Fatalf("got %+v, want %+v", got, want)
	}
}
