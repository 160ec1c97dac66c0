package etcdcluster

import (
	"context"
	"slices"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"

	etcdfedv1 "github.com/etcdfed/etcdfed/api/v1alpha1"
	"github.com/etcdfed/etcdfed/hub/liveness"
	"github.com/etcdfed/etcdfed/hub/membership"
	"github.com/etcdfed/etcdfed/pkg/topology"
)

// noZonePrefix marks the single pseudo-zone of a member cluster whose nodes
// carry no zone label. ':' cannot appear in a label value, so it never
// collides with a real zone.
const noZonePrefix = "cluster:"

// topoZone is the zone pkg/topology uses for a (cluster, zone label) pair.
func topoZone(cluster, zone string) string {
	if zone == "" {
		return noZonePrefix + cluster
	}
	return zone
}

// labelZone is the node zone label for a topology zone ("" for none).
func labelZone(zone string) string {
	if strings.HasPrefix(zone, noZonePrefix) {
		return ""
	}
	return zone
}

type placementResult struct {
	input  topology.Input
	result topology.Result
}

// reconcileMembership: record what etcd says, plan, and take one step.
func (r *Reconciler) reconcileMembership(ctx context.Context, v *view) (ctrl.Result, error) {
	recordObservations(v)
	pin := placementInput(v)
	res, err := topology.Plan(pin)
	if err != nil {
		v.placementErr = err
		return ctrl.Result{RequeueAfter: resyncPeriod}, nil
	}
	v.placement = placementResult{input: pin, result: res}
	d := membership.Next(membershipInput(v))
	v.decision = d
	if d.Action != membership.ActNone && d.Action != membership.ActWait {
		ctrl.LoggerFrom(ctx).Info("Membership step", "action", d.Action, "member", d.Member, "reason", d.Reason)
	}
	return r.act(ctx, v, d)
}

// recordObservations updates the hub's record of each member from etcd and
// the spokes: etcd IDs (matched by peer URL), readiness with the hub-clock
// time it changed, address.
func recordObservations(v *view) {
	st := &v.ec.Status
	for i := range st.Members {
		m := &st.Members[i]
		obj := objectOf(v, m.Name)
		if obj != nil && obj.Spec.Incarnation == m.Incarnation && obj.Status.Address != "" {
			m.Address = obj.Status.Address
		}
		em, found := etcdMember(v, m)
		if !found && m.ID == "" && obj != nil && obj.Status.PeerURL != "" && obj.Status.Incarnation == m.Incarnation {
			for _, e := range v.etcd.Members {
				if slices.Contains(e.PeerURLs, obj.Status.PeerURL) && !recordedID(st, e.ID) {
					m.ID, em, found = hexID(e.ID), e, true
				}
			}
		}
		ready := found && em.Started() && em.Healthy && !em.IsLearner
		if !v.etcd.Reachable {
			continue // unknown: keep the last readiness, do not start grace clocks
		}
		if ready != m.Ready || m.LastTransitionTime == nil {
			m.Ready = ready
			t := metav1.NewTime(v.now)
			m.LastTransitionTime = &t
		}
	}
	// A recorded member that etcd no longer lists, with no operation about
	// it, was removed outside etcdfed: forget it (rule 1).
	if v.etcd.Reachable && st.ClusterID != "" {
		st.Members = slices.DeleteFunc(st.Members, func(m etcdfedv1.MemberStatus) bool {
			if st.Operation != nil && st.Operation.Member == m.Name {
				return false
			}
			_, found := etcdMember(v, &m)
			return !found
		})
	}
}

func recordedID(st *etcdfedv1.EtcdClusterStatus, id uint64) bool {
	for _, m := range st.Members {
		if parseID(m.ID) == id {
			return true
		}
	}
	return false
}

func etcdMember(v *view, m *etcdfedv1.MemberStatus) (membership.ListEntry, bool) {
	id := parseID(m.ID)
	if id == 0 {
		return membership.ListEntry{}, false
	}
	for _, e := range v.etcd.Members {
		if e.ID == id {
			return e, true
		}
	}
	return membership.ListEntry{}, false
}

