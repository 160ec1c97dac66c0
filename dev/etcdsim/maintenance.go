package etcdsim

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

type maintenanceService struct {
	pb.UnimplementedMaintenanceServer
}

func (maintenanceService) Status(ctx context.Context, req *pb.StatusRequest) (*pb.StatusResponse, error) {
	r, m, ci, err := begin(ctx, req)
	if err != nil {
		return nil, err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if err := r.auth.requireUser(ci.commonName); err != nil {
		return nil, err
	}
	r.inSyncLocked(m) // a learner's catch-up delay may have passed
	r.applyLocked()
	resp := &pb.StatusResponse{
		Header:           r.header(m),
		Version:          r.versionLocked(m),
		DbSize:           m.dbSize,
		Leader:           r.leaderOf(m),
		RaftIndex:        m.applied,
		RaftTerm:         r.term,
		RaftAppliedIndex: m.applied,
		DbSizeInUse:      m.dbInUse,
		IsLearner:        m.learner,
		StorageVersion:   r.storageVersionLocked(m),
		DbSizeQuota:      DefaultQuotaBytes,
		DowngradeInfo:    &pb.DowngradeInfo{Enabled: r.downgrade.Enabled, TargetVersion: r.downgrade.TargetVersion},
	}
	if resp.Leader == 0 {
		resp.Errors = append(resp.Errors, "etcdserver: no leader")
	}
	for _, a := range r.alarms {
		// etcd 3.6's text form of the alarm (gogo protobuf's compact text).
		resp.Errors = append(resp.Errors, fmt.Sprintf("memberID:%d alarm:%s ", a.MemberID, a.Alarm))
	}
	return resp, nil
}

func (maintenanceService) Alarm(ctx context.Context, req *pb.AlarmRequest) (*pb.AlarmResponse, error) {
	r, m, ci, err := begin(ctx, req)
	if err != nil {
		return nil, err
	}
	r.mu.Lock()
	if req.Action == pb.AlarmRequest_GET {
		err = r.auth.requireUser(ci.commonName)
	} else {
		err = r.auth.adminPermitted(ci.commonName)
	}
	r.mu.Unlock()
	if err != nil {
		return nil, err
	}
	if err := r.waitQuorum(ctx, m); err != nil {
		return nil, err
	}
	defer r.mu.Unlock()
	resp := &pb.AlarmResponse{}
	switch req.Action {
	case pb.AlarmRequest_GET:
		r.commitLocked()
		for _, a := range r.alarms {
			if req.Alarm == pb.AlarmType_NONE || a.Alarm == req.Alarm {
				resp.Alarms = append(resp.Alarms, &pb.AlarmMember{MemberID: a.MemberID, Alarm: a.Alarm})
			}
		}
	case pb.AlarmRequest_ACTIVATE:
		if req.Alarm != pb.AlarmType_NONE && r.activateAlarmLocked(&pb.AlarmMember{MemberID: req.MemberID, Alarm: req.Alarm}) {
			resp.Alarms = append(resp.Alarms, &pb.AlarmMember{MemberID: req.MemberID, Alarm: req.Alarm})
		}
	case pb.AlarmRequest_DEACTIVATE:
		for i, a := range r.alarms {
			if a.MemberID == req.MemberID && a.Alarm == req.Alarm {
				r.alarms = append(r.alarms[:i:i], r.alarms[i+1:]...)
				resp.Alarms = append(resp.Alarms, &pb.AlarmMember{MemberID: a.MemberID, Alarm: a.Alarm})
				r.commitLocked()
				break
			}
		}
	}
	resp.Header = r.header(m)
	return resp, nil
}

func (maintenanceService) MoveLeader(ctx context.Context, req *pb.MoveLeaderRequest) (*pb.MoveLeaderResponse, error) {
	r, m, ci, err := begin(ctx, req)
	if err != nil {
		return nil, err
	}
	r.mu.Lock()
	if err := r.auth.adminPermitted(ci.commonName); err != nil {
		r.mu.Unlock()
		return nil, err
	}
	if r.leaderOf(m) != m.id {
		r.mu.Unlock()
		return nil, rpctypes.ErrGRPCNotLeader
	}
	if t := r.find(req.TargetID); t == nil || t.learner {
		r.mu.Unlock()
		return nil, rpctypes.ErrGRPCBadLeaderTransferee
	}
	r.mu.Unlock()
	// Raft hands leadership over once the transferee is in reach and
	// in sync; etcd waits for it until the caller gives up.
	for {
		r.mu.Lock()
		t := r.find(req.TargetID)
		switch {
		case r.leader == req.TargetID:
			r.mu.Unlock()
			return &pb.MoveLeaderResponse{}, nil
		case t == nil || t.learner || r.leader != m.id:
			// Removed, demoted, or m lost leadership meanwhile: raft drops
			// the transfer and etcd waits out the caller.
		case connected(m, t) && r.reach(t) >= quorum(len(r.voters())):
			r.leader = t.id
			r.term++
			r.commitLocked()
			r.mu.Unlock()
			return &pb.MoveLeaderResponse{}, nil
		}
		ch := r.changed
		r.mu.Unlock()
		select {
		case <-ch:
		case <-time.After(leaderTransferStep):
		case <-ctx.Done():
			return nil, status.Error(codes.Unknown, "etcdserver: request timed out, leader transfer took too long")
		}
	}
}

func (maintenanceService) Defragment(ctx context.Context, req *pb.DefragmentRequest) (*pb.DefragmentResponse, error) {
	r, m, ci, err := begin(ctx, req)
	if err != nil {
		return nil, err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if err := r.auth.adminPermitted(ci.commonName); err != nil {
		return nil, err
	}
	m.dbSize = max(m.dbInUse, emptyDBSize)
	return &pb.DefragmentResponse{}, nil
}

// Downgrade follows etcd's downgrade API: validate and enable a target
// exactly one minor below the cluster version, cancel one enabled.
func (maintenanceService) Downgrade(ctx context.Context, req *pb.DowngradeRequest) (*pb.DowngradeResponse, error) {
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
	if err := r.waitQuorum(ctx, m); err != nil {
		return nil, err
	}
	defer r.mu.Unlock()
	cv := r.opts.ClusterVersion
	switch req.Action {
	case pb.DowngradeRequest_VALIDATE, pb.DowngradeRequest_ENABLE:
		target, ok := minorOf(req.Version)
		if !ok {
			return nil, rpctypes.ErrGRPCWrongDowngradeVersionFormat
		}
		have, _ := minorOf(cv)
		if r.downgrade.Enabled {
			if r.downgrade.TargetVersion == target+".0" {
				break
			}
			return nil, rpctypes.ErrGRPCDowngradeInProcess
		}
		if !oneMinorBelow(target, have) {
			return nil, rpctypes.ErrGRPCInvalidDowngradeTargetVersion
		}
		if req.Action == pb.DowngradeRequest_ENABLE {
			r.downgrade = &pb.DowngradeInfo{Enabled: true, TargetVersion: target + ".0"}
			r.commitLocked()
		}
	case pb.DowngradeRequest_CANCEL:
		if !r.downgrade.Enabled {
			return nil, rpctypes.ErrGRPCNoInflightDowngrade
		}
		r.downgrade = &pb.DowngradeInfo{}
		r.commitLocked()
	}
	return &pb.DowngradeResponse{Header: r.header(m), Version: cv}, nil
}

// minorOf is "3.5" of "3.5", "3.5.0" or "v3.5.17".
func minorOf(v string) (string, bool) {
	parts := strings.Split(strings.TrimPrefix(v, "v"), ".")
	if len(parts) < 2 {
		return "", false
	}
	for _, p := range parts[:2] {
		if _, err := strconv.Atoi(p); err != nil {
			return "", false
		}
	}
	return parts[0] + "." + parts[1], true
}

func oneMinorBelow(target, have string) bool {
	var tMaj, tMin, hMaj, hMin int
	if _, err := fmt.Sscanf(target, "%d.%d", &tMaj, &tMin); err != nil {
		return false
	}
	if _, err := fmt.Sscanf(have, "%d.%d", &hMaj, &hMin); err != nil {
		return false
	}
	return tMaj == hMaj && tMin == hMin-1
}
