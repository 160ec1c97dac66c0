package planner

import (
	"fmt"
	"slices"
	"time"

	"github.com/etcdfed/etcdfed/pkg/topology"
)

// The ring's one disruption budget (rule 12). Every member pod has a
// PodDisruptionBudget that blocks eviction; a member whose node is being
// drained (its spoke reports the node cordoned) asks for a disruption, and
// the hub grants one at a time, as a Disrupt operation through the same
// gate as every other change:
//
//   - it begins only when every member is a ready voter on a settled
//     object, etcd lists no member that is not a healthy voter, and no
//     membership change or roll is due;
//   - a leader has its leadership moved away first;
//   - GrantDisruption opens the member's budget (maxUnavailable 1) and
//     holds it open while the member is up and every other member is a
//     ready voter; if another member fails first, the grant is withdrawn
//     (the operation ends, the budget closes);
//   - once the member is down (evicted), AwaitReturn closes the budget and
//     waits for the member to be back as a ready voter; one that is not
//     back within memberGracePeriod gives way to its replacement.

// Steps of a Disrupt operation.
const (
	// ActGrantDisruption: the member's object allows one disruption
	// (spec.disruption.allowed); its spoke opens its PodDisruptionBudget.
	ActGrantDisruption Action = "GrantDisruption"
	// ActAwaitReturn: the member went down; its budget is closed again and
	// the operation waits for it to be a ready voter.
	ActAwaitReturn Action = "AwaitReturn"
)

// OpDisrupt grants one member's disruption (a node drain).
const OpDisrupt OpType = "Disrupt"

// ReasonNodeMaintenance is the reason of a Disrupt operation.
const ReasonNodeMaintenance = "NodeMaintenance"

// Allows reports whether the operation in flight opens member's budget.
func Allows(op *Operation, member string) bool {
	return op != nil && op.Type == OpDisrupt && op.Member == member && op.Step == ActGrantDisruption
}

// disruptionStep begins the grant of the longest-waiting request, or
// returns otherwise when there is none or the ring cannot spare a member.
func disruptionStep(in Input, otherwise Decision) Decision {
	var asking []Member
	for _, m := range in.Members {
		if m.Object != nil && m.Object.DisruptionRequested {
			asking = append(asking, m)
		}
	}
	if len(asking) == 0 {
		return otherwise
	}
	if otherwise.Action != ActNone {
		return otherwise
	}
	if why := notReadyToRoll(in); why != "" {
		return wait(pollSlow, "%d disruption request(s) (node drains) wait until every member is a ready voter: %s", len(asking), why)
	}
	slices.SortFunc(asking, func(a, b Member) int {
		if c := a.Object.DisruptionRequestedSince.Compare(b.Object.DisruptionRequestedSince); c != 0 {
			return c
		}
		return topology.CompareNames(a.Name, b.Name)
	})
	m := asking[0]
	why := fmt.Sprintf("granting %s one disruption (%s); every other member's budget stays closed", m.Name, orUnknown(m.Object.DisruptionReason))
	if len(asking) > 1 {
		why += fmt.Sprintf("; %d more wait", len(asking)-1)
	}
	return begin(in, Operation{Type: OpDisrupt, Member: m.Name, Reason: ReasonNodeMaintenance}, why)
}

