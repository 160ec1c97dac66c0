package pki

import (
	"bytes"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// Secret data keys, the kubernetes.io/tls layout plus the CA bundle.
const (
	KeyCert = "tls.crt"
	KeyKey  = "tls.key"
	KeyCA   = "ca.crt"
)

// Validity of issued certificates and when they are renewed.
const (
	CAValidity   = 10 * 365 * 24 * time.Hour
	LeafValidity = 365 * 24 * time.Hour
	// ClientValidity is the life of a client certificate IssueClient
	// makes: the hub's own (its etcd user has the root role; the hub
	// renews it when a third is left, RenewalTime) and the
	// administrators' of `etcdfed client-cert` (at most
	// MaxAdminClientValidity). etcd cannot delete its root user while
	// authentication is on, so such a certificate is revoked by its
	// serial only (spec.tls.revokedCertificates, RevocationList); a short
	// life bounds what a stolen one is worth meanwhile.
	ClientValidity = 7 * 24 * time.Hour
	// DefaultAdminClientValidity and MaxAdminClientValidity: `etcdfed
	// client-cert --duration`'s default and bound.
	DefaultAdminClientValidity = 24 * time.Hour
	MaxAdminClientValidity     = ClientValidity
	RenewBefore                = 30 * 24 * time.Hour
	backdateIssued             = 5 * time.Minute // tolerate clock skew between clusters
)

// ReasonOtherCA is NeedsRenewal's reason for a certificate another CA
// signed.
const ReasonOtherCA = "signed by another CA"

// ErrInvalidCA says the CA material cannot sign.
var ErrInvalidCA = errors.New("pki: invalid CA")

// ErrNoCAKey says the CA's private key is not held: a ring taken over by
// a rebuilt hub without its escrow keeps trusting the CA it runs on, but
// nothing can be issued from it (LoadCACert).
var ErrNoCAKey = errors.New("pki: the CA's private key is not held")

// CA is a certificate authority that can sign, or, with Key nil, the
// certificate of one whose key is not held (LoadCACert).
type CA struct {
	Cert    *x509.Certificate
	Key     crypto.Signer
	CertPEM []byte
	KeyPEM  []byte
}

// CanSign reports whether the CA's key is held.
func (ca *CA) CanSign() bool { return ca != nil && ca.Key != nil }

// NewCA creates a self-signed ECDSA P-256 CA named after commonName.
func NewCA(commonName string, now time.Time) (*CA, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("generate CA key: %w", err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          serial(),
		Subject:               pkix.Name{CommonName: commonName, Organization: []string{"etcdfed"}},
		NotBefore:             now.Add(-backdateIssued),
		NotAfter:              now.Add(CAValidity),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
		SubjectKeyId:          keyID(&key.PublicKey),
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, fmt.Errorf("self-sign CA: %w", err)
	}
	keyPEM, err := encodeKey(key)
	if err != nil {
		return nil, err
	}
	return LoadCA(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), keyPEM)
}

// LoadCA parses a CA certificate and key in PEM (as a user may supply them).
func LoadCA(certPEM, keyPEM []byte) (*CA, error) {
	pair, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidCA, err)
	}
	cert, err := x509.ParseCertificate(pair.Certificate[0])
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidCA, err)
	}
	if !cert.IsCA || cert.KeyUsage&x509.KeyUsageCertSign == 0 {
		return nil, fmt.Errorf("%w: certificate %q is not a CA (basic constraints CA:TRUE and keyCertSign needed)", ErrInvalidCA, cert.Subject.CommonName)
	}
	signer, ok := pair.PrivateKey.(crypto.Signer)
	if !ok {
		return nil, fmt.Errorf("%w: key cannot sign", ErrInvalidCA)
	}
	return &CA{Cert: cert, Key: signer, CertPEM: certPEM, KeyPEM: keyPEM}, nil
}

// LoadCACert parses a CA certificate whose key is not held: the CA a
// running ring's members trust, read from their own Secrets by a hub that
// takes the ring over without the escrow. It verifies and describes
// certificates; issuing from it fails with ErrNoCAKey.
func LoadCACert(certPEM []byte) (*CA, error) {
	b, _ := pem.Decode(certPEM)
	if b == nil || b.Type != "CERTIFICATE" {
		return nil, fmt.Errorf("%w: no PEM certificate", ErrInvalidCA)
	}
	cert, err := x509.ParseCertificate(b.Bytes)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidCA, err)
	}
	if !cert.IsCA || cert.KeyUsage&x509.KeyUsageCertSign == 0 {
		return nil, fmt.Errorf("%w: certificate %q is not a CA (basic constraints CA:TRUE and keyCertSign needed)", ErrInvalidCA, cert.Subject.CommonName)
	}
	return &CA{Cert: cert, CertPEM: pem.EncodeToMemory(b)}, nil
}

