package etcdcluster

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	etcdfedv1 "github.com/etcdfed/etcdfed/api/v1alpha1"
	"github.com/etcdfed/etcdfed/hub/liveness"
	"github.com/etcdfed/etcdfed/hub/planner"
	"github.com/etcdfed/etcdfed/internal/text"
	"github.com/etcdfed/etcdfed/pkg/topology"
)

// What the two pure planners are given: pkg/topology the failure domains
// and the members in them, hub/planner the ledger joined with the
// objects and etcd's view.

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

// placementInput describes the failure domains and the current members for
// pkg/topology. A cluster the hub cannot see but has not declared failed
// keeps its members and gets no new ones (rule 8).
func placementInput(s *snapshot, st *etcdfedv1.EtcdClusterStatus) topology.Input {
	ec := s.ec
	in := topology.Input{Replicas: int(ec.Spec.Replicas), NamePrefix: ec.Name + "-", Prefer: leaderPlaces(ec)}
	counts := map[topology.Domain]int{}
	grace := durationOr(ec.Spec.FailurePolicy.MemberGracePeriod, 5*time.Minute)
	failedIn := map[topology.Domain]bool{} // a member failed there beyond its grace
	// Member clusters that do not start a member's pod on a spec another
	// member runs (hub/planner/pending.go), and how many such members
	// each domain holds.
	_, stuckIn := notStartingMembers(s, st, grace)
	notStartingIn := map[string]bool{}
	for _, c := range st.NotStarting {
		notStartingIn[c.Cluster] = c.Generation == ec.Generation
	}
	for _, m := range st.Members {
		em, found := listed(s.etcd, &m)
		if !found && !inOperation(st, m.Name) {
			continue
		}
		d := topology.Domain{Cluster: m.Cluster, Zone: topoZone(m.Cluster, m.Zone)}
		counts[d]++
		if found && m.LastTransitionTime != nil && planner.FailedBeyondGrace(m.Ready, m.LastTransitionTime.Time, em.Healthy, s.now, grace) {
			failedIn[d] = true
		}
		in.Members = append(in.Members, topology.Member{Name: m.Name, Domain: d, Healthy: em.Healthy || em.ID == 0})
		if em.ID != 0 && em.ID == s.etcd.LeaderID {
			in.Leader = m.Name
		}
	}
	seen := map[topology.Domain]bool{}
	for _, cs := range s.clusters {
		if !cs.eligible || !spokeReported(cs.spoke) {
			continue
		}
		zones := cs.spoke.Status.Zones
		if len(zones) == 0 {
			zones = []string{""}
		}
		for _, z := range zones {
			d := topology.Domain{Cluster: cs.name, Zone: topoZone(cs.name, z)}
			info := topology.DomainInfo{Domain: d}
			switch {
			case cs.verdict.State == liveness.Failed:
				info.Unschedulable = topology.Unhealthy
			case slices.Contains(ec.Spec.Topology.CordonedClusters, cs.name):
				info.Unschedulable = topology.ClusterCordoned
			case slices.Contains(ec.Spec.Topology.CordonedZones, z) || slices.Contains(ec.Spec.Topology.CordonedZones, cs.name+"/"+z):
				info.Unschedulable = topology.ZoneCordoned
			case !cs.visible():
				info = unknownDomain(d, counts[d])
			case cs.zoneFailed(z):
				// The zone witness: stale node Leases and its peers lost
				// it, for the zone grace (zones.go).
				info.Unschedulable = topology.Unhealthy
			case cs.zoneStale(z):
				// One signal only (or both within the grace): "unknown"
				// is never "dead". Its members stay; it takes none.
				info = unknownDomain(d, counts[d])
			case notStartingIn[cs.name]:
				// A member's pod stays Pending there on a spec another
				// member runs: the cluster takes no new member, and the
				// one that does not start moves out.
				info = notStartingDomain(d, counts[d]-stuckIn[d])
			case cs.zoneClosed(z):
				// No node takes new pods: no member is placed there, and
				// once one has failed there beyond its grace (it cannot
				// start again in place) the zone is left.
				info = closedDomain(d, counts[d], failedIn[d])
			}
			in.Domains = append(in.Domains, info)
			seen[d] = true
		}
	}
	// Members recorded in domains the hub cannot describe right now (a
	// cluster not visible, a spoke that has not reported, a zone missing
	// from its spoke's report) stay where they are and get no company: a
	// partial view never moves a member (rule 8). So do the members of a
	// cluster that dropped out of the registry (its kubeconfig Secret
	// deleted or re-created) or out of spec.topology.clusterSelector (its
	// labels changed): it is judged like any other, and only its failure
	// moves them. Only a failed cluster, a cordon, or a cluster the spec's
	// list of clusters no longer names (leftDeliberately) does.
	for d, n := range counts {
		cs := s.cluster(d.Cluster)
		if seen[d] || cs == nil || cs.verdict.State == liveness.Failed || (!cs.eligible && leftDeliberately(ec, cs)) {
			continue
		}
		in.Domains = append(in.Domains, unknownDomain(d, n))
		seen[d] = true
	}
	return in
}

