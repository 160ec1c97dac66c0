package backupstore

import (
	"path"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// TimeLayout is the time in snapshot names: UTC, ISO 8601 basic format with
// milliseconds. It sorts as text and has no ':' (which some filesystems and
// tools refuse in names).
const TimeLayout = "20060102T150405.000Z"

// Extensions of a snapshot object and of its metadata sidecar.
const (
	SnapshotExt = ".db"
	MetadataExt = ".json"
)

// ClusterDir is the directory (with a trailing '/') of one etcd cluster's
// snapshots, relative to the store's prefix.
func ClusterDir(namespace, name, clusterID string) string {
	return path.Join(namespace, name, clusterID) + "/"
}

// SnapshotKey names the snapshot taken at t holding revision rev.
func SnapshotKey(dir string, t time.Time, rev int64) string {
	return dir + t.UTC().Format(TimeLayout) + "-rev" + strconv.FormatInt(rev, 10) + SnapshotExt
}

// MetadataKey is the sidecar of a snapshot key.
func MetadataKey(snapshotKey string) string {
	return strings.TrimSuffix(snapshotKey, SnapshotExt) + MetadataExt
}

var snapshotName = regexp.MustCompile(`^([0-9]{8}T[0-9]{6}[.][0-9]{3}Z)-rev([0-9]+)[.]db$`)

// Snapshot is one stored snapshot, as its name describes it.
type Snapshot struct {
	// Key is the object's key relative to the store's prefix.
	Key string
	// Time the snapshot was taken.
	Time time.Time
	// Revision it holds.
	Revision int64
	// Size of the object in bytes (from the listing).
	Size int64
	// StoredAt is when the store says the object was last written (its
	// listing's modification time); zero when unknown.
	StoredAt time.Time
}

// nameSkew is how far a name's time may run ahead of the store's own
// time of the write (the clocks of the writer and the store differ).
const nameSkew = 5 * time.Minute

// Effective is the time the snapshot counts as taken: the time in its
// name, but never later than the store's own time of the write. A name
// dated in the future (a wrong clock, or an object planted to stay
// "latest") counts as written when the store received it, so every
// snapshot taken after it is newer.
func (s Snapshot) Effective() time.Time {
	if !s.StoredAt.IsZero() && s.Time.After(s.StoredAt.Add(nameSkew)) {
		return s.StoredAt
	}
	return s.Time
}

// ParseKey reads a snapshot key. ok is false for any other object, which
// etcdfed never deletes.
func ParseKey(key string) (Snapshot, bool) {
	m := snapshotName.FindStringSubmatch(path.Base(key))
	if m == nil {
		return Snapshot{}, false
	}
	t, err := time.Parse(TimeLayout, m[1])
	if err != nil {
		return Snapshot{}, false
	}
	rev, err := strconv.ParseInt(m[2], 10, 64)
	if err != nil {
		return Snapshot{}, false
	}
	return Snapshot{Key: key, Time: t, Revision: rev}, true
}

// Metadata is the sidecar written beside each snapshot.
type Metadata struct {
	// Namespace and Name of the EtcdCluster, its UID and etcd cluster ID.
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	UID       string `json:"uid,omitempty"`
	ClusterID string `json:"clusterID"`
	// Member the snapshot was streamed from, and its etcd ID (hex).
	Member   string `json:"member,omitempty"`
	MemberID string `json:"memberID,omitempty"`
	// Revision, content hash (etcdutl's crc32, hex), live keys and etcd's
	// storage version, as read from the snapshot itself.
	Revision       int64  `json:"revision"`
	Hash           string `json:"hash"`
	TotalKeys      int    `json:"totalKeys"`
	StorageVersion string `json:"storageVersion,omitempty"`
	// SHA256 of the database (equal to the checksum etcd appended) and the
	// size of the object, checksum included.
	SHA256    string `json:"sha256"`
	SizeBytes int64  `json:"sizeBytes"`
	// TakenAt is when the stream started; Trigger why (Schedule, Request).
	TakenAt time.Time `json:"takenAt"`
	Trigger string    `json:"trigger,omitempty"`
	// MAC authenticates the snapshot (mac.go): "hmac-sha256:" and the hex
	// HMAC under the ring's snapshot key. Empty on snapshots written
	// before snapshots were signed.
	MAC string `json:"mac,omitempty"`
}
