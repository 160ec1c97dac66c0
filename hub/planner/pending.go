package planner

import (
	"fmt"
	"time"
)

// A pod that stays Pending (not scheduled, its image not pulled) says
// nothing of its member's data, and a replacement on a spec no pod can
// start would not start either: a Roll whose member's pod cannot start
// on the new spec halts rather than give way (issue 24). But a member
// cluster decides alone whether a pod there is scheduled, and reports
// alone that it is not: a broken or hostile cluster that keeps its
// member Pending would hold the ring's roll halted for ever, and with it
// every roll of the ring (upgrades, CA rotations). Pending is therefore
// bounded by evidence from the rest of the ring:
//
//   - when another member, a ready voter, runs the very spec the Pending
//     member's object carries (neither object outdated, the other's pod
//     ready on it), the spec starts and the fault is where the Pending
//     pod runs: after the member grace the roll gives way, the member
//     is not replaced in place, and the placement moves it out of that
//     member cluster (its domains take no new members while a member
//     there does not start; topology.NotStarting);
//   - when no member runs that spec, the spec is at fault: the roll stays
//     halted, as before, until the spec changes or the pod starts.
//
// The same bound ends the start of a new incarnation (an Add, Replace or
// Move) that stays Pending where it was placed (giveUpStart).
//
// The evidence comes from the hub's own record (a ready voter is one
// etcd answers for) and from the other member's cluster, never from the
// Pending member's cluster alone. What a hostile cluster can do with it is
// move members out of itself, which it can do anyway by stopping them.
// With spec.failurePolicy.automatic false nothing is replaced or moved:
// the roll halts as before.

// NotStarting says why member m's pod does not start where it runs
// although its spec does start elsewhere in the ring, "" when that is not
// so: m is not a ready voter, its object is its current incarnation's on
// the ring's current spec and its pod has been Pending on it for the
// member grace (since m went down, as the hub recorded it), and another
// member is a ready voter whose pod runs that same spec. Only with
// spec.failurePolicy.automatic: then m is left to the placement, which
// moves it out of its member cluster. A zone where no node takes new pods
// (DomainClosed) explains the Pending pod without blaming the cluster: the
// placement moves m out through the closed zone and takes the zone back
// once a node there takes pods again, so that is not NotStarting.
func NotStarting(in Input, m Member) string {
	if !in.Automatic || m.DomainClosed {
		return ""
	}
	return notStarting(in, m, m.ReadyChangedAt)
}

// notStarting is NotStarting with the Pending time counted from since.
func notStarting(in Input, m Member, since time.Time) string {
	o := m.Object
	if o == nil || o.Pending == "" || o.Outdated || o.Incarnation != m.Incarnation || m.Ready ||
		since.IsZero() || in.Now.Sub(since) < in.MemberGrace {
		return ""
	}
	for _, x := range in.Members {
		xo := x.Object
		if x.Name == m.Name || !x.Ready || xo == nil || xo.Incarnation != x.Incarnation || xo.Outdated || !xo.Settled || xo.Pending != "" {
			continue
		}
		return fmt.Sprintf("%s's pod has not started in %s for %s (grace %s): %s; %s runs the same spec in %s, so the spec starts and %s does not start it",
			m.Name, m.Domain, in.Now.Sub(since).Truncate(time.Second), in.MemberGrace, o.Pending, x.Name, x.Domain, m.Domain.Cluster)
	}
	return ""
}
