package pki

import (
	"bytes"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"time"
)

// KeyCarried is the key of the hub's client certificate Secret
// (HubClientSecretName) that holds the revocation entries a hub carried
// forward from the list the members held when it took a running ring over
// (a hub rebuilt in a new hub cluster): the old hub's records of the
// certificates it superseded (KeySuperseded, KeySupersededPeers) were
// lost with its cluster, but the list it signed names them. JSON
// (Carried). Its presence says the carry was done: the hub reads the
// members' lists for it once, never again.
const KeyCarried = "carried-revocations.json"

// Carried is KeyCarried's content: the entries of one revocation list
// the members held, verified against the ring's CA.
type Carried struct {
	// List is the CRL number of the list they were carried from (0: none
	// was found).
	List int64 `json:"list"`
	// Signer names the CA that signed that list (Describe) and
	// SignerKey is its KeyFingerprint: the entries leave with that CA
	// (a rotation dropping it).
	Signer    string `json:"signer,omitempty"`
	SignerKey string `json:"signerKey,omitempty"`
	// At is when the hub carried them.
	At time.Time `json:"carriedAt"`
	// Entries are the serials and when the list said each was revoked.
	Entries []CarriedEntry `json:"entries,omitempty"`
}

// CarriedEntry is one carried serial (FormatSerial) with its revocation
// time.
type CarriedEntry struct {
	Serial    string    `json:"serial"`
	RevokedAt time.Time `json:"revokedAt"`
}

// Encode is KeyCarried's content for c.
func (c *Carried) Encode() []byte {
	b, _ := json.Marshal(c) // plain strings and times: cannot fail
	return b
}

// ParseCarried reads KeyCarried (fields it does not know are skipped: a
// newer hub's record). Empty input, or entries whose serial is not in
// FormatSerial's spelling, are an error: the record is the hub's own.
func ParseCarried(b []byte) (*Carried, error) {
	var c Carried
	if len(bytes.TrimSpace(b)) == 0 {
		return nil, fmt.Errorf("parse %s: empty", KeyCarried)
	}
	if err := json.Unmarshal(b, &c); err != nil {
		return nil, fmt.Errorf("parse %s: %w", KeyCarried, err)
	}
	for _, e := range c.Entries {
		n, err := ParseSerial(e.Serial)
		if err != nil || FormatSerial(n) != e.Serial {
			return nil, fmt.Errorf("parse %s: serial %q is not in the hub's spelling", KeyCarried, e.Serial)
		}
	}
	return &c, nil
}

// ListSigner is the certificate of cas that signed l (its issuer name and
// signature), nil when none did: a list a member cluster holds is trusted
// only when it verifies against one of the ring's CAs.
func ListSigner(l *x509.RevocationList, cas []*x509.Certificate) *x509.Certificate {
	for _, c := range cas {
		if c != nil && bytes.Equal(l.RawIssuer, c.RawSubject) && l.CheckSignatureFrom(c) == nil {
			return c
		}
	}
	return nil
}

// Certs are the certificates of the Authority's CAs: the one that
// issues, and during a rotation the one trusted beside it.
func (a *Authority) Certs() []*x509.Certificate {
	if a == nil {
		return nil
	}
	var out []*x509.Certificate
	for _, ca := range []*CA{a.Signer, a.Next} {
		if ca != nil {
			out = append(out, ca.Cert)
		}
	}
	if a.Previous != nil {
		out = append(out, a.Previous)
	}
	return out
}
