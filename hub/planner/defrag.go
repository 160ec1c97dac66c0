package planner

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/etcdfed/etcdfed/internal/text"
	"github.com/etcdfed/etcdfed/pkg/topology"
)

// Defragmentation is an operation of this planner (type Defrag), taken
// through the same one-operation-at-a-time gate as membership changes and
// rolls, because a member being defragmented does not serve:
//
//   - reason Fragmented: one member whose database file is mostly free
//     pages (both thresholds of Maintenance). It begins only when every
//     member is a ready voter and nothing else is to do; followers go
//     first in name order and the leader last, after leadership is moved
//     away. Done when the member answers again with its file no longer
//     fragmented.
//   - reason Scheduled: the same, for a member with free pages worth
//     giving back (at least 1 MiB and 5% of its file) while a scheduled
//     run is due.
//   - reason NoSpace: the recovery of a NOSPACE alarm (etcd refuses writes
//     once a member's file reaches its quota), as etcd's documentation
//     describes it: compact, defragment every member (in name order), then
//     disarm the alarm, once every member's file is back under 90% of its
//     quota. The compaction goes no further than the user's configured
//     retention unless the user consented to compaction to the current
//     revision (Maintenance.NoSpaceCompactToCurrent): history is data.
//     When compaction and defragmentation cannot get there (the data kept
//     is above the quota), the operation ends without disarming, and the
//     next try is NoSpaceRetry later; a human deletes keys, raises the
//     quota or consents to compaction to the current revision.

// OpDefrag defragments members' databases, one member at a time.
const OpDefrag OpType = "Defrag"

// Reasons of a Defrag operation.
const (
	ReasonFragmented = "Fragmented"
	ReasonScheduled  = "Scheduled"
	ReasonNoSpace    = "NoSpace"
)

// Actions of a Defrag operation.
const (
	// ActCompact is the first step of a NOSPACE recovery as recorded when
	// it begins: the compaction is still to be done. It is done together
	// with the first ActDefragment (the compaction, as far as the policy
	// allows, is repeated before every member's defragmentation in a
	// NOSPACE recovery; repeating it is harmless).
	ActCompact Action = "Compact"
	// ActDefragment: Defragment the member Decision.MemberID (compacting
	// first when the operation's reason is NoSpace).
	ActDefragment Action = "Defragment"
	// ActDisarm: disarm every NOSPACE alarm.
	ActDisarm Action = "DisarmAlarm"
)

// Alarm types, etcd's own names.
const (
	AlarmNoSpace = "NOSPACE"
	AlarmCorrupt = "CORRUPT"
)

// NoSpaceRetry is how long after a NOSPACE recovery that could not disarm
// the alarm the next one begins.
const NoSpaceRetry = 10 * time.Minute

// Alarm is one alarm etcd has raised.
type Alarm struct {
	MemberID uint64
	Type     string
}

// Maintenance is the policy for members' databases (spec.defragmentation).
type Maintenance struct {
	// AutoDefrag lets the planner defragment fragmented members.
	AutoDefrag bool
	// MinFragmentedPercent and MinReclaimable: a member is fragmented when
	// at least this share of its file, and at least this many bytes, are
	// free pages.
	MinFragmentedPercent int64
	MinReclaimable       int64
	// NoSpaceLastRecovery is when the last NOSPACE recovery ended without
	// disarming the alarm raised now (zero: none did).
	NoSpaceLastRecovery time.Time
	// NoSpaceCompactToCurrent: the user consented to compaction to the
	// current revision in a NOSPACE recovery (spec.defragmentation.
	// noSpaceCompaction: CurrentRevision); otherwise the hub compacts no
	// further than the configured auto-compaction retention.
	NoSpaceCompactToCurrent bool
	// ScheduledDue: a scheduled run (spec.defragmentation.schedule) is due:
	// every member whose file has free pages worth giving back
	// (reclaimable) is defragmented, whatever the thresholds and
	// AutoDefrag. The reconciler records the run done once the planner has
	// nothing left to do.
	ScheduledDue bool
}

// Fragmented reports whether a member's file is fragmented beyond both
// thresholds. A member whose sizes are unknown is not.
func (p Maintenance) Fragmented(e ListEntry) bool {
	if e.DBSize <= 0 || e.DBSizeInUse <= 0 || e.DBSizeInUse > e.DBSize {
		return false
	}
	free := e.DBSize - e.DBSizeInUse
	return free >= p.MinReclaimable && free*100 >= e.DBSize*p.MinFragmentedPercent
}

