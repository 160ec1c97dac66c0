// Package restore is the step a member's pod runs on its data directory
// before etcd starts (`etcdfed-init prepare-data`, an init container):
//
//   - a founding member of a cluster restored from a snapshot downloads
//     the snapshot the hub chose into the member's volume, checks it
//     (etcd's appended sha256, the bbolt structure, the sidecar, and the
//     sha256 the hub recorded), and writes the data directory with
//     etcdutl's restore (new cluster token, the full initial cluster, the
//     revision bumped and marked compacted), only into an empty data
//     directory: data already there is never overwritten;
//   - a member whose cluster has formed refuses a data directory that
//     belongs to another etcd cluster ID than its own (fencing): etcd does
//     not start on it, and the data is kept.
package restore

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/spf13/pflag"

	etcdfedv1 "github.com/etcdfed/etcdfed/api/v1alpha1"
	"github.com/etcdfed/etcdfed/pkg/backupstore"
	"github.com/etcdfed/etcdfed/pkg/diskspace"
	"github.com/etcdfed/etcdfed/pkg/etcdsnapshot"
)

// ErrMismatch: the downloaded snapshot is sound but is not the one the hub
// verified (its sha256 differs): the object was replaced in the store.
var ErrMismatch = fmt.Errorf("%w: not the snapshot the hub verified", etcdsnapshot.ErrInvalid)

// Input is one member's restore.
type Input struct {
	// Store is the object store; CredentialsDir holds its credentials as
	// one file per key (a mounted Secret), "" for none.
	Store          etcdfedv1.BackupStore
	CredentialsDir string
	// Object is the snapshot's key; SHA256 the sha256 the hub recorded.
	Object, SHA256 string
	// Name, PeerURL, InitialCluster and Token are the member's etcd
	// bootstrap flags.
	Name, PeerURL, InitialCluster, Token string
	// DataDir is etcd's --data-dir; the snapshot is downloaded beside it,
	// on the same volume.
	DataDir string
	// RevisionBump is added to the snapshot's revision, which is then
	// marked compacted.
	RevisionBump int64
	// ClusterID, when set (hex), is the etcd cluster the member belongs to:
	// data of another cluster is refused.
	ClusterID string
	// FreeSpace reads the free space of the data directory's volume before
	// anything is downloaded (RestoreNeed); nil: diskspace.Available
	// (statfs). Not a flag: a seam for tests.
	FreeSpace diskspace.Free
}

// walSegment is the size etcd preallocates for its first WAL file in a
// restored data directory.
const walSegment = 64 << 20

// RestoreNeed is the free space a restore of a snapshot of size bytes
// needs on the data directory's volume: the download, the restored
// database (a copy of it), the first WAL file etcd preallocates, and
// diskspace.Margin.
func RestoreNeed(size int64) int64 { return 2*size + walSegment + diskspace.Margin }

// restores says whether in asks for a restore (not only a check).
func (in Input) restores() bool { return in.Object != "" }

// Result says what Run did.
type Result struct {
	// Skipped: the data directory already held data (of the member's
	// cluster when ClusterID is set), or no restore was asked; nothing
	// was written.
	Skipped bool
	// Info is the restored snapshot.
	Info etcdsnapshot.Info
}

