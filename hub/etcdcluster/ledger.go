package etcdcluster

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	etcdfedv1 "github.com/etcdfed/etcdfed/api/v1alpha1"
	"github.com/etcdfed/etcdfed/hub/planner"
	"github.com/etcdfed/etcdfed/pkg/topology"
)

// The ledger is the part of status the hub decides on and keeps across
// passes: status.members (who is where, which incarnation and etcd ID,
// ready since when), status.operation (the one operation in flight, rule
// 3), status.clusterID and status.lastIncarnation, and each feature's
// record (features.go). decide writes it only through the features (and
// the hold for a take-over): each brings its part up to date with what the
// pass observed, then records the step taken; computeStatus adds what
// only the step's result tells (a new learner's ID: membership.status).

// membership is the core feature: the ledger's members (who is where,
// which incarnation and etcd ID, ready since when) and the one operation
// in flight. It records what the pass observed of them, gives the planner
// the members joined with their objects and etcd (input, placement.go),
// records the planner's step, and derives the members' roles, the
// endpoints and the counts of the status.
type membership struct{ s *snapshot }

// observe rebuilds a lost record of members from their objects and
// brings every member's record up to date (adoptLostMembers,
// recordObservations).
func (f *membership) observe(st *etcdfedv1.EtcdClusterStatus, d *decision) {
	d.notAdopted = adoptLostMembers(f.s, st)
	adoptLateMembers(f.s, st)
	recordObservations(f.s, st)
	recordNotStarting(f.s, st)
}

// record records the planner's step (recordStep).
func (f *membership) record(st *etcdfedv1.EtcdClusterStatus, d *decision) {
	recordStep(f.s, st, d.plan)
}

// status adds what only the step's result tells (recordApplied), then
// the roles, the leader, the ready counts, the endpoints, the failures
// etcd tolerates and the moves the placement still wants.
func (f *membership) status(st *etcdfedv1.EtcdClusterStatus, d *decision, res applyResult) {
	s := f.s
	recordApplied(st, d, res)
	setRoles(s, st)
	setEndpoints(s, st)
	st.FailuresTolerated = failuresTolerated(s.etcd)
	st.PendingMoves = pendingMoves(st, d.placement)
}

// adoptLostMembers rebuilds status.members from the objects when the hub's
// record is empty but objects exist (status lost, or restored without it).
// The highest incarnation of each member wins. Only clusters eligible for
// the ring (spec.topology) count: objects in any other cluster are not
// taken into the record, whatever incarnation they claim (a member
// cluster the ring does not allow could otherwise name itself the home of
// any member); they are returned, one line per cluster, for Degraded. An
// etcd member running there then has no record, and the planner stops on
// it (foreignMembers) rather than guess.
func adoptLostMembers(s *snapshot, st *etcdfedv1.EtcdClusterStatus) (notAdopted []string) {
	if len(st.Members) > 0 {
		return nil
	}
	best := map[string]*etcdfedv1.EtcdMember{}
	where := map[string]string{}
	for _, cs := range s.clusters {
		if !cs.visible() {
			continue
		}
		if !cs.eligible {
			if len(cs.members) > 0 {
				notAdopted = append(notAdopted, fmt.Sprintf("member cluster %s holds objects of %s, but the ring's spec.topology does not allow it: not taken into the rebuilt record of members",
					cs.name, strings.Join(slices.Sorted(maps.Keys(cs.members)), ", ")))
			}
			continue
		}
		for name, obj := range cs.members {
			if b, ok := best[name]; !ok || obj.Spec.Incarnation > b.Spec.Incarnation {
				best[name], where[name] = obj, cs.name
			}
		}
	}
	for name, obj := range best {
		st.Members = append(st.Members, etcdfedv1.MemberStatus{Name: name, Cluster: where[name], Zone: obj.Spec.Zone, Incarnation: obj.Spec.Incarnation})
		st.LastIncarnation = max(st.LastIncarnation, obj.Spec.Incarnation)
	}
	sortMembers(st.Members)
	return notAdopted
}

