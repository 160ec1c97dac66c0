package etcdsnapshot

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"os"
	"time"

	bolt "go.etcd.io/bbolt"
	"go.etcd.io/etcd/etcdutl/v3/snapshot"
	"go.uber.org/zap"
)

// Sentinel errors. Every check failure wraps ErrInvalid.
var (
	// ErrInvalid says a snapshot failed a check and must not be used.
	ErrInvalid = errors.New("etcdsnapshot: invalid snapshot")
	// ErrChecksumMismatch: the sha256 etcd appended does not match the data.
	ErrChecksumMismatch = fmt.Errorf("%w: sha256 of the database does not match the checksum etcd appended (corrupted in transit or at rest)", ErrInvalid)
	// ErrNoChecksum: the file does not end in etcd's sha256 (it was cut
	// short, or it is a copy of a data directory's db, not a snapshot).
	ErrNoChecksum = fmt.Errorf("%w: no sha256 appended (truncated stream, or not a snapshot taken through the etcd API)", ErrInvalid)
	// ErrCorrupt: bbolt's consistency check failed or the keys cannot be read.
	ErrCorrupt = fmt.Errorf("%w: database check failed", ErrInvalid)
	// ErrStaleRevision: the snapshot's revision is below one the member had
	// already reported.
	ErrStaleRevision = fmt.Errorf("%w: revision lower than the member reported before the snapshot", ErrInvalid)
)

// sectorSize: etcd's restore recognises an appended sha256 by the file size
// (a bbolt file is a whole number of 512-byte sectors; see etcdutl's
// hasChecksum).
const sectorSize = 512

// HasChecksum reports whether a snapshot file of size n ends in a sha256.
func HasChecksum(n int64) bool { return n%sectorSize == sha256.Size }

// Info describes a checked snapshot.
type Info struct {
	// Size of the file in bytes, checksum included.
	Size int64
	// SHA256 of the database part, hex (equal to the appended checksum).
	SHA256 string
	// Revision is the revision a member restored from the snapshot starts
	// at: the highest revision of a key, or of the last compaction when that
	// is higher, and at least 1.
	Revision int64
	// Hash is the content hash `etcdutl snapshot status` prints (crc32c over
	// every bucket's keys and values).
	Hash uint32
	// TotalKeys is the number of live keys.
	TotalKeys int
	// StorageVersion is the etcd storage version recorded in the snapshot
	// (3.6 and later), such as "3.6.0".
	StorageVersion string
}

// HashHex is Hash as etcdutl prints it.
func (i Info) HashHex() string { return fmt.Sprintf("%08x", i.Hash) }

// checkingWriter hashes everything but the last sha256.Size bytes written,
// which it keeps aside as the expected checksum.
type checkingWriter struct {
	w    io.Writer
	h    hash.Hash
	tail []byte
	n    int64
}

func newCheckingWriter(w io.Writer) *checkingWriter {
	return &checkingWriter{w: w, h: sha256.New(), tail: make([]byte, 0, 2*sha256.Size)}
}

func (c *checkingWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	p = p[:n]
	// Hash what can no longer be part of the trailing checksum.
	if len(p) >= sha256.Size {
		c.h.Write(c.tail)
		c.h.Write(p[:len(p)-sha256.Size])
		c.tail = append(c.tail[:0], p[len(p)-sha256.Size:]...)
	} else {
		c.tail = append(c.tail, p...)
		if extra := len(c.tail) - sha256.Size; extra > 0 {
			c.h.Write(c.tail[:extra])
			c.tail = append(c.tail[:0], c.tail[extra:]...)
		}
	}
	return n, err
}

// check compares the data's sha256 with the trailing checksum.
func (c *checkingWriter) check() (string, error) {
	if !HasChecksum(c.n) || len(c.tail) != sha256.Size {
		return "", fmt.Errorf("%w (%d bytes)", ErrNoChecksum, c.n)
	}
	sum := c.h.Sum(nil)
	if !bytes.Equal(sum, c.tail) {
		return "", fmt.Errorf("%w: appended %x, computed %x", ErrChecksumMismatch, c.tail, sum)
	}
	return hex.EncodeToString(sum), nil
}

// Save writes the snapshot stream r to path (created, mode 0600, fsynced)
// and checks it: the appended sha256 while the bytes go by, then the
// database as Status does. minRevision, when positive, is a revision the
// member reported before the stream started; a snapshot below it is
// refused. The file is removed when any check fails.
func Save(r io.Reader, path string, minRevision int64) (Info, error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
	if err != nil {
		return Info{}, fmt.Errorf("create snapshot file: %w", err)
	}
	info, err := save(r, f)
	if cerr := f.Close(); cerr != nil && err == nil {
		err = fmt.Errorf("close snapshot file: %w", cerr)
	}
	if err != nil {
		_ = os.Remove(path)
		return Info{}, err
	}
	st, err := Status(path)
	if err != nil {
		_ = os.Remove(path)
		return Info{}, err
	}
	st.Size, st.SHA256 = info.Size, info.SHA256
	if minRevision > 0 && st.Revision < minRevision {
		_ = os.Remove(path)
		return Info{}, fmt.Errorf("%w: snapshot at revision %d, member reported %d", ErrStaleRevision, st.Revision, minRevision)
	}
	return st, nil
}

