package etcdsim

import (
	"fmt"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
)

// PauseMember freezes a member: connections are accepted and no call is
// answered (as a process under SIGSTOP, or behind a partition that drops
// packets); its peers see it down. ResumeMember undoes it.
func (r *Ring) PauseMember(id uint64) error { return r.setPaused(id, true) }

// ResumeMember lets a paused member answer again.
func (r *Ring) ResumeMember(id uint64) error { return r.setPaused(id, false) }

func (r *Ring) setPaused(id uint64, p bool) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	m := r.find(id)
	if m == nil {
		return fmt.Errorf("pause %x: %w", id, ErrUnknownMember)
	}
	if !m.running {
		return fmt.Errorf("pause %x: not running", id)
	}
	m.paused = p
	m.activeSince = time.Now()
	r.electLocked()
	return nil
}

// Partition splits the ring: members of each group given reach each other
// and nobody else; members named in no group form group 0 together.
// Clients still reach every member. Partition() heals.
func (r *Ring) Partition(groups ...[]uint64) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	next := map[uint64]int{}
	for i, g := range groups {
		for _, id := range g {
			if r.find(id) == nil {
				return fmt.Errorf("partition %x: %w", id, ErrUnknownMember)
			}
			next[id] = i + 1
		}
	}
	for _, m := range r.members {
		if m.group != next[m.id] {
			m.group, m.activeSince = next[m.id], time.Now()
		}
	}
	r.electLocked()
	return nil
}

// CatchUp brings a learner in sync with the leader at once.
func (r *Ring) CatchUp(id uint64) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	m := r.find(id)
	if m == nil {
		return fmt.Errorf("catch up %x: %w", id, ErrUnknownMember)
	}
	m.caughtUp = true
	r.notifyLocked()
	return nil
}

// RaiseAlarm raises an alarm (such as NOSPACE) for a member, as etcd
// does when its database reaches the quota.
func (r *Ring) RaiseAlarm(id uint64, a pb.AlarmType) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.find(id) == nil {
		return fmt.Errorf("raise alarm on %x: %w", id, ErrUnknownMember)
	}
	r.activateAlarmLocked(&pb.AlarmMember{MemberID: id, Alarm: a})
	return nil
}

// SetDBSize sets what a member reports as its database size and the part
// in use (defragmentation brings the size down to the part in use).
func (r *Ring) SetDBSize(id uint64, size, inUse int64) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	m := r.find(id)
	if m == nil {
		return fmt.Errorf("set db size of %x: %w", id, ErrUnknownMember)
	}
	m.dbSize, m.dbInUse = size, inUse
	return nil
}

// ForceNewCluster restarts a member as etcd --force-new-cluster does:
// every other member leaves the membership (they are stopped, and their
// IDs count as removed), the member is the only voter and leads, in a new
// term; the cluster ID and the keys stay. The member is started (at its
// last address) if it was not running.
func (r *Ring) ForceNewCluster(id uint64) error {
	r.mu.Lock()
	m := r.find(id)
	if m == nil {
		r.mu.Unlock()
		return fmt.Errorf("force new cluster from %x: %w", id, ErrUnknownMember)
	}
	r.stopLocked(m)
	r.mu.Unlock()
	l, err := r.listen(m, StartOptions{})
	if err != nil {
		return fmt.Errorf("force new cluster from %x: %w", id, err)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed || m.running {
		_ = l.ln.Close()
		return fmt.Errorf("force new cluster from %x: ring closed or member started meanwhile", id)
	}
	for _, o := range r.members {
		if o != m {
			r.stopLocked(o)
			r.removed[o.id] = true
		}
	}
	r.members = []*member{m}
	m.learner, m.caughtUp, m.group = false, true, 0
	r.attachLocked(m, l)
	r.leader = 0
	r.index++ // the forced configuration
	r.electLocked()
	return nil
}