// reclaimable: a member's file is worth defragmenting (in a scheduled run,
// or after compaction in a NOSPACE recovery) when at least 1 MiB and 5% of
// it are free pages.
func reclaimable(e ListEntry) bool {
	free := e.DBSize - e.DBSizeInUse
	return e.DBSizeInUse > 0 && free >= 1<<20 && free*20 >= e.DBSize
}

// defragStep begins the defragmentation of the next fragmented member when
// nothing else is to do, or returns otherwise.
func defragStep(in Input, otherwise Decision) Decision {
	if otherwise.Action != ActNone && otherwise.Action != ActWait {
		return otherwise
	}
	due, reason := defragDue(in)
	if len(due) == 0 {
		return otherwise
	}
	if why := notReadyToRoll(in); why != "" {
		if otherwise.Action == ActWait {
			return otherwise
		}
		return wait(pollSlow, "defragmentation of %s waits until every member is a ready voter: %s", memberNames(due), why)
	}
	if a := alarmsOf(in.Etcd, AlarmCorrupt); len(a) > 0 {
		if otherwise.Action == ActWait {
			return otherwise
		}
		return wait(pollSlow, "no defragmentation while etcd has a CORRUPT alarm raised (%s)", describeAlarms(in, a))
	}
	due = leaderLast(in, due)
	m := due[0]
	em, _ := byID(in.Etcd, m.ID)
	why := fmt.Sprintf("defragmenting %s: %s of its %s database file are free pages (%d%%); %d member(s) to defragment",
		m.Name, Bytes(em.DBSize-em.DBSizeInUse), Bytes(em.DBSize), (em.DBSize-em.DBSizeInUse)*100/em.DBSize, len(due))
	if reason == ReasonScheduled {
		why = "scheduled run: " + why
	}
	if em.ID == in.Etcd.LeaderID {
		why += "; it leads, so leadership moves away first"
	}
	return begin(in, Operation{Type: OpDefrag, Member: m.Name, Reason: reason, Step: ActDefragment}, why)
}

// defragDue lists the members to defragment and why: those fragmented
// beyond the thresholds (AutoDefrag), else, while a scheduled run is due,
// those with free pages worth giving back.
func defragDue(in Input) ([]Member, string) {
	var fragmented, scheduled []Member
	for _, m := range in.Members {
		em, ok := byID(in.Etcd, m.ID)
		if !ok || em.IsLearner {
			continue
		}
		if in.Maintenance.AutoDefrag && in.Maintenance.Fragmented(em) {
			fragmented = append(fragmented, m)
		}
		if in.Maintenance.ScheduledDue && reclaimable(em) {
			scheduled = append(scheduled, m)
		}
	}
	if len(fragmented) > 0 {
		return fragmented, ReasonFragmented
	}
	return scheduled, ReasonScheduled
}

// noSpaceStep begins the recovery of a NOSPACE alarm. ok is false when
// there is none to begin (no alarm, or the last recovery could not disarm
// it and the next is not due: then rollouts, for example of a raised
// quota, go on).
func noSpaceStep(in Input) (Decision, bool) {
	if !in.Etcd.AlarmsKnown {
		return Decision{}, false
	}
	alarms := alarmsOf(in.Etcd, AlarmNoSpace)
	if len(alarms) == 0 {
		return Decision{}, false
	}
	if last := in.Maintenance.NoSpaceLastRecovery; !last.IsZero() && in.Now.Sub(last) < NoSpaceRetry {
		return Decision{}, false
	}
	on := describeAlarms(in, alarms)
	if why := notReadyToRoll(in); why != "" {
		return wait(pollFast, "NOSPACE alarm on %s: its recovery (compaction, every member defragmented, alarm disarmed) waits until every member is a ready voter: %s", on, why), true
	}
	return begin(in, Operation{Type: OpDefrag, Reason: ReasonNoSpace, Step: ActCompact},
		fmt.Sprintf("NOSPACE alarm on %s: %s, defragmenting every member, then disarming the alarm", on, noSpaceCompaction(in.Maintenance))), true
}

