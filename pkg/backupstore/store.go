package backupstore

import (
	"context"
	"crypto/md5" //nolint:gosec // Content-MD5 is the stores' integrity check, not a security measure.
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"path"
	"strconv"
	"strings"
	"time"

	"gocloud.dev/blob"
	"gocloud.dev/gcerrors"

	etcdfedv1 "github.com/etcdfed/etcdfed/api/v1alpha1"
	"github.com/etcdfed/etcdfed/internal/text"
)

// Sentinel errors, so callers can say which part failed.
var (
	// ErrInvalidStore: the store spec cannot be used (bad URL).
	ErrInvalidStore = errors.New("backupstore: invalid store")
	// ErrCredentials: the credentials lack a key the store needs.
	ErrCredentials = errors.New("backupstore: credentials incomplete")
	// ErrUnreachable: the store did not answer, refused the credentials or
	// has no such bucket.
	ErrUnreachable = errors.New("backupstore: store unreachable")
	// ErrUpload: writing an object failed.
	ErrUpload = errors.New("backupstore: upload failed")
	// ErrNotFound: no such snapshot.
	ErrNotFound = errors.New("backupstore: no snapshot found")
)

// Location is a parsed store URL.
type Location struct {
	// Scheme is s3, gs, azblob or file.
	Scheme string
	// Bucket (container for azblob); empty for file.
	Bucket string
	// Prefix inside the bucket, without leading or trailing '/'.
	Prefix string
	// Dir is the directory of a file store.
	Dir string
}

// ParseURL parses a store URL the way the API's validation describes it.
func ParseURL(raw string) (Location, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return Location{}, fmt.Errorf("%w: %w", ErrInvalidStore, err)
	}
	if u.RawQuery != "" || u.Fragment != "" || u.User != nil {
		return Location{}, fmt.Errorf("%w: %q: query strings, fragments and user info are not accepted", ErrInvalidStore, raw)
	}
	switch u.Scheme {
	case "s3", "gs", "azblob":
		if u.Host == "" {
			return Location{}, fmt.Errorf("%w: %q has no bucket", ErrInvalidStore, raw)
		}
		if !bucketName.MatchString(u.Host) {
			return Location{}, fmt.Errorf("%w: %q: bucket %q is not 3-63 lowercase letters, digits, '.', '_' or '-'", ErrInvalidStore, raw, u.Host)
		}
		prefix := strings.Trim(u.Path, "/")
		if prefix != "" {
			for _, seg := range strings.Split(prefix, "/") {
				if !prefixSegment.MatchString(seg) || seg == "." || seg == ".." {
					return Location{}, fmt.Errorf("%w: %q: prefix segment %q is not letters, digits and ._~=+@- (nor '.' or '..')", ErrInvalidStore, raw, seg)
				}
			}
		}
		return Location{Scheme: u.Scheme, Bucket: u.Host, Prefix: prefix}, nil
	case "file":
		if u.Host != "" || !path.IsAbs(u.Path) {
			return Location{}, fmt.Errorf("%w: %q: a file store needs an absolute path, file:///dir", ErrInvalidStore, raw)
		}
		return Location{Scheme: "file", Dir: path.Clean(u.Path)}, nil
	}
	return Location{}, fmt.Errorf("%w: %q: scheme must be s3, gs, azblob or file", ErrInvalidStore, raw)
}

// String is the URL of the store's root (prefix included).
func (l Location) String() string {
	if l.Scheme == "file" {
		return "file://" + l.Dir
	}
	s := l.Scheme + "://" + l.Bucket
	if l.Prefix != "" {
		s += "/" + l.Prefix
	}
	return s
}

// Store is an opened object store.
type Store struct {
	loc    Location
	bucket *blob.Bucket
}

