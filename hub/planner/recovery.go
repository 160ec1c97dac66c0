package planner

import (
	"fmt"
	"slices"
	"strings"
	"time"
)

// Quorum-loss recovery (design rule 11, restated in wave 3). A ring whose
// majority of voters does not answer cannot change its membership: etcd
// needs a quorum for that. The planner declares the loss (AssessQuorum) and,
// once every voter that is not a survivor is known gone (confirmed fenced,
// or its data lost as its own cluster shows: never merely unreachable, for
// an unreachable majority may be serving on the other side of a cut) and a
// human asked for it (Request) or the spec opts in (Automatic), recovers
// from one survivor:
//
//  1. Begin: Recover recorded, with the survivor (the freshest by raft
//     index unless the request names one).
//  2. ForceNewCluster: the survivor's object gets spec.forceNewCluster; its
//     spoke restarts it with etcd --force-new-cluster on its own data, so
//     it comes back as a one-member cluster with its name, ID, DNS record
//     and certificate, and with everything it had committed.
//  3. ClearForceNewCluster: once etcd answers as that one member, the flag
//     is cleared (the pod restarts once more, without it: a later restart
//     must not force again once others have joined).
//  4. Finish once the survivor is ready. The members that were gone are no
//     longer in etcd's member list; the ledger forgets them (rule 1) and
//     the placement adds them back one at a time as learners under their
//     names with new incarnations (Add). Their old objects are deleted by
//     the sweep when their clusters are seen again, and etcd itself refuses
//     their old IDs ("member removed").

// QuorumInput is what the planner needs to declare and recover a loss of
// quorum.
type QuorumInput struct {
	// LostSince is when etcd stopped answering with a leader (the
	// Available condition's last change to False); zero while it answers.
	LostSince time.Time
	// Grace is how long the loss must last before it is declared.
	Grace time.Duration
	// Automatic recovers without a request once the loss is declared and
	// every lost voter is known gone.
	Automatic bool
	// Request is a human's request (etcdfed recover), nil when none (or
	// when it was consumed, or refused: RequestError says so).
	Request *RecoveryRequest
	// RequestError says why the request annotation could not be read or
	// is not acted on.
	RequestError string
}

// RecoveryRequest is a human's request to recover.
type RecoveryRequest struct {
	// FromMember is the survivor to recover from; empty: the freshest.
	FromMember string
	// FromBackup recovers from a snapshot instead of a survivor
	// (recovery_backup.go): "latest" or an object key.
	FromBackup  string
	RequestedAt time.Time
	// UID names the request; the hub consumes it once (Decision.Request).
	UID string
}

// EtcdView is a member's own etcd as its spoke last read it; it needs no
// quorum.
type EtcdView struct {
	// ID is the member ID etcd reports.
	ID uint64
	// RaftIndex is the member's raft index.
	RaftIndex int64
	// Answers is true when etcd answered its spoke's last read (with or
	// without a leader).
	Answers bool
}

// QuorumLoss is the planner's verdict on a ring that does not answer.
type QuorumLoss struct {
	// Lost: the voters whose etcd answers are fewer than a quorum.
	Lost bool
	// Declared: Lost, and it has lasted Grace.
	Declared bool
	// Voters is the number of recorded voters.
	Voters int
	// Gone are the voters known not to serve any more, with the evidence:
	// confirmed fenced, or their own cluster shows their data lost (rule 11
	// restated: positive evidence, never mere unreachability).
	Gone []LostVoter
	// MustFence are the voters neither surviving nor known gone: their
	// cluster out of sight (they may be serving a majority the hub cannot
	// see), or their etcd not answering in a cluster the hub sees (their
	// pod may come back with its data). No new cluster is forced before
	// each is fenced and confirmed.
	MustFence []LostVoter
	// Survivors are the members whose etcd still answers with its data,
	// freshest first.
	Survivors []Survivor
}

