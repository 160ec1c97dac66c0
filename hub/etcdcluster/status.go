package etcdcluster

import (
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	etcdfedv1 "github.com/etcdfed/etcdfed/api/v1alpha1"
	"github.com/etcdfed/etcdfed/hub/liveness"
	"github.com/etcdfed/etcdfed/hub/pki"
	"github.com/etcdfed/etcdfed/hub/planner"
	"github.com/etcdfed/etcdfed/pkg/topology"
)

// computeStatus is the EtcdCluster's whole status after a pass, computed
// here and nowhere else: the ledger as decide left it, what only the step's
// result tells, then everything derived (roles, counts, endpoints, zone
// summary, quorum loss) and one small setter per condition (Available,
// AllMembersReady, Progressing with the version and CA rotation progress,
// Degraded, FailureTolerant, the alarm conditions, SpokeVersions). passProblem is set when the pass ran out of
// its deadline.
func computeStatus(s *snapshot, d *decision, res applyResult, passProblem string) etcdfedv1.EtcdClusterStatus {
	st := d.ledger.DeepCopy()
	d.features.status(st, d, res)
	tol := tolerance(s, st)
	st.ZoneSummary = zoneSummary(tol)
	st.CAFingerprint = userCAFingerprint(s)

	gen := s.ec.Generation
	// What the spokes found in etcd's own logs: why members cannot connect
	// to their peers (EtcdMember PeerConnections=False).
	peerReason, peerProblems := peerConnectionProblems(s)
	setAvailable(st, gen, s.etcd, quorumLostMessage(d.quorum))
	setAllMembersReady(st, gen, int(s.ec.Spec.Replicas))
	setProgressing(s, st, gen, d, res, peerProblems)
	// What member clusters reported and the hub refused (checkReports).
	var rejected []string
	for _, cs := range s.clusters {
		if cs.visible() {
			rejected = append(rejected, cs.rejected...)
		}
	}
	degradedReason := peerReason
	if degradedReason == "" && len(rejected) > 0 {
		degradedReason = etcdfedv1.ReasonReportRejected
	}
	setDegraded(st, gen, degradedReason, slices.Concat(peerProblems, rejected, problems(s, st, d, res, passProblem)))
	setFailureTolerant(st, gen, tol)
	setAlarmConditions(s, st, gen)
	setSpokeVersions(s, st, gen)
	setRevocation(s, st, d, res)
	if res.stepErr == nil && res.pkiErr == nil && res.dnsErr == nil && d.placementErr == nil && d.dns.err == nil {
		st.ObservedGeneration = gen
	}
	return *st
}

// setRoles derives each member's role, the leader and the ready counts
// from etcd's view.
func setRoles(s *snapshot, st *etcdfedv1.EtcdClusterStatus) {
	ready := 0
	st.Leader = ""
	for i := range st.Members {
		m := &st.Members[i]
		em, found := listed(s.etcd, m)
		switch {
		case !s.etcd.Reachable || !found:
			m.Role = etcdfedv1.RoleUnknown
		case em.IsLearner:
			m.Role = etcdfedv1.RoleLearner
		case em.ID == s.etcd.LeaderID:
			m.Role = etcdfedv1.RoleLeader
			st.Leader = m.Name
		default:
			m.Role = etcdfedv1.RoleFollower
		}
		if m.Ready {
			ready++
		}
	}
	if a := st.Adoption; st.Leader == "" && a != nil && s.etcd.Reachable {
		// An adopted cluster's original member leads.
		for _, o := range a.Originals {
			if parseID(o.ID) == s.etcd.LeaderID && o.Retired == nil {
				st.Leader = truncate(o.Name+" (original)", 63)
			}
		}
	}
	st.ReadyMembers = int32(ready)
	st.MemberSummary = fmt.Sprintf("%d/%d", ready, s.ec.Spec.Replicas)
}

// setEndpoints lists every member's client URL by its DNS name.
func setEndpoints(s *snapshot, st *etcdfedv1.EtcdClusterStatus) {
	st.Endpoints = nil
	for _, m := range st.Members {
		port := etcdfedv1.DefaultClientPort
		if obj := s.currentObject(st, m.Name); obj != nil {
			port = urlPort(obj.Status.ClientURL, port)
		}
		st.Endpoints = append(st.Endpoints, memberURL(s.ec, m.Name, port))
	}
}

