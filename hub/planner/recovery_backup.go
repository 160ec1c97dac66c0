package planner

import (
	"fmt"
	"slices"
	"time"
)

// Quorum-loss recovery from a backup, when no survivor is usable (or a
// human prefers the backup): `etcdfed recover NAME --from-backup
// latest|OBJECT`. The hub first resolves and checks the snapshot
// (hub/restore, status.restore, Restore.Verified); then, as the Recover
// operation's steps:
//
//  1. Begin: Recover recorded (reason FromBackup) with a seed member, the
//     first by name whose member cluster is visible, assigned a new
//     incarnation in its domain.
//  2. CreateObjects: the seed's object with the new incarnation; its spoke
//     deletes the old incarnation's pod before the new one may start
//     (same pod name), and gives it a new volume. The old volume may hold
//     writes newer than the backup: the object keeps it whatever the
//     reclaim policy (spec.storage.keepVolumesBefore, labelled
//     etcdfed.dev/kept; hub/etcdcluster desiredMember).
//  3. StartBootstrap: the seed alone as the initial cluster, state new, a
//     new token, restored from the checked snapshot (revision bumped and
//     marked compacted): a new one-member etcd cluster under the same
//     name, DNS name and endpoints.
//  4. Finish once it answers as that one started, healthy member: the
//     new cluster ID is recorded, the other members are no longer in
//     etcd's member list and the ledger forgets them (rule 1); the
//     placement adds them back one at a time as learners with new
//     incarnations (Add). Their old data is never used again: each new
//     incarnation has a new volume, and the old members' IDs belong to
//     another cluster ID.

// ReasonFromBackup is the reason of a Recover from a backup.
const ReasonFromBackup = "FromBackup"

// beginRecoveryFromBackup starts a recovery from a backup once the loss
// of quorum is declared, every voter that is not a survivor is known gone
// (confirmed fenced, or its data lost), and the snapshot is checked.
func beginRecoveryFromBackup(in Input, q QuorumLoss, req RecoveryRequest) Decision {
	seed, haveSeed := seedMember(in)
	// The seed's old incarnation needs no fencing: its object is rewritten
	// with the new incarnation first, and its spoke deletes the old pod
	// before the new one starts (the same pod name).
	fence := q
	fence.MustFence = slices.DeleteFunc(slices.Clone(q.MustFence), func(v LostVoter) bool { return haveSeed && v.Name == seed.Name })
	switch {
	case !q.Lost:
		return wait(pollFast, "recovery from backup %s requested, but a quorum of the voters still answers its spokes: %s", req.FromBackup, q.Message())
	case len(fence.MustFence) > 0:
		return wait(pollSlow, "recovery from backup %s requested, but a lost voter may still serve: %s; %s", req.FromBackup, q.Message(), fence.FenceHint())
	case in.Quorum.LostSince.IsZero():
		return wait(pollFast, "recovery from backup %s requested; the hub has not recorded when the quorum was lost yet", req.FromBackup)
	case in.Now.Sub(in.Quorum.LostSince) < in.Quorum.Grace:
		return wait(pollFast, "recovery from backup %s requested; quorum lost since %s, declared after %s", req.FromBackup,
			in.Quorum.LostSince.UTC().Format(time.RFC3339), in.Quorum.Grace)
	case !in.Restore.Verified:
		return wait(pollFast, "recovery from backup %s requested; waiting for the snapshot to be resolved and checked: %s", req.FromBackup, orUnknown(in.Restore.Message))
	case !haveSeed:
		return wait(pollSlow, "recovery from backup %s requested, but no member's cluster is visible to restore into: %s", req.FromBackup, q.Message())
	}
	inc := in.LastIncarnation + 1
	op := Operation{Type: OpRecover, Member: seed.Name, Incarnation: inc, Reason: ReasonFromBackup, Step: ActBegin, StartedAt: in.Now}
	d := seed.Domain
	op.To = &d
	return Decision{Action: ActBegin, Operation: &op, Member: seed.Name, Domain: d, Request: req.UID,
		Assign: []Assignment{{Member: seed.Name, Domain: d, Incarnation: inc}},
		Reason: fmt.Sprintf("recovering from backup %s (requested at %s): %s restarts as incarnation %d restored from the snapshot, a new one-member cluster, its earlier volume kept; %s",
			req.FromBackup, req.RequestedAt.UTC().Format(time.RFC3339), seed.Name, inc, q.Message())}
}

// seedMember is the member a backup is restored into: the first by name
// whose member cluster is visible and not declared failed.
func seedMember(in Input) (Member, bool) {
	for _, m := range in.Members {
		if m.ClusterVisible && !m.DomainFailed {
			return m, true
		}
	}
	return Member{}, false
}

// continueRecoverFromBackup walks: the seed's object, its exposure, its
// restore as a one-member cluster, finish.
func continueRecoverFromBackup(in Input, op Operation) Decision {
	m, ok := member(in, op.Member)
	if !ok {
		return Decision{Action: ActFinish, Reason: fmt.Sprintf("member %s is no longer recorded; recovery from backup abandoned", op.Member)}
	}
	if !m.ClusterVisible {
		return waitStep(op, op.Step, pollFast, "member cluster %s of %s is not visible", m.Domain.Cluster, m.Name)
	}
	o := m.Object
	switch {
	case o == nil || o.Incarnation < m.Incarnation:
		return step(op, ActCreateObjects, Decision{Members: []string{m.Name}, Domain: m.Domain,
			Reason: fmt.Sprintf("creating %s's incarnation %d in %s (its old pod is deleted first)", m.Name, m.Incarnation, m.Domain)})
	case o.PeerURL == "" || o.StatusIncarnation != m.Incarnation:
		return waitStep(op, ActCreateObjects, pollFast, "waiting for the spoke in %s to expose %s's incarnation %d", m.Domain.Cluster, m.Name, m.Incarnation)
	case o.Bootstrap == "":
		return step(op, ActStartBootstrap, Decision{Members: []string{m.Name},
			Reason: fmt.Sprintf("starting %s restored from the snapshot as a new one-member cluster", m.Name)})
	}
	if in.Etcd.Reachable && len(in.Etcd.Members) == 1 {
		e := in.Etcd.Members[0]
		if e.Started() && e.Healthy && !e.IsLearner && e.Name == m.Name {
			return Decision{Action: ActFinish, Member: m.Name, MemberID: e.ID,
				Reason: fmt.Sprintf("%s [%x] runs restored from the snapshot as a one-member cluster; the other members come back as new incarnations", m.Name, e.ID)}
		}
	}
	if o.Failing != "" {
		return waitStep(op, ActStartBootstrap, pollFast, "%s cannot start: %s", m.Name, o.Failing)
	}
	return waitStep(op, ActStartBootstrap, pollFast, "waiting for %s to come up restored from the snapshot (etcd: %s)", m.Name, etcdState(in.Etcd))
}
