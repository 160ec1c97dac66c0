package pki_test

import (
	"crypto/x509"
	"math/big"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/etcdfed/etcdfed/hub/pki"
)

// crdSerial is spec.tls.revokedCertificates' item pattern and bound
// (api/v1alpha1).
var crdSerial = regexp.MustCompile(`^[1-9a-f][0-9a-f]{0,39}$`)

// TestParseSerial: what `etcdfed client-cert revoke --serial` takes, and
// that FormatSerial spells every accepted serial as the CRD admits it.
func TestParseSerial(t *testing.T) {
	for _, tc := range []struct {
		in, want string // want "" means refused
	}{
		{"5c1f", "5c1f"},
		{"5C1F", "5c1f"},
		{"0x5c1f", "5c1f"},
		{"5C:1F", "5c1f"},
		{"00:5c:1f", "5c1f"},
		{" 5c1f\n", "5c1f"},
		{"1", "1"},
		{strings.Repeat("ff", 20), strings.Repeat("ff", 20)},
		{strings.Repeat("ff", 21), ""},
		{"0", ""},
		{"00", ""},
		{"", ""},
		{"0x", ""},
		{"-5", ""},
		{"5g", ""},
		{"5c:1", ""},
		{"5c::1f", ""},
		{"+5", ""},
	} {
		n, err := pki.ParseSerial(tc.in)
		switch {
		case tc.want == "" && err == nil:
			t.Errorf("ParseSerial(%q) = %s, want an error", tc.in, pki.FormatSerial(n))
		case tc.want != "" && err != nil:
			t.Errorf("ParseSerial(%q): %v", tc.in, err)
		case tc.want != "" && pki.FormatSerial(n) != tc.want:
			t.Errorf("ParseSerial(%q) = %s, want %s", tc.in, pki.FormatSerial(n), tc.want)
		}
	}
	ca, err := pki.NewCA("serial", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	leaf, err := ca.IssueClient("root", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	s, ok := pki.Serial(leaf.CertPEM)
	if !ok || !crdSerial.MatchString(pki.FormatSerial(s)) {
		t.Fatalf("an issued certificate's serial %v is not spelled as the CRD admits it", s)
	}
}

// FuzzParseSerial: whatever ParseSerial accepts is positive, at most 20
// bytes, spelled by FormatSerial as the CRD admits it, and parses back to
// itself.
func FuzzParseSerial(f *testing.F) {
	for _, s := range []string{"5c1f", "5C:1F", "0x01", "0", "", strings.Repeat("f", 40), "ab:cd:ef", "::", "0x0x1"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		n, err := pki.ParseSerial(in)
		if err != nil {
			return
		}
		if n.Sign() <= 0 || len(n.Bytes()) > 20 {
			t.Fatalf("ParseSerial(%q) = %v: not a positive serial of at most 20 bytes", in, n)
		}
		text := pki.FormatSerial(n)
		if !crdSerial.MatchString(text) {
			t.Fatalf("ParseSerial(%q) spelled %q, which the CRD refuses", in, text)
		}
		back, err := pki.ParseSerial(text)
		if err != nil || back.Cmp(n) != 0 {
			t.Fatalf("ParseSerial(FormatSerial(%v)) = %v, %v", n, back, err)
		}
	})
}

// TestRevocationListSigners: a list lists exactly its serials and is
// signed by its CA (SignedBy, not by another); a CA without the cRLSign
// key usage, or without its key, signs none (ErrCannotSignLists).
func TestRevocationListSigners(t *testing.T) {
	now := time.Now()
	ca, err := pki.NewCA("one", now)
	if err != nil {
		t.Fatal(err)
	}
	other, err := pki.NewCA("other", now)
	if err != nil {
		t.Fatal(err)
	}
	der, err := ca.RevocationList([]*big.Int{big.NewInt(0x5c1f), big.NewInt(7), big.NewInt(7)}, 3, now, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	l, err := pki.ParseRevocationList(der)
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(pki.ListedSerials(l), ","); got != "5c1f,7" {
		t.Errorf("listed %s, want 5c1f,7", got)
	}
	if l.Number.Int64() != 3 {
		t.Errorf("number %v, want 3", l.Number)
	}
	if !pki.SignedBy(l, ca) || pki.SignedBy(l, other) {
		t.Errorf("SignedBy(own CA) = %v, SignedBy(other CA) = %v; want true, false", pki.SignedBy(l, ca), pki.SignedBy(l, other))
	}
	noCRLSign := *ca
	cert := *ca.Cert
	cert.KeyUsage &^= x509.KeyUsageCRLSign
	noCRLSign.Cert = &cert
	if noCRLSign.CanSignLists() {
		t.Error("a CA without cRLSign can sign lists")
	}
	if _, err := noCRLSign.RevocationList(nil, 1, now, time.Hour); err == nil {
		t.Error("a CA without cRLSign signed a list")
	}
	keyless := &pki.CA{Cert: ca.Cert, CertPEM: ca.CertPEM}
	if keyless.CanSignLists() {
		t.Error("a CA without its key can sign lists")
	}
}
