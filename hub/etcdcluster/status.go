package etcdcluster

import (
	"fmt"
	"sort"
	"strings"

	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	etcdfedv1 "github.com/etcdfed/etcdfed/api/v1alpha1"
	"github.com/etcdfed/etcdfed/hub/liveness"
	"github.com/etcdfed/etcdfed/hub/membership"
	"github.com/etcdfed/etcdfed/pkg/topology"
)

// Condition reasons.
const (
	ReasonQuorate           = "Quorate"
	ReasonNoQuorum          = "NoQuorum"
	ReasonNotBootstrapped   = "NotBootstrapped"
	ReasonAllReady          = "AllReady"
	ReasonMembersNotReady   = "MembersNotReady"
	ReasonIdle              = "Idle"
	ReasonWaiting           = "Waiting"
	ReasonAsExpected        = "AsExpected"
	ReasonProblems          = "Problems"
	ReasonSurvivesZoneLoss  = "SurvivesZoneLoss"
	ReasonZoneLossLosesQuor = "ZoneLossLosesQuorum"
)

func setCondition(ec *etcdfedv1.EtcdCluster, typ string, status bool, reason, msg string) {
	s := metav1.ConditionFalse
	if status {
		s = metav1.ConditionTrue
	}
	meta.SetStatusCondition(&ec.Status.Conditions, metav1.Condition{
		Type: typ, Status: s, Reason: reason, Message: truncate(msg, 32768), ObservedGeneration: ec.Generation,
	})
}

func equalStatus(a, b etcdfedv1.EtcdClusterStatus) bool { return equality.Semantic.DeepEqual(a, b) }