// Leaf is an issued certificate with its key, in PEM.
type Leaf struct {
	CertPEM []byte
	KeyPEM  []byte
}

// MemberRequest describes a member's certificate.
type MemberRequest struct {
	// Member is the member name, used as CommonName.
	Member string
	// DNSNames are the SANs; the member's DNS name first.
	DNSNames []string
	// IPs are optional IP SANs (for a loopback or a known source address).
	IPs []net.IP
}

// PeerName is the DNS name every member certificate of a ring with DNS
// domain domain carries besides the member's own, and no client
// certificate does: etcd's peer port accepts only certificates with it
// (--peer-cert-allowed-hostname), so a consumer's certificate of the same
// CA cannot speak raft. It is never published in DNS.
func PeerName(domain string) string {
	return "etcdfed-peer." + strings.TrimSuffix(domain, ".")
}

// IssueMember issues a certificate valid for both server and client auth, so
// one certificate serves etcd's client port, its peer port (where it is
// presented in both directions) and the spoke's status reads.
func (ca *CA) IssueMember(req MemberRequest, now time.Time) (*Leaf, error) {
	if req.Member == "" || len(req.DNSNames) == 0 {
		return nil, errors.New("pki: a member certificate needs a member name and at least one DNS name")
	}
	return ca.issue(&x509.Certificate{
		Subject:     pkix.Name{CommonName: req.Member, Organization: []string{"etcdfed"}},
		DNSNames:    req.DNSNames,
		IPAddresses: req.IPs,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
	}, now)
}

// IssueClient issues a client-auth certificate for commonName (the etcd user
// name when etcd auth uses certificate CNs), valid ClientValidity. It carries
// no SAN: it can never pass as a member on a peer port that requires the
// ring's peer name (PeerName).
func (ca *CA) IssueClient(commonName string, now time.Time) (*Leaf, error) {
	return ca.IssueClientFor(commonName, ClientValidity, now)
}

// IssueClientFor is IssueClient valid for lifetime (capped at the CA's own
// expiry).
func (ca *CA) IssueClientFor(commonName string, lifetime time.Duration, now time.Time) (*Leaf, error) {
	if commonName == "" {
		return nil, errors.New("pki: a client certificate needs a common name")
	}
	if lifetime <= 0 {
		return nil, errors.New("pki: a client certificate needs a positive lifetime")
	}
	return ca.issueFor(&x509.Certificate{
		Subject:     pkix.Name{CommonName: commonName, Organization: []string{"etcdfed"}},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}, lifetime, now)
}

func (ca *CA) issue(tmpl *x509.Certificate, now time.Time) (*Leaf, error) {
	return ca.issueFor(tmpl, LeafValidity, now)
}

func (ca *CA) issueFor(tmpl *x509.Certificate, lifetime time.Duration, now time.Time) (*Leaf, error) {
	if !ca.CanSign() {
		return nil, fmt.Errorf("sign certificate for %q with CA %q: %w", tmpl.Subject.CommonName, ca.Cert.Subject.CommonName, ErrNoCAKey)
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("generate key: %w", err)
	}
	tmpl.SerialNumber = serial()
	tmpl.NotBefore = now.Add(-backdateIssued)
	tmpl.NotAfter = now.Add(lifetime)
	if tmpl.NotAfter.After(ca.Cert.NotAfter) {
		tmpl.NotAfter = ca.Cert.NotAfter
	}
	tmpl.KeyUsage = x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment
	tmpl.BasicConstraintsValid = true
	tmpl.AuthorityKeyId = ca.Cert.SubjectKeyId
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.Cert, &key.PublicKey, ca.Key)
	if err != nil {
		return nil, fmt.Errorf("sign certificate for %q: %w", tmpl.Subject.CommonName, err)
	}
	keyPEM, err := encodeKey(key)
	if err != nil {
		return nil, err
	}
	return &Leaf{CertPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), KeyPEM: keyPEM}, nil
}

// RenewalTime is when a certificate valid from notBefore to notAfter is
// renewed: RenewBefore ahead of its expiry, or when a third of its
// lifetime is left if that is earlier (a short-lived certificate).
func RenewalTime(notBefore, notAfter time.Time) time.Time {
	before := min(RenewBefore, notAfter.Sub(notBefore)/3)
	return notAfter.Add(-before)
}