func continueDefrag(in Input, op Operation) Decision {
	if op.Reason == ReasonNoSpace {
		return continueNoSpace(in, op)
	}
	m, ok := member(in, op.Member)
	if !ok {
		return Decision{Action: ActFinish, Reason: fmt.Sprintf("%s is no longer a member; its defragmentation is dropped", op.Member)}
	}
	if !in.Etcd.Reachable {
		return waitStep(op, op.Step, pollFast, "etcd does not answer (%s)", orUnknown(in.Etcd.Error))
	}
	em, found := byID(in.Etcd, m.ID)
	if !found || em.IsLearner {
		return Decision{Action: ActFinish, Member: m.Name, Reason: fmt.Sprintf("%s is no longer a voter; its defragmentation is dropped", m.Name)}
	}
	if d, waiting := awaitMember(in, op, m, em); waiting {
		return d
	}
	if done := !in.Maintenance.Fragmented(em); (op.Reason != ReasonScheduled && done) || (op.Reason == ReasonScheduled && !reclaimable(em)) {
		return Decision{Action: ActFinish, Member: m.Name, MemberID: em.ID,
			Reason: fmt.Sprintf("%s defragmented: database file %s, %s in use", m.Name, Bytes(em.DBSize), Bytes(em.DBSizeInUse))}
	}
	return defragment(in, op, m, em)
}

// continueNoSpace walks a NOSPACE recovery: compaction with the first
// member's defragmentation, then every other member's, once each, in name
// order (leadership moved away from each member that leads when its turn
// comes: under NOSPACE the ring takes no writes, so an extra election
// costs nothing), then the alarm disarmed. Every member is defragmented,
// not only those whose file shows free pages: a member frees compacted
// pages only at its next write, which NOSPACE forbids, so its in-use size
// is not to be trusted yet. The member recorded in the operation is the
// one in work; it is done once its file shows no free pages. The
// operation ends when the alarm is gone.
func continueNoSpace(in Input, op Operation) Decision {
	if !in.Etcd.Reachable || !in.Etcd.AlarmsKnown {
		return waitStep(op, op.Step, pollFast, "etcd does not answer with its alarms (%s)", orUnknown(in.Etcd.Error))
	}
	if len(alarmsOf(in.Etcd, AlarmNoSpace)) == 0 {
		return Decision{Action: ActFinish, Reason: "the NOSPACE alarm is disarmed: etcd accepts writes again"}
	}
	var order []Member
	for _, m := range in.Members {
		em, found := byID(in.Etcd, m.ID)
		if !found || em.IsLearner {
			continue
		}
		if d, waiting := awaitMember(in, op, m, em); waiting {
			return d
		}
		order = append(order, m)
	}
	slices.SortFunc(order, func(a, b Member) int { return topology.CompareNames(a.Name, b.Name) })
	next := 0
	if op.Step != ActCompact && op.Step != ActDisarm {
		next = len(order)
		for i, m := range order {
			if m.Name != op.Member {
				continue
			}
			next = i + 1
			if em, _ := byID(in.Etcd, m.ID); op.Step == ActMoveLeader || reclaimable(em) {
				next = i // not done yet
			}
		}
	}
	if op.Step != ActDisarm && next < len(order) {
		m := order[next]
		em, _ := byID(in.Etcd, m.ID)
		op.Member = m.Name
		return defragment(in, op, m, em)
	}
	var over []string
	for _, m := range order {
		if em, _ := byID(in.Etcd, m.ID); em.DBSizeQuota > 0 && em.DBSize*10 > em.DBSizeQuota*9 {
			over = append(over, fmt.Sprintf("%s: %s file, %s in use, quota %s", m.Name, Bytes(em.DBSize), Bytes(em.DBSizeInUse), Bytes(em.DBSizeQuota)))
		}
	}
	if len(over) > 0 {
		remedy := "delete keys or raise spec.etcd.quotaBackendBytes"
		if !in.Maintenance.NoSpaceCompactToCurrent {
			remedy = "set spec.defragmentation.noSpaceCompaction: CurrentRevision to compact away the history the retention keeps, delete keys, or raise spec.etcd.quotaBackendBytes"
		}
		return Decision{Action: ActFinish, Reason: fmt.Sprintf("%s and defragmentation left too little room to disarm NOSPACE (%s); %s; next try in %s",
			noSpaceCompaction(in.Maintenance), strings.Join(over, "; "), remedy, NoSpaceRetry)}
	}
	op.Member = ""
	return step(op, ActDisarm, Decision{RequeueAfter: pollFast, Reason: "every member compacted and defragmented below 90% of its quota: disarming NOSPACE"})
}