// failuresTolerated is how many voters etcd's own member list can lose
// and keep quorum: healthy voters minus the quorum of all voters, at
// least 0; nil when etcd did not answer. It counts every voter etcd lists,
// so a Move's extra voter counts (the ledger knows one incarnation per
// member).
func failuresTolerated(e planner.Etcd) *int32 {
	if !e.Reachable {
		return nil
	}
	voters, healthy := 0, 0
	for _, m := range e.Members {
		if m.IsLearner {
			continue
		}
		voters++
		if m.Healthy {
			healthy++
		}
	}
	n := int32(max(0, healthy-(voters/2+1)))
	return &n
}

// pendingMoves is how many members the placement still wants moved, the
// Move or Replace in flight for a placement reason included: a
// migration's progress.
func pendingMoves(st *etcdfedv1.EtcdClusterStatus, p topology.Result) int32 {
	n := int32(0)
	planned := false
	for _, s := range p.Steps {
		if s.Action == topology.Move {
			n++
			planned = planned || (st.Operation != nil && s.Member == st.Operation.Member)
		}
	}
	// The pass that begins a move planned it too.
	if op := st.Operation; !planned && op != nil && op.From != nil && op.To != nil && *op.From != *op.To &&
		(op.Type == etcdfedv1.OperationMove || op.Type == etcdfedv1.OperationReplace) {
		n++
	}
	return n
}

// tolerance evaluates today's placement of the voters.
func tolerance(s *snapshot, st *etcdfedv1.EtcdClusterStatus) topology.Tolerance {
	var current []topology.Member
	for _, m := range st.Members {
		if em, ok := listed(s.etcd, &m); ok && !em.IsLearner {
			current = append(current, topology.Member{Name: m.Name, Domain: topology.Domain{Cluster: m.Cluster, Zone: topoZone(m.Cluster, m.Zone)}, Healthy: em.Healthy})
		}
	}
	if op := st.Operation; op != nil && op.Type == etcdfedv1.OperationMove && op.From != nil {
		// The old incarnation a Move keeps is a voter until it is removed.
		if em, ok := listedID(s.etcd, parseID(op.MemberID)); ok && !em.IsLearner {
			current = append(current, topology.Member{Name: op.Member + " (incarnation " + strconv.FormatInt(op.FromIncarnation, 10) + ")",
				Domain: topology.Domain{Cluster: op.From.Cluster, Zone: topoZone(op.From.Cluster, op.From.Zone)}, Healthy: em.Healthy})
		}
	}
	return topology.Evaluate(current)
}

func setCondition(st *etcdfedv1.EtcdClusterStatus, generation int64, typ string, status bool, reason, msg string) {
	// A condition's message is at most 32768 characters; parts of it come
	// from member clusters, and a longer one would fail the status write.
	msg = truncate(msg, 32000)
	s := metav1.ConditionFalse
	if status {
		s = metav1.ConditionTrue
	}
	meta.SetStatusCondition(&st.Conditions, metav1.Condition{
		Type: typ, Status: s, Reason: reason, Message: truncate(msg, 32768), ObservedGeneration: generation,
	})
}

// setAvailable: etcd answers with a leader. quorumLost is the message of
// the loss of quorum the planner declares ("" for none).
func setAvailable(st *etcdfedv1.EtcdClusterStatus, gen int64, e planner.Etcd, quorumLost string) {
	switch {
	case quorumLost != "":
		setCondition(st, gen, etcdfedv1.ConditionAvailable, false, etcdfedv1.ReasonQuorumLost, quorumLost)
	case st.ClusterID == "":
		setCondition(st, gen, etcdfedv1.ConditionAvailable, false, etcdfedv1.ReasonNotBootstrapped, "etcd has not formed yet: "+e.Error)
	case e.Reachable && e.LeaderID != 0:
		setCondition(st, gen, etcdfedv1.ConditionAvailable, true, etcdfedv1.ReasonQuorate, fmt.Sprintf("etcd %s has a leader (%s) and answers", st.ClusterID, st.Leader))
	default:
		setCondition(st, gen, etcdfedv1.ConditionAvailable, false, etcdfedv1.ReasonNoQuorum, "etcd does not answer with a leader: "+e.Error)
	}
}