// leftDeliberately: the spec moves the members of an ineligible cluster
// out: it is cordoned, or spec.topology.clusters (with no selector) does
// not name it. A cluster the hub no longer finds in its registry, or that
// no longer matches the selector, did not leave by a change of the spec:
// its members stay unless it is declared failed (docs/architecture.md:
// a partial view never moves a member).
func leftDeliberately(ec *etcdfedv1.EtcdCluster, cs *clusterSnapshot) bool {
	t := ec.Spec.Topology
	switch {
	case slices.Contains(t.CordonedClusters, cs.name):
		return true
	case !cs.registered:
		return false
	}
	return len(t.Clusters) > 0 && t.ClusterSelector == nil && !slices.Contains(t.Clusters, cs.name)
}

// heldOutside says why a cluster holding members of the ring keeps them
// although it dropped out of the registry or out of the selector
// (leftDeliberately is false); "" when neither applies.
func heldOutside(ec *etcdfedv1.EtcdCluster, st *etcdfedv1.EtcdClusterStatus, cs *clusterSnapshot) string {
	if !hasMembers(st, cs.name) || cs.verdict.State == liveness.Failed || leftDeliberately(ec, cs) {
		return ""
	}
	var why string
	switch {
	case !cs.registered:
		why = "is no longer registered with the hub (its kubeconfig Secret is gone)"
	case !cs.eligible:
		why = "no longer matches spec.topology.clusterSelector"
	default:
		return ""
	}
	var names []string
	for _, m := range st.Members {
		if m.Cluster == cs.name {
			names = append(names, m.Name)
		}
	}
	return fmt.Sprintf("member cluster %s holds %s but %s: they stay where they are until it is declared failed (grace and witnesses, as any cluster) or cordoned (spec.topology.cordonedClusters)",
		cs.name, strings.Join(names, ", "), why)
}

// spokeReported: the spoke has written its status and its cluster has
// nodes, so its zone list can be believed.
func spokeReported(sp *etcdfedv1.EtcdSpoke) bool {
	if sp == nil || sp.Status.ObservedAt == nil {
		return false
	}
	c := meta.FindStatusCondition(sp.Status.Conditions, etcdfedv1.ConditionReady)
	return c == nil || c.Reason != etcdfedv1.ReasonNoNodes
}

// closedDomain is a zone where no node takes new pods: NoSchedulableNode
// (its members move out) once a member failed there, else schedulable for
// the members it has and closed to new ones.
func closedDomain(d topology.Domain, members int, memberFailed bool) topology.DomainInfo {
	if memberFailed || members == 0 {
		return topology.DomainInfo{Domain: d, Unschedulable: topology.NoSchedulableNode}
	}
	return topology.DomainInfo{Domain: d, Capacity: members}
}

// notStartingMembers finds the members whose pod their cluster does not
// start although another member runs the same spec (planner.NotStarting):
// the clusters holding one (with why), and per domain how many of them the
// placement counts (listed in etcd, or in the operation in flight).
func notStartingMembers(s *snapshot, st *etcdfedv1.EtcdClusterStatus, grace time.Duration) (map[string]string, map[topology.Domain]int) {
	ec := s.ec
	in := planner.Input{Now: s.now, MemberGrace: grace, Automatic: ec.Spec.FailurePolicy.Automatic == nil || *ec.Spec.FailurePolicy.Automatic}
	in.Members = plannerMembers(s, st)
	clusters, counted := map[string]string{}, map[topology.Domain]int{}
	for i, m := range in.Members {
		why := planner.NotStarting(in, m)
		if why == "" {
			continue
		}
		clusters[m.Domain.Cluster] = why
		if _, found := listed(s.etcd, &st.Members[i]); found || inOperation(st, m.Name) {
			counted[m.Domain]++
		}
	}
	return clusters, counted
}

