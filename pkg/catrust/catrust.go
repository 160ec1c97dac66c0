// Package catrust names a CA trust: the CA bundle a member or consumer
// holds (ca.crt) together with the CA of that bundle that issued its
// certificate. The hub writes the name of the trust it wants into a
// member's spec while the ring's CA is rotated (spec.tls.caHash); the
// spoke starts the member's pod only once the member's Secret holds that
// trust, since etcd reads its trusted CAs only when it starts.
//
// It has no dependency beyond the standard library, so the spoke and the
// member pods' helper can link it.
package catrust

import (
	"crypto/sha256"
	"crypto/x509"
	"encoding/hex"
	"encoding/pem"
	"slices"
)

// Hash identifies a CA bundle together with the CA that issued a
// certificate: the certificates of the bundle in any order, and the
// issuer. It is "" when bundlePEM holds no certificate.
func Hash(bundlePEM []byte, issuer *x509.Certificate) string {
	var sums []string
	rest := bundlePEM
	for {
		var b *pem.Block
		b, rest = pem.Decode(rest)
		if b == nil {
			break
		}
		if b.Type != "CERTIFICATE" {
			continue
		}
		s := sha256.Sum256(b.Bytes)
		sums = append(sums, hex.EncodeToString(s[:]))
	}
	if len(sums) == 0 {
		return ""
	}
	slices.Sort(sums)
	sums = slices.Compact(sums)
	h := sha256.New()
	for _, s := range sums {
		h.Write([]byte(s))
		h.Write([]byte{'\n'})
	}
	if issuer != nil {
		h.Write([]byte("issuer "))
		s := sha256.Sum256(issuer.Raw)
		h.Write(s[:])
	}
	return hex.EncodeToString(h.Sum(nil))[:16]
}

// IssuerIn is the certificate of bundlePEM that signed certPEM, nil when
// none did.
func IssuerIn(bundlePEM, certPEM []byte) *x509.Certificate {
	b, _ := pem.Decode(certPEM)
	if b == nil {
		return nil
	}
	leaf, err := x509.ParseCertificate(b.Bytes)
	if err != nil {
		return nil
	}
	rest := bundlePEM
	for {
		var cb *pem.Block
		cb, rest = pem.Decode(rest)
		if cb == nil {
			return nil
		}
		ca, err := x509.ParseCertificate(cb.Bytes)
		if err != nil {
			continue
		}
		if leaf.CheckSignatureFrom(ca) == nil {
			return ca
		}
	}
}

// Held is the Hash of what a Secret holds: its bundle, and the CA of the
// bundle that issued its certificate.
func Held(bundlePEM, certPEM []byte) string { return Hash(bundlePEM, IssuerIn(bundlePEM, certPEM)) }