// Run prepares the member's data directory: data already there is checked
// against ClusterID (when set) and kept; an empty one is restored from the
// snapshot (when one is asked for). report receives progress lines.
func Run(ctx context.Context, in Input, report func(string)) (Result, error) {
	if in.DataDir == "" {
		return Result{}, errors.New("restore: a data directory is required")
	}
	if in.restores() && (in.SHA256 == "" || in.RevisionBump <= 0) {
		return Result{}, errors.New("restore: a restore needs the object's sha256 and a positive revision bump")
	}
	empty, err := emptyDir(in.DataDir)
	if err != nil {
		return Result{}, err
	}
	if !empty {
		if in.ClusterID != "" {
			if err := CheckCluster(in.DataDir, in.ClusterID); err != nil {
				return Result{}, err
			}
			report(fmt.Sprintf("data directory %s belongs to etcd cluster %s", in.DataDir, in.ClusterID))
		}
		if in.restores() {
			report(fmt.Sprintf("data directory %s already holds data: not restoring over it", in.DataDir))
		}
		return Result{Skipped: true}, nil
	}
	if !in.restores() {
		return Result{Skipped: true}, nil
	}
	creds, err := ReadCredentials(in.CredentialsDir)
	if err != nil {
		return Result{}, err
	}
	store, err := backupstore.Open(ctx, in.Store, creds)
	if err != nil {
		return Result{}, fmt.Errorf("open store %s: %w", in.Store.URL, err)
	}
	defer func() { _ = store.Close() }()

	parent := filepath.Dir(filepath.Clean(in.DataDir))
	download := filepath.Join(parent, "restore-snapshot.db")
	staging := filepath.Clean(in.DataDir) + ".restoring"
	// Leftovers of an earlier run that did not finish are ours.
	for _, p := range []string{download, staging} {
		if err := os.RemoveAll(p); err != nil {
			return Result{}, fmt.Errorf("remove leftover %s: %w", p, err)
		}
	}
	report(fmt.Sprintf("downloading %s", store.Location(in.Object)))
	// The sidecar must describe the snapshot the hub verified before
	// anything is downloaded, and the bytes must be those (the sha256 is
	// compared before the database is opened).
	// Room for the restore is checked before any byte is written, against
	// the size of the snapshot the hub verified.
	info, _, err := store.FetchAccepted(ctx, in.Object, download, func(md backupstore.Metadata) error {
		if md.SHA256 != in.SHA256 {
			return fmt.Errorf("snapshot %s: its sidecar says sha256 %s, the hub verified %s: %w", store.Location(in.Object), md.SHA256, in.SHA256, ErrMismatch)
		}
		return diskspace.Check(in.FreeSpace, parent, RestoreNeed(md.SizeBytes),
			fmt.Sprintf("restoring it (%d bytes: the download, the restored database, etcd's first %d-byte WAL file and a %d-byte margin)",
				md.SizeBytes, walSegment, diskspace.Margin))
	})
	if err != nil {
		return Result{}, fmt.Errorf("snapshot %s: %w", store.Location(in.Object), err)
	}
	defer func() { _ = os.Remove(download) }()
	if info.SHA256 != in.SHA256 {
		return Result{}, fmt.Errorf("snapshot %s has sha256 %s, the hub verified %s: %w", store.Location(in.Object), info.SHA256, in.SHA256, ErrMismatch)
	}
	report(fmt.Sprintf("snapshot checked: revision %d, hash %s, %d keys, sha256 %s", info.Revision, info.HashHex(), info.TotalKeys, info.SHA256))

	if _, err := etcdsnapshot.Restore(etcdsnapshot.RestoreInput{
		SnapshotPath: download, Name: in.Name, PeerURLs: []string{in.PeerURL},
		InitialCluster: in.InitialCluster, Token: in.Token, DataDir: staging,
		BumpRevision: uint64(in.RevisionBump), MarkCompacted: true,
	}); err != nil {
		_ = os.RemoveAll(staging)
		return Result{}, err
	}
	// The data directory appears whole or not at all.
	if err := os.Rename(staging, in.DataDir); err != nil {
		_ = os.RemoveAll(staging)
		return Result{}, fmt.Errorf("move the restored data into %s: %w", in.DataDir, err)
	}
	syncDir(parent)
	report(fmt.Sprintf("restored %s into %s: revision %d bumped by %d and marked compacted", in.Name, in.DataDir, info.Revision, in.RevisionBump))
	return Result{Info: info}, nil
}

// emptyDir reports whether dir is missing or empty.
func emptyDir(dir string) (bool, error) {
	entries, err := os.ReadDir(dir)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return true, nil
	case err != nil:
		return false, fmt.Errorf("read data directory: %w", err)
	}
	return len(entries) == 0, nil
}

// ReadCredentials reads a mounted Secret: one file per key. The
// kubelet's own entries (..data, ..2026_...) are left out. "" reads none.
func ReadCredentials(dir string) (map[string][]byte, error) {
	if dir == "" {
		return nil, nil
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("read credentials: %w", err)
	}
	out := map[string][]byte{}
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), ".") {
			continue
		}
		p := filepath.Join(dir, e.Name())
		fi, err := os.Stat(p) // follows the kubelet's symlinks
		if err != nil || fi.IsDir() {
			continue
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return nil, fmt.Errorf("read credentials: %w", err)
		}
		out[e.Name()] = b
	}
	return out, nil
}

func syncDir(dir string) {
	if f, err := os.Open(dir); err == nil {
		_ = f.Sync()
		_ = f.Close()
	}
}