// maxNotStarting bounds status.notStarting (its MaxItems).
const maxNotStarting = 64

// recordNotStarting keeps status.notStarting: the entries of an earlier
// spec (generation) go, and each cluster found now not starting a member
// on a spec another member runs is added (once, with when). The entry
// outlives the member's move out of that cluster, so the placement does
// not move it (or another) back there while the spec is the same: the
// cluster costs each spec one member grace at most.
func recordNotStarting(s *snapshot, st *etcdfedv1.EtcdClusterStatus) {
	gen := s.ec.Generation
	st.NotStarting = slices.DeleteFunc(st.NotStarting, func(c etcdfedv1.NotStartingCluster) bool { return c.Generation != gen })
	clusters, _ := notStartingMembers(s, st, durationOr(s.ec.Spec.FailurePolicy.MemberGracePeriod, 5*time.Minute))
	for _, name := range slices.Sorted(maps.Keys(clusters)) {
		if len(st.NotStarting) >= maxNotStarting || slices.ContainsFunc(st.NotStarting, func(c etcdfedv1.NotStartingCluster) bool { return c.Cluster == name }) {
			continue
		}
		st.NotStarting = append(st.NotStarting, etcdfedv1.NotStartingCluster{Cluster: name, Generation: gen, Since: metav1.NewTime(s.now), Message: text.Truncate(clusters[name], 1024)})
	}
}

// notStartingDomain is a domain of a cluster that does not start a
// member's pod: closed to new members, and holding only the members
// that start (keep), so that the one that does not moves out; unschedulable
// when none does.
func notStartingDomain(d topology.Domain, keep int) topology.DomainInfo {
	if keep <= 0 {
		return topology.DomainInfo{Domain: d, Unschedulable: topology.MemberNotStarting}
	}
	return topology.DomainInfo{Domain: d, Capacity: keep}
}

// zoneClosed: the spoke of cs reports that no node of zone (a node label
// value) takes new pods.
func (cs *clusterSnapshot) zoneClosed(zone string) bool {
	return cs.spoke != nil && slices.Contains(cs.spoke.Status.UnschedulableZones, zone)
}

// unknownDomain: schedulable for the members it has, closed to new ones.
func unknownDomain(d topology.Domain, members int) topology.DomainInfo {
	if members == 0 {
		return topology.DomainInfo{Domain: d, Unschedulable: topology.Unhealthy}
	}
	return topology.DomainInfo{Domain: d, Capacity: members}
}

// input is the membership planner's input: the spec's replicas and
// failure policy, the ledger's members joined with their objects and
// etcd, the operation in flight, and the clusters not seen.
func (f *membership) input(in *planner.Input, st *etcdfedv1.EtcdClusterStatus) {
	s, ec := f.s, f.s.ec
	in.Now = s.now
	in.Replicas = int(ec.Spec.Replicas)
	in.Automatic = ec.Spec.FailurePolicy.Automatic == nil || *ec.Spec.FailurePolicy.Automatic
	in.MovesPaused = ec.Spec.Topology.PauseMoves
	in.BreakBeforeMake = ec.Annotations[etcdfedv1.AnnotationBreakBeforeMake] == "true"
	in.MemberGrace = durationOr(ec.Spec.FailurePolicy.MemberGracePeriod, 5*time.Minute)
	in.Bootstrapped = st.ClusterID != ""
	in.LastIncarnation = st.LastIncarnation
	in.Etcd = s.etcd
	if op := st.Operation; op != nil {
		in.Operation = fromAPIOperation(op)
	}
	for _, cs := range s.clusters {
		switch {
		case !cs.eligible:
		case !cs.visible():
			in.Unseen = append(in.Unseen, cs.name+": "+orText(cs.verdict.Reason, "not visible"))
		case !spokeReported(cs.spoke):
			in.Unseen = append(in.Unseen, cs.name+": its spoke has not reported zones and nodes")
		}
	}
	in.Members = plannerMembers(s, st)
}