// adoptLateMembers adds to a record rebuilt from the objects
// (adoptLostMembers) the members whose clusters were out of sight when it
// was rebuilt: a member with no record of its name whose object, in an
// eligible cluster in sight, reports running as an etcd ID that etcd
// lists under that name and no record holds. Before, such a member stayed
// one "etcdfed does not manage" for good once the partial record was
// written. The record follows the objects and etcd (rule 1); nothing is
// written to the ring.
func adoptLateMembers(s *snapshot, st *etcdfedv1.EtcdClusterStatus) {
	if !s.etcd.Reachable || len(st.Members) == 0 {
		return
	}
	for _, cs := range s.clusters {
		if !cs.visible() || !cs.eligible {
			continue
		}
		for _, obj := range cs.allObjects() {
			name := obj.Spec.MemberName
			if statusMember(st, name) != nil {
				continue
			}
			id := runsAs(obj)
			if id == 0 || recordedID(st, id) {
				continue
			}
			if em, ok := listedID(s.etcd, id); !ok || em.Name != name {
				continue
			}
			st.Members = append(st.Members, etcdfedv1.MemberStatus{Name: name, Cluster: cs.name, Zone: obj.Spec.Zone, Incarnation: obj.Spec.Incarnation, ID: hexID(id)})
			st.LastIncarnation = max(st.LastIncarnation, obj.Spec.Incarnation)
			sortMembers(st.Members)
		}
	}
}

// recordObservations updates the record of each member from etcd and the
// spokes: etcd IDs (matched by peer URL), readiness with the hub-clock time
// it changed, address. A member etcd no longer lists, with no operation
// about it, was removed outside etcdfed and is forgotten (rule 1); one
// whose ID is not known yet and cannot be looked for now is kept
// (unboundUnseen).
func recordObservations(s *snapshot, st *etcdfedv1.EtcdClusterStatus) {
	coverIncarnations(s, st)
	for i := range st.Members {
		m := &st.Members[i]
		if s.etcd.Reachable && !inOperation(st, m.Name) {
			if _, found := listed(s.etcd, m); !found && m.ID != "" {
				rebindToRunningObject(s, st, m)
			}
		}
		obj := s.currentObject(st, m.Name)
		if obj != nil && obj.Spec.Incarnation == m.Incarnation && obj.Status.Address != "" {
			m.Address = obj.Status.Address
		}
		if obj != nil && obj.Spec.Incarnation == m.Incarnation {
			m.Object = obj.Name
		}
		em, found := listed(s.etcd, m)
		if !found && m.ID == "" && obj != nil && obj.Status.PeerURL != "" && obj.Status.Incarnation == m.Incarnation {
			for _, e := range s.etcd.Members {
				if slices.Contains(e.PeerURLs, obj.Status.PeerURL) && !recordedID(st, e.ID) {
					m.ID, em, found = hexID(e.ID), e, true
				}
			}
		}
		ready := found && em.Started() && em.Healthy && !em.IsLearner
		if !s.etcd.Reachable {
			continue // unknown: keep the last readiness, do not start grace clocks
		}
		// A promotion starts the clock afresh: a voter that never answered
		// as one is judged from when it became one, not from when its
		// incarnation was placed (a learner is never ready).
		promoted := found && !em.IsLearner && m.Role == etcdfedv1.RoleLearner
		if ready != m.Ready || m.LastTransitionTime == nil || promoted {
			m.Ready = ready
			t := metav1.NewTime(s.now)
			m.LastTransitionTime = &t
		}
	}
	recordDatabases(s, st)
	if s.etcd.Reachable && st.ClusterID != "" {
		st.Members = slices.DeleteFunc(st.Members, func(m etcdfedv1.MemberStatus) bool {
			if inOperation(st, m.Name) || unboundUnseen(s, st, &m) {
				return false
			}
			_, found := listed(s.etcd, &m)
			return !found
		})
	}
}