// continueDisrupt walks one member's grant.
func continueDisrupt(in Input, op Operation) Decision {
	m, ok := member(in, op.Member)
	if !ok {
		return Decision{Action: ActFinish, Reason: fmt.Sprintf("%s is no longer a member; its disruption grant is dropped", op.Member)}
	}
	if !in.Etcd.Reachable {
		return waitStep(op, awaitIfGone(op), pollFast, "etcd does not answer (%s); %s's budget is closed meanwhile", orUnknown(in.Etcd.Error), m.Name)
	}
	if !m.ClusterVisible || m.Object == nil {
		return waitStep(op, awaitIfGone(op), pollSlow, "member cluster %s is not visible; %s's budget is closed meanwhile", m.Domain.Cluster, m.Name)
	}
	switch {
	case m.Object.Incarnation != m.Incarnation:
		return Decision{Action: ActFinish, Member: m.Name, Reason: fmt.Sprintf("%s has a new incarnation; its disruption grant ends", m.Name)}
	case m.DomainFailed || m.Object.VolumeLost:
		return Decision{Action: ActFinish, Member: m.Name, Reason: fmt.Sprintf("%s must be replaced; its disruption grant gives way to the replacement", m.Name)}
	}
	em, found := byID(in.Etcd, m.ID)
	up := found && em.Started() && em.Healthy && !em.IsLearner && m.Ready && m.Object.Settled
	if op.Step == ActAwaitReturn {
		if up {
			return Decision{Action: ActFinish, Member: m.Name, MemberID: m.ID, Reason: fmt.Sprintf("%s is back as a ready voter; its budget stays closed", m.Name)}
		}
		if in.Automatic && !m.Ready && !m.ReadyChangedAt.IsZero() && in.Now.Sub(m.ReadyChangedAt) >= in.MemberGrace {
			return Decision{Action: ActFinish, Member: m.Name, Reason: fmt.Sprintf("%s has not been back for %s (grace %s); its disruption gives way to its replacement",
				m.Name, in.Now.Sub(m.ReadyChangedAt).Truncate(time.Second), in.MemberGrace)}
		}
		return waitStep(op, ActAwaitReturn, pollFast, "%s is down (disrupted); every budget is closed until it is back as a ready voter", m.Name)
	}
	if !up {
		return step(op, ActAwaitReturn, Decision{Member: m.Name, MemberID: m.ID, RequeueAfter: pollFast,
			Reason: fmt.Sprintf("%s is down (disrupted); its budget is closed again until it is back as a ready voter", m.Name)})
	}
	if !m.Object.DisruptionRequested {
		return Decision{Action: ActFinish, Member: m.Name, MemberID: m.ID, Reason: fmt.Sprintf("%s no longer asks for a disruption; its budget is closed", m.Name)}
	}
	if why := othersNotReady(in, m.Name); why != "" {
		return Decision{Action: ActFinish, Member: m.Name, MemberID: m.ID, Reason: fmt.Sprintf("the ring is not fully healthy (%s): %s's disruption grant is withdrawn before it was used", why, m.Name)}
	}
	if em.ID == in.Etcd.LeaderID {
		if to, ok := transferee(in, em.ID); ok {
			return step(op, ActMoveLeader, Decision{Member: m.Name, MemberID: em.ID, TransfereeID: to, Reason: fmt.Sprintf("moving leadership away from %s before its disruption", describe(em))})
		}
		if voters(in.Etcd) > 1 {
			return waitStep(op, ActMoveLeader, pollFast, "%s leads and no other healthy voter can take over", describe(em))
		}
	}
	return step(op, ActGrantDisruption, Decision{Member: m.Name, MemberID: m.ID, RequeueAfter: pollFast,
		Reason: fmt.Sprintf("%s may be evicted once (%s); every other member's budget stays closed", m.Name, orUnknown(m.Object.DisruptionReason))})
}

// awaitIfGone keeps an AwaitReturn step, and otherwise takes the grant
// back while the hub cannot see: a budget is never left open blind.
func awaitIfGone(op Operation) Action {
	if op.Step == ActAwaitReturn {
		return ActAwaitReturn
	}
	return ActWait
}

// othersNotReady is notReadyToRoll for every member but one.
func othersNotReady(in Input, except string) string {
	rest := in
	rest.Members = slices.DeleteFunc(slices.Clone(in.Members), func(m Member) bool { return m.Name == except })
	var self uint64
	for _, m := range in.Members {
		if m.Name == except {
			self = m.ID
		}
	}
	rest.Etcd.Members = slices.DeleteFunc(slices.Clone(in.Etcd.Members), func(e ListEntry) bool { return e.ID == self })
	return notReadyToRoll(rest)
}
