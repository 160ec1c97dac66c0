package tokenseal

import (
	"crypto/ecdh"
	"crypto/hpke"
	"encoding/base64"
	"errors"
	"fmt"
	"strings"
)

// The hub's sealing key in the hub cluster.
const (
	// KeySecret is the Secret, in the hub namespace, holding the hub's
	// sealing key pair.
	KeySecret = "etcdfed-hub-sealing-key"
	// PrivateKeyKey holds the private key (RFC 9180 serialization, 32
	// bytes).
	PrivateKeyKey = "private-key"
	// PublicKeyKey holds the public key, base64 (standard encoding), as
	// `cluster join` copies it onto a member cluster's anchor.
	PublicKeyKey = "public-key"
)

// ErrOpen says a sealed token did not open with the hub's key for that
// member cluster: sealed to another key, for another anchor, or altered.
var ErrOpen = errors.New("tokenseal: the sealed token does not open with the hub's key for this member cluster")

func kem() hpke.KEM { return hpke.DHKEM(ecdh.X25519()) }

// GenerateKey returns a new private key and its public key, both
// serialized (the public key base64, as PublicKeyKey holds it).
func GenerateKey() (private []byte, public string, err error) {
	k, err := kem().GenerateKey()
	if err != nil {
		return nil, "", err
	}
	private, err = k.Bytes()
	if err != nil {
		return nil, "", err
	}
	return private, base64.StdEncoding.EncodeToString(k.PublicKey().Bytes()), nil
}

// PrivateKey reads a private key serialized by GenerateKey.
func PrivateKey(b []byte) (hpke.PrivateKey, error) {
	k, err := kem().NewPrivateKey(b)
	if err != nil {
		return nil, fmt.Errorf("the hub's sealing key: %w", err)
	}
	return k, nil
}

// PublicKey reads a public key as GenerateKey encodes it.
func PublicKey(s string) (hpke.PublicKey, error) {
	b, err := base64.StdEncoding.DecodeString(strings.TrimSpace(s))
	if err != nil {
		return nil, fmt.Errorf("the hub's public sealing key %q: not base64: %w", s, err)
	}
	k, err := kem().NewPublicKey(b)
	if err != nil {
		return nil, fmt.Errorf("the hub's public sealing key %q: %w", s, err)
	}
	return k, nil
}

// PublicOf returns the public key of a private key, encoded as
// GenerateKey does.
func PublicOf(k hpke.PrivateKey) string {
	return base64.StdEncoding.EncodeToString(k.PublicKey().Bytes())
}

// Info binds a sealed token to the one anchor it is bound to (its
// namespace, name and UID): a token sealed for one member cluster's chain
// does not open as another's.
func Info(namespace, anchor, anchorUID string) []byte {
	return []byte("etcdfed hub token v1\x00" + namespace + "\x00" + anchor + "\x00" + anchorUID)
}

// Seal seals token to the public key pub (encoded as GenerateKey does)
// with info.
func Seal(pub string, info []byte, token string) ([]byte, error) {
	pk, err := PublicKey(pub)
	if err != nil {
		return nil, err
	}
	return hpke.Seal(pk, hpke.HKDFSHA256(), hpke.AES256GCM(), info, []byte(token))
}

// Open opens what Seal sealed to k's public key with the same info.
func Open(k hpke.PrivateKey, info, sealed []byte) (string, error) {
	tok, err := hpke.Open(k, hpke.HKDFSHA256(), hpke.AES256GCM(), info, sealed)
	if err != nil {
		return "", fmt.Errorf("%w: %w", ErrOpen, err)
	}
	return string(tok), nil
}
