package etcdsim

import (
	"context"
	"slices"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// The raft-like model: elections, commits and quorum waits over the
// members' state, which r.mu guards.

func (m *member) up() bool { return m.running && !m.paused }

func connected(a, b *member) bool { return a.up() && b.up() && a.group == b.group }

func (r *Ring) voters() []*member {
	var out []*member
	for _, m := range r.members {
		if !m.learner {
			out = append(out, m)
		}
	}
	return out
}

func quorum(n int) int { return n/2 + 1 }

// activeFor: m sees v as an active peer, connected for HealthInterval
// (etcd's transport ActiveSince); m itself always counts.
func (r *Ring) activeFor(m, v *member) bool {
	if v == m {
		return true
	}
	if !connected(m, v) {
		return false
	}
	if r.opts.HealthInterval < 0 {
		return true
	}
	return time.Since(later(m.activeSince, v.activeSince)) >= r.opts.HealthInterval
}

func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// activeVoters counts the voters m sees active (etcd's numConnectedSince).
func (r *Ring) activeVoters(m *member) int {
	n := 0
	for _, v := range r.voters() {
		if r.activeFor(m, v) {
			n++
		}
	}
	return n
}

// reach counts the voters m is connected to, itself included.
func (r *Ring) reach(m *member) int {
	n := 0
	for _, v := range r.voters() {
		if connected(m, v) {
			n++
		}
	}
	return n
}

// electLocked keeps the leader while it reaches a quorum of voters, or
// elects the first voter that does (a new term, an empty entry), or none;
// then members that reach the leader publish their names and apply the
// log. Every change of state ends here.
func (r *Ring) electLocked() {
	defer r.notifyLocked()
	if r.closed {
		return
	}
	q := quorum(len(r.voters()))
	if l := r.find(r.leader); l == nil || l.learner || !l.up() || r.reach(l) < q {
		r.leader = 0
		for _, v := range r.voters() {
			if v.up() && r.reach(v) >= q {
				r.leader = v.id
				r.term++
				r.index++
				break
			}
		}
	}
	l := r.find(r.leader)
	if l == nil {
		return
	}
	for _, m := range r.members {
		if m.pendingName != "" && connected(m, l) {
			m.name, m.clientURLs = m.pendingName, m.pendingClientURLs
			m.pendingName, m.pendingClientURLs = "", nil
			r.index++
		}
	}
	r.applyLocked()
}

// applyLocked brings every member that reaches the leader (a learner: in
// sync) up to the committed index.
func (r *Ring) applyLocked() {
	l := r.find(r.leader)
	if l == nil {
		return
	}
	for _, m := range r.members {
		if connected(m, l) && (!m.learner || r.inSyncLocked(m)) {
			m.applied = r.index
		}
	}
}

// inSyncLocked: a learner is in sync with the leader when it runs, reaches
// the leader and has caught up (RingOptions.CatchUp, or CatchUp).
func (r *Ring) inSyncLocked(m *member) bool {
	l := r.find(r.leader)
	if l == nil || !connected(m, l) {
		return false
	}
	if !m.caughtUp && r.opts.CatchUp >= 0 && time.Since(m.startedAt) >= r.opts.CatchUp {
		m.caughtUp = true
	}
	return m.caughtUp
}

// storageVersionInterval is etcd's monitorVersionInterval: every 4 s a
// member writes the storage version, which a member that joined can do
// only once it applied an entry of its own (before, "missing term
// information").
const storageVersionInterval = 4 * time.Second

// storageVersionLocked is what m reports as its storage version.
func (r *Ring) storageVersionLocked(m *member) string {
	if m.storageVersion == "" && m.running && m.applied > m.startIndex && time.Since(m.startedAt) >= storageVersionInterval {
		m.storageVersion = r.opts.StorageVersion
	}
	return m.storageVersion
}

// commitLocked appends one entry to the log.
func (r *Ring) commitLocked() {
	r.index++
	r.applyLocked()
	r.notifyLocked()
}

func (r *Ring) notifyLocked() {
	close(r.changed)
	r.changed = make(chan struct{})
}

// leaderOf is the leader m sees (0: none, or m does not reach it).
func (r *Ring) leaderOf(m *member) uint64 {
	l := r.find(r.leader)
	if l == nil || !connected(m, l) {
		return 0
	}
	return l.id
}

// errNoLeaderTimeout is what etcd answers a proposal or a linearizable
// read that found no leader within its request timeout: raft takes no
// proposal without a leader, so the server's own deadline expires.
var errNoLeaderTimeout = status.Error(codes.DeadlineExceeded, context.DeadlineExceeded.Error())

// waitQuorum waits until m reaches a leader (a proposal or a linearizable
// read can be served), at most RequestTimeout, and returns with r.mu
// held when it succeeds. (etcd's "request timed out" comes from a
// proposal a leader took and could not commit; here a leader always
// commits at once.)
func (r *Ring) waitQuorum(ctx context.Context, m *member) error {
	timer := time.NewTimer(r.opts.RequestTimeout)
	defer timer.Stop()
	for {
		r.mu.Lock()
		if r.closed || !m.running {
			r.mu.Unlock()
			return rpctypes.ErrGRPCStopped
		}
		if r.leaderOf(m) != 0 {
			return nil
		}
		ch := r.changed
		r.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			return status.FromContextError(ctx.Err()).Err()
		case <-timer.C:
			return errNoLeaderTimeout
		}
	}
}

// waitAnswer blocks while m is paused (a frozen process answers nothing),
// and fails when it no longer runs.
func (r *Ring) waitAnswer(ctx context.Context, m *member) error {
	for {
		r.mu.Lock()
		if r.closed || !m.running {
			r.mu.Unlock()
			return rpctypes.ErrGRPCStopped
		}
		if !m.paused {
			r.mu.Unlock()
			return nil
		}
		ch := r.changed
		r.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			return status.FromContextError(ctx.Err()).Err()
		}
	}
}

func (r *Ring) header(m *member) *pb.ResponseHeader {
	return &pb.ResponseHeader{ClusterId: r.clusterID, MemberId: m.id, RaftTerm: r.term, Revision: r.kv.rev}
}

func (r *Ring) clusterHeader(m *member) *pb.ResponseHeader {
	return &pb.ResponseHeader{ClusterId: r.clusterID, MemberId: m.id, RaftTerm: r.term}
}

func (r *Ring) protoMembersLocked() []*pb.Member {
	ms := slices.Clone(r.members)
	slices.SortFunc(ms, func(a, b *member) int {
		switch {
		case a.id < b.id:
			return -1
		case a.id > b.id:
			return 1
		}
		return 0
	})
	out := make([]*pb.Member, 0, len(ms))
	for _, m := range ms {
		out = append(out, &pb.Member{ID: m.id, Name: m.name, PeerURLs: slices.Clone(m.peerURLs), ClientURLs: slices.Clone(m.clientURLs), IsLearner: m.learner})
	}
	return out
}

func (r *Ring) activateAlarmLocked(a *pb.AlarmMember) bool {
	for _, have := range r.alarms {
		if have.MemberID == a.MemberID && have.Alarm == a.Alarm {
			return false
		}
	}
	r.alarms = append(r.alarms, &pb.AlarmMember{MemberID: a.MemberID, Alarm: a.Alarm})
	r.commitLocked()
	return true
}
