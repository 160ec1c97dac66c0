package etcdsnapshot

import (
	"errors"
	"fmt"
	"strings"

	"go.etcd.io/etcd/etcdutl/v3/snapshot"
	"go.uber.org/zap"
)

// RestoreInput describes the data directory of one member restored from a
// snapshot. Every member of the new cluster is restored from the same file
// with the same InitialCluster and Token, and its own Name and PeerURLs.
type RestoreInput struct {
	// SnapshotPath is a snapshot file with etcd's appended sha256.
	SnapshotPath string
	// Name is this member's name; it must appear in InitialCluster.
	Name string
	// PeerURLs this member advertises.
	PeerURLs []string
	// InitialCluster is name=peerURL pairs, comma separated, of every member
	// of the new cluster.
	InitialCluster string
	// Token is the new cluster's --initial-cluster-token; use a new one per
	// restore so the restored cluster never talks to the old one.
	Token string
	// DataDir to create; it must not exist or be empty.
	DataDir string
	// BumpRevision raises the restored revision by this much (etcdutl
	// --bump-revision), so revisions never go backwards for clients of the
	// old cluster. Zero leaves it as it is.
	BumpRevision uint64
	// MarkCompacted marks the bumped revision compacted (etcdutl
	// --mark-compacted): watchers of the old cluster get "compacted" and
	// resync instead of silently missing the events between the snapshot
	// and the loss. Needs BumpRevision.
	MarkCompacted bool
}

// Restore checks the snapshot (Verify) and writes the member's data
// directory with etcdutl's restore library. It returns what was restored.
func Restore(in RestoreInput) (Info, error) {
	var errs []error
	if in.Name == "" {
		errs = append(errs, errors.New("a member name is required"))
	}
	if in.DataDir == "" {
		errs = append(errs, errors.New("a data directory is required"))
	}
	if len(in.PeerURLs) == 0 {
		errs = append(errs, errors.New("at least one peer URL is required"))
	}
	if !strings.Contains(","+in.InitialCluster, ","+in.Name+"=") {
		errs = append(errs, fmt.Errorf("member %q is not in the initial cluster %q", in.Name, in.InitialCluster))
	}
	if in.MarkCompacted && in.BumpRevision == 0 {
		errs = append(errs, errors.New("marking the revision compacted needs a revision bump (etcd requires both)"))
	}
	if err := errors.Join(errs...); err != nil {
		return Info{}, fmt.Errorf("restore %s: %w", in.SnapshotPath, err)
	}
	info, err := Verify(in.SnapshotPath)
	if err != nil {
		return Info{}, err
	}
	err = snapshot.NewV3(zap.NewNop()).Restore(snapshot.RestoreConfig{
		SnapshotPath:        in.SnapshotPath,
		Name:                in.Name,
		OutputDataDir:       in.DataDir,
		PeerURLs:            in.PeerURLs,
		InitialCluster:      in.InitialCluster,
		InitialClusterToken: in.Token,
		RevisionBump:        in.BumpRevision,
		MarkCompacted:       in.MarkCompacted,
	})
	if err != nil {
		return Info{}, fmt.Errorf("restore %s into %s: %w", in.SnapshotPath, in.DataDir, err)
	}
	return info, nil
}
