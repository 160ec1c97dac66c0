package pki

import (
	"bytes"
	"crypto/rand"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"iter"
	"math/big"
	"slices"
	"strings"
	"time"
)

// RevocationListValidity is how long a list the hub signs is valid
// (nextUpdate); the hub signs it again when a third is left. etcd does not
// look at the dates; other readers of the list may.
const RevocationListValidity = 30 * 24 * time.Hour

// ErrCannotSignLists says a CA cannot sign a revocation list: its key is
// not held, or its certificate lacks the cRLSign key usage (a CA you
// provided may).
var ErrCannotSignLists = errors.New("pki: the CA cannot sign revocation lists (no key held, or no cRLSign key usage)")

// maxSerialBytes is RFC 5280's bound on a serial number (20 octets).
const maxSerialBytes = 20

// CanSignLists reports whether the CA can sign a revocation list: its key
// is held and its certificate allows cRLSign.
func (ca *CA) CanSignLists() bool {
	return ca.CanSign() && ca.Cert.KeyUsage&x509.KeyUsageCRLSign != 0
}

// FormatSerial renders a serial number the way spec.tls.revokedCertificates
// takes it: lowercase hexadecimal without leading zeros.
func FormatSerial(s *big.Int) string { return s.Text(16) }

// ParseSerial reads a serial number in hexadecimal: upper or lower case,
// optionally with a 0x prefix or colons between bytes (as openssl prints
// it), at most 20 bytes (RFC 5280), positive. FormatSerial of the result
// is the spelling spec.tls.revokedCertificates takes.
func ParseSerial(text string) (*big.Int, error) {
	t := strings.TrimSpace(text)
	t = strings.TrimPrefix(strings.TrimPrefix(t, "0x"), "0X")
	if strings.Contains(t, ":") {
		for _, part := range strings.Split(t, ":") {
			if len(part) != 2 {
				return nil, fmt.Errorf("pki: serial %q: colons separate bytes of two hex digits each", text)
			}
		}
		t = strings.ReplaceAll(t, ":", "")
	}
	if t == "" {
		return nil, fmt.Errorf("pki: serial %q: no hex digits", text)
	}
	for _, c := range t {
		if !isHexDigit(c) {
			return nil, fmt.Errorf("pki: serial %q: %q is not a hex digit", text, c)
		}
	}
	n, ok := new(big.Int).SetString(t, 16)
	if !ok {
		return nil, fmt.Errorf("pki: serial %q: not hexadecimal", text)
	}
	if n.Sign() <= 0 {
		return nil, fmt.Errorf("pki: serial %q: a serial number is positive", text)
	}
	if len(n.Bytes()) > maxSerialBytes {
		return nil, fmt.Errorf("pki: serial %q: longer than 20 bytes (RFC 5280)", text)
	}
	return n, nil
}

// ParseRevocationList reads a DER revocation list (as the members'
// Secrets hold it).
func ParseRevocationList(der []byte) (*x509.RevocationList, error) {
	l, err := x509.ParseRevocationList(der)
	if err != nil {
		return nil, fmt.Errorf("parse revocation list: %w", err)
	}
	return l, nil
}

