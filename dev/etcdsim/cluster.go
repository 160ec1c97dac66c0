package etcdsim

import (
	"context"
	"crypto/sha1"
	"encoding/binary"
	"fmt"
	"slices"
	"strings"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	"go.etcd.io/etcd/client/pkg/v3/types"
	"google.golang.org/grpc/metadata"
)

// begin is every call's common part, as etcd's interceptors: the member
// that took the call answers only when it is not frozen; a learner serves
// Status and serializable reads only; clients that require a leader
// (clientv3.WithRequireLeader) get "no leader" without one.
func begin(ctx context.Context, req any) (*Ring, *member, *connInfo, error) {
	ci, err := memberOf(ctx)
	if err != nil {
		return nil, nil, nil, err
	}
	r, m := ci.ring, ci.member
	if err := r.waitAnswer(ctx, m); err != nil {
		return nil, nil, nil, err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if m.learner && !supportedForLearner(req) {
		return nil, nil, nil, rpctypes.ErrGRPCNotSupportedForLearner
	}
	if md, ok := metadata.FromIncomingContext(ctx); ok {
		if v := md.Get(rpctypes.MetadataRequireLeaderKey); len(v) > 0 && v[0] == rpctypes.MetadataHasLeader && r.leaderOf(m) == 0 {
			return nil, nil, nil, rpctypes.ErrGRPCNoLeader
		}
	}
	return r, m, ci, nil
}

func supportedForLearner(req any) bool {
	switch q := req.(type) {
	case *pb.StatusRequest:
		return true
	case *pb.RangeRequest:
		return q.Serializable
	}
	return false
}

type clusterService struct {
	pb.UnimplementedClusterServer
}

func (clusterService) MemberAdd(ctx context.Context, req *pb.MemberAddRequest) (*pb.MemberAddResponse, error) {
	r, m, ci, err := begin(ctx, req)
	if err != nil {
		return nil, err
	}
	urls, err := types.NewURLs(req.PeerURLs)
	if err != nil {
		return nil, rpctypes.ErrGRPCMemberBadURLs
	}
	// etcd's member ID: the peer URLs and the second of the request.
	id := memberID(urls.StringSlice(), time.Now())
	r.mu.Lock()
	if err := r.auth.adminPermitted(ci.commonName); err != nil {
		r.mu.Unlock()
		return nil, err
	}
	// etcd's strict reconfiguration check (mayAddMember).
	voters := r.voters()
	if !req.IsLearner && !readyToAddVoter(voters) {
		r.mu.Unlock()
		return nil, rpctypes.ErrGRPCMemberNotEnoughStarted
	}
	if len(voters) > 1 && r.activeVoters(m) < quorum(len(voters)+1) {
		r.mu.Unlock()
		return nil, rpctypes.ErrGRPCUnhealthy
	}
	r.mu.Unlock()
	if err := r.waitQuorum(ctx, m); err != nil {
		return nil, err
	}
	defer r.mu.Unlock()
	// etcd's ValidateConfigurationChange, when the entry applies.
	switch {
	case r.removed[id]:
		return nil, rpctypes.ErrGRPCMemberNotFound
	case r.find(id) != nil:
		return nil, rpctypes.ErrGRPCMemberExist
	}
	learners := 0
	for _, o := range r.members {
		for _, u := range o.peerURLs {
			if slices.Contains(req.PeerURLs, u) {
				return nil, rpctypes.ErrGRPCPeerURLExist
			}
		}
		if o.learner {
			learners++
		}
	}
	if req.IsLearner && learners+1 > r.opts.MaxLearners {
		return nil, rpctypes.ErrGRPCTooManyLearners
	}
	// A member that joins reports no storage version (etcd 3.6 sets it
	// on members that bootstrapped the cluster only).
	nm := &member{id: id, peerURLs: urls.StringSlice(), learner: req.IsLearner, dbSize: emptyDBSize, dbInUse: emptyDBSize / 2}
	r.members = append(r.members, nm)
	r.commitLocked()
	r.electLocked() // a voter added down may cost the leader its quorum
	return &pb.MemberAddResponse{
		Header:  r.clusterHeader(m),
		Member:  &pb.Member{ID: nm.id, PeerURLs: slices.Clone(nm.peerURLs), IsLearner: nm.learner},
		Members: r.protoMembersLocked(),
	}, nil
}

// readyToAddVoter is etcd's IsReadyToAddVotingMember: the started voters
// (a name published) must make a quorum of the voters with the new one.
func readyToAddVoter(voters []*member) bool {
	n, started := 1, 0
	for _, v := range voters {
		if v.name != "" {
			started++
		}
		n++
	}
	if started == 1 && n == 2 {
		return true
	}
	return started >= quorum(n)
}

// memberID is etcd's computeMemberID for a member added through the API
// (no cluster name): sha1 of the sorted peer URLs and the Unix second.
func memberID(peerURLs []string, now time.Time) uint64 {
	us := slices.Sorted(slices.Values(peerURLs))
	b := []byte(strings.Join(us, ""))
	b = append(b, []byte(fmt.Sprintf("%d", now.Unix()))...)
	h := sha1.Sum(b)
	return binary.BigEndian.Uint64(h[:8])
}

func (clusterService) MemberRemove(ctx context.Context, req *pb.MemberRemoveRequest) (*pb.MemberRemoveResponse, error) {
	r, m, ci, err := begin(ctx, req)
	if err != nil {
		return nil, err
	}
	r.mu.Lock()
	if err := r.auth.adminPermitted(ci.commonName); err != nil {
		r.mu.Unlock()
		return nil, err
	}
	// etcd's mayRemoveMember: a learner goes without checks; a voter only
	// when the started voters left make a quorum, and when the member
	// that took the call keeps a quorum of active peers without it.
	target := r.find(req.ID)
	if target == nil || !target.learner {
		n, started := 0, 0
		for _, v := range r.voters() {
			if v.id == req.ID {
				continue
			}
			n++
			if v.name != "" {
				started++
			}
		}
		if started < quorum(n) {
			r.mu.Unlock()
			return nil, rpctypes.ErrGRPCMemberNotEnoughStarted
		}
		down := target == nil || (target != m && !connected(m, target))
		if !down && r.activeVoters(m)-1 < 1+(len(r.voters())-1)/2 {
			r.mu.Unlock()
			return nil, rpctypes.ErrGRPCUnhealthy
		}
	}
	r.mu.Unlock()
	if err := r.waitQuorum(ctx, m); err != nil {
		return nil, err
	}
	defer r.mu.Unlock()
	target = r.find(req.ID)
	if target == nil {
		return nil, rpctypes.ErrGRPCMemberNotFound
	}
	// A member stops gracefully when it applies its own removal: its
	// clients get GOAWAY and go elsewhere, calls under way finish.
	r.stopGracefullyLocked(target)
	r.members = slices.DeleteFunc(r.members, func(o *member) bool { return o == target })
	r.removed[target.id] = true
	r.commitLocked()
	r.electLocked()
	if target == m {
		// The member that took the call applied its own removal and
		// stopped before it answered.
		return nil, rpctypes.ErrGRPCStopped
	}
	return &pb.MemberRemoveResponse{Header: r.clusterHeader(m), Members: r.protoMembersLocked()}, nil
}

func (clusterService) MemberUpdate(ctx context.Context, req *pb.MemberUpdateRequest) (*pb.MemberUpdateResponse, error) {
	r, m, ci, err := begin(ctx, req)
	if err != nil {
		return nil, err
	}
	if _, err := types.NewURLs(req.PeerURLs); err != nil {
		return nil, rpctypes.ErrGRPCMemberBadURLs
	}
	r.mu.Lock()
	err = r.auth.adminPermitted(ci.commonName)
	r.mu.Unlock()
	if err != nil {
		return nil, err
	}
	if err := r.waitQuorum(ctx, m); err != nil {
		return nil, err
	}
	defer r.mu.Unlock()
	target := r.find(req.ID)
	if target == nil {
		return nil, rpctypes.ErrGRPCMemberNotFound
	}
	for _, o := range r.members {
		if o == target {
			continue
		}
		for _, u := range o.peerURLs {
			if slices.Contains(req.PeerURLs, u) {
				return nil, rpctypes.ErrGRPCPeerURLExist
			}
		}
	}
	target.peerURLs = slices.Clone(req.PeerURLs)
	r.commitLocked()
	return &pb.MemberUpdateResponse{Header: r.clusterHeader(m), Members: r.protoMembersLocked()}, nil
}

func (clusterService) MemberList(ctx context.Context, req *pb.MemberListRequest) (*pb.MemberListResponse, error) {
	r, m, ci, err := begin(ctx, req)
	if err != nil {
		return nil, err
	}
	if req.Linearizable {
		if err := r.waitQuorum(ctx, m); err != nil {
			return nil, err
		}
	} else {
		r.mu.Lock()
	}
	defer r.mu.Unlock()
	if err := r.auth.requireUser(ci.commonName); err != nil {
		return nil, err
	}
	return &pb.MemberListResponse{Header: r.clusterHeader(m), Members: r.protoMembersLocked()}, nil
}

func (clusterService) MemberPromote(ctx context.Context, req *pb.MemberPromoteRequest) (*pb.MemberPromoteResponse, error) {
	r, m, ci, err := begin(ctx, req)
	if err != nil {
		return nil, err
	}
	r.mu.Lock()
	err = r.auth.adminPermitted(ci.commonName)
	r.mu.Unlock()
	if err != nil {
		return nil, err
	}
	// Only the leader knows whether a learner is in sync; a follower
	// forwards the promotion to it and waits for one.
	if err := r.waitQuorum(ctx, m); err != nil {
		return nil, err
	}
	defer r.mu.Unlock()
	target := r.find(req.ID)
	if target == nil {
		return nil, rpctypes.ErrGRPCMemberNotFound
	}
	// isLearnerReady: the target's log must match the leader's (within
	// 10%); a voter in reach matches, one down does not.
	if target.learner {
		if !r.inSyncLocked(target) {
			return nil, rpctypes.ErrGRPCLearnerNotReady
		}
	} else if r.leaderOf(target) == 0 || target.applied*10 < r.index*9 {
		return nil, rpctypes.ErrGRPCLearnerNotReady
	}
	// IsReadyToPromoteMember: the learner counts as a started voter.
	n, started := 1, 1
	for _, v := range r.voters() {
		n++
		if v.name != "" {
			started++
		}
	}
	if started < quorum(n) {
		return nil, rpctypes.ErrGRPCMemberNotEnoughStarted
	}
	if !target.learner {
		return nil, rpctypes.ErrGRPCMemberNotLearner
	}
	target.learner = false
	target.applied = r.index
	r.commitLocked()
	r.electLocked()
	return &pb.MemberPromoteResponse{Header: r.clusterHeader(m), Members: r.protoMembersLocked()}, nil
}

// leaderTransferStep is how often MoveLeader looks whether the transfer
// happened (etcd: one tick).
const leaderTransferStep = 100 * time.Millisecond
