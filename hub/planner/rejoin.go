package planner

import (
	"fmt"
	"time"
)

// A member cut off from its peers by a partition answers the hub (its
// process runs on its data) but names no leader. Once the partition
// heals it should hear the leader within a heartbeat; etcd's peer
// streams, though, can stay on connections the cut left half-open (etcd
// sets no read deadline on them: etcd issue 18052) until TCP's
// retransmission backoff ends, up to two minutes later. Such a member is
// not failed: it is restarted in place once (the same incarnation on the
// same data, new connections), and its grace counts from when it was
// first seen answering without a leader, not from when it went unready
// (which, cut off with the hub, can lie a whole partition back).

// ActRestartMember: the member's object asks its spoke to restart the
// member's pod in place (etcdfedv1.AnnotationRestart). Not an
// operation: it changes no membership and no spec; the member counts
// unhealthy before and during it alike.
const ActRestartMember Action = "RestartMember"

const (
	// RejoinRestartAfter is how long a member answers without a leader,
	// while the ring has one, before it is restarted in place: two
	// election timeouts at etcd's defaults (a member names no leader
	// only after an election timeout without hearing one, and a member
	// whose peer connections work hears the leader's next heartbeat), so
	// that a member that rejoins by itself is left alone. After a cut of
	// more than a few seconds TCP's backoff keeps the old connections
	// silent for longer than this (docs/measurements/partitions.md: 3 s
	// here cost 3 s of every heal, 2026-11-28).
	RejoinRestartAfter = 2 * time.Second
)

// rejoinRestartEvery is the least time between two restarts of one
// member: twice its grace, so that a member that does not rejoin after a
// restart is replaced (its grace ends first) rather than restarted for
// ever.
func rejoinRestartEvery(grace time.Duration) time.Duration { return 2 * grace }

// unhealthySince is when a member's grace starts: when it went unready
// as recorded, or, for one that answers without a leader, when it was
// first seen doing so, or when the hub last asked its spoke to restart it
// in place (a restart gives the member its grace anew: after a heal the
// member cut off with the hub has been leaderless since the cut, and the
// restart itself takes it out of sight for seconds), whichever is latest.
func unhealthySince(m Member, em ListEntry) time.Time {
	since := m.ReadyChangedAt
	if em.LeaderlessSince.After(since) {
		since = em.LeaderlessSince
	}
	if m.Object != nil && m.Object.RestartRequestedAt.After(since) {
		since = m.Object.RestartRequestedAt
	}
	return since
}

// restartRejoining restarts in place the first voter that has answered
// without a leader for RejoinRestartAfter while the ring has a leader,
// in a cluster the hub sees, whose object was not asked to restart
// since (and not within rejoinRestartEvery).
func restartRejoining(in Input) (Decision, bool) {
	if !in.Automatic || in.Etcd.LeaderID == 0 {
		return Decision{}, false
	}
	for _, m := range in.Members {
		em, found := byID(in.Etcd, m.ID)
		if !found || em.IsLearner || em.LeaderlessSince.IsZero() || !m.ClusterVisible || m.DomainFailed || m.Object == nil {
			continue
		}
		if in.Now.Sub(em.LeaderlessSince) < RejoinRestartAfter {
			continue
		}
		if asked := m.Object.RestartRequestedAt; !asked.IsZero() && (!asked.Before(em.LeaderlessSince) || in.Now.Sub(asked) < rejoinRestartEvery(in.MemberGrace)) {
			continue
		}
		return Decision{Action: ActRestartMember, Member: m.Name, MemberID: em.ID, RequeueAfter: pollFast,
			Reason: fmt.Sprintf("%s answers but has named no leader since %s (%s) while the ring's leader is %x: restarting it in place, on the same data, to open new peer connections",
				m.Name, em.LeaderlessSince.UTC().Format(time.RFC3339), in.Now.Sub(em.LeaderlessSince).Round(time.Second), in.Etcd.LeaderID)}, true
	}
	return Decision{}, false
}

// rejoinEnds is how long until the first member answering without a
// leader is due for a restart (restartRejoining), when one is waiting.
func rejoinEnds(in Input) (time.Duration, bool) {
	var first time.Duration
	found := false
	if !in.Automatic || in.Etcd.LeaderID == 0 {
		return 0, false
	}
	for _, m := range in.Members {
		em, listed := byID(in.Etcd, m.ID)
		if !listed || em.IsLearner || em.LeaderlessSince.IsZero() || !m.ClusterVisible {
			continue
		}
		left := em.LeaderlessSince.Add(RejoinRestartAfter).Sub(in.Now)
		if left <= 0 {
			continue
		}
		if !found || left < first {
			first, found = left, true
		}
	}
	return first, found
}
