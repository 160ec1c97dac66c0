package planner

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/etcdfed/etcdfed/pkg/topology"
)

// A rollout brings every member's object to the EtcdCluster's current spec
// when a change restarts pods (image, version, etcd flags, pod template).
// It is a series of Roll operations, one member at a time: each begins only
// when every member is a ready voter on a settled object, followers go
// first in name order and the leader last, and a Roll of the leader moves
// leadership away before the pod restarts.

// rollStep begins the Roll of the next outdated member, or returns
// otherwise (the membership decision, None or a Wait) when there is none
// or the ring is not ready for one.
func rollStep(in Input, otherwise Decision) Decision {
	var outdated []Member
	for _, m := range in.Members {
		if m.Object != nil && m.Object.Outdated {
			outdated = append(outdated, m)
		}
	}
	if len(outdated) == 0 {
		return otherwise
	}
	if why := notReadyToRoll(in); why != "" {
		if otherwise.Action == ActWait {
			return otherwise
		}
		return wait(pollSlow, "%d member(s) wait for the new spec until every member is a ready voter: %s", len(outdated), why)
	}
	leader := ""
	for _, m := range in.Members {
		if m.ID != 0 && m.ID == in.Etcd.LeaderID {
			leader = m.Name
		}
	}
	// Followers in name order, the leader last.
	slices.SortFunc(outdated, func(a, b Member) int {
		switch {
		case a.Name == leader:
			return 1
		case b.Name == leader:
			return -1
		}
		return topology.CompareNames(a.Name, b.Name)
	})
	m := outdated[0]
	why := fmt.Sprintf("rolling %s to the new spec (%d of %d members to go)", m.Name, len(outdated), len(in.Members))
	if m.Object.Changes != "" {
		why += ": " + m.Object.Changes
	}
	if m.Name == leader {
		why += "; it leads, so leadership moves away first"
	}
	reason := ReasonSpecChanged
	if m.Object.OutdatedTrust {
		reason = ReasonCARotation
		why = fmt.Sprintf("restarting %s on the ring's changed CA trust (%d of %d members to go)", m.Name, len(outdated), len(in.Members))
		if m.Name == leader {
			why += "; it leads, so leadership moves away first"
		}
	}
	return begin(in, Operation{Type: OpRoll, Member: m.Name, Reason: reason}, why)
}

// notReadyToRoll says why no member may be restarted now, "" when every
// recorded member is a ready voter whose object its spoke has acted on, and
// etcd lists no member that is not a healthy, started voter.
func notReadyToRoll(in Input) string {
	var why []string
	for _, m := range in.Members {
		switch {
		case !m.ClusterVisible || m.Object == nil:
			why = append(why, fmt.Sprintf("%s's cluster %s is not visible", m.Name, m.Domain.Cluster))
		case m.Object.Incarnation != m.Incarnation:
			why = append(why, fmt.Sprintf("%s's object is not its current incarnation", m.Name))
		case !m.Ready:
			why = append(why, fmt.Sprintf("%s is not a ready voter", m.Name))
		case !m.Object.Settled:
			why = append(why, fmt.Sprintf("%s's pod is not ready on its latest spec", m.Name))
		}
	}
	for _, em := range in.Etcd.Members {
		if !em.Started() || !em.Healthy || em.IsLearner {
			why = append(why, fmt.Sprintf("etcd member %s is not a healthy voter", describe(em)))
		}
	}
	return strings.Join(why, "; ")
}

