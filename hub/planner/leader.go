package planner

import (
	"fmt"
	"time"

	"github.com/etcdfed/etcdfed/pkg/topology"
)

// Leader placement (rule 16) is an operation of this planner (type
// MoveLeader), through the same one-operation-at-a-time gate as every
// other change, because a move of leadership is a short stall of writes:
//
//   - pkg/topology's DecideLeader says where the leader is wanted
//     (spec.leader) and whether to move it now, with hysteresis: only
//     after the ring has been healthy with the leader outside the wanted
//     place for the settle time, never twice within the interval;
//   - the planner begins a MoveLeader only when nothing else is to do (no
//     operation in flight, no step due, no CA rotation holding) and every
//     member is a ready voter; it is recorded (rule 3) before etcd's
//     MoveLeader is called (TransferLeadership);
//   - it ends when the target leads, or is abandoned when the ring
//     degrades, the target stops being a healthy voter, etcd does not
//     answer, or leadership has not moved within leaderMoveTimeout.
//
// Leadership is never moved by stopping a member.

// OpMoveLeader moves leadership to the member where spec.leader wants it.
const OpMoveLeader OpType = "MoveLeader"

// ActTransferLeadership: etcd's MoveLeader to Decision.TransfereeID, for
// the leader's placement (OpMoveLeader).
const ActTransferLeadership Action = "TransferLeadership"

// leaderMoveTimeout is how long a MoveLeader operation tries before it is
// given up (etcd's own transfer takes an election timeout at most).
const leaderMoveTimeout = 30 * time.Second

// LeaderInput is what leader placement needs beyond the ring's state.
type LeaderInput struct {
	// Policy is spec.leader, defaults resolved.
	Policy topology.LeaderPolicy
	// OutsideSince and LastMoved are the recorded times
	// (status.leaderPlacement) that the hysteresis counts from.
	OutsideSince time.Time
	LastMoved    time.Time
	// RoundTrip is the measured round-trip matrix, nil without one.
	RoundTrip topology.RoundTrip
}

// leaderStep decides the leader's placement beside d, the planner's
// decision for everything else: it records DecideLeader's answer in
// d.Leader (for the status) and, when d takes no step and nothing is in
// flight, begins a MoveLeader instead.
func leaderStep(in Input, d Decision) Decision {
	li := topology.LeaderInput{
		Policy:       in.Leader.Policy,
		Now:          in.Now,
		OutsideSince: in.Leader.OutsideSince,
		LastMoved:    in.Leader.LastMoved,
		RoundTrip:    in.Leader.RoundTrip,
		Unhealthy:    ringUnhealthy(in),
		Busy:         busy(in, d),
	}
	li.Members, li.Leader = leaderMembers(in)
	ld := topology.DecideLeader(li)
	if op := in.Operation; op != nil && op.Type == OpMoveLeader && d.Action != ActFinish && !ld.InPlace {
		ld.Reason, ld.MoveTo, ld.Message = topology.LeaderMove, "", d.Reason
	}
	d.Leader = &ld
	if ld.MoveTo == "" {
		if ld.RequeueAfter > 0 && (d.Action == ActNone || d.Action == ActWait) && (d.RequeueAfter <= 0 || ld.RequeueAfter < d.RequeueAfter) {
			d.RequeueAfter = ld.RequeueAfter
		}
		return d
	}
	m, _ := member(in, ld.MoveTo)
	to := m.Domain
	nd := begin(in, Operation{Type: OpMoveLeader, Member: m.Name, MemberID: m.ID, To: &to, Reason: string(in.Leader.Policy.Placement)}, ld.Message)
	nd.Leader = &ld
	return nd
}

// leaderMembers are etcd's members as leader placement sees them, and
// the leader's name ("" when unknown).
func leaderMembers(in Input) (out []topology.LeaderMember, leader string) {
	ids := map[uint64]Member{}
	for _, m := range in.Members {
		if m.ID != 0 {
			ids[m.ID] = m
		}
	}
	for _, em := range in.Etcd.Members {
		m, ok := ids[em.ID]
		if !ok {
			continue
		}
		out = append(out, topology.LeaderMember{Name: m.Name, Domain: m.Domain, Voter: !em.IsLearner,
			Ready: m.Ready && em.Healthy && em.Started() && !em.IsLearner})
		if em.ID == in.Etcd.LeaderID && in.Etcd.Reachable {
			leader = m.Name
		}
	}
	return out, leader
}