// plannerMembers is the planner's view of each recorded member: the
// ledger joined with the member's objects and its cluster's verdicts.
func plannerMembers(s *snapshot, st *etcdfedv1.EtcdClusterStatus) []planner.Member {
	var out []planner.Member
	for _, m := range st.Members {
		cs := s.cluster(m.Cluster)
		mm := planner.Member{
			Name:        m.Name,
			Domain:      topology.Domain{Cluster: m.Cluster, Zone: topoZone(m.Cluster, m.Zone)},
			Incarnation: m.Incarnation,
			ID:          parseID(m.ID),
			Ready:       m.Ready,
		}
		if m.LastTransitionTime != nil {
			mm.ReadyChangedAt = m.LastTransitionTime.Time
		}
		if cs != nil && !mm.Ready && cs.backSince.After(mm.ReadyChangedAt) {
			// A member that went unready while the hub could not see
			// its cluster (cut off, with it, from the majority) is
			// judged from when the cluster came back into view: it gets
			// its whole grace to catch up before it counts as failed.
			mm.ReadyChangedAt = cs.backSince
		}
		if cs != nil {
			mm.ClusterVisible = cs.visible()
			mm.DomainFailed = cs.verdict.State == liveness.Failed || (mm.ClusterVisible && cs.zoneFailed(m.Zone))
			mm.DomainClosed = mm.ClusterVisible && cs.zoneClosed(m.Zone)
			if obj := cs.members[m.Name]; obj != nil && mm.ClusterVisible {
				mm.Object = plannerObject(s, st, &m, obj)
				mm.Superseded = slices.ContainsFunc(cs.others[m.Name], func(o *etcdfedv1.EtcdMember) bool { return o.Spec.Incarnation < m.Incarnation })
			}
		}
		for _, other := range s.clusters {
			if other.name != m.Cluster && other.visible() && other.members[m.Name] != nil {
				mm.StaleIn = append(mm.StaleIn, other.name)
			}
		}
		out = append(out, mm)
	}
	return out
}

// plannerObject is what the planner needs of a member's EtcdMember object.
func plannerObject(s *snapshot, st *etcdfedv1.EtcdClusterStatus, m *etcdfedv1.MemberStatus, obj *etcdfedv1.EtcdMember) *planner.Object {
	o := &planner.Object{
		Incarnation:       obj.Spec.Incarnation,
		PeerURL:           obj.Status.PeerURL,
		StatusIncarnation: obj.Status.Incarnation,
		Healthy:           meta.IsStatusConditionTrue(obj.Status.Conditions, etcdfedv1.ConditionMemberHealthy),
		Settled: obj.Status.ObservedGeneration == obj.Generation &&
			meta.IsStatusConditionTrue(obj.Status.Conditions, etcdfedv1.ConditionPodReady),
	}
	if obj.Spec.Bootstrap != nil {
		o.Bootstrap = string(obj.Spec.Bootstrap.InitialClusterState)
	}
	o.Etcd, o.ForceNewCluster = etcdView(obj), obj.Spec.ForceNewCluster
	o.NamedAfterMember = obj.Name == obj.Spec.MemberName
	if at, err := time.Parse(time.RFC3339Nano, obj.Annotations[etcdfedv1.AnnotationRestart]); err == nil {
		o.RestartRequestedAt = at
	}
	if c := meta.FindStatusCondition(obj.Status.Conditions, etcdfedv1.ConditionStorageReady); c != nil &&
		c.Status == metav1.ConditionFalse && c.Reason == etcdfedv1.ReasonVolumeLost {
		o.VolumeLost = true
	}
	if obj.Spec.Incarnation == m.Incarnation {
		want := desiredMember(s, st, m, obj)
		o.Outdated = restarts(obj, want)
		if o.Outdated {
			o.Changes = specChanges(obj, want)
		}
		if o.Outdated && obj.Spec.TLS.CAHash != want.Spec.TLS.CAHash {
			same := obj.DeepCopy()
			same.Spec.TLS.CAHash = want.Spec.TLS.CAHash
			o.OutdatedTrust = !restarts(same, want)
		}
		o.Failing, o.Pending = podFailing(obj), podPending(obj)
	}
	return o
}

// restarts: writing want over existing changes what the pod runs. Labels
// and spec.bootstrap do not (etcd reads the bootstrap flags only at its
// first start); everything else in the spec does.
func restarts(existing, want *etcdfedv1.EtcdMember) bool {
	return !equality.Semantic.DeepEqual(withoutBootstrap(existing.Spec), withoutBootstrap(want.Spec))
}

func withoutBootstrap(s etcdfedv1.EtcdMemberSpec) etcdfedv1.EtcdMemberSpec {
	s.Bootstrap = nil
	s.Disruption = nil // the budget's grant restarts nothing
	return s
}