// continueRoll walks one member's roll: leadership away, the new spec
// written, the pod restarted, the member a ready voter again. Each step is
// found by inspection. A member whose cluster failed or whose volume was
// lost, or that does not come back within the grace period, ends the roll:
// its replacement (rule 6) goes next, on the new spec. One whose pod cannot
// start on the new spec (failing, or pending: not scheduled, not pulled)
// halts the roll instead: replacing it would lose a healthy identity for a
// pod that could not start either. A pending one whose spec another member
// runs does not halt it for ever: beyond the grace the roll gives way to a
// replacement outside its cluster (pending.go).
func continueRoll(in Input, op Operation) Decision {
	m, ok := member(in, op.Member)
	if !ok {
		return Decision{Action: ActFinish, Reason: fmt.Sprintf("%s is no longer a member; its roll is dropped", op.Member)}
	}
	if !in.Etcd.Reachable {
		return waitStep(op, op.Step, pollFast, "etcd does not answer (%s)", orUnknown(in.Etcd.Error))
	}
	if !m.ClusterVisible || m.Object == nil {
		return waitStep(op, op.Step, pollSlow, "member cluster %s is not visible; waiting to roll %s", m.Domain.Cluster, m.Name)
	}
	switch {
	case m.Object.Incarnation != m.Incarnation:
		return Decision{Action: ActFinish, Member: m.Name, Reason: fmt.Sprintf("%s has a new incarnation; its roll ends", m.Name)}
	case m.DomainFailed || m.Object.VolumeLost:
		return Decision{Action: ActFinish, Member: m.Name, Reason: fmt.Sprintf("%s must be replaced; its roll gives way to the replacement", m.Name)}
	}
	if d, ok := cancelDowngrade(in, op, m); ok {
		return d
	}
	em, found := byID(in.Etcd, m.ID)
	if m.Object.Outdated {
		if d, pending := versionSteps(in, op, m); pending {
			return d
		}
		handOff := ""
		if found && em.ID == in.Etcd.LeaderID {
			to, ok := transferee(in, em.ID)
			tried := onStep(in, op, ActMoveLeader)
			switch {
			case ok && tried >= leaderHandOffLimit:
				// The hub's MoveLeader has not moved it (etcd takes it
				// only from the leader, and this one has not answered
				// the hub): a roll that waited for it would wait for
				// ever. Another healthy voter can take over, so quorum
				// holds; the member's own preStop hands leadership over
				// as it stops, else etcd elects.
				handOff = handOffGivenUp(em, tried, "restarting it as the leader: its pod's preStop hands leadership over, else etcd elects")
			case ok:
				return step(op, ActMoveLeader, Decision{Member: m.Name, MemberID: em.ID, TransfereeID: to, Reason: fmt.Sprintf("moving leadership away from %s before restarting it", describe(em))})
			case voters(in.Etcd) > 1:
				return waitStep(op, ActMoveLeader, pollFast, "%s leads and no other healthy voter can take over", describe(em))
			}
			// The only voter: there is no one to hand leadership to.
		}
		if !m.Ready {
			// Written again while the member is down (the spec changed
			// back, or again, after its pod could not start): the grace
			// for it to come back counts from this write, not from when it
			// went down on the spec it no longer has.
			op.StartedAt = in.Now
		}
		return step(op, ActUpdateObject, Decision{Member: m.Name, MemberID: m.ID, RequeueAfter: pollFast,
			Reason: fmt.Sprintf("%swriting the new spec to %s; its spoke restarts the pod on the same volume", handOff, m.Name)})
	}
	// Down since it went down, or since its object was last written in
	// this roll when that is later.
	down := m.ReadyChangedAt
	if op.StartedAt.After(down) {
		down = op.StartedAt
	}
	ready := found && em.Started() && em.Healthy && !em.IsLearner && m.Ready
	if m.Object.Settled && ready && caughtUp(in.Etcd, em) {
		return Decision{Action: ActFinish, Member: m.Name, MemberID: em.ID, Reason: fmt.Sprintf("%s runs the new spec and is a ready voter caught up with the leader", m.Name)}
	}
	if d, stop := halted(op, m); stop && !ready {
		return d
	}
	// Pending is not failing: a pod on the new spec that cannot be
	// scheduled or pulled says nothing of the member's data, and its
	// replacement would not start either. The roll waits, and beyond the
	// grace halts, unless another member runs the same spec: then the
	// member's cluster, not the spec, keeps it from starting, and the
	// roll gives way to a replacement outside that cluster (pending.go).
	if m.Object.Pending != "" && !ready {
		notBack := in.Now.Sub(down)
		if down.IsZero() || notBack < in.MemberGrace {
			return waitStep(op, ActUpdateObject, pollFast, "waiting for %s's pod to start on the new spec: %s", m.Name, m.Object.Pending)
		}
		if in.Automatic {
			// Bounded (pending.go): when another member runs the same
			// spec, the spec starts and the fault is the cluster's.
			if why := notStarting(in, m, down); why != "" {
				return Decision{Action: ActFinish, Member: m.Name, GaveUp: true,
					Reason: fmt.Sprintf("%s; its roll gives way to a replacement placed outside %s", why, m.Domain.Cluster)}
			}
		}
		d := waitStep(op, ActUpdateObject, pollSlow, "rollout halted: %s's pod cannot start on the new spec for %s (grace %s): %s; no member runs the new spec yet, so the members not rolled keep the old spec, and nothing is replaced (a pod that cannot be scheduled or pulled is not a failed member): change the spec back, or make the pod startable",
			m.Name, notBack.Truncate(time.Second), in.MemberGrace, m.Object.Pending)
		d.Halted = true
		return d
	}
	if in.Automatic && !m.Ready && !down.IsZero() && in.Now.Sub(down) >= in.MemberGrace {
		return Decision{Action: ActFinish, Member: m.Name, Reason: fmt.Sprintf("%s has not been ready for %s (grace %s); its roll gives way to its replacement",
			m.Name, in.Now.Sub(down).Truncate(time.Second), in.MemberGrace)}
	}
	if !m.Object.Settled {
		return waitStep(op, ActUpdateObject, pollFast, "waiting for %s's pod to restart on the new spec", m.Name)
	}
	if ready {
		return waitStep(op, ActUpdateObject, pollFast, "waiting for %s to catch up with the leader (raft index %d)", m.Name, em.RaftIndex)
	}
	return waitStep(op, ActUpdateObject, pollFast, "waiting for %s to be a ready voter again", m.Name)
}

// leaderHandOffLimit is how long a Roll tries to move leadership away
// from the member it restarts (MoveLeader, asked of the leader) before it
// restarts the leader as it is, and a removal (Remove, Replace, Move)
// before it removes the leader as it is: a leader the hub cannot reach
// (its client port cut from the hub, a certificate it refuses) kept a CA
// rotation's last roll trying for ever (seen in the fleet benchmark: 1 of
// 20 rings stuck 11 minutes), and a Replace asked MoveLeader every 10 s
// for six minutes (TestScenarioFleetClusterLoss, 3 Dec). etcd's own
// transfer takes an election timeout at most, so a minute is many tries.
// It counts from the step's start (Operation.StepStartedAt).
const leaderHandOffLimit = time.Minute

func voters(e Etcd) int {
	n := 0
	for _, m := range e.Members {
		if !m.IsLearner {
			n++
		}
	}
	return n
}