// unboundUnseen: the record has no etcd ID yet and the hub cannot tell
// whether etcd lists it, because its cluster is out of sight or its
// object has not reported the peer URL of this incarnation (the ID is
// bound by that URL). Such a record is kept, not forgotten as removed:
// a ring formed while one spoke's Lease lagged behind under load had the
// records of its founding members there forgotten the pass after it
// formed, their running members became ones "etcdfed does not manage",
// and the ring stopped there for good (seen in TestDevUpStatusDown at a
// load average of 30).
func unboundUnseen(s *snapshot, st *etcdfedv1.EtcdClusterStatus, m *etcdfedv1.MemberStatus) bool {
	if m.ID != "" {
		return false
	}
	if !s.cluster(m.Cluster).visible() {
		return true
	}
	obj := s.currentObject(st, m.Name)
	return obj != nil && obj.Spec.Incarnation == m.Incarnation && (obj.Status.PeerURL == "" || obj.Status.Incarnation != m.Incarnation)
}

// coverIncarnations raises status.lastIncarnation to every incarnation an
// object of the ring holds in a visible cluster: a record older than the
// objects (the hub cluster's store restored from a backup taken before a
// Move or a Replace) would otherwise number the next incarnation as one
// that exists, and name its volume as that incarnation's.
func coverIncarnations(s *snapshot, st *etcdfedv1.EtcdClusterStatus) {
	for _, cs := range s.clusters {
		if !cs.visible() {
			continue
		}
		for _, o := range cs.allObjects() {
			st.LastIncarnation = max(st.LastIncarnation, o.Spec.Incarnation)
		}
	}
}

// rebindToRunningObject records member m as the incarnation that runs it
// now, when the record is older than the ring: etcd no longer lists the
// recorded ID, but lists a member of m's name under an ID no record
// holds, and an object of m in a visible cluster reports (its spoke's
// view of etcd) that it runs as that ID. This is how a stale record (the
// hub cluster's store restored to before a Move or a Replace) catches up
// with the ring instead of forgetting the member as removed outside
// etcdfed, after which its live incarnation would be a member etcdfed
// does not manage. The record follows the objects and etcd (rule 1);
// nothing is written to the ring.
func rebindToRunningObject(s *snapshot, st *etcdfedv1.EtcdClusterStatus, m *etcdfedv1.MemberStatus) {
	for _, cs := range s.clusters {
		if !cs.visible() {
			continue
		}
		for _, obj := range cs.objectsOf(m.Name) {
			id := runsAs(obj)
			if id == 0 || recordedID(st, id) {
				continue
			}
			if em, ok := listedID(s.etcd, id); !ok || em.Name != m.Name {
				continue
			}
			m.ID, m.Cluster, m.Zone, m.Incarnation = hexID(id), cs.name, obj.Spec.Zone, obj.Spec.Incarnation
			m.Object, m.Address, m.DNSName = obj.Name, obj.Status.Address, ""
			if stable := m.Name + "." + s.ec.Spec.DNS.Domain; obj.Spec.DNSName != "" && obj.Spec.DNSName != stable {
				m.DNSName = obj.Spec.DNSName
			}
			m.Role, m.Ready, m.LastTransitionTime = "", false, nil // judged afresh below, its grace from now
			st.LastIncarnation = max(st.LastIncarnation, obj.Spec.Incarnation)
			return
		}
	}
}