// updateStatus derives members' roles, endpoints, summaries and conditions
// from what this reconcile saw and did.
func (r *Reconciler) updateStatus(v *view) {
	ec := v.ec
	st := &ec.Status
	ready := 0
	st.Leader = ""
	for i := range st.Members {
		m := &st.Members[i]
		em, found := etcdMember(v, m)
		switch {
		case !v.etcd.Reachable || !found:
			m.Role = etcdfedv1.RoleUnknown
		case em.IsLearner:
			m.Role = etcdfedv1.RoleLearner
		case em.ID == v.etcd.LeaderID:
			m.Role = etcdfedv1.RoleLeader
			st.Leader = m.Name
		default:
			m.Role = etcdfedv1.RoleFollower
		}
		if m.Ready {
			ready++
		}
	}
	st.ReadyMembers = int32(ready)
	st.MemberSummary = fmt.Sprintf("%d/%d", ready, ec.Spec.Replicas)
	st.Endpoints = nil
	for _, m := range st.Members {
		port := etcdfedv1.DefaultClientPort
		if obj := objectOf(v, m.Name); obj != nil {
			port = urlPort(obj.Status.ClientURL, port)
		}
		st.Endpoints = append(st.Endpoints, memberURL(ec, m.Name, port))
	}
	var current []topology.Member
	for _, m := range st.Members {
		if em, ok := etcdMember(v, &m); ok && !em.IsLearner {
			current = append(current, topology.Member{Name: m.Name, Domain: topology.Domain{Cluster: m.Cluster, Zone: topoZone(m.Cluster, m.Zone)}, Healthy: em.Healthy})
		}
	}
	tol := topology.Evaluate(current)
	st.ZoneSummary = zoneSummary(tol)

	// Available: etcd answers with a leader.
	switch {
	case st.ClusterID == "":
		setCondition(ec, etcdfedv1.ConditionAvailable, false, ReasonNotBootstrapped, "etcd has not formed yet: "+v.etcd.Error)
	case v.etcd.Reachable && v.etcd.LeaderID != 0:
		setCondition(ec, etcdfedv1.ConditionAvailable, true, ReasonQuorate, fmt.Sprintf("etcd %s has a leader (%s) and answers", st.ClusterID, st.Leader))
	default:
		setCondition(ec, etcdfedv1.ConditionAvailable, false, ReasonNoQuorum, "etcd does not answer with a leader: "+v.etcd.Error)
	}

	// AllMembersReady.
	var notReady []string
	for _, m := range st.Members {
		if !m.Ready {
			notReady = append(notReady, m.Name)
		}
	}
	switch {
	case len(notReady) == 0 && ready == int(ec.Spec.Replicas):
		setCondition(ec, etcdfedv1.ConditionAllMembersReady, true, ReasonAllReady, fmt.Sprintf("all %d members are ready voters", ready))
	case len(notReady) > 0:
		setCondition(ec, etcdfedv1.ConditionAllMembersReady, false, ReasonMembersNotReady, "not ready: "+strings.Join(notReady, ", "))
	default:
		setCondition(ec, etcdfedv1.ConditionAllMembersReady, false, ReasonMembersNotReady, fmt.Sprintf("%d of %d members ready", ready, ec.Spec.Replicas))
	}

	// What the spokes found in etcd's own logs: why members cannot
	// connect to their peers (EtcdMember PeerConnections=False).
	peerReason, peerProblems := peerConnectionProblems(v)
	blocked := ""
	if len(peerProblems) > 0 {
		blocked = "; blocked: " + peerProblems[0]
	}

	// Progressing: a change in flight.
	d := v.decision
	switch {
	case st.Operation != nil:
		op := st.Operation
		setCondition(ec, etcdfedv1.ConditionProgressing, true, string(op.Type), fmt.Sprintf("%s %s (%s), step %s: %s%s", op.Type, op.Member, op.Reason, op.Step, op.Message, blocked))
	case d.Action == membership.ActWait:
		setCondition(ec, etcdfedv1.ConditionProgressing, false, ReasonWaiting, d.Reason+blocked)
	default:
		setCondition(ec, etcdfedv1.ConditionProgressing, false, ReasonIdle, "membership matches the placement")
	}

	// Degraded: everything a human should look at, what etcd's logs say
	// first.
	problems := append(peerProblems, v.problems...)
	if v.placementErr != nil {
		problems = append(problems, "placement: "+v.placementErr.Error())
	}
	if v.actErr != nil {
		problems = append(problems, "last step failed: "+v.actErr.Error())
	}
	if v.dnsErr != nil {
		problems = append(problems, "DNS: "+v.dnsErr.Error())
	}
	if d.Action == membership.ActWait && st.Operation == nil && st.ClusterID != "" {
		problems = append(problems, d.Reason)
	}
	for _, cv := range v.clusters {
		switch {
		case cv.verdict.State == liveness.Failed:
			problems = append(problems, fmt.Sprintf("member cluster %s failed: %s", cv.name, cv.verdict.Reason))
		case cv.verdict.State == liveness.Unknown && (cv.eligible || hasMembers(ec, cv.name)):
			msg := fmt.Sprintf("member cluster %s unknown: %s", cv.name, cv.verdict.Reason)
			if p := cv.connProblem(v.now); p != "" {
				msg += "; " + p
			} else if cv.readErr != nil {
				msg += "; " + cv.readErr.Error()
			}
			problems = append(problems, msg)
		case cv.readErr != nil:
			problems = append(problems, cv.readErr.Error())
		case cv.connProblem(v.now) != "" && (cv.eligible || hasMembers(ec, cv.name)):
			problems = append(problems, fmt.Sprintf("member cluster %s: %s", cv.name, cv.connProblem(v.now)))
		}
	}
	if st.ClusterID != "" && len(notReady) > 0 {
		problems = append(problems, "members not ready: "+strings.Join(notReady, ", "))
	}
	if len(problems) > 0 {
		reason := ReasonProblems
		if peerReason != "" {
			reason = peerReason
		}
		setCondition(ec, etcdfedv1.ConditionDegraded, true, reason, strings.Join(problems, "; "))
	} else {
		setCondition(ec, etcdfedv1.ConditionDegraded, false, ReasonAsExpected, "no problems seen")
	}

	// FailureTolerant: today's placement survives the loss of any one zone.
	switch {
	case len(current) == 0:
		setCondition(ec, etcdfedv1.ConditionFailureTolerant, false, ReasonNotBootstrapped, "no voting members yet")
	case tol.ZoneFailures >= 1:
		setCondition(ec, etcdfedv1.ConditionFailureTolerant, true, ReasonSurvivesZoneLoss,
			fmt.Sprintf("survives the loss of any %d zone(s) and %d member cluster(s): %s", tol.ZoneFailures, tol.ClusterFailures, st.ZoneSummary))
	default:
		msg := tol.ZoneReason
		if msg == "" {
			msg = "losing one zone loses quorum"
		}
		setCondition(ec, etcdfedv1.ConditionFailureTolerant, false, ReasonZoneLossLosesQuor, msg)
	}

	if v.actErr == nil && v.placementErr == nil && v.dnsErr == nil {
		st.ObservedGeneration = ec.Generation
	}
	recordMetrics(v)
}

// peerConnectionProblems reports the members whose spoke found in etcd's
// log why they cannot connect to their peers, one entry per cause (most
// fundamental first, etcdfedv1.PeerConnectionProblems), naming the
// members and giving the first one's message (cause and fix). reason is
// the first cause's reason.
func peerConnectionProblems(v *view) (reason string, problems []string) {
	byReason := map[string][]string{}
	first := map[string]string{}
	for _, cv := range v.clusters {
		if !cv.visible() {
			continue
		}
		names := make([]string, 0, len(cv.objects))
		for n := range cv.objects {
			names = append(names, n)
		}
		sort.Strings(names)
		for _, n := range names {
			c := meta.FindStatusCondition(cv.objects[n].Status.Conditions, etcdfedv1.ConditionPeerConnections)
			if c == nil || c.Status != metav1.ConditionFalse {
				continue
			}
			byReason[c.Reason] = append(byReason[c.Reason], n+" ("+cv.name+")")
			if _, ok := first[c.Reason]; !ok {
				first[c.Reason] = c.Message
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

func hasMembers(ec *etcdfedv1.EtcdCluster, cluster string) bool {
	for _, m := range ec.Status.Members {
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