// transferee picks the new leader when id must lose leadership (a roll, a
// drain, a removal): the first healthy started voter other than id where
// spec.leader wants the leader (topology.WantedLeaders, id counted not
// ready), else the one the etcd container's preStop hook would pick
// (topology.ChooseSuccessor): the most up to date by its last status
// answer, then the nearest to id's member cluster by the measured round
// trips, then the lowest ID.
func transferee(in Input, id uint64) (uint64, bool) {
	ok := func(e ListEntry) bool { return e.ID != id && !e.IsLearner && e.Healthy && e.Started() }
	members, _ := leaderMembers(in)
	from := ""
	for i := range members {
		if m, _ := member(in, members[i].Name); m.ID == id {
			members[i].Ready, from = false, m.Domain.Cluster
		}
	}
	for _, name := range topology.WantedLeaders(topology.LeaderInput{Policy: in.Leader.Policy, Members: members, RoundTrip: in.Leader.RoundTrip}) {
		m, _ := member(in, name)
		if e, listed := byID(in.Etcd, m.ID); listed && ok(e) {
			return e.ID, true
		}
	}
	clusterOf := map[uint64]string{}
	for _, m := range in.Members {
		if m.ID != 0 {
			clusterOf[m.ID] = m.Domain.Cluster
		}
	}
	var cands []topology.Successor
	for _, e := range in.Etcd.Members {
		if !ok(e) {
			continue
		}
		c := topology.Successor{ID: e.ID, Applied: e.RaftIndex}
		if to, known := clusterOf[e.ID]; known && from != "" && to != from && in.Leader.RoundTrip != nil {
			// Inside id's member cluster counts as no distance; a cluster
			// the matrix has no round trip to, as farther than any it has.
			c.Away = unmeasuredAway
			if rtt, measured := in.Leader.RoundTrip(from, to); measured {
				c.Away = rtt
			}
		}
		cands = append(cands, c)
	}
	s, found := topology.ChooseSuccessor(cands)
	return s.ID, found
}

// unmeasuredAway is how far transferee counts a voter in a member cluster
// the round-trip matrix does not reach from the leader's.
const unmeasuredAway = time.Hour

// ringUnhealthy says why the leader may not be moved for its placement
// ("" when it may): every member must be a ready voter.
func ringUnhealthy(in Input) string {
	switch {
	case !in.Bootstrapped:
		return "the cluster has not formed"
	case !in.Etcd.Reachable:
		return fmt.Sprintf("etcd does not answer (%s)", orUnknown(in.Etcd.Error))
	}
	return notReadyToRoll(in)
}

// busy names what goes before a move of leadership ("" when nothing
// does): an operation in flight (each needs a stable leader: a Roll or a
// Remove moves it themselves), a step the planner takes, a CA rotation
// that holds.
func busy(in Input, d Decision) string {
	if op := in.Operation; op != nil {
		if op.Type == OpMoveLeader {
			return fmt.Sprintf("leadership is being moved to %s", op.Member)
		}
		return fmt.Sprintf("the %s of %s is in flight", op.Type, orText(op.Member, "the ring"))
	}
	switch d.Action {
	case ActNone, ActWait, "":
		return ""
	case ActHoldCARotation:
		return "a CA rotation holds"
	}
	return fmt.Sprintf("%s goes first (%s)", d.Action, d.Reason)
}

func orText(s, otherwise string) string {
	if s == "" {
		return otherwise
	}
	return s
}

// continueMoveLeader walks one move of leadership: MoveLeader until the
// target leads.
func continueMoveLeader(in Input, op Operation) Decision {
	if !in.Etcd.Reachable {
		return Decision{Action: ActFinish, Member: op.Member, Reason: fmt.Sprintf("moving leadership to %s abandoned: etcd does not answer (%s)", op.Member, orUnknown(in.Etcd.Error))}
	}
	if in.Etcd.LeaderID != 0 && in.Etcd.LeaderID == op.MemberID {
		where := ""
		if op.To != nil {
			where = " in " + op.To.String()
		}
		return Decision{Action: ActFinish, Member: op.Member, Reason: fmt.Sprintf("%s leads%s", op.Member, where)}
	}
	em, ok := byID(in.Etcd, op.MemberID)
	if !ok || em.IsLearner || !em.Healthy || !em.Started() {
		return Decision{Action: ActFinish, Member: op.Member, Reason: fmt.Sprintf("moving leadership to %s abandoned: it is no longer a healthy voter", op.Member)}
	}
	if why := notReadyToRoll(in); why != "" {
		return Decision{Action: ActFinish, Member: op.Member, Reason: fmt.Sprintf("moving leadership to %s abandoned: the ring is not healthy: %s", op.Member, why)}
	}
	if op.Step == ActTransferLeadership && !op.StartedAt.IsZero() && in.Now.Sub(op.StartedAt) >= leaderMoveTimeout {
		return Decision{Action: ActFinish, Member: op.Member, Reason: fmt.Sprintf("leadership did not move to %s within %s; given up until the next try", op.Member, leaderMoveTimeout)}
	}
	return step(op, ActTransferLeadership, Decision{Member: op.Member, MemberID: op.MemberID, TransfereeID: op.MemberID, RequeueAfter: pollJoin,
		Reason: fmt.Sprintf("moving leadership to %s (%s) for its placement", describe(em), op.Reason)})
}