// recordStep records the planner's decision before apply carries it out:
// the operation with its step (rule 3: recorded before it is made), a new
// operation's assignments, and the end of an operation.
func recordStep(s *snapshot, st *etcdfedv1.EtcdClusterStatus, d planner.Decision) {
	if d.Operation != nil {
		prev := st.Operation
		st.Operation = toAPIOperation(d.Operation, d.Reason)
		st.Operation.StepStartedAt = stepStartedAt(prev, st.Operation, s.now)
	}
	switch d.Action {
	case planner.ActBegin:
		if op := st.Operation; op != nil && op.MemberID != "" {
			// The old incarnation's names keep its address until its ID
			// is removed (moveHoldsStableName, retiredOwnName): the stable
			// name during a Move, and its own name, if it has one, during
			// any operation that retires it.
			if m := statusMember(st, op.Member); m != nil {
				op.FromAddress, op.FromDNSName = m.Address, m.DNSName
			}
		}
		recordAssignments(s, st, d.Assign)
	case planner.ActFinishBootstrap:
		st.ClusterID = hexID(s.etcd.ClusterID)
		st.Operation = nil
		recordTakeOverDone(s, st)
	case planner.ActFinish:
		op := st.Operation
		recordNoSpaceRecovery(s, st, op)
		if op != nil && restoringFromBackup(st, op.Member) && s.etcd.ClusterID != 0 {
			// Restored from a backup: a new etcd cluster under the same
			// EtcdCluster.
			st.ClusterID = hexID(s.etcd.ClusterID)
		}
		if op != nil && op.Type == etcdfedv1.OperationRemove {
			st.Members = slices.DeleteFunc(st.Members, func(m etcdfedv1.MemberStatus) bool { return m.Name == op.Member })
		} else if op != nil && op.Type == etcdfedv1.OperationMove && d.GaveUp {
			giveBack(s, st, op, d.Assign)
		} else if m := statusMember(st, d.Member); m != nil && d.MemberID != 0 {
			m.ID = hexID(d.MemberID)
		}
		st.Operation = nil
	}
}

// giveBack records a member whose Move was given up as its old
// incarnation again, which never left etcd: its domain, incarnation, ID,
// address, and the DNS name it was started under.
func giveBack(_ *snapshot, st *etcdfedv1.EtcdClusterStatus, op *etcdfedv1.MembershipOperation, assign []planner.Assignment) {
	for _, a := range assign {
		m := statusMember(st, a.Member)
		if m == nil {
			continue
		}
		m.Cluster, m.Zone, m.Incarnation, m.ID = a.Domain.Cluster, labelZone(a.Domain.Zone), a.Incarnation, hexID(a.ID)
		m.Address, m.DNSName, m.Object = op.FromAddress, op.FromDNSName, "" // named again by recordObservations
	}
}

// recordAssignments places new incarnations (Bootstrap, Add, Replace,
// Move); a Move's is served under its own DNS name.
func recordAssignments(s *snapshot, st *etcdfedv1.EtcdClusterStatus, assign []planner.Assignment) {
	now := metav1.NewTime(s.now)
	for _, a := range assign {
		m := statusMember(st, a.Member)
		if m == nil {
			st.Members = append(st.Members, etcdfedv1.MemberStatus{Name: a.Member})
			m = &st.Members[len(st.Members)-1]
		}
		m.Cluster, m.Zone, m.Incarnation = a.Domain.Cluster, labelZone(a.Domain.Zone), a.Incarnation
		m.DNSName, m.Object = "", "" // its object is named once it exists (recordObservations)
		if a.OwnName {
			m.DNSName = etcdfedv1.IncarnationDNSName(a.Member, a.Incarnation, s.ec.Spec.DNS.Domain)
		}
		// The address stays: it is what the member's DNS name resolves to,
		// and the old incarnation (maybe the leader, which the hub must
		// reach to move leadership away) runs there until its ID is
		// removed. The new incarnation's address replaces it once its
		// spoke reports one.
		m.ID, m.Ready, m.Role = "", false, ""
		m.Since, m.LastTransitionTime = &now, &now
		st.LastIncarnation = max(st.LastIncarnation, a.Incarnation)
	}
	sortMembers(st.Members)
}

// recordApplied records what only the step's result tells.
func recordApplied(st *etcdfedv1.EtcdClusterStatus, d *decision, res applyResult) {
	if res.learnerID != 0 {
		if st.Operation != nil {
			st.Operation.NewMemberID = hexID(res.learnerID)
		}
		if m := statusMember(st, d.plan.Member); m != nil {
			m.ID = hexID(res.learnerID)
		}
	}
	if res.notYet != nil && st.Operation != nil {
		st.Operation.Message = truncate(res.notYet.Error(), 1024)
	}
}

