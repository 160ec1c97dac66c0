package planner

import (
	"fmt"
	"slices"
	"strings"
)

// Adoption of a running etcd cluster that etcdfed did not create
// (spec.adopt). Instead of a Bootstrap, the hub records the cluster as it
// finds it (ActFinishBootstrap: its cluster ID, and its members as the
// originals); the placement then wants spec.replicas members of its own,
// each joined by the ordinary Add (a learner, caught up, promoted), one at
// a time. Once every one of them is a ready voter and spec.adopt.retire
// is set, the originals are removed one at a time by Retire operations:
// followers first, the leader last, leadership handed to one of etcdfed's
// voters before.

// OpRetire removes one original member of an adopted cluster (Member is
// its etcd name, MemberID its ID): leadership moved to an etcdfed voter
// first when it leads, then its ID removed. It has no objects.
const OpRetire OpType = "Retire"

// ReasonAdoption is the reason of the Retire operations.
const ReasonAdoption = "Adoption"

// Adopt is the planner's view of spec.adopt and status.adoption.
type Adopt struct {
	// Wanted: spec.adopt is set; the cluster is never founded, only
	// found.
	Wanted bool
	// Endpoints are spec.adopt.endpoints, for messages.
	Endpoints []string
	// Originals are the IDs of the members the existing cluster had when
	// the hub first reached it (status.adoption.originals), nil before.
	Originals []uint64
	// Retire is spec.adopt.retire.
	Retire bool
}

// Original reports whether id is one of the adopted cluster's original
// members.
func (a Adopt) Original(id uint64) bool {
	return a.Wanted && id != 0 && slices.Contains(a.Originals, id)
}

// beginAdoption takes the place of beginBootstrap when spec.adopt is set:
// nothing is founded, ever. The running cluster is recorded once it
// answers with a quorate member list; until then the hub waits.
func beginAdoption(in Input) Decision {
	if !in.Etcd.Reachable {
		return wait(pollFast, "adopting: the existing cluster does not answer at %s (%s); nothing is founded or changed until it does",
			strings.Join(in.Adopt.Endpoints, ", "), orUnknown(in.Etcd.Error))
	}
	if len(in.Etcd.Members) == 0 {
		return wait(pollFast, "adopting: the existing cluster answered with an empty member list")
	}
	var names []string
	for _, m := range in.Etcd.Members {
		names = append(names, describe(m))
	}
	return Decision{Action: ActFinishBootstrap, Reason: fmt.Sprintf("adopting the running etcd cluster %x with %d original member(s): %s",
		in.Etcd.ClusterID, len(in.Etcd.Members), strings.Join(names, ", "))}
}

// originalsLeft are the originals etcd still lists, in removal order:
// followers by ID, the leader last.
func originalsLeft(in Input) []ListEntry {
	var out []ListEntry
	for _, em := range in.Etcd.Members {
		if in.Adopt.Original(em.ID) {
			out = append(out, em)
		}
	}
	slices.SortFunc(out, func(a, b ListEntry) int {
		la, lb := a.ID == in.Etcd.LeaderID, b.ID == in.Etcd.LeaderID
		switch {
		case la != lb && la:
			return 1
		case la != lb:
			return -1
		case a.ID < b.ID:
			return -1
		case a.ID > b.ID:
			return 1
		}
		return 0
	})
	return out
}

// managedReady says why etcdfed's own members cannot yet carry the ring
// alone ("" when they can): spec.replicas of them, each a started,
// healthy, ready voter in a member cluster the hub sees, no learner in
// etcd, and no eligible member cluster out of sight (nothing is decided
// on a partial view, rule 8).
func managedReady(in Input) string {
	if !in.Etcd.Reachable {
		return fmt.Sprintf("etcd does not answer (%s)", orUnknown(in.Etcd.Error))
	}
	if len(in.Unseen) > 0 {
		return "not every eligible member cluster is seen: " + strings.Join(in.Unseen, "; ")
	}
	if l, busy := otherLearner(in.Etcd, 0); busy {
		return fmt.Sprintf("learner %s is still joining", describe(l))
	}
	var voters int
	var not []string
	for _, m := range in.Members {
		em, listed := byID(in.Etcd, m.ID)
		switch {
		case !listed:
			not = append(not, m.Name+" has not joined")
		case em.IsLearner:
			not = append(not, m.Name+" is a learner")
		case !m.ClusterVisible || m.DomainFailed:
			not = append(not, fmt.Sprintf("%s's member cluster %s is out of sight", m.Name, m.Domain.Cluster))
		case !em.Started() || !em.Healthy || !m.Ready:
			not = append(not, m.Name+" is not a ready, healthy voter")
		default:
			voters++
		}
	}
	if len(not) > 0 {
		return strings.Join(not, "; ")
	}
	if voters < in.Replicas {
		return fmt.Sprintf("%d of %d etcdfed members are voters", voters, in.Replicas)
	}
	return ""
}