// LostVoter is a voter of a ring without quorum that does not answer.
type LostVoter struct {
	Name    string
	ID      uint64
	Cluster string
	// Why says what the hub knows of it.
	Why string
}

func (v LostVoter) String() string { return fmt.Sprintf("%s [%x]: %s", v.Name, v.ID, v.Why) }

// Survivor is a member whose etcd answers its spoke.
type Survivor struct {
	Name      string
	ID        uint64
	Cluster   string
	RaftIndex int64
}

// Freshest is the survivor with the highest raft index.
func (q QuorumLoss) Freshest() (Survivor, bool) {
	if len(q.Survivors) == 0 {
		return Survivor{}, false
	}
	return q.Survivors[0], true
}

// Proven: declared, and every voter that is not a survivor is known gone:
// the old majority cannot serve again, so forcing a new cluster splits
// nothing.
func (q QuorumLoss) Proven() bool { return q.Declared && len(q.MustFence) == 0 }

// MustFenceNames are the names of MustFence.
func (q QuorumLoss) MustFenceNames() []string {
	out := make([]string, 0, len(q.MustFence))
	for _, v := range q.MustFence {
		out = append(out, v.Name)
	}
	return out
}

// Message explains the verdict in a condition's words.
func (q QuorumLoss) Message() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%d of %d voters answer", len(q.Survivors), q.Voters)
	list := func(vs []LostVoter) string {
		parts := make([]string, len(vs))
		for i, v := range vs {
			parts[i] = v.String()
		}
		return strings.Join(parts, "; ")
	}
	if len(q.Gone) > 0 {
		fmt.Fprintf(&b, "; %d known gone (%s)", len(q.Gone), list(q.Gone))
	}
	if len(q.MustFence) > 0 {
		fmt.Fprintf(&b, "; %d not known gone, to be fenced before any new cluster is forced (%s)", len(q.MustFence), list(q.MustFence))
	}
	if f, ok := q.Freshest(); ok {
		var others []string
		for _, s := range q.Survivors[1:] {
			others = append(others, fmt.Sprintf("%s at %d", s.Name, s.RaftIndex))
		}
		fmt.Fprintf(&b, "; freshest survivor: %s [%x] at raft index %d", f.Name, f.ID, f.RaftIndex)
		if len(others) > 0 {
			fmt.Fprintf(&b, " (also %s)", strings.Join(others, ", "))
		}
	} else {
		b.WriteString("; no survivor holds data: only a restore from a backup can help")
	}
	return b.String()
}

// AssessQuorum judges a ring etcd does not answer for. A recorded voter is
// a survivor when its cluster is visible and its etcd (the current
// incarnation, the recorded ID) answers its spoke; gone when there is
// positive evidence that it cannot serve (confirmed fenced, or its visible
// cluster reports its data lost); otherwise it must be fenced first. A
// cluster declared failed by the witnesses is still only unreachable: the
// hub cannot tell death from a cut (rule 11 restated).
func AssessQuorum(in Input) QuorumLoss {
	var q QuorumLoss
	if !in.Bootstrapped || in.Etcd.Reachable {
		return q
	}
	for _, m := range in.Members {
		if m.ID == 0 {
			continue // never joined: not a voter
		}
		q.Voters++
		o := m.Object
		current := m.ClusterVisible && o != nil && o.Incarnation == m.Incarnation
		lost := LostVoter{Name: m.Name, ID: m.ID, Cluster: m.Domain.Cluster}
		switch {
		case current && o.Etcd != nil && o.Etcd.Answers && o.Etcd.ID == m.ID:
			q.Survivors = append(q.Survivors, Survivor{Name: m.Name, ID: m.ID, Cluster: m.Domain.Cluster, RaftIndex: o.Etcd.RaftIndex})
			continue
		case m.Fenced != "":
			lost.Why = "confirmed fenced (" + m.Fenced + ")"
			q.Gone = append(q.Gone, lost)
			continue
		case current && o.VolumeLost:
			lost.Why = fmt.Sprintf("its data is lost (the spoke in %s reports its volume gone)", m.Domain.Cluster)
			q.Gone = append(q.Gone, lost)
			continue
		case m.DomainFailed:
			lost.Why = fmt.Sprintf("cluster %s declared failed, but unreachable is not dead: it may be serving", m.Domain.Cluster)
		case !m.ClusterVisible:
			lost.Why = fmt.Sprintf("cluster %s not visible: it may be alive and serving", m.Domain.Cluster)
		case o == nil:
			lost.Why = fmt.Sprintf("no EtcdMember object in %s, its pod may still run", m.Domain.Cluster)
		default:
			lost.Why = fmt.Sprintf("etcd does not answer its spoke in %s, its pod may come back with its data", m.Domain.Cluster)
		}
		q.MustFence = append(q.MustFence, lost)
	}
	slices.SortStableFunc(q.Survivors, func(a, b Survivor) int {
		switch {
		case a.RaftIndex > b.RaftIndex:
			return -1
		case a.RaftIndex < b.RaftIndex:
			return 1
		}
		return 0
	})
	quorum := q.Voters/2 + 1
	q.Lost = q.Voters > 0 && len(q.Survivors) < quorum
	q.Declared = q.Lost && !in.Quorum.LostSince.IsZero() && in.Now.Sub(in.Quorum.LostSince) >= in.Quorum.Grace
	return q
}

