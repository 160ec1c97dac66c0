package etcdcluster

import (
	"testing"
	"time"

	etcdfedv1 "github.com/etcdfed/etcdfed/api/v1alpha1"
	"github.com/etcdfed/etcdfed/hub/pki"
)

// TestHubClientCertificateShortLived: the hub's own client certificate
// (etcd's root role) is issued for pki.ClientValidity (7 days) and the hub
// renews it when a third of that is left; one it issued for a year before
// is replaced at once. Before, it lived a year and a stolen copy stayed
// root that long.
func TestHubClientCertificateShortLived(t *testing.T) {
	s := ring()
	ca := withTLS(t, s)
	if life, _ := pki.Lifetime(s.pki.hubClient.Data[pki.KeyCert]); life > pki.ClientValidity+time.Hour || life < pki.ClientValidity {
		t.Fatalf("IssueClient issues for %s, want %s", life, pki.ClientValidity)
	}
	if w := pkiDue(s); w.issueHubClient {
		t.Error("a fresh 7-day hub certificate is renewed")
	}
	at := pki.RenewalTime(now.Add(-5*time.Minute), now.Add(pki.ClientValidity))
	s.now = at.Add(-time.Minute)
	if w := pkiDue(s); w.issueHubClient {
		t.Error("renewed before a third of its life is left")
	}
	s.now = at.Add(time.Minute)
	if w := pkiDue(s); !w.issueHubClient {
		t.Error("not renewed with less than a third of its life left")
	}
	s.now = now
	year, err := ca.IssueClientFor(etcdfedv1.EtcdHubUser, pki.LeafValidity, now)
	if err != nil {
		t.Fatal(err)
	}
	s.pki.hubClient = certSecret(s.ec.Namespace, pki.HubClientSecretName(s.ec), ownerLabels(s.ec), ca.CertPEM, year)
	if w := pkiDue(s); !w.issueHubClient {
		t.Error("a year-long hub certificate is kept")
	}
}
