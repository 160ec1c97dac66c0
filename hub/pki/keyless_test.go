package pki

import (
	"encoding/pem"
	"errors"
	"testing"
	"time"
)

// TestKeylessAuthorityRotatesOntoANewCA: the CA a taken-over ring runs on,
// read back from a member's Secret without its key, stores and loads as a
// keyless CA Secret, issues nothing, and a rotation from it ends on a CA
// that issues, with the old CA trusted until it is dropped.
func TestKeylessAuthorityRotatesOntoANewCA(t *testing.T) {
	now := time.Now()
	old, err := NewCA("old", now)
	if err != nil {
		t.Fatal(err)
	}
	member, err := old.IssueMember(MemberRequest{Member: "m1", DNSNames: []string{"m1.example"}}, now)
	if err != nil {
		t.Fatal(err)
	}
	// What a member's Secret tells: its certificate and its bundle.
	issuer := IssuerIn(old.CertPEM, member.CertPEM)
	if issuer == nil {
		t.Fatal("the member's issuer is not found in its bundle")
	}
	kl, err := LoadCACert(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: issuer.Raw}))
	if err != nil {
		t.Fatal(err)
	}
	if kl.CanSign() {
		t.Fatal("a CA loaded without its key says it can sign")
	}
	if _, err := kl.IssueClient("etcdfed-hub", now); !errors.Is(err, ErrNoCAKey) {
		t.Fatalf("issuing from a keyless CA: %v, want ErrNoCAKey", err)
	}
	if renew, why := kl.NeedsRenewal(member.CertPEM, []string{"m1.example"}, now); renew {
		t.Fatalf("the member's certificate of the keyless CA needs renewal: %s", why)
	}

	data := (&Authority{Signer: kl}).Data()
	if len(data[KeyKey]) != 0 || string(data[KeyKeyless]) != KeylessReason {
		t.Fatalf("keyless CA Secret data: tls.key %q, %s %q", data[KeyKey], KeyKeyless, data[KeyKeyless])
	}
	a, err := LoadAuthority(data)
	if err != nil {
		t.Fatal(err)
	}
	if !a.Keyless() {
		t.Fatal("the keyless CA Secret loads as a CA that signs")
	}
	// A Secret that says keyless but holds a key is not taken for either.
	bad := map[string][]byte{KeyCert: old.CertPEM, KeyKey: old.KeyPEM, KeyKeyless: []byte("x")}
	if _, err := LoadAuthority(bad); !errors.Is(err, ErrInvalidCA) {
		t.Fatalf("keyless marker beside a key: %v, want ErrInvalidCA", err)
	}
	// Without the marker, a missing key is an invalid CA, as before.
	if _, err := LoadAuthority(map[string][]byte{KeyCert: old.CertPEM}); !errors.Is(err, ErrInvalidCA) {
		t.Fatalf("CA Secret without a key nor the marker: %v, want ErrInvalidCA", err)
	}

	next, err := NewCA("new", now)
	if err != nil {
		t.Fatal(err)
	}
	trusting, err := LoadAuthority(a.BeginRotation(next).Data())
	if err != nil {
		t.Fatal(err)
	}
	if !trusting.Keyless() || trusting.Next == nil || trusting.Issuer(member.CertPEM) == nil {
		t.Fatalf("Trusting from a keyless CA: keyless %v, next %v", trusting.Keyless(), trusting.Next != nil)
	}
	reissuing, err := trusting.SwitchSigner()
	if err != nil {
		t.Fatal(err)
	}
	reissuing, err = LoadAuthority(reissuing.Data())
	if err != nil {
		t.Fatal(err)
	}
	if reissuing.Keyless() || reissuing.Issuer(member.CertPEM) == nil {
		t.Fatalf("Reissuing: keyless %v; the old CA's member still trusted: %v", reissuing.Keyless(), reissuing.Issuer(member.CertPEM) != nil)
	}
	if _, err := reissuing.Signer.IssueClient("etcdfed-hub", now); err != nil {
		t.Fatalf("the new CA does not issue: %v", err)
	}
	if dropped := reissuing.DropPrevious(); dropped.Issuer(member.CertPEM) != nil {
		t.Fatal("the old CA is still trusted after Dropping")
	}
}
