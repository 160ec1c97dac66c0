package embedded

import (
	"crypto/hmac"
	"crypto/sha1"
	"crypto/sha256"
	"crypto/sha512"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"hash"
	"strings"

	"github.com/miekg/dns"
)

// TSIGKey is a shared secret for TSIG (RFC 8945).
type TSIGKey struct {
	// Name of the key, for example "etcdfed-update."; a missing trailing
	// dot is added.
	Name string
	// Algorithm, for example dns.HmacSHA256 ("hmac-sha256."); "" means
	// hmac-sha256.
	Algorithm string
	// Secret, base64 encoded as in BIND's key statements.
	Secret string
}

// keyring is a dns.TsigProvider over a fixed set of keys that also checks
// that a message uses the algorithm its key was configured with.
type keyring map[string]keyEntry

type keyEntry struct {
	alg    string
	secret []byte
	hash   func() hash.Hash
}

var tsigAlgs = map[string]func() hash.Hash{
	dns.HmacSHA1:   sha1.New,
	dns.HmacSHA224: sha256.New224,
	dns.HmacSHA256: sha256.New,
	dns.HmacSHA384: sha512.New384,
	dns.HmacSHA512: sha512.New,
}

func newKeyring(keys []TSIGKey) (keyring, error) {
	k := keyring{}
	for _, key := range keys {
		name := strings.ToLower(dns.Fqdn(key.Name))
		if _, ok := dns.IsDomainName(name); !ok || key.Name == "" {
			return nil, fmt.Errorf("TSIG key name %q is not a domain name", key.Name)
		}
		alg := strings.ToLower(dns.Fqdn(key.Algorithm))
		if key.Algorithm == "" {
			alg = dns.HmacSHA256
		}
		h, ok := tsigAlgs[alg]
		if !ok {
			return nil, fmt.Errorf("TSIG key %s: algorithm %q not supported (use hmac-sha256, hmac-sha512, hmac-sha384, hmac-sha224 or hmac-sha1)", name, key.Algorithm)
		}
		secret, err := base64.StdEncoding.DecodeString(key.Secret)
		if err != nil || len(secret) == 0 {
			return nil, fmt.Errorf("TSIG key %s: secret is not non-empty base64", name)
		}
		if _, dup := k[name]; dup {
			return nil, fmt.Errorf("TSIG key %s given twice", name)
		}
		k[name] = keyEntry{alg: alg, secret: secret, hash: h}
	}
	return k, nil
}

func (k keyring) entry(t *dns.TSIG) (keyEntry, error) {
	e, ok := k[strings.ToLower(t.Hdr.Name)]
	if !ok {
		return keyEntry{}, dns.ErrSecret
	}
	if strings.ToLower(t.Algorithm) != e.alg {
		return keyEntry{}, dns.ErrKeyAlg
	}
	return e, nil
}

// Generate implements dns.TsigProvider.
func (k keyring) Generate(msg []byte, t *dns.TSIG) ([]byte, error) {
	e, err := k.entry(t)
	if err != nil {
		return nil, err
	}
	h := hmac.New(e.hash, e.secret)
	h.Write(msg)
	return h.Sum(nil), nil
}

// Verify implements dns.TsigProvider.
func (k keyring) Verify(msg []byte, t *dns.TSIG) error {
	want, err := k.Generate(msg, t)
	if err != nil {
		return err
	}
	got, err := hex.DecodeString(t.MAC)
	if err != nil {
		return dns.ErrSig
	}
	if !hmac.Equal(got, want) {
		return dns.ErrSig
	}
	return nil
}