// placementInput describes the failure domains and the current members for
// pkg/topology. A cluster the hub cannot see but has not declared failed
// keeps its members and gets no new ones (rule 8).
func placementInput(v *view) topology.Input {
	ec := v.ec
	in := topology.Input{Replicas: int(ec.Spec.Replicas), NamePrefix: ec.Name + "-"}
	counts := map[topology.Domain]int{}
	for _, m := range v.ec.Status.Members {
		if _, ok := etcdMember(v, &m); ok || inOperation(ec, m.Name) {
			d := topology.Domain{Cluster: m.Cluster, Zone: topoZone(m.Cluster, m.Zone)}
			counts[d]++
			em, _ := etcdMember(v, &m)
			in.Members = append(in.Members, topology.Member{Name: m.Name, Domain: d, Healthy: em.Healthy || em.ID == 0})
			if em.ID != 0 && em.ID == v.etcd.LeaderID {
				in.Leader = m.Name
			}
		}
	}
	seen := map[topology.Domain]bool{}
	for _, cv := range v.clusters {
		if !cv.eligible || !spokeReported(cv.spoke) {
			continue
		}
		zones := cv.spoke.Status.Zones
		if len(zones) == 0 {
			zones = []string{""}
		}
		for _, z := range zones {
			d := topology.Domain{Cluster: cv.name, Zone: topoZone(cv.name, z)}
			info := topology.DomainInfo{Domain: d}
			switch {
			case cv.verdict.State == liveness.Failed:
				info.Unschedulable = topology.Unhealthy
			case slices.Contains(ec.Spec.Topology.CordonedClusters, cv.name):
				info.Unschedulable = topology.ClusterCordoned
			case slices.Contains(ec.Spec.Topology.CordonedZones, z) || slices.Contains(ec.Spec.Topology.CordonedZones, cv.name+"/"+z):
				info.Unschedulable = topology.ZoneCordoned
			case !cv.visible():
				info = unknownDomain(d, counts[d])
			}
			in.Domains = append(in.Domains, info)
			seen[d] = true
		}
	}
	// Members recorded in domains the hub cannot describe right now (a
	// cluster not visible, a spoke that has not reported, a zone missing
	// from its spoke's report) stay where they are and get no company: a
	// partial view never moves a member (rule 8). Only a failed cluster, a
	// cordon or a cluster no longer eligible does.
	for d, n := range counts {
		cv := v.cluster(d.Cluster)
		if seen[d] || cv == nil || !cv.eligible || cv.verdict.State == liveness.Failed {
			continue
		}
		in.Domains = append(in.Domains, unknownDomain(d, n))
		seen[d] = true
	}
	return in
}

// spokeReported: the spoke has written its status and its cluster has
// nodes, so its zone list can be believed.
func spokeReported(s *etcdfedv1.EtcdSpoke) bool {
	if s == nil || s.Status.ObservedAt == nil {
		return false
	}
	c := meta.FindStatusCondition(s.Status.Conditions, etcdfedv1.ConditionReady)
	return c == nil || c.Reason != ReasonSpokeNoNodes
}

// ReasonSpokeNoNodes is the EtcdSpoke Ready reason of a cluster without
// nodes (spoke/spokestatus): nothing can be placed there yet.
const ReasonSpokeNoNodes = "NoNodes"

// unknownDomain: schedulable for the members it has, closed to new ones.
func unknownDomain(d topology.Domain, members int) topology.DomainInfo {
	if members == 0 {
		return topology.DomainInfo{Domain: d, Unschedulable: topology.Unhealthy}
	}
	return topology.DomainInfo{Domain: d, Capacity: members}
}

func inOperation(ec *etcdfedv1.EtcdCluster, member string) bool {
	return ec.Status.Operation != nil && ec.Status.Operation.Member == member
}