// Open opens the store of spec with credentials: the data of the Secret
// spec.credentialsSecretName names. A store whose spec names a Secret (or
// that is given credentials) uses those and only those: a Secret without
// the keys its store needs is ErrCredentials, never completed with the
// process's own identity. Only a spec that names no Secret, opened with
// nil credentials, uses the process's own (ambient) identity: its
// environment, instance role or workload identity; whether a spec may ask
// for that is the caller's policy (hub/tenancy). Account names and
// endpoints are checked (ErrCredentials, ErrInvalidStore) so that no
// field points the store's credentials at another host. It does not
// contact the store; Check does.
func Open(ctx context.Context, spec etcdfedv1.BackupStore, creds map[string][]byte) (*Store, error) {
	loc, err := ParseURL(spec.URL)
	if err != nil {
		return nil, err
	}
	if spec.S3 != nil && loc.Scheme != "s3" {
		return nil, fmt.Errorf("%w: s3 options on a %s:// store", ErrInvalidStore, loc.Scheme)
	}
	fromSecret := spec.CredentialsSecretName != "" || creds != nil
	var b *blob.Bucket
	switch loc.Scheme {
	case "s3":
		b, err = openS3(ctx, loc, spec.S3, fromSecret, creds)
	case "gs":
		b, err = openGCS(ctx, loc, fromSecret, creds)
	case "azblob":
		b, err = openAzure(ctx, loc, fromSecret, creds)
	case "file":
		b, err = openFile(loc)
	}
	if err != nil {
		return nil, err
	}
	if loc.Prefix != "" {
		b = blob.PrefixedBucket(b, loc.Prefix+"/")
	}
	return &Store{loc: loc, bucket: b}, nil
}

// Close releases the store's connections.
func (s *Store) Close() error { return s.bucket.Close() }

// Location is the URL of key in this store.
func (s *Store) Location(key string) string { return s.loc.String() + "/" + key }

// Check lists one object to see that the store answers, accepts the
// credentials and has the bucket.
func (s *Store) Check(ctx context.Context) error {
	ok, err := s.bucket.IsAccessible(ctx)
	switch {
	case err != nil:
		return fmt.Errorf("%w: %s: %s", ErrUnreachable, s.loc, describe(err))
	case !ok:
		return fmt.Errorf("%w: %s: bucket does not exist", ErrUnreachable, s.loc)
	}
	return nil
}

// Upload writes the file at localPath as key, then its metadata sidecar,
// and returns the object's size as the store reports it. The content MD5
// is checked by the store (or by the driver) before the object counts; an
// upload that fails leaves no sidecar, so a listing never shows a snapshot
// whose metadata says it is complete when it is not.
func (s *Store) Upload(ctx context.Context, key, localPath string, md Metadata) (int64, error) {
	f, err := os.Open(localPath)
	if err != nil {
		return 0, fmt.Errorf("open %s: %w", localPath, err)
	}
	defer func() { _ = f.Close() }()
	h := md5.New() //nolint:gosec // integrity check, see import
	if _, err := io.Copy(h, f); err != nil {
		return 0, fmt.Errorf("read %s: %w", localPath, err)
	}
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return 0, fmt.Errorf("rewind %s: %w", localPath, err)
	}
	opts := &blob.WriterOptions{
		ContentType: "application/octet-stream",
		ContentMD5:  h.Sum(nil),
		Metadata: map[string]string{
			"etcd-revision": strconv.FormatInt(md.Revision, 10),
			"etcd-hash":     md.Hash,
			"sha256":        md.SHA256,
			"cluster-id":    md.ClusterID,
		},
		// 16 MiB parts: fewer requests for large snapshots, bounded memory.
		BufferSize: 16 << 20,
	}
	if err := s.bucket.Upload(ctx, key, f, opts); err != nil {
		return 0, fmt.Errorf("%w: %s: %s", ErrUpload, s.Location(key), describe(err))
	}
	attrs, err := s.bucket.Attributes(ctx, key)
	if err != nil {
		return 0, fmt.Errorf("%w: %s written but cannot be read back: %s", ErrUpload, s.Location(key), describe(err))
	}
	if attrs.Size != md.SizeBytes {
		return 0, fmt.Errorf("%w: %s is %d bytes in the store, %d were written", ErrUpload, s.Location(key), attrs.Size, md.SizeBytes)
	}
	data, err := json.MarshalIndent(md, "", "  ")
	if err != nil {
		return 0, fmt.Errorf("encode metadata: %w", err)
	}
	if err := s.bucket.WriteAll(ctx, MetadataKey(key), append(data, '\n'), &blob.WriterOptions{ContentType: "application/json"}); err != nil {
		return 0, fmt.Errorf("%w: %s: %s", ErrUpload, s.Location(MetadataKey(key)), describe(err))
	}
	return attrs.Size, nil
}

// List returns the snapshots under dir (a ClusterDir), newest first.
// Objects whose names are not snapshot names are left out.
func (s *Store) List(ctx context.Context, dir string) ([]Snapshot, error) {
	return s.list(ctx, dir, func(key string) bool { return path.Dir(key)+"/" == dir })
}

