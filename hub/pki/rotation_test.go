package pki

import (
	"crypto/x509"
	"fmt"
	"testing"
	"time"
)

// runningMember is what a running etcd holds: the pool it loaded from its
// ca.crt when it started, and the certificate it serves (re-read on every
// handshake, so it follows the Secret).
type runningMember struct {
	name string
	pool *x509.CertPool
	leaf *x509.Certificate
}

func verifies(pool *x509.CertPool, leaf *x509.Certificate) error {
	_, err := leaf.Verify(x509.VerifyOptions{Roots: pool, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageAny}})
	return err
}

// TestRotationNeverSplitsTrust walks a CA rotation the way the hub does:
// for each of the three authority changes, every member is restarted one
// at a time, loading the bundle and a certificate of the signer. After
// every restart, every member must trust every other member's certificate
// and the hub's client certificate; at the end, only the new CA is
// trusted and everything chains to it.
func TestRotationNeverSplitsTrust(t *testing.T) {
	now := time.Now()
	old := mustCA(t, now)
	a := &Authority{Signer: old}
	issue := func(a *Authority, name string) *x509.Certificate {
		leaf, err := a.Signer.IssueMember(MemberRequest{Member: name, DNSNames: []string{name + ".etcd.test"}}, now)
		if err != nil {
			t.Fatal(err)
		}
		return parse(t, leaf.CertPEM)
	}
	members := []*runningMember{}
	for _, n := range []string{"main-0", "main-1", "main-2"} {
		members = append(members, &runningMember{name: n, pool: a.Pool(), leaf: issue(a, n)})
	}
	hub := issue(a, "hub")
	check := func(when string) {
		t.Helper()
		for _, m := range members {
			for _, o := range members {
				if err := verifies(m.pool, o.leaf); err != nil {
					t.Fatalf("%s: %s does not trust %s's certificate: %v", when, m.name, o.name, err)
				}
			}
			if err := verifies(m.pool, hub); err != nil {
				t.Fatalf("%s: %s does not trust the hub's certificate: %v", when, m.name, err)
			}
		}
	}
	next := mustCA(t, now)
	steps := []struct {
		name string
		do   func(*Authority) (*Authority, error)
	}{
		{"add the new CA", func(a *Authority) (*Authority, error) { return a.BeginRotation(next), nil }},
		{"switch the signer", func(a *Authority) (*Authority, error) { return a.SwitchSigner() }},
		{"drop the old CA", func(a *Authority) (*Authority, error) { return a.DropPrevious(), nil }},
	}
	trusts := map[string]bool{}
	for _, s := range steps {
		var err error
		// The authority is stored first (the Secret round trip is part of it).
		if a, err = s.do(a); err != nil {
			t.Fatal(err)
		}
		if a, err = LoadAuthority(a.Data()); err != nil {
			t.Fatalf("%s: %v", s.name, err)
		}
		if trusts[a.Trust()] {
			t.Fatalf("%s: trust hash %s repeats an earlier step's: members would not be restarted", s.name, a.Trust())
		}
		trusts[a.Trust()] = true
		// The hub's and consumers' client certificates are reissued as soon
		// as the signer changes; the hub trusts the bundle at once.
		if a.Issuer(certPEM(hub)) == nil || !a.Issuer(certPEM(hub)).Equal(a.Signer.Cert) {
			hub = issue(a, "hub")
		}
		check(s.name + ", before any restart")
		for _, m := range members {
			m.pool = a.Pool()
			if !a.Signer.Cert.Equal(issuerOf(t, a, m.leaf)) {
				m.leaf = issue(a, m.name)
			}
			check(fmt.Sprintf("%s, after restarting %s", s.name, m.name))
		}
	}
	if a.Rotating() {
		t.Fatal("the rotation left a second CA in the authority")
	}
	oldLeaf := parse(t, mustIssue(t, old, "stale"))
	for _, m := range members {
		if m.leaf.CheckSignatureFrom(next.Cert) != nil {
			t.Errorf("%s's certificate does not chain to the new CA", m.name)
		}
		if verifies(m.pool, oldLeaf) == nil {
			t.Errorf("%s still trusts a certificate of the old CA", m.name)
		}
	}
}

func certPEM(c *x509.Certificate) []byte {
	return pemCert(c.Raw)
}

func issuerOf(t *testing.T, a *Authority, leaf *x509.Certificate) *x509.Certificate {
	t.Helper()
	return a.Issuer(pemCert(leaf.Raw))
}

func mustIssue(t *testing.T, ca *CA, cn string) []byte {
	t.Helper()
	l, err := ca.IssueClient(cn, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	return l.CertPEM
}

func TestTrustHash(t *testing.T) {
	now := time.Now()
	a, b := mustCA(t, now), mustCA(t, now)
	ab := append(append([]byte{}, a.CertPEM...), b.CertPEM...)
	ba := append(append([]byte{}, b.CertPEM...), a.CertPEM...)
	if TrustHash(ab, a.Cert) != TrustHash(ba, a.Cert) {
		t.Error("the order of the bundle changed the hash")
	}
	if TrustHash(ab, a.Cert) == TrustHash(ab, b.Cert) {
		t.Error("another issuer kept the hash")
	}
	if TrustHash(ab, a.Cert) == TrustHash(a.CertPEM, a.Cert) {
		t.Error("a smaller bundle kept the hash")
	}
	if TrustHash(nil, a.Cert) != "" {
		t.Error("an empty bundle has a hash")
	}
}

func TestLoadAuthorityRefusesBothNextAndPrevious(t *testing.T) {
	now := time.Now()
	a := &Authority{Signer: mustCA(t, now), Next: mustCA(t, now)}
	d := a.Data()
	d[KeyPreviousCert] = mustCA(t, now).CertPEM
	if _, err := LoadAuthority(d); err == nil {
		t.Fatal("want an error for a CA Secret with both next.crt and previous.crt")
	}
	if _, err := LoadAuthority(map[string][]byte{KeyCert: a.Signer.CertPEM, KeyKey: a.Signer.KeyPEM, KeyPreviousCert: []byte("junk")}); err == nil {
		t.Fatal("want an error for an unparsable previous.crt")
	}
}

func TestBundleOutsideARotationIsTheSignerAsStored(t *testing.T) {
	ca := mustCA(t, time.Now())
	a := &Authority{Signer: ca}
	if string(a.Bundle()) != string(ca.CertPEM) {
		t.Fatal("outside a rotation the bundle must be the CA's PEM byte for byte (Secrets written before rotation existed stay current)")
	}
}