// membershipInput joins the hub's record with the objects and etcd.
func membershipInput(v *view) membership.Input {
	ec := v.ec
	in := membership.Input{
		Now:             v.now,
		Replicas:        int(ec.Spec.Replicas),
		Automatic:       ec.Spec.FailurePolicy.Automatic == nil || *ec.Spec.FailurePolicy.Automatic,
		MemberGrace:     durationOr(ec.Spec.FailurePolicy.MemberGracePeriod, 5*time.Minute),
		Bootstrapped:    ec.Status.ClusterID != "",
		LastIncarnation: ec.Status.LastIncarnation,
		Etcd:            v.etcd,
		Placement:       v.placement.result,
	}
	if op := ec.Status.Operation; op != nil {
		in.Operation = fromAPIOperation(op)
	}
	for _, cv := range v.clusters {
		switch {
		case !cv.eligible:
		case !cv.visible():
			in.Unseen = append(in.Unseen, cv.name+": "+orText(cv.verdict.Reason, "not visible"))
		case !spokeReported(cv.spoke):
			in.Unseen = append(in.Unseen, cv.name+": its spoke has not reported zones and nodes")
		}
	}
	for _, m := range ec.Status.Members {
		cv := v.cluster(m.Cluster)
		mm := membership.Member{
			Name:        m.Name,
			Domain:      topology.Domain{Cluster: m.Cluster, Zone: topoZone(m.Cluster, m.Zone)},
			Incarnation: m.Incarnation,
			ID:          parseID(m.ID),
			Ready:       m.Ready,
		}
		if m.LastTransitionTime != nil {
			mm.ReadyChangedAt = m.LastTransitionTime.Time
		}
		if cv != nil {
			mm.ClusterVisible = cv.visible()
			mm.ClusterFailed = cv.verdict.State == liveness.Failed
			if obj := cv.objects[m.Name]; obj != nil && mm.ClusterVisible {
				mm.Object = objectFor(obj)
			}
		}
		for _, other := range v.clusters {
			if other.name != m.Cluster && other.visible() && other.objects[m.Name] != nil {
				mm.StaleIn = append(mm.StaleIn, other.name)
			}
		}
		in.Members = append(in.Members, mm)
	}
	return in
}

func objectFor(obj *etcdfedv1.EtcdMember) *membership.Object {
	o := &membership.Object{
		Incarnation:       obj.Spec.Incarnation,
		PeerURL:           obj.Status.PeerURL,
		StatusIncarnation: obj.Status.Incarnation,
		Healthy:           meta.IsStatusConditionTrue(obj.Status.Conditions, etcdfedv1.ConditionMemberHealthy),
	}
	if obj.Spec.Bootstrap != nil {
		o.Bootstrap = string(obj.Spec.Bootstrap.InitialClusterState)
	}
	if c := meta.FindStatusCondition(obj.Status.Conditions, etcdfedv1.ConditionStorageReady); c != nil &&
		c.Status == metav1.ConditionFalse && c.Reason == ReasonVolumeLost {
		o.VolumeLost = true
	}
	return o
}

// ReasonVolumeLost is the StorageReady reason a spoke reports when the
// volume of an incarnation that once existed is gone.
const ReasonVolumeLost = "VolumeLost"

func fromAPIOperation(op *etcdfedv1.MembershipOperation) *membership.Operation {
	out := &membership.Operation{
		Type:        membership.OpType(op.Type),
		Member:      op.Member,
		MemberID:    parseID(op.MemberID),
		NewMemberID: parseID(op.NewMemberID),
		Incarnation: op.Incarnation,
		Reason:      op.Reason,
		Step:        membership.Action(op.Step),
		StartedAt:   op.StartedAt.Time,
	}
	if op.From != nil {
		out.From = &topology.Domain{Cluster: op.From.Cluster, Zone: topoZone(op.From.Cluster, op.From.Zone)}
	}
	if op.To != nil {
		out.To = &topology.Domain{Cluster: op.To.Cluster, Zone: topoZone(op.To.Cluster, op.To.Zone)}
	}
	return out
}

func toAPIOperation(op *membership.Operation, message string) *etcdfedv1.MembershipOperation {
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
	}
	if op.From != nil {
		out.From = &etcdfedv1.FailureDomain{Cluster: op.From.Cluster, Zone: labelZone(op.From.Zone)}
	}
	if op.To != nil {
		out.To = &etcdfedv1.FailureDomain{Cluster: op.To.Cluster, Zone: labelZone(op.To.Zone)}
	}
	return out
}

func orText(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n-3] + "..."
}