// FenceHint says how to confirm q's MustFence, for messages.
func (q QuorumLoss) FenceHint() string {
	names := strings.Join(q.MustFenceNames(), ",")
	return fmt.Sprintf("stop %s for good (or cut their clusters off), then confirm with `etcdfed recover --confirm-fenced %s` (or the annotation etcdfed.dev/fenced)", names, names)
}

// beginRecovery starts a Recover when the loss is declared, every lost
// voter is known gone, and a request (made after the loss began) or the
// spec asks for it. ok is false when there is nothing to say beyond "etcd
// does not answer".
func beginRecovery(in Input) (Decision, bool) {
	q := AssessQuorum(in)
	req := in.Quorum.Request
	if req != nil && !in.Quorum.LostSince.IsZero() && req.RequestedAt.Before(in.Quorum.LostSince) {
		// Left over from an earlier loss: never taken for this one.
		req = nil
	}
	if req != nil && req.FromBackup != "" {
		return beginRecoveryFromBackup(in, q, *req), true
	}
	if req == nil && !in.Quorum.Automatic {
		switch {
		case q.Declared && !q.Proven():
			return wait(pollSlow, "quorum lost: %s; before a recovery, %s", q.Message(), q.FenceHint()), true
		case q.Declared:
			return wait(pollSlow, "quorum lost: %s; recover with `etcdfed recover`", q.Message()), true
		}
		return Decision{}, false
	}
	if !q.Declared {
		if req != nil {
			return wait(pollFast, "recovery requested, but the loss of quorum is not declared: %s", undeclared(in, q)), true
		}
		return Decision{}, false
	}
	if !q.Proven() {
		return wait(pollSlow, "quorum lost: %s; no new cluster is forced while a lost voter may still serve: %s", q.Message(), q.FenceHint()), true
	}
	s, ok := q.Freshest()
	if req != nil && req.FromMember != "" {
		i := slices.IndexFunc(q.Survivors, func(s Survivor) bool { return s.Name == req.FromMember })
		if i < 0 {
			return wait(pollSlow, "recovery requested from %s, which is not a survivor: %s", req.FromMember, q.Message()), true
		}
		s = q.Survivors[i]
	}
	if !ok {
		return wait(pollSlow, "quorum lost and no survivor: %s", q.Message()), true
	}
	how := "automatic (failurePolicy.quorumLossRecovery: Automatic)"
	uid := ""
	if req != nil {
		how, uid = "requested at "+req.RequestedAt.UTC().Format(time.RFC3339), req.UID
	}
	op := Operation{Type: OpRecover, Member: s.Name, MemberID: s.ID, Reason: "QuorumLost", Step: ActBegin, StartedAt: in.Now}
	return Decision{Action: ActBegin, Operation: &op, Member: s.Name, MemberID: s.ID, Request: uid,
		Reason: fmt.Sprintf("recovering from %s at raft index %d (%s): %s", s.Name, s.RaftIndex, how, q.Message())}, true
}