// setAllMembersReady: every wanted member is a ready voter.
func setAllMembersReady(st *etcdfedv1.EtcdClusterStatus, gen int64, replicas int) {
	notReady := notReadyMembers(st)
	ready := int(st.ReadyMembers)
	switch {
	case len(notReady) == 0 && ready == replicas:
		setCondition(st, gen, etcdfedv1.ConditionAllMembersReady, true, etcdfedv1.ReasonAllReady, fmt.Sprintf("all %d members are ready voters", ready))
	case len(notReady) > 0:
		setCondition(st, gen, etcdfedv1.ConditionAllMembersReady, false, etcdfedv1.ReasonMembersNotReady, "not ready: "+strings.Join(notReady, ", "))
	default:
		setCondition(st, gen, etcdfedv1.ConditionAllMembersReady, false, etcdfedv1.ReasonMembersNotReady, fmt.Sprintf("%d of %d members ready", ready, replicas))
	}
}

func notReadyMembers(st *etcdfedv1.EtcdClusterStatus) []string {
	var out []string
	for _, m := range st.Members {
		if !m.Ready {
			out = append(out, m.Name)
		}
	}
	return out
}

// conditionValue is a condition's status, reason and message before it
// is set.
type conditionValue struct {
	status          bool
	reason, message string
}

// setProgressing: the operation in flight (of any type: membership change,
// roll, defragmentation, disruption grant, recovery, CA rotation step), or
// what the next one waits for; either ends with the first peer-connection
// cause when there is one, since it holds the change up. A wait for the
// fleet-wide limit says so; a Roll that changes the version says how far
// it is (rollProgress), and a CA rotation under way its phase
// (caRotationProgress).
func setProgressing(s *snapshot, st *etcdfedv1.EtcdClusterStatus, gen int64, d *decision, res applyResult, peerProblems []string) {
	c := operationProgress(st, d.plan, peerProblems)
	if d.fleetWait && st.Operation == nil {
		c = conditionValue{false, etcdfedv1.ReasonWaitingForFleetLimit, d.plan.Reason}
	}
	if v, ok := rollProgress(s, st, d.plan, res, truncate(c.message, 32000)); ok {
		c = v
	}
	if v, ok := caRotationProgress(st); ok {
		c = v
	}
	setCondition(st, gen, etcdfedv1.ConditionProgressing, c.status, c.reason, c.message)
}

// operationProgress is Progressing for the operation in flight or the
// wait for the next one.
func operationProgress(st *etcdfedv1.EtcdClusterStatus, plan planner.Decision, peerProblems []string) conditionValue {
	blocked := ""
	if len(peerProblems) > 0 {
		blocked = "; blocked: " + peerProblems[0]
	}
	switch op := st.Operation; {
	case op == nil && st.TakeOver != nil && st.TakeOver.Phase == etcdfedv1.TakeOverHeld:
		return conditionValue{false, etcdfedv1.ReasonTakeOverHeld, st.TakeOver.Message}
	case op == nil && st.TakeOver != nil && st.TakeOver.Phase == etcdfedv1.TakeOverTakingOver:
		msg := st.TakeOver.Message
		if actions[plan.Action].waits && plan.Reason != "" && plan.Reason != msg {
			msg += "; " + plan.Reason
		}
		return conditionValue{true, etcdfedv1.ReasonTakingOver, truncate(msg, 1024)}
	case op != nil:
		return conditionValue{true, string(op.Type), fmt.Sprintf("%s %s (%s), step %s: %s%s", op.Type, op.Member, op.Reason, op.Step, op.Message, blocked)}
	case actions[plan.Action].waits, adoptionWaits(st, plan):
		return conditionValue{false, etcdfedv1.ReasonWaiting, plan.Reason + blocked}
	default:
		return conditionValue{false, etcdfedv1.ReasonIdle, "membership matches the placement and every member runs the current spec"}
	}
}

// setDegraded: everything a human should look at. reason, when not empty,
// replaces Problems (the first peer-connection cause, which explains the
// rest).
func setDegraded(st *etcdfedv1.EtcdClusterStatus, gen int64, reason string, problems []string) {
	if len(problems) > 0 {
		if reason == "" {
			reason = etcdfedv1.ReasonProblems
		}
		setCondition(st, gen, etcdfedv1.ConditionDegraded, true, reason, strings.Join(problems, "; "))
		return
	}
	setCondition(st, gen, etcdfedv1.ConditionDegraded, false, etcdfedv1.ReasonAsExpected, "no problems seen")
}

