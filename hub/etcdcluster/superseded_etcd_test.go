package etcdcluster

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	etcdfedv1 "github.com/etcdfed/etcdfed/api/v1alpha1"
	"github.com/etcdfed/etcdfed/dev/etcdtest"
	"github.com/etcdfed/etcdfed/dev/testenv"
	"github.com/etcdfed/etcdfed/hub/pki"
)

// TestSupersededHubCertificateRefused: the hub renews its own client
// certificate (etcd's root) through a real hub apiserver, and the next
// pass's revocation list, written where a real etcd running with
// --client-crl-file reads it, names the certificate it replaced: a stolen
// copy of the old one is refused on its next connection while the new
// one, and another certificate of the CA, are served. Before, the hub
// kept no record of the certificate it replaced: it stayed root on the
// ring until it expired (up to two more days after a renewal, up to seven
// after a CA change or a revocation of the hub's certificate). Once the
// old certificate has expired it leaves the list and, at the next
// replacement, the Secret.
func TestSupersededHubCertificateRefused(t *testing.T) {
	testenv.SkipIfShort(t, "a kube-apiserver and an etcd process")
	ctx := context.Background()
	start := time.Now()
	ca, err := pki.NewCA("ring", start.Add(-30*24*time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	empty, err := ca.RevocationList(nil, 1, start, pki.RevocationListValidity)
	if err != nil {
		t.Fatal(err)
	}
	crl, writeCRL := crlFile(t, empty)
	etcd := etcdtest.Start(t, etcdtest.Options{Members: 1, CA: ca, ExtraArgs: []string{"--client-crl-file=" + crl}})
	addr := strings.TrimPrefix(etcd.Members[0].ClientURL, "https://")

	api, r, s := tlsRing(t, start)
	for _, m := range s.ec.Status.Members {
		issueMemberCert(t, s, ca, m.Cluster, m.Name, start)
	}
	if err := api.Client.Create(ctx, caSecretOf(s, ca)); err != nil {
		t.Fatal(err)
	}
	// The hub's certificate, issued five days ago: due for renewal, valid
	// two more days.
	old, err := ca.IssueClient(etcdfedv1.EtcdHubUser, start.Add(-5*24*time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	if err := api.Client.Create(ctx, certSecret(s.ec.Namespace, pki.HubClientSecretName(s.ec), ownerLabels(s.ec), ca.CertPEM, old)); err != nil {
		t.Fatal(err)
	}
	observe := func() {
		t.Helper()
		if s.pki, err = r.observePKI(ctx, s.ec); err != nil {
			t.Fatal(err)
		}
	}
	observe()
	if err := etcdtest.GetAs(ca, old, addr, "/health"); err != nil {
		t.Fatalf("the hub's certificate before its renewal: %v", err)
	}

	w := pkiDue(s)
	if !w.issueHubClient {
		t.Fatal("a hub certificate with two of its seven days left is not renewed")
	}
	if _, err := r.applyPKI(ctx, s, w); err != nil {
		t.Fatal(err)
	}
	observe()
	fresh := s.pki.hubClientLeaf()
	if fresh == nil || pki.Equal(fresh.CertPEM, old.CertPEM) {
		t.Fatal("the hub's certificate was not replaced")
	}
	// The next pass: its list, written where etcd reads it.
	crlWork := decideCRL(s)
	list, err := r.applyCRL(s, crlWork, nil)
	if err != nil {
		t.Fatal(err)
	}
	writeCRL(list)
	oldSerial := serialOf(t, old)
	if l, err := pki.ParseRevocationList(list); err != nil || !slices.Contains(pki.ListedSerials(l), oldSerial) {
		t.Errorf("the revocation list after the hub's renewal (%v) does not name the certificate it replaced (%s)", err, oldSerial)
	}
	if err := etcdtest.GetAs(ca, old, addr, "/health"); err == nil {
		t.Error("the hub's superseded certificate is still served after the next pass's list reached the member")
	} else {
		t.Logf("the superseded certificate: %v", err)
	}
	for _, c := range []struct {
		name string
		leaf *pki.Leaf
	}{{"the hub's new certificate", fresh}, {"another certificate of the CA", etcd.Client}} {
		if err := etcdtest.GetAs(ca, c.leaf, addr, "/health"); err != nil {
			t.Errorf("%s after the list: %v", c.name, err)
		}
	}

	// Once the old certificate has expired, the list drops it, and so does
	// the Secret at the next replacement.
	expiry, _ := pki.NotAfter(old.CertPEM)
	s.now = expiry.Add(time.Minute)
	if slices.Contains(decideCRL(s).want, oldSerial) {
		t.Error("the list still names the hub's superseded certificate after it expired")
	}
	next, err := ca.IssueClient(etcdfedv1.EtcdHubUser, s.now)
	if err != nil {
		t.Fatal(err)
	}
	var kept []string
	for _, c := range supersededHubCerts(hubClientSecret(s, ca.CertPEM, next, s.now), s.now, false) {
		kept = append(kept, pki.FormatSerial(c.SerialNumber))
	}
	if want := []string{serialOf(t, fresh)}; !slices.Equal(kept, want) {
		t.Errorf("the Secret written at the next replacement keeps %v; want %v (the replaced certificate, not the expired one)", kept, want)
	}
}

// TestSupersededHubCertificatesBounded: the hub client Secret keeps at
// most maxSupersededHubCerts superseded certificates, the last to expire
// first, none expired, each once.
func TestSupersededHubCertificatesBounded(t *testing.T) {
	ca, err := pki.NewCA("ring", now.Add(-30*24*time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	var certs []*pki.Leaf
	for i := range maxSupersededHubCerts + 4 {
		l, err := ca.IssueClient(etcdfedv1.EtcdHubUser, now.Add(-time.Duration(i)*12*time.Hour))
		if err != nil {
			t.Fatal(err)
		}
		certs = append(certs, l)
	}
	var pemList []byte
	for _, l := range certs[1:] {
		pemList = append(pemList, l.CertPEM...)
	}
	pemList = append(pemList, certs[1].CertPEM...) // twice
	sec := certSecret("default", "main-hub-client", nil, ca.CertPEM, certs[0])
	sec.Data[pki.KeySuperseded] = pemList
	got := supersededHubCerts(sec, now, true)
	// Issued 0 to 19 half-days ago for 7 days: 14 have not expired.
	if len(got) != 14 {
		t.Fatalf("%d kept; want the 14 that have not expired", len(got))
	}
	for i, c := range got {
		if want := serialOf(t, certs[i]); pki.FormatSerial(c.SerialNumber) != want {
			t.Errorf("kept[%d] = %s; want %s (the last to expire first)", i, pki.FormatSerial(c.SerialNumber), want)
		}
	}
	got = supersededHubCerts(sec, now.Add(-5*24*time.Hour), true)
	if len(got) != maxSupersededHubCerts || serialOf(t, certs[0]) != pki.FormatSerial(got[0].SerialNumber) {
		t.Errorf("five days earlier: %d kept, the first %s; want %d, the last to expire first", len(got), pki.FormatSerial(got[0].SerialNumber), maxSupersededHubCerts)
	}
}

func serialOf(t *testing.T, l *pki.Leaf) string {
	t.Helper()
	n, ok := pki.Serial(l.CertPEM)
	if !ok {
		t.Fatal("no certificate")
	}
	return pki.FormatSerial(n)
}