func undeclared(in Input, q QuorumLoss) string {
	switch {
	case q.Voters == 0:
		return "no recorded voter"
	case !q.Lost:
		return fmt.Sprintf("a quorum of the voters still answers its spokes: %s", q.Message())
	case in.Quorum.LostSince.IsZero():
		return "the hub has not recorded when the quorum was lost yet"
	}
	return fmt.Sprintf("lost since %s, declared after %s", in.Quorum.LostSince.UTC().Format(time.RFC3339), in.Quorum.Grace)
}

// continueRecover walks: force a new cluster, clear the flag, finish.
func continueRecover(in Input, op Operation) Decision {
	if op.Reason == ReasonFromBackup {
		return continueRecoverFromBackup(in, op)
	}
	m, ok := member(in, op.Member)
	if !ok {
		return Decision{Action: ActFinish, Reason: fmt.Sprintf("member %s is no longer recorded; recovery abandoned", op.Member)}
	}
	if !m.ClusterVisible || m.Object == nil {
		return waitStep(op, op.Step, pollFast, "member cluster %s of survivor %s is not visible", m.Domain.Cluster, m.Name)
	}
	o := m.Object
	alone := in.Etcd.Reachable && len(in.Etcd.Members) == 1 && in.Etcd.Members[0].ID == op.MemberID
	switch op.Step {
	case ActBegin:
		if in.Etcd.Reachable {
			// The quorum came back before anything was done: forcing now
			// would split the ring.
			return Decision{Action: ActFinish, Member: m.Name, MemberID: op.MemberID, Reason: "etcd answers again with its quorum; recovery not needed"}
		}
		return step(op, ActForceNewCluster, Decision{Member: m.Name, MemberID: op.MemberID,
			Reason: fmt.Sprintf("restarting %s with --force-new-cluster on its own data", m.Name)})
	case ActForceNewCluster:
		switch {
		case alone:
			return step(op, ActClearForceNewCluster, Decision{Member: m.Name, MemberID: op.MemberID,
				Reason: fmt.Sprintf("%s answers as a one-member cluster: restarting it without --force-new-cluster", m.Name)})
		case o.ForceNewCluster == "":
			// Not written yet (or not seen yet): writing again is harmless.
			return step(op, ActForceNewCluster, Decision{Member: m.Name, MemberID: op.MemberID,
				Reason: fmt.Sprintf("restarting %s with --force-new-cluster on its own data", m.Name)})
		}
		return waitStep(op, ActForceNewCluster, pollFast, "waiting for %s to come up as a one-member cluster (etcd: %s)", m.Name, etcdState(in.Etcd))
	}
	// ActClearForceNewCluster
	switch {
	case o.ForceNewCluster != "":
		return step(op, ActClearForceNewCluster, Decision{Member: m.Name, MemberID: op.MemberID,
			Reason: fmt.Sprintf("restarting %s without --force-new-cluster", m.Name)})
	case !alone || !o.Settled || !in.Etcd.Members[0].Healthy:
		return waitStep(op, ActClearForceNewCluster, pollFast, "waiting for %s to run without --force-new-cluster and be ready (etcd: %s)", m.Name, etcdState(in.Etcd))
	}
	return Decision{Action: ActFinish, Member: m.Name, MemberID: op.MemberID,
		Reason: fmt.Sprintf("%s runs as a one-member cluster with its data; the other members come back as new incarnations", m.Name)}
}

func etcdState(e Etcd) string {
	if !e.Reachable {
		return orUnknown(e.Error)
	}
	var names []string
	for _, m := range e.Members {
		names = append(names, describe(m))
	}
	return "members " + strings.Join(names, ", ")
}