// ListUnder returns the snapshots anywhere under prefix (such as
// NAMESPACE/NAME/, every etcd cluster ID of one EtcdCluster), newest first.
func (s *Store) ListUnder(ctx context.Context, prefix string) ([]Snapshot, error) {
	return s.list(ctx, prefix, func(string) bool { return true })
}

func (s *Store) list(ctx context.Context, prefix string, keep func(key string) bool) ([]Snapshot, error) {
	var out []Snapshot
	it := s.bucket.List(&blob.ListOptions{Prefix: prefix})
	for {
		obj, err := it.Next(ctx)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("%w: list %s: %s", ErrUnreachable, s.Location(prefix), describe(err))
		}
		if obj.IsDir {
			continue
		}
		if snap, ok := ParseKey(obj.Key); ok && keep(obj.Key) {
			snap.Size, snap.StoredAt = obj.Size, obj.ModTime
			out = append(out, snap)
		}
	}
	sortNewestFirst(out)
	return out, nil
}

// Delete removes a snapshot and its sidecar. Objects already gone are
// fine.
func (s *Store) Delete(ctx context.Context, key string) error {
	var errs []error
	for _, k := range []string{key, MetadataKey(key)} {
		if err := s.bucket.Delete(ctx, k); err != nil && gcerrors.Code(err) != gcerrors.NotFound {
			errs = append(errs, fmt.Errorf("delete %s: %s", s.Location(k), describe(err)))
		}
	}
	return errors.Join(errs...)
}

// Prune deletes the snapshots under dir that retention no longer keeps
// and returns what it deleted and how many remain.
func (s *Store) Prune(ctx context.Context, dir string, r Retention, now time.Time) (deleted []Snapshot, remaining int, err error) {
	snaps, err := s.List(ctx, dir)
	if err != nil {
		return nil, 0, err
	}
	var errs []error
	for _, snap := range Expired(snaps, r, now.UTC()) {
		if err := s.Delete(ctx, snap.Key); err != nil {
			errs = append(errs, err)
			continue
		}
		deleted = append(deleted, snap)
	}
	return deleted, len(snaps) - len(deleted), errors.Join(errs...)
}

// Latest is the newest snapshot under dir.
func (s *Store) Latest(ctx context.Context, dir string) (Snapshot, error) {
	snaps, err := s.List(ctx, dir)
	if err != nil {
		return Snapshot{}, err
	}
	if len(snaps) == 0 {
		return Snapshot{}, fmt.Errorf("%w under %s", ErrNotFound, s.Location(dir))
	}
	return snaps[0], nil
}

// Download writes key to localPath (created; it must not exist).
func (s *Store) Download(ctx context.Context, key, localPath string) error {
	f, err := os.OpenFile(localPath, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
	if err != nil {
		return fmt.Errorf("create %s: %w", localPath, err)
	}
	err = s.bucket.Download(ctx, key, f, nil)
	if cerr := f.Close(); cerr != nil && err == nil {
		err = cerr
	}
	if err != nil {
		_ = os.Remove(localPath)
		if gcerrors.Code(err) == gcerrors.NotFound {
			return fmt.Errorf("%w: %s", ErrNotFound, s.Location(key))
		}
		return fmt.Errorf("download %s: %s", s.Location(key), describe(err))
	}
	return nil
}

// ReadMetadata reads a snapshot's sidecar.
func (s *Store) ReadMetadata(ctx context.Context, key string) (Metadata, error) {
	var md Metadata
	data, err := s.bucket.ReadAll(ctx, MetadataKey(key))
	if err != nil {
		if gcerrors.Code(err) == gcerrors.NotFound {
			return md, fmt.Errorf("%w: no sidecar %s", ErrNotFound, s.Location(MetadataKey(key)))
		}
		return md, fmt.Errorf("read %s: %s", s.Location(MetadataKey(key)), describe(err))
	}
	if err := json.Unmarshal(data, &md); err != nil {
		return md, fmt.Errorf("decode %s: %w", s.Location(MetadataKey(key)), err)
	}
	return md, nil
}

// describe is a store error with its gocloud code, short enough for a
// condition message.
func describe(err error) string {
	code := gcerrors.Code(err)
	msg := text.Truncate(err.Error(), 1024)
	if code == gcerrors.Unknown || code == gcerrors.OK {
		return msg
	}
	return code.String() + ": " + msg
}