// listed is the member's entry in etcd's member list, by its recorded ID.
func listed(e planner.Etcd, m *etcdfedv1.MemberStatus) (planner.ListEntry, bool) {
	id := parseID(m.ID)
	if id == 0 {
		return planner.ListEntry{}, false
	}
	for _, em := range e.Members {
		if em.ID == id {
			return em, true
		}
	}
	return planner.ListEntry{}, false
}

func recordedID(st *etcdfedv1.EtcdClusterStatus, id uint64) bool {
	for _, m := range st.Members {
		if parseID(m.ID) == id {
			return true
		}
	}
	return false
}

func statusMember(st *etcdfedv1.EtcdClusterStatus, name string) *etcdfedv1.MemberStatus {
	for i := range st.Members {
		if st.Members[i].Name == name {
			return &st.Members[i]
		}
	}
	return nil
}

func inOperation(st *etcdfedv1.EtcdClusterStatus, member string) bool {
	return st.Operation != nil && st.Operation.Member == member
}

func sortMembers(ms []etcdfedv1.MemberStatus) {
	slices.SortFunc(ms, func(a, b etcdfedv1.MemberStatus) int { return topology.CompareNames(a.Name, b.Name) })
}

// stepStartedAt is when next's step began: kept from prev while the same
// operation stays on the same step, now when the step (or the operation)
// is new. Stepping away and back counts afresh.
func stepStartedAt(prev, next *etcdfedv1.MembershipOperation, now time.Time) *metav1.Time {
	if prev != nil && prev.StepStartedAt != nil && prev.Step == next.Step && prev.Type == next.Type &&
		prev.Member == next.Member && prev.StartedAt.Equal(&next.StartedAt) {
		return prev.StepStartedAt
	}
	t := metav1.NewTime(now)
	return &t
}

func fromAPIOperation(op *etcdfedv1.MembershipOperation) *planner.Operation {
	out := &planner.Operation{
		Type:        planner.OpType(op.Type),
		Member:      op.Member,
		MemberID:    parseID(op.MemberID),
		NewMemberID: parseID(op.NewMemberID),
		Incarnation: op.Incarnation,
		Reason:      op.Reason,
		Step:        planner.Action(op.Step),
		StartedAt:   op.StartedAt.Time,

		FromIncarnation: op.FromIncarnation,
		FromAddress:     op.FromAddress,
		FromDNSName:     op.FromDNSName,
	}
	if op.StepStartedAt != nil {
		out.StepStartedAt = op.StepStartedAt.Time
	}
	if op.From != nil {
		out.From = &topology.Domain{Cluster: op.From.Cluster, Zone: topoZone(op.From.Cluster, op.From.Zone)}
	}
	if op.To != nil {
		out.To = &topology.Domain{Cluster: op.To.Cluster, Zone: topoZone(op.To.Cluster, op.To.Zone)}
	}
	return out
}

func toAPIOperation(op *planner.Operation, message string) *etcdfedv1.MembershipOperation {
	out := &etcdfedv1.MembershipOperation{
		Type:        etcdfedv1.OperationType(op.Type),
		Member:      op.Member,
		MemberID:    hexID(op.MemberID),
		NewMemberID: hexID(op.NewMemberID),
		Incarnation: op.Incarnation,
		Reason:      op.Reason,
		Step:        string(op.Step),
		Message:     truncate(message, 1024),
		StartedAt:   metav1.NewTime(op.StartedAt),

		FromIncarnation: op.FromIncarnation,
		FromAddress:     op.FromAddress,
		FromDNSName:     op.FromDNSName,
	}
	if op.From != nil {
		out.From = &etcdfedv1.FailureDomain{Cluster: op.From.Cluster, Zone: labelZone(op.From.Zone)}
	}
	if op.To != nil {
		out.To = &etcdfedv1.FailureDomain{Cluster: op.To.Cluster, Zone: labelZone(op.To.Zone)}
	}
	return out
}