// awaitMember waits while a member of a defragmentation does not answer
// as a ready voter (a member does not serve while it is defragmented). A
// member that stays down beyond the grace period ends the operation: its
// replacement goes first.
func awaitMember(in Input, op Operation, m Member, em ListEntry) (Decision, bool) {
	if em.Started() && em.Healthy && m.Ready {
		return Decision{}, false
	}
	if in.Automatic && !m.Ready && !m.ReadyChangedAt.IsZero() && in.Now.Sub(m.ReadyChangedAt) >= in.MemberGrace {
		return Decision{Action: ActFinish, Member: m.Name, Reason: fmt.Sprintf("%s has not been ready for %s (grace %s); the defragmentation gives way to its replacement",
			m.Name, in.Now.Sub(m.ReadyChangedAt).Truncate(time.Second), in.MemberGrace)}, true
	}
	return waitStep(op, op.Step, pollFast, "waiting for %s to answer as a ready voter (a member does not serve while it is defragmented)", m.Name), true
}

// defragment is the member's next step: leadership away when it leads,
// then the defragmentation.
func defragment(in Input, op Operation, m Member, em ListEntry) Decision {
	handOff := ""
	if em.ID == in.Etcd.LeaderID && voters(in.Etcd) > 1 {
		to, ok := transferee(in, em.ID)
		tried := onStep(in, op, ActMoveLeader)
		switch {
		case !ok:
			return waitStep(op, ActMoveLeader, pollFast, "%s leads and no other healthy voter can take over", describe(em))
		case tried < leaderHandOffLimit:
			return step(op, ActMoveLeader, Decision{Member: m.Name, MemberID: em.ID, TransfereeID: to, Reason: fmt.Sprintf("moving leadership away from %s before defragmenting it", describe(em))})
		}
		// As a roll restarts such a leader: defragmented where it leads,
		// the ring's writes wait for it (a leader defragmenting does not
		// apply) rather than the defragmentation for ever.
		handOff = handOffGivenUp(em, tried, "defragmenting it as the leader, writes wait while it does")
	}
	what := handOff + "defragmenting"
	if op.Reason == ReasonNoSpace {
		what = noSpaceCompaction(in.Maintenance) + " and defragmenting"
	}
	return step(op, ActDefragment, Decision{Member: m.Name, MemberID: em.ID, RequeueAfter: pollFast,
		Reason: fmt.Sprintf("%s %s (database file %s, %s in use)", what, m.Name, Bytes(em.DBSize), Bytes(em.DBSizeInUse))})
}

// noSpaceCompaction says how far a NOSPACE recovery compacts.
func noSpaceCompaction(p Maintenance) string {
	if p.NoSpaceCompactToCurrent {
		return "compacting to the current revision (consented)"
	}
	return "compacting no further than the configured retention"
}

// leaderLast orders members by name, the leader last.
func leaderLast(in Input, ms []Member) []Member {
	out := slices.Clone(ms)
	slices.SortFunc(out, func(a, b Member) int {
		switch {
		case a.ID == in.Etcd.LeaderID && b.ID != in.Etcd.LeaderID:
			return 1
		case b.ID == in.Etcd.LeaderID && a.ID != in.Etcd.LeaderID:
			return -1
		}
		return topology.CompareNames(a.Name, b.Name)
	})
	return out
}

func alarmsOf(e Etcd, typ string) []Alarm {
	var out []Alarm
	for _, a := range e.Alarms {
		if a.Type == typ {
			out = append(out, a)
		}
	}
	return out
}

// describeAlarms names the members alarms are raised for.
func describeAlarms(in Input, alarms []Alarm) string {
	var out []string
	for _, a := range alarms {
		name := fmt.Sprintf("[%x]", a.MemberID)
		for _, m := range in.Members {
			if m.ID == a.MemberID {
				name = m.Name
			}
		}
		out = append(out, name)
	}
	return strings.Join(out, ", ")
}

func memberNames(ms []Member) string {
	out := make([]string, len(ms))
	for i, m := range ms {
		out[i] = m.Name
	}
	return strings.Join(out, ", ")
}

// Bytes formats a size for people: "312.4 MiB" (text.Bytes).
func Bytes(n int64) string { return text.Bytes(n) }