// setObserveFailed is Degraded when the pass could not observe at all (the
// hub could not read its own cluster); nothing else is known.
func setObserveFailed(ec *etcdfedv1.EtcdCluster, err error) {
	setCondition(&ec.Status, ec.Generation, etcdfedv1.ConditionDegraded, true, etcdfedv1.ReasonObserveFailed, err.Error())
}

// problems lists what Degraded reports.
func problems(s *snapshot, st *etcdfedv1.EtcdClusterStatus, d *decision, res applyResult, passProblem string) []string {
	var out []string
	if passProblem != "" {
		out = append(out, passProblem)
	}
	// Rule 8 restated: a hub that sees too few clusters to declare any
	// failed says so first, in plain words.
	if msg := s.hubView.Message(); msg != "" {
		out = append(out, msg)
	}
	if d.placementErr != nil {
		out = append(out, "placement: "+d.placementErr.Error())
	}
	if res.stepErr != nil {
		out = append(out, "last step failed: "+res.stepErr.Error())
	}
	if res.pkiErr != nil {
		out = append(out, "certificates: "+res.pkiErr.Error())
	}
	if d.dns.err != nil {
		out = append(out, "DNS: "+d.dns.err.Error())
	}
	if res.dnsErr != nil {
		out = append(out, "DNS: "+res.dnsErr.Error())
	}
	if actions[d.plan.Action].waits && st.Operation == nil && st.ClusterID != "" {
		out = append(out, d.plan.Reason)
	}
	if d.plan.Halted {
		out = append(out, d.plan.Reason)
	}
	// A recovery request or fencing confirmation the hub does not act on
	// says why.
	if note := d.features.recovery.note; note != "" {
		out = append(out, note)
	}
	if _, note := fencedMembers(s.requests(), s.ec, st, s.now); note != "" {
		out = append(out, note)
	}
	for _, cs := range s.clusters {
		concerned := cs.eligible || hasMembers(st, cs.name)
		switch {
		case cs.verdict.State == liveness.Failed && s.concernedWith(cs):
			out = append(out, fmt.Sprintf("member cluster %s failed: %s", cs.name, cs.verdict.Reason))
		case cs.verdict.State == liveness.Unknown && concerned:
			msg := fmt.Sprintf("member cluster %s unknown: %s", cs.name, cs.verdict.Reason)
			if p := cs.connProblem(s.now); p != "" {
				msg += "; " + p
			} else if cs.readErr != nil {
				msg += "; " + cs.readErr.Error()
			}
			out = append(out, msg)
		case cs.readErr != nil:
			out = append(out, cs.readErr.Error())
		case cs.connProblem(s.now) != "" && concerned:
			out = append(out, fmt.Sprintf("member cluster %s: %s", cs.name, cs.connProblem(s.now)))
		}
		if msg := heldOutside(s.ec, st, cs); msg != "" {
			out = append(out, msg)
		}
		// A spoke whose gossip cannot witness (rule 8): it abstains.
		if concerned && cs.visible() && cs.spoke != nil {
			if why := gossipAbstains(cs.spoke); why != "" {
				out = append(out, fmt.Sprintf("the spoke of %s abstains as a witness of other clusters' failure: %s", cs.name, why))
			}
		}
		// The zone witness's verdicts on the zones of a visible
		// multi-zone cluster: a failed zone, and a stale one holding
		// members.
		zones := make([]string, 0, len(cs.zoneVerdicts))
		for z := range cs.zoneVerdicts {
			zones = append(zones, z)
		}
		sort.Strings(zones)
		for _, z := range zones {
			members := slices.ContainsFunc(st.Members, func(m etcdfedv1.MemberStatus) bool { return m.Cluster == cs.name && m.Zone == z })
			if p := zoneProblem(cs, z, members); p != "" {
				out = append(out, p)
			}
		}
		// A zone holding members where no node takes new pods: a member
		// that fails there cannot start again in place.
		if cs.visible() && cs.spoke != nil {
			for _, z := range cs.spoke.Status.UnschedulableZones {
				if slices.ContainsFunc(st.Members, func(m etcdfedv1.MemberStatus) bool { return m.Cluster == cs.name && m.Zone == z }) {
					out = append(out, fmt.Sprintf("no node of %s takes new pods (every node cordoned or not Ready): a member that fails there moves to another zone after the member grace", topology.Domain{Cluster: cs.name, Zone: topoZone(cs.name, z)}))
				}
			}
		}
	}
	out = append(out, d.notAdopted...)
	out = append(out, d.sweepKept...)
	if notReady := notReadyMembers(st); st.ClusterID != "" && len(notReady) > 0 {
		out = append(out, "members not ready: "+strings.Join(notReady, ", "))
	}
	return append(out, alarmProblems(st)...)
}