// Flag names of `etcdfed-init prepare-data`: Args renders them, BindFlags
// reads them, so the pod the spoke builds and the command agree.
const (
	flagStoreURL       = "store-url"
	flagS3Endpoint     = "s3-endpoint"
	flagS3Region       = "s3-region"
	flagS3PathStyle    = "s3-force-path-style"
	flagCredentialsDir = "credentials-dir"
	flagObject         = "object"
	flagSHA256         = "sha256"
	flagName           = "name"
	flagPeerURL        = "peer-url"
	flagInitialCluster = "initial-cluster"
	flagToken          = "initial-cluster-token"
	flagDataDir        = "data-dir"
	flagBumpRevision   = "bump-revision"
	flagClusterID      = "cluster-id"
)

// Args renders in as the command line of `etcdfed-init prepare-data`.
func Args(in Input) []string {
	args := []string{"--" + flagDataDir + "=" + in.DataDir}
	if in.ClusterID != "" {
		args = append(args, "--"+flagClusterID+"="+in.ClusterID)
	}
	if !in.restores() {
		return args
	}
	args = append(args,
		"--"+flagStoreURL+"="+in.Store.URL,
		"--"+flagObject+"="+in.Object,
		"--"+flagSHA256+"="+in.SHA256,
		"--"+flagName+"="+in.Name,
		"--"+flagPeerURL+"="+in.PeerURL,
		"--"+flagInitialCluster+"="+in.InitialCluster,
		"--"+flagToken+"="+in.Token,
		"--"+flagBumpRevision+"="+strconv.FormatInt(in.RevisionBump, 10),
	)
	if s3 := in.Store.S3; s3 != nil {
		if s3.Endpoint != "" {
			args = append(args, "--"+flagS3Endpoint+"="+s3.Endpoint)
		}
		if s3.Region != "" {
			args = append(args, "--"+flagS3Region+"="+s3.Region)
		}
		if s3.ForcePathStyle {
			args = append(args, "--"+flagS3PathStyle)
		}
	}
	if in.CredentialsDir != "" {
		args = append(args, "--"+flagCredentialsDir+"="+in.CredentialsDir)
	}
	return args
}

// BindFlags binds the command's flags to in. Call Finish after parsing.
func BindFlags(fs *pflag.FlagSet, in *Input) {
	if in.Store.S3 == nil {
		in.Store.S3 = &etcdfedv1.S3StoreOptions{}
	}
	fs.StringVar(&in.Store.URL, flagStoreURL, "", "Object store URL (s3://, gs://, azblob://, file://), as spec.backup.store.url.")
	fs.StringVar(&in.Store.S3.Endpoint, flagS3Endpoint, "", "S3-compatible endpoint (s3:// stores).")
	fs.StringVar(&in.Store.S3.Region, flagS3Region, "", "S3 region (s3:// stores).")
	fs.BoolVar(&in.Store.S3.ForcePathStyle, flagS3PathStyle, false, "Path-style S3 addressing (s3:// stores).")
	fs.StringVar(&in.CredentialsDir, flagCredentialsDir, "", "Directory of the store's credentials, one file per key (a mounted Secret).")
	fs.StringVar(&in.Object, flagObject, "", "The snapshot's key in the store.")
	fs.StringVar(&in.SHA256, flagSHA256, "", "The sha256 the snapshot must have (hex).")
	fs.StringVar(&in.Name, flagName, "", "The member's etcd name.")
	fs.StringVar(&in.PeerURL, flagPeerURL, "", "The member's advertised peer URL.")
	fs.StringVar(&in.InitialCluster, flagInitialCluster, "", "etcd --initial-cluster of the new cluster.")
	fs.StringVar(&in.Token, flagToken, "", "etcd --initial-cluster-token of the new cluster.")
	fs.StringVar(&in.DataDir, flagDataDir, "", "etcd --data-dir to restore into (only when empty).")
	fs.Int64Var(&in.RevisionBump, flagBumpRevision, etcdfedv1.DefaultRestoreRevisionBump, "Added to the snapshot's revision, which is marked compacted.")
	fs.StringVar(&in.ClusterID, flagClusterID, "", "The etcd cluster ID (hex) the member belongs to: data of another cluster is refused and kept.")
}

// Finish drops the S3 options of a store that is not s3://, and the
// bump's default when nothing is restored.
func (in *Input) Finish() {
	if !strings.HasPrefix(in.Store.URL, "s3://") {
		in.Store.S3 = nil
	}
	if !in.restores() {
		in.RevisionBump = 0
	}
}
