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
	md, err := s.ReadMetadata(ctx, key)
	if err != nil {
		return etcdsnapshot.Info{}, md, err
	}
	if err := s.Download(ctx, key, localPath); err != nil {
		return etcdsnapshot.Info{}, md, err
	}
	info, err := etcdsnapshot.Verify(localPath)
	if err == nil && (info.SHA256 != md.SHA256 || info.Revision != md.Revision || info.Size != md.SizeBytes) {
		err = fmt.Errorf("%w: %s is not the snapshot its sidecar describes (sha256 %s, revision %d, %d bytes; sidecar %s, %d, %d)",
			etcdsnapshot.ErrInvalid, s.Location(key), info.SHA256, info.Revision, info.Size, md.SHA256, md.Revision, md.SizeBytes)
	}
	if err != nil {
		_ = os.Remove(localPath)
		return etcdsnapshot.Info{}, md, err
	}
	return info, md, nil
}
