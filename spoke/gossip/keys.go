package gossip

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"slices"

	"github.com/hashicorp/memberlist"
)

// rekey installs key as the one that encrypts and accept beside it, then
// removes every other key (a key is installed before it is used, and
// removed after it is no longer).
func rekey(kr *memberlist.Keyring, key []byte, accept [][]byte) error {
	for _, k := range append([][]byte{key}, accept...) {
		if err := kr.AddKey(k); err != nil {
			return err
		}
	}
	if err := kr.UseKey(key); err != nil {
		return err
	}
	for _, k := range kr.GetKeys() {
		if !bytes.Equal(k, key) && !slices.ContainsFunc(accept, func(a []byte) bool { return bytes.Equal(a, k) }) {
			if err := kr.RemoveKey(k); err != nil {
				return err
			}
		}
	}
	return nil
}

func sameKeys(a, b [][]byte) bool {
	return len(a) == len(b) && !slices.ContainsFunc(a, func(k []byte) bool {
		return !slices.ContainsFunc(b, func(o []byte) bool { return bytes.Equal(o, k) })
	})
}

func cloneKeys(ks [][]byte) [][]byte {
	var out [][]byte
	for _, k := range ks {
		out = append(out, slices.Clone(k))
	}
	return out
}

// Fingerprint names a key without revealing it: the first 8 hex digits of
// its sha256, "" for none.
func Fingerprint(key []byte) string {
	if len(key) == 0 {
		return ""
	}
	s := sha256.Sum256(key)
	return hex.EncodeToString(s[:4])
}

func fingerprints(keys [][]byte) []string {
	var out []string
	for _, k := range keys {
		out = append(out, Fingerprint(k))
	}
	return out
}

// Keys returns the fingerprints of the key that encrypts and of the keys
// accepted beside it, as installed.
func (a *Agent) Keys() (encrypts string, accepts []string) {
	r := a.cur.Load()
	if r == nil {
		return "", nil
	}
	return Fingerprint(r.key), fingerprints(r.accept)
}
