package pki

import (
	"bytes"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"

	"github.com/etcdfed/etcdfed/pkg/catrust"
)

// Keys of the CA Secret while the CA is rotated. tls.crt and tls.key are
// always the CA that issues; next.* is the new CA while members learn to
// trust it (it does not issue yet); previous.crt is the old CA while
// members get certificates of the new one (it is trusted, no longer
// issues). Outside a rotation neither is present.
const (
	KeyNextCert     = "next.crt"
	KeyNextKey      = "next.key"
	KeyPreviousCert = "previous.crt"
)

// KeyKeyless marks a CA Secret whose tls.crt is a CA without its key
// (tls.key empty): a ring taken over without the escrow, whose members
// trust that CA until a rotation (asked for at the take-over) replaces
// it. Its value says why.
const KeyKeyless = "ca.keyless"

// Authority is the content of a CA Secret: the CA that issues, and during
// a rotation the CA trusted beside it.
type Authority struct {
	// Signer issues every certificate.
	Signer *CA
	// Next is the new CA of a rotation's first phase: trusted, not issuing.
	Next *CA
	// Previous is the old CA of a rotation's second phase: trusted, not
	// issuing; its key is gone.
	Previous *x509.Certificate
	// PreviousPEM is Previous in PEM.
	PreviousPEM []byte
}

// LoadAuthority reads a CA Secret's data.
func LoadAuthority(data map[string][]byte) (*Authority, error) {
	var signer *CA
	var err error
	if len(data[KeyKeyless]) > 0 {
		if len(data[KeyKey]) > 0 {
			return nil, fmt.Errorf("%w: %s is set and %s holds a key", ErrInvalidCA, KeyKeyless, KeyKey)
		}
		signer, err = LoadCACert(data[KeyCert])
	} else {
		signer, err = LoadCA(data[KeyCert], data[KeyKey])
	}
	if err != nil {
		return nil, err
	}
	a := &Authority{Signer: signer}
	if len(data[KeyNextCert]) > 0 {
		if a.Next, err = LoadCA(data[KeyNextCert], data[KeyNextKey]); err != nil {
			return nil, fmt.Errorf("%s: %w", KeyNextCert, err)
		}
	}
	if len(data[KeyPreviousCert]) > 0 {
		b, _ := pem.Decode(data[KeyPreviousCert])
		if b == nil {
			return nil, fmt.Errorf("%w: %s holds no PEM certificate", ErrInvalidCA, KeyPreviousCert)
		}
		if a.Previous, err = x509.ParseCertificate(b.Bytes); err != nil {
			return nil, fmt.Errorf("%w: %s: %w", ErrInvalidCA, KeyPreviousCert, err)
		}
		a.PreviousPEM = data[KeyPreviousCert]
	}
	if a.Next != nil && a.Previous != nil {
		return nil, fmt.Errorf("%w: both %s and %s are set (a rotation has one of them at a time)", ErrInvalidCA, KeyNextCert, KeyPreviousCert)
	}
	return a, nil
}

// Data renders the authority as a CA Secret's data.
func (a *Authority) Data() map[string][]byte {
	d := map[string][]byte{KeyCert: a.Signer.CertPEM, KeyKey: a.Signer.KeyPEM}
	if !a.Signer.CanSign() {
		d[KeyKey], d[KeyKeyless] = []byte{}, []byte(KeylessReason)
	}
	if a.Next != nil {
		d[KeyNextCert], d[KeyNextKey] = a.Next.CertPEM, a.Next.KeyPEM
	}
	if a.Previous != nil {
		d[KeyPreviousCert] = a.PreviousPEM
	}
	return d
}

// KeylessReason is the value of KeyKeyless the hub writes.
const KeylessReason = "taken over without the CA's key: the ring is rotated onto a new CA"

// Keyless reports whether the issuing CA's key is not held.
func (a *Authority) Keyless() bool { return a != nil && !a.Signer.CanSign() }

// Rotating reports whether a CA is trusted beside the signer.
func (a *Authority) Rotating() bool { return a.Next != nil || a.Previous != nil }

// Bundle is the CA bundle every member and consumer trusts: the signer,
// and during a rotation the CA beside it. Outside a rotation it is the
// signer's PEM as stored.
func (a *Authority) Bundle() []byte {
	if !a.Rotating() {
		return a.Signer.CertPEM
	}
	var b bytes.Buffer
	for _, p := range [][]byte{a.Signer.CertPEM, a.nextPEM(), a.PreviousPEM} {
		if len(p) == 0 {
			continue
		}
		b.Write(bytes.TrimSpace(p))
		b.WriteByte('\n')
	}
	return b.Bytes()
}

func (a *Authority) nextPEM() []byte {
	if a.Next == nil {
		return nil
	}
	return a.Next.CertPEM
}

// Pool is the bundle as a cert pool.
func (a *Authority) Pool() *x509.CertPool {
	p := x509.NewCertPool()
	p.AddCert(a.Signer.Cert)
	if a.Next != nil {
		p.AddCert(a.Next.Cert)
	}
	if a.Previous != nil {
		p.AddCert(a.Previous)
	}
	return p
}

// BeginRotation returns the authority with next set to a new CA: the first
// step of a rotation.
func (a *Authority) BeginRotation(next *CA) *Authority {
	return &Authority{Signer: a.Signer, Next: next}
}

// SwitchSigner returns the authority with the new CA issuing and the old
// one kept as previous (trusted, no longer issuing; its key dropped).
func (a *Authority) SwitchSigner() (*Authority, error) {
	if a.Next == nil {
		return nil, errors.New("pki: no next CA to switch to")
	}
	return &Authority{Signer: a.Next, Previous: a.Signer.Cert, PreviousPEM: a.Signer.CertPEM}, nil
}

// DropPrevious returns the authority without the old CA.
func (a *Authority) DropPrevious() *Authority { return &Authority{Signer: a.Signer} }

// TrustHash identifies a CA bundle together with the CA that issued a
// certificate (catrust.Hash): the certificates of the bundle in any
// order, and the issuer. It is "" when bundlePEM holds no certificate.
func TrustHash(bundlePEM []byte, issuer *x509.Certificate) string {
	return catrust.Hash(bundlePEM, issuer)
}

// Trust is the TrustHash of what the authority wants every member and
// consumer to hold: its bundle, and certificates of its signer.
func (a *Authority) Trust() string { return TrustHash(a.Bundle(), a.Signer.Cert) }

// Issuer is the CA among the authority's that signed certPEM, nil when
// none did (or certPEM does not parse).
func (a *Authority) Issuer(certPEM []byte) *x509.Certificate {
	return IssuerIn(a.Bundle(), certPEM)
}

// IssuerIn is the certificate of bundlePEM that signed certPEM, nil when
// none did.
func IssuerIn(bundlePEM, certPEM []byte) *x509.Certificate {
	return catrust.IssuerIn(bundlePEM, certPEM)
}

// Describe names a CA certificate for status and events: subject and
// serial.
func Describe(c *x509.Certificate) string {
	if c == nil {
		return ""
	}
	return fmt.Sprintf("%s (serial %s)", c.Subject.CommonName, c.SerialNumber.Text(16))
}

func pemCert(der []byte) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
}