// setFailureTolerant: today's placement survives the loss of any one zone.
func setFailureTolerant(st *etcdfedv1.EtcdClusterStatus, gen int64, tol topology.Tolerance) {
	switch {
	case tol.Members == 0:
		setCondition(st, gen, etcdfedv1.ConditionFailureTolerant, false, etcdfedv1.ReasonNotBootstrapped, "no voting members yet")
	case tol.ZoneFailures >= 1:
		setCondition(st, gen, etcdfedv1.ConditionFailureTolerant, true, etcdfedv1.ReasonSurvivesZoneLoss,
			fmt.Sprintf("survives the loss of any %d zone(s) and %d member cluster(s): %s", tol.ZoneFailures, tol.ClusterFailures, st.ZoneSummary))
	default:
		msg := tol.ZoneReason
		if msg == "" {
			msg = "losing one zone loses quorum"
		}
		setCondition(st, gen, etcdfedv1.ConditionFailureTolerant, false, etcdfedv1.ReasonZoneLossLosesQuorum, msg)
	}
}

// peerConnectionProblems reports the members whose spoke found in etcd's
// log why they cannot connect to their peers, one entry per cause (most
// fundamental first, etcdfedv1.PeerConnectionProblems), naming the members
// and giving the first one's message (cause and fix). reason is the first
// cause's reason. Only visible clusters are believed.
func peerConnectionProblems(s *snapshot) (reason string, problems []string) {
	byReason := map[string][]string{}
	first := map[string]string{}
	for _, cs := range s.clusters {
		if !cs.visible() {
			continue
		}
		names := make([]string, 0, len(cs.members))
		for n := range cs.members {
			names = append(names, n)
		}
		sort.Strings(names)
		for _, n := range names {
			c := meta.FindStatusCondition(cs.members[n].Status.Conditions, etcdfedv1.ConditionPeerConnections)
			if c == nil || c.Status != metav1.ConditionFalse {
				continue
			}
			byReason[c.Reason] = append(byReason[c.Reason], n+" ("+cs.name+")")
			if _, ok := first[c.Reason]; !ok {
				first[c.Reason] = truncate(c.Message, 1024) // written in the member cluster
			}
		}
	}
	for _, r := range etcdfedv1.PeerConnectionProblems {
		members := byReason[r]
		if len(members) == 0 {
			continue
		}
		sort.Strings(members)
		if reason == "" {
			reason = r
		}
		problems = append(problems, fmt.Sprintf("%s on %s: %s", r, strings.Join(members, ", "), first[r]))
	}
	return reason, problems
}

func hasMembers(st *etcdfedv1.EtcdClusterStatus, cluster string) bool {
	for _, m := range st.Members {
		if m.Cluster == cluster {
			return true
		}
	}
	return false
}

// zoneSummary is "3 (2/2/1)": zones, and members per zone, largest first.
func zoneSummary(t topology.Tolerance) string {
	if len(t.Zones) == 0 {
		return ""
	}
	counts := make([]int, 0, len(t.Zones))
	for _, z := range t.Zones {
		counts = append(counts, z.Members)
	}
	sort.Sort(sort.Reverse(sort.IntSlice(counts)))
	parts := make([]string, len(counts))
	for i, c := range counts {
		parts[i] = fmt.Sprint(c)
	}
	return fmt.Sprintf("%d (%s)", len(counts), strings.Join(parts, "/"))
}

// userCAFingerprint is the key fingerprint of the CA the spec names in
// spec.tls.caSecretName, for status.caFingerprint (admit refuses another
// namespace's ring with the same key); "" for a CA the hub generated.
func userCAFingerprint(s *snapshot) string {
	if s.ec.Spec.TLS.CASecretName == "" || s.pki.ca == nil {
		return ""
	}
	return pki.KeyFingerprint(s.pki.ca.Cert)
}