// retireStep begins the Retire of the next original, when the placement
// has nothing left to do, spec.adopt.retire is set and etcdfed's members
// carry the ring (managedReady). ok is false when there is nothing to
// retire; a wait explains why not yet.
func retireStep(in Input) (Decision, bool) {
	left := originalsLeft(in)
	if len(left) == 0 {
		return Decision{}, false
	}
	if !in.Adopt.Retire {
		if why := managedReady(in); why != "" {
			return Decision{}, false // still joining: the placement says so
		}
		return Decision{Action: ActNone, Reason: fmt.Sprintf("adopted: %d etcdfed members are voters beside %d original member(s); set spec.adopt.retire to remove the originals", in.Replicas, len(left))}, true
	}
	if why := managedReady(in); why != "" {
		return wait(pollFast, "not retiring original members yet: %s", why), true
	}
	em := left[0]
	if ok, q := keepsQuorum(in.Etcd, em.ID); !ok {
		return wait(pollSlow, "not retiring original member %s: %s", describe(em), q), true
	}
	op := Operation{Type: OpRetire, Member: em.Name, MemberID: em.ID, Reason: ReasonAdoption, Step: ActRemoveMember, StartedAt: in.Now}
	return Decision{Action: ActBegin, Operation: &op, Member: em.Name, MemberID: em.ID,
		Reason: fmt.Sprintf("retiring original member %s (%d of %d left), etcdfed's %d members being ready voters", describe(em), len(left), len(in.Adopt.Originals), in.Replicas)}, true
}

// continueRetire walks one Retire: gone already, done; otherwise the same
// checks as its beginning again (a member may have failed since), then
// leadership handed to an etcdfed voter if the original leads, then the
// removal, gated on quorum.
func continueRetire(in Input, op Operation) Decision {
	if !in.Etcd.Reachable {
		return waitStep(op, op.Step, pollFast, "etcd does not answer (%s)", orUnknown(in.Etcd.Error))
	}
	em, found := byID(in.Etcd, op.MemberID)
	if !found {
		return Decision{Action: ActFinish, Reason: fmt.Sprintf("original member %s [%x] retired", op.Member, op.MemberID)}
	}
	if why := managedReady(in); why != "" {
		return waitStep(op, op.Step, pollFast, "not retiring %s yet: %s", describe(em), why)
	}
	if in.Etcd.LeaderID == em.ID {
		to, ok := managedTransferee(in)
		if !ok {
			return waitStep(op, ActMoveLeader, pollFast, "%s leads and no etcdfed voter can take over", describe(em))
		}
		return step(op, ActMoveLeader, Decision{Member: op.Member, MemberID: em.ID, TransfereeID: to,
			Reason: fmt.Sprintf("moving leadership from original member %s to an etcdfed member before retiring it", describe(em))})
	}
	if ok, why := keepsQuorum(in.Etcd, em.ID); !ok {
		return waitStep(op, ActRemoveMember, pollSlow, "not retiring %s: %s", describe(em), why)
	}
	return step(op, ActRemoveMember, Decision{Member: op.Member, MemberID: em.ID, RequeueAfter: pollJoin,
		Reason: fmt.Sprintf("retiring original member %s: removing it from etcd", describe(em))})
}

// managedTransferee is the etcdfed voter, healthy and started, with the
// lowest ID: leadership leaves an original for one of etcdfed's members,
// never for another original about to be retired.
func managedTransferee(in Input) (uint64, bool) {
	var best uint64
	for _, m := range in.Members {
		em, ok := byID(in.Etcd, m.ID)
		if !ok || em.IsLearner || !em.Healthy || !em.Started() {
			continue
		}
		if best == 0 || em.ID < best {
			best = em.ID
		}
	}
	return best, best != 0
}