func save(r io.Reader, f *os.File) (Info, error) {
	cw := newCheckingWriter(f)
	// 1 MiB copies: fewer syscalls than io.Copy's 32 KiB for large DBs.
	if _, err := io.CopyBuffer(cw, r, make([]byte, 1<<20)); err != nil {
		return Info{}, fmt.Errorf("receive snapshot after %d bytes: %w", cw.n, err)
	}
	sum, err := cw.check()
	if err != nil {
		return Info{}, err
	}
	if err := f.Sync(); err != nil {
		return Info{}, fmt.Errorf("sync snapshot file: %w", err)
	}
	return Info{Size: cw.n, SHA256: sum}, nil
}

// Verify checks an existing snapshot file: the appended sha256 (read
// through once), then the database as Status does.
func Verify(path string) (Info, error) {
	sum, err := Checksum(path)
	if err != nil {
		return Info{}, err
	}
	st, err := Status(path)
	if err != nil {
		return Info{}, err
	}
	st.Size, st.SHA256 = sum.Size, sum.SHA256
	return st, nil
}

// Checksum checks the sha256 etcd appended to a snapshot file (read
// through once, in this process: no database is opened) and returns the
// size and sha256 (Info's other fields are zero). Callers that know which
// snapshot they expect compare these before Status opens the database.
func Checksum(path string) (Info, error) {
	f, err := os.Open(path)
	if err != nil {
		return Info{}, fmt.Errorf("open snapshot: %w", err)
	}
	cw := newCheckingWriter(io.Discard)
	_, err = io.CopyBuffer(cw, f, make([]byte, 1<<20))
	_ = f.Close()
	if err != nil {
		return Info{}, fmt.Errorf("read snapshot %s: %w", path, err)
	}
	sum, err := cw.check()
	if err != nil {
		return Info{}, fmt.Errorf("snapshot %s: %w", path, err)
	}
	return Info{Size: cw.n, SHA256: sum}, nil
}

// Status reads a snapshot file as `etcdutl snapshot status` does: bbolt's
// consistency check over every page, then revision, content hash, live keys
// and storage version. It does not check the appended sha256 (Verify does).
//
// The file is read in a child process under DefaultLimits (isolate.go): a
// crafted database that panics bbolt, faults on its mapping, eats memory
// or loops is an error wrapping ErrCorrupt, never the caller's crash. A
// sha256 that matches proves nothing about the database: whoever crafted
// it appended the right one.
func Status(path string) (Info, error) {
	return StatusWithLimits(context.Background(), path, DefaultLimits)
}

// statusInProcess is Status's work, done in the checking child. A panic in
// this goroutine is returned as ErrCorrupt; one in bbolt's own checking
// goroutine, or a fault on the mapping, ends the child.
func statusInProcess(path string) (info Info, err error) {
	defer func() {
		if p := recover(); p != nil {
			info, err = Info{}, fmt.Errorf("%w: %s: bbolt panicked reading it: %v", ErrCorrupt, path, p)
		}
	}()
	st, err := snapshot.NewV3(zap.NewNop()).Status(path)
	if err != nil {
		return Info{}, fmt.Errorf("%w: %s: %w", ErrCorrupt, path, err)
	}
	compacted, err := finishedCompactRevision(path)
	if err != nil {
		return Info{}, fmt.Errorf("%w: %s: %w", ErrCorrupt, path, err)
	}
	return Info{Revision: storeRevision(st.Revision, compacted), Hash: st.Hash, TotalKeys: st.TotalKey, StorageVersion: st.Version}, nil
}

// storeRevision is the revision a member restored from the snapshot starts
// at, as etcd's mvcc store computes it on restore: the highest revision in
// the key bucket, raised to the last finished compaction, and never below 1
// (a store starts at revision 1 before any write). etcdutl prints only the
// first, which is 0 for a ring never written to and falls below the
// member's revision when the newest revisions were deletions compacted
// away.
func storeRevision(keys, compacted int64) int64 {
	return max(keys, compacted, 1)
}

// finishedCompactRevision reads the meta bucket's finishedCompactRev (0 when
// the store was never compacted).
func finishedCompactRevision(path string) (int64, error) {
	db, err := bolt.Open(path, 0o400, &bolt.Options{ReadOnly: true, Timeout: 5 * time.Second})
	if err != nil {
		return 0, err
	}
	defer func() { _ = db.Close() }()
	var rev int64
	err = db.View(func(tx *bolt.Tx) error {
		b := tx.Bucket([]byte("meta"))
		if b == nil {
			return nil
		}
		v := b.Get([]byte("finishedCompactRev"))
		if v == nil {
			return nil
		}
		// mvcc's revision key: 8-byte big-endian main, '_', 8-byte sub.
		if len(v) < 8 {
			return fmt.Errorf("finishedCompactRev is %d bytes", len(v))
		}
		rev = int64(binary.BigEndian.Uint64(v[:8]))
		return nil
	})
	return rev, err
}