// NeedsRenewal reports whether certPEM must be (re)issued: it is missing or
// unparsable, not signed by this CA, due (RenewalTime), or its DNS SANs
// differ from want (nil want: SANs not checked).
func (ca *CA) NeedsRenewal(certPEM []byte, wantDNS []string, now time.Time) (bool, string) {
	block, _ := pem.Decode(certPEM)
	if block == nil {
		return true, "no certificate"
	}
	cert, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		return true, "unparsable certificate"
	}
	if err := cert.CheckSignatureFrom(ca.Cert); err != nil {
		return true, ReasonOtherCA
	}
	if !now.Before(RenewalTime(cert.NotBefore, cert.NotAfter)) {
		return true, fmt.Sprintf("expires %s", cert.NotAfter.UTC().Format(time.RFC3339))
	}
	if wantDNS != nil && !slices.Equal(sorted(cert.DNSNames), sorted(wantDNS)) {
		return true, "DNS names changed"
	}
	return false, ""
}

// Lifetime is how long the first certificate of certPEM is valid
// (NotAfter less NotBefore, so with the backdating); ok is false when
// there is none.
func Lifetime(certPEM []byte) (d time.Duration, ok bool) {
	block, _ := pem.Decode(certPEM)
	if block == nil {
		return 0, false
	}
	cert, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		return 0, false
	}
	return cert.NotAfter.Sub(cert.NotBefore), true
}

// NotAfter returns the expiry of the first certificate of certPEM; ok is
// false when there is none that parses.
func NotAfter(certPEM []byte) (t time.Time, ok bool) {
	block, _ := pem.Decode(certPEM)
	if block == nil {
		return time.Time{}, false
	}
	cert, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		return time.Time{}, false
	}
	return cert.NotAfter, true
}

// Pool returns a cert pool holding the CA.
func (ca *CA) Pool() *x509.CertPool {
	p := x509.NewCertPool()
	p.AddCert(ca.Cert)
	return p
}

// ClientTLS returns a TLS config that presents leaf and trusts only the CA.
func ClientTLS(caPEM []byte, leaf *Leaf) (*tls.Config, error) {
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(caPEM) {
		return nil, errors.New("pki: no CA certificate in PEM")
	}
	cfg := &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	if leaf != nil {
		pair, err := tls.X509KeyPair(leaf.CertPEM, leaf.KeyPEM)
		if err != nil {
			return nil, fmt.Errorf("pki: client key pair: %w", err)
		}
		cfg.Certificates = []tls.Certificate{pair}
	}
	return cfg, nil
}

// Client file names WriteClientFiles writes, as etcdctl's --cacert,
// --cert and --key take them.
const (
	FileCA         = "ca.crt"
	FileClientCert = "client.crt"
	FileClientKey  = "client.key"
)

// WriteClientFiles writes the CA certificate and a client certificate and
// key into dir (created 0700 when missing), each file 0600.
func WriteClientFiles(dir string, caPEM []byte, leaf *Leaf) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	for name, data := range map[string][]byte{FileCA: caPEM, FileClientCert: leaf.CertPEM, FileClientKey: leaf.KeyPEM} {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o600); err != nil {
			return err
		}
	}
	return nil
}

func encodeKey(key *ecdsa.PrivateKey) ([]byte, error) {
	der, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return nil, fmt.Errorf("encode key: %w", err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: der}), nil
}

func serial() *big.Int {
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		panic(fmt.Sprintf("pki: read random serial: %v", err))
	}
	return n
}

func keyID(pub *ecdsa.PublicKey) []byte {
	b, err := x509.MarshalPKIXPublicKey(pub)
	if err != nil {
		return nil
	}
	sum := sha256.Sum256(b)
	return sum[:20]
}

func sorted(s []string) []string {
	c := slices.Clone(s)
	slices.Sort(c)
	return c
}

// CommonName is the subject common name of the first certificate in
// certPEM, "" when there is none.
func CommonName(certPEM []byte) string {
	block, _ := pem.Decode(certPEM)
	if block == nil {
		return ""
	}
	c, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		return ""
	}
	return c.Subject.CommonName
}

// Equal reports whether two PEM blobs hold the same bytes.
func Equal(a, b []byte) bool { return bytes.Equal(bytes.TrimSpace(a), bytes.TrimSpace(b)) }

// KeyFingerprint is the SHA-256 (hex) of a certificate's public key: two
// CA certificates with the same fingerprint sign for each other (a leaf
// one issued verifies against the other when the names match), so rings
// are compared by key, not by certificate.
func KeyFingerprint(cert *x509.Certificate) string {
	sum := sha256.Sum256(cert.RawSubjectPublicKeyInfo)
	return hex.EncodeToString(sum[:])
}
