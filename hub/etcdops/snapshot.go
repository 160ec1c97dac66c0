package etcdops

import (
	"context"
	"errors"
	"fmt"
	"io"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// SnapshotInfo says where and when a snapshot stream came from.
type SnapshotInfo struct {
	// MemberID of the member that streamed it.
	MemberID uint64
	// WasLeader: the member was the leader when the stream started.
	WasLeader bool
	// RevisionBefore is the member's revision just before the stream
	// started; the snapshot holds at least this revision.
	RevisionBefore int64
	// Version is the storage version the member reported with the stream.
	Version string
}

// Snapshot streams a snapshot (Maintenance.SnapshotWithVersion) from the
// one member reached at memberURLs, never from another, and hands the
// stream to save with the member's revision just before the stream (the
// snapshot must hold at least that revision). ctx bounds the whole
// transfer.
func (c *Client) Snapshot(ctx context.Context, memberURLs []string, save func(stream io.Reader, revisionBefore int64) error) (SnapshotInfo, error) {
	mc, err := clientv3.New(clientConfig(memberURLs, c.cfg.TLS))
	if err != nil {
		return SnapshotInfo{}, fmt.Errorf("connect to member %v: %w", memberURLs, err)
	}
	defer func() { _ = mc.Close() }()

	var info SnapshotInfo
	var statusErr error
	for _, u := range memberURLs {
		sctx, cancel := context.WithTimeout(ctx, StatusTimeout)
		st, err := mc.Status(sctx, u)
		cancel()
		if err != nil {
			statusErr = errors.Join(statusErr, fmt.Errorf("status of %s: %w", u, err))
			continue
		}
		if len(st.Errors) > 0 {
			return SnapshotInfo{}, fmt.Errorf("member at %s reports errors: %v", u, st.Errors)
		}
		info = SnapshotInfo{MemberID: st.Header.MemberId, WasLeader: st.Leader == st.Header.MemberId, RevisionBefore: st.Header.Revision}
		statusErr = nil
		break
	}
	if statusErr != nil {
		return SnapshotInfo{}, statusErr
	}

	resp, err := mc.SnapshotWithVersion(ctx)
	if err != nil {
		return info, fmt.Errorf("open snapshot stream from %v: %w", memberURLs, err)
	}
	defer func() { _ = resp.Snapshot.Close() }()
	info.Version = resp.Version
	if err := save(resp.Snapshot, info.RevisionBefore); err != nil {
		return info, err
	}
	return info, nil
}
