package pki

import (
	"crypto/rand"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"time"
)

// RevocationList is a DER certificate revocation list signed by ca that
// revokes the certificates of the given serial numbers, valid from now for
// validity. etcd checks a client's certificate against such a list
// (--client-crl-file) on every TLS handshake, reading the file each time,
// so a list rewritten in place refuses the revoked certificate's next
// connection without a restart; a connection open before it stays open
// (TestRevocationListOnRealEtcd). etcd matches serial numbers only and does
// not check the list's signature or dates; they are set for other readers.
// DER, not PEM: etcd 3.6 and later parse the file with
// x509.ParseRevocationList, which takes DER only (3.5 took either).
//
// etcdfed does not distribute such a list to members yet: see
// docs/certificates.md.
func (ca *CA) RevocationList(serials []*big.Int, number int64, now time.Time, validity time.Duration) ([]byte, error) {
	if validity <= 0 {
		return nil, errors.New("pki: a revocation list needs a positive validity")
	}
	entries := make([]x509.RevocationListEntry, 0, len(serials))
	for _, s := range serials {
		if s == nil || s.Sign() <= 0 {
			return nil, fmt.Errorf("pki: revoke serial %v: not a positive serial number", s)
		}
		entries = append(entries, x509.RevocationListEntry{SerialNumber: s, RevocationTime: now})
	}
	der, err := x509.CreateRevocationList(rand.Reader, &x509.RevocationList{
		Number:                    big.NewInt(number),
		ThisUpdate:                now.Add(-backdateIssued),
		NextUpdate:                now.Add(validity),
		RevokedCertificateEntries: entries,
	}, ca.Cert, ca.Key)
	if err != nil {
		return nil, fmt.Errorf("sign revocation list: %w", err)
	}
	return der, nil
}

// Serial is the serial number of the first certificate of certPEM; ok is
// false when there is none.
func Serial(certPEM []byte) (s *big.Int, ok bool) {
	block, _ := pem.Decode(certPEM)
	if block == nil {
		return nil, false
	}
	cert, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		return nil, false
	}
	return cert.SerialNumber, true
}
