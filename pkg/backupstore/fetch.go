package backupstore

import (
	"context"
	"fmt"
	"os"

	"github.com/etcdfed/etcdfed/pkg/etcdsnapshot"
)

// FetchVerified downloads a snapshot to localPath and checks it before it
// is used for anything: etcd's appended sha256, the database as etcdutl
// snapshot status reads it, and agreement with the sidecar written when
// it was stored (sha256, revision, size). A snapshot that fails is removed
// again and the error wraps etcdsnapshot.ErrInvalid.
func (s *Store) FetchVerified(ctx context.Context, key, localPath string) (etcdsnapshot.Info, Metadata, error) {
	return s.FetchAccepted(ctx, key, localPath, nil)
}

// FetchAccepted is FetchVerified with a check of the sidecar before
// anything is downloaded (accept: the MAC, or the sha256 the caller
// expects; nil accepts any). The database is opened only after the
// downloaded bytes proved to be the ones the sidecar describes.
func (s *Store) FetchAccepted(ctx context.Context, key, localPath string, accept func(Metadata) error) (etcdsnapshot.Info, Metadata, error) {
	md, err := s.ReadMetadata(ctx, key)
	if err != nil {
		return etcdsnapshot.Info{}, md, err
	}
	if accept != nil {
		if err := accept(md); err != nil {
			return etcdsnapshot.Info{}, md, err
		}
	}
	if err := s.Download(ctx, key, localPath); err != nil {
		return etcdsnapshot.Info{}, md, err
	}
	info, err := s.verifyAgainst(key, localPath, md)
	if err != nil {
		_ = os.Remove(localPath)
		return etcdsnapshot.Info{}, md, err
	}
	return info, md, nil
}

// verifyAgainst checks the file's sha256 and size against the sidecar,
// then the database (in its checking child) and its revision.
func (s *Store) verifyAgainst(key, localPath string, md Metadata) (etcdsnapshot.Info, error) {
	sum, err := etcdsnapshot.Checksum(localPath)
	if err != nil {
		return etcdsnapshot.Info{}, err
	}
	if sum.SHA256 != md.SHA256 || sum.Size != md.SizeBytes {
		return etcdsnapshot.Info{}, fmt.Errorf("%w: %s is not the snapshot its sidecar describes (sha256 %s, %d bytes; sidecar %s, %d)",
			etcdsnapshot.ErrInvalid, s.Location(key), sum.SHA256, sum.Size, md.SHA256, md.SizeBytes)
	}
	info, err := etcdsnapshot.Status(localPath)
	if err != nil {
		return etcdsnapshot.Info{}, err
	}
	info.Size, info.SHA256 = sum.Size, sum.SHA256
	if info.Revision != md.Revision {
		return etcdsnapshot.Info{}, fmt.Errorf("%w: %s holds revision %d, its sidecar says %d", etcdsnapshot.ErrInvalid, s.Location(key), info.Revision, md.Revision)
	}
	return info, nil
}
