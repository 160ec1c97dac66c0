package backupstore

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/etcdfed/etcdfed/pkg/etcdsnapshot"
)

// A snapshot the hub wrote carries a MAC in its sidecar: HMAC-SHA256,
// under a key of the ring's kept in the hub cluster, over the object's
// key and the sidecar's description of it (the ring, its etcd cluster ID,
// the revision, the sha256 and size of the file, when it was taken). The
// sha256 ties the MAC to the file's bytes; the object key ties it to its
// name, so an old snapshot copied under a newer name is refused too. A
// restore checks the MAC before it downloads the snapshot: an object the
// hub did not write never reaches a database reader.

// MACKeySize is the size of a snapshot key.
const MACKeySize = 32

// macScheme prefixes Metadata.MAC.
const macScheme = "hmac-sha256:"

// ErrUnauthenticated: the sidecar's MAC is missing or does not match the
// ring's snapshot key.
var ErrUnauthenticated = fmt.Errorf("%w: not authenticated by the ring's snapshot key", etcdsnapshot.ErrInvalid)

// NewMACKey returns a random snapshot key.
func NewMACKey() ([]byte, error) {
	k := make([]byte, MACKeySize)
	if _, err := rand.Read(k); err != nil {
		return nil, fmt.Errorf("generate snapshot key: %w", err)
	}
	return k, nil
}

// macInput is what the MAC covers, one field per line.
func (md Metadata) macInput(objectKey string) []byte {
	fields := []string{
		"etcdfed-snapshot-v1", objectKey, md.Namespace, md.Name, md.UID, md.ClusterID,
		strconv.FormatInt(md.Revision, 10), md.SHA256, strconv.FormatInt(md.SizeBytes, 10),
		md.TakenAt.UTC().Format(time.RFC3339Nano),
	}
	return []byte(strings.Join(fields, "\n"))
}

func (md Metadata) mac(objectKey string, key []byte) []byte {
	h := hmac.New(sha256.New, key)
	h.Write(md.macInput(objectKey))
	return h.Sum(nil)
}

// Sign sets md.MAC for the snapshot stored as objectKey.
func (md *Metadata) Sign(objectKey string, key []byte) {
	md.MAC = macScheme + hex.EncodeToString(md.mac(objectKey, key))
}

// CheckMAC checks md.MAC for the snapshot stored as objectKey.
func (md Metadata) CheckMAC(objectKey string, key []byte) error {
	if md.MAC == "" {
		return fmt.Errorf("%w: the sidecar of %s has no MAC (written by a hub before snapshots were signed, or not by a hub)", ErrUnauthenticated, objectKey)
	}
	got, ok := strings.CutPrefix(md.MAC, macScheme)
	if !ok {
		return fmt.Errorf("%w: %s: unknown MAC scheme in %q", ErrUnauthenticated, objectKey, md.MAC)
	}
	b, err := hex.DecodeString(got)
	if err != nil || !hmac.Equal(b, md.mac(objectKey, key)) {
		return fmt.Errorf("%w: %s: the MAC does not match (the object or its sidecar was changed or renamed, or another ring's key signed it)", ErrUnauthenticated, objectKey)
	}
	return nil
}

// KeySecretName is the hub-cluster Secret, in the EtcdCluster's
// namespace, that keeps the snapshot key of the EtcdCluster name. It has
// no owner: it outlives its EtcdCluster, whose snapshots a new one may be
// founded from.
func KeySecretName(name string) string { return name + "-snapshot-key" }

// KeySecretField is the Secret's data key holding the key.
const KeySecretField = "key"