// ListedSerials are the serial numbers a revocation list revokes, in
// FormatSerial's spelling, sorted.
func ListedSerials(l *x509.RevocationList) []string {
	out := make([]string, 0, len(l.RevokedCertificateEntries))
	for _, e := range l.RevokedCertificateEntries {
		if e.SerialNumber != nil {
			out = append(out, FormatSerial(e.SerialNumber))
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// SignedBy reports whether ca signed the revocation list.
func SignedBy(l *x509.RevocationList, ca *CA) bool {
	return ca != nil && bytes.Equal(l.RawIssuer, ca.Cert.RawSubject) && l.CheckSignatureFrom(ca.Cert) == nil
}

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
// The hub writes such a list into every member's Secret
// (etcdfedv1.RevocationListKey) from spec.tls.revokedCertificates.
func (ca *CA) RevocationList(serials []*big.Int, number int64, now time.Time, validity time.Duration) ([]byte, error) {
	entries := make([]Revoked, 0, len(serials))
	for _, s := range serials {
		entries = append(entries, Revoked{Serial: s})
	}
	return ca.RevocationListOf(entries, number, now, validity)
}

// Revoked is one entry of a revocation list: a serial number and when it
// was revoked (zero: when the list is signed).
type Revoked struct {
	Serial *big.Int
	At     time.Time
}

// RevocationListOf is RevocationList with each entry's revocation time:
// entries a hub carried from the list it took over keep the time that
// list gave them (CarriedRevocations), so they age out from when they
// were revoked, not from when they were signed again.
func (ca *CA) RevocationListOf(revoked []Revoked, number int64, now time.Time, validity time.Duration) ([]byte, error) {
	if !ca.CanSignLists() {
		return nil, fmt.Errorf("%w: %s", ErrCannotSignLists, Describe(ca.Cert))
	}
	if validity <= 0 {
		return nil, errors.New("pki: a revocation list needs a positive validity")
	}
	entries := make([]x509.RevocationListEntry, 0, len(revoked))
	for _, r := range revoked {
		if r.Serial == nil || r.Serial.Sign() <= 0 {
			return nil, fmt.Errorf("pki: revoke serial %v: not a positive serial number", r.Serial)
		}
		at := r.At
		if at.IsZero() || at.After(now) {
			at = now
		}
		entries = append(entries, x509.RevocationListEntry{SerialNumber: r.Serial, RevocationTime: at.UTC()})
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

func isHexDigit(c rune) bool {
	return c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F'
}

// KeySuperseded is the key of the hub's client certificate Secret
// (HubClientSecretName) that holds the hub's own client certificates it
// replaced (renewal, a new CA, a revoked one) and that have not expired:
// PEM, certificates only, no keys. The hub lists their serials in the
// ring's revocation list until they expire, so that a stolen copy of a
// superseded hub certificate is refused as the current one would be.
const KeySuperseded = "superseded.crt"

// KeyHubCerts is the key of every member's certificate Secret (in the
// member cluster) that records the hub's client certificates of the ring:
// PEM, certificates only, no keys, each written there before the hub uses
// it and kept until it expires. The hub client Secret lives in the hub
// cluster and is lost with it; this record is what a hub rebuilt in a new
// hub cluster reads when it takes the ring over, to list every hub client
// certificate it did not issue itself (the old hub's current one among
// them), since whoever kept a copy of the lost cluster's Secrets could
// still act as root with it.
const KeyHubCerts = "hub-client-certs.crt"

// Certificates are the certificates of every CERTIFICATE block of
// pemBytes; blocks that do not parse are skipped.
func Certificates(pemBytes []byte) []*x509.Certificate {
	var out []*x509.Certificate
	for _, c := range certificateBlocks(pemBytes) {
		out = append(out, c)
	}
	return out
}

// certificateBlocks yields each CERTIFICATE block of pemBytes that parses,
// with its certificate.
func certificateBlocks(pemBytes []byte) iter.Seq2[*pem.Block, *x509.Certificate] {
	return func(yield func(*pem.Block, *x509.Certificate) bool) {
		for rest := pemBytes; ; {
			var block *pem.Block
			block, rest = pem.Decode(rest)
			if block == nil {
				return
			}
			if block.Type != "CERTIFICATE" {
				continue
			}
			if c, err := x509.ParseCertificate(block.Bytes); err == nil && !yield(block, c) {
				return
			}
		}
	}
}

// EncodeCertificates is certs in PEM, one CERTIFICATE block each.
func EncodeCertificates(certs []*x509.Certificate) []byte {
	var b bytes.Buffer
	for _, c := range certs {
		_ = pem.Encode(&b, &pem.Block{Type: "CERTIFICATE", Bytes: c.Raw})
	}
	return b.Bytes()
}

// KeySupersededPeers is the key of the hub's client certificate Secret
// (HubClientSecretName) that holds the member (peer) certificates of the
// ring the hub replaced or deleted (a renewal, a CA rotation, an earlier
// incarnation of a replaced or moved member) and that have not expired:
// PEM, certificates only, no keys, each block with a SupersededAtHeader
// and a ClusterHeader. The hub lists their serials in the ring's
// revocation list, which the members read with --peer-crl-file as well as
// --client-crl-file, until they expire. The hub's Secret, not the member
// cluster's: a member cluster (compromised, or gone) cannot drop the
// record of its own old certificates.
const KeySupersededPeers = "superseded-peers.crt"

// SupersededAtHeader and ClusterHeader are the PEM headers of a
// KeySupersededPeers block: when the hub replaced or deleted the
// certificate (RFC 3339), and the member cluster whose Secret held it.
const (
	SupersededAtHeader = "Superseded-At"
	ClusterHeader      = "Member-Cluster"
)

// Superseded is a certificate the hub replaced, as KeySupersededPeers
// keeps it.
type Superseded struct {
	Cert    *x509.Certificate
	At      time.Time
	Cluster string
}

// ParseSuperseded reads KeySupersededPeers: blocks that do not parse, or
// without a time, are skipped.
func ParseSuperseded(pemBytes []byte) []Superseded {
	var out []Superseded
	for block, c := range certificateBlocks(pemBytes) {
		at, err := time.Parse(time.RFC3339, block.Headers[SupersededAtHeader])
		if err != nil {
			continue
		}
		out = append(out, Superseded{Cert: c, At: at, Cluster: block.Headers[ClusterHeader]})
	}
	return out
}

// EncodeSuperseded is KeySupersededPeers's content for list.
func EncodeSuperseded(list []Superseded) []byte {
	var b bytes.Buffer
	for _, s := range list {
		_ = pem.Encode(&b, &pem.Block{Type: "CERTIFICATE", Bytes: s.Cert.Raw,
			Headers: map[string]string{SupersededAtHeader: s.At.UTC().Format(time.RFC3339), ClusterHeader: s.Cluster}})
	}
	return b.Bytes()
}

// SignedAt is when l was signed (RevocationList backdates its ThisUpdate
// for clock skew between clusters).
func SignedAt(l *x509.RevocationList) time.Time { return l.ThisUpdate.Add(backdateIssued) }
