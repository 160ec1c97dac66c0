package etcdcluster

import (
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	etcdfedv1 "github.com/etcdfed/etcdfed/api/v1alpha1"
	"github.com/etcdfed/etcdfed/hub/liveness"
	"github.com/etcdfed/etcdfed/hub/planner"
	"github.com/etcdfed/etcdfed/pkg/topology"
)

// replaceEvidence remembers, per ring, why each replacement in flight
// began (the planner's reason with the witnesses' evidence), so that the
// MemberReplaced event at its end can tell it. A hub that restarted mid
// replacement no longer knows it; the event then says what the operation
// recorded.
type replaceEvidence struct {
	mu    sync.Mutex
	rings map[types.UID]map[string]string // member@incarnation -> evidence
}

func evidenceKey(member string, incarnation int64) string {
	return fmt.Sprintf("%s@%d", member, incarnation)
}

func (m *replaceEvidence) put(ring types.UID, member string, incarnation int64, why string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.rings == nil {
		m.rings = map[types.UID]map[string]string{}
	}
	if m.rings[ring] == nil {
		m.rings[ring] = map[string]string{}
	}
	m.rings[ring][evidenceKey(member, incarnation)] = why
}

// take returns and forgets the evidence of a replacement.
func (m *replaceEvidence) take(ring types.UID, member string, incarnation int64) (string, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	k := evidenceKey(member, incarnation)
	why, ok := m.rings[ring][k]
	delete(m.rings[ring], k)
	return why, ok
}

func (m *replaceEvidence) forget(ring types.UID) {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.rings, ring)
}

// domainEvidence says why a failure domain is being left: the liveness
// verdict of its cluster when failed (which witnesses saw what, since
// when), a zone where no node takes pods, the cordon that asks for it, or
// spec.topology.clusters that no longer allows its cluster (a migration).
func domainEvidence(s *snapshot, d topology.Domain) string {
	for _, cs := range s.clusters {
		if cs.name != d.Cluster {
			continue
		}
		if cs.verdict.State == liveness.Failed {
			grace := durationOr(s.ec.Spec.FailurePolicy.ZoneGracePeriod, 2*time.Minute)
			return fmt.Sprintf("member cluster %s%s failed: %s; zone grace %s expired", cs.name, zonesOf(cs), cs.verdict.Reason, grace)
		}
		if cs.zoneFailed(labelZone(d.Zone)) {
			grace := durationOr(s.ec.Spec.FailurePolicy.ZoneGracePeriod, 2*time.Minute)
			return fmt.Sprintf("%s; zone grace %s expired", zoneProblem(cs, labelZone(d.Zone), true), grace)
		}
		if cs.zoneClosed(labelZone(d.Zone)) {
			grace := durationOr(s.ec.Spec.FailurePolicy.MemberGracePeriod, 5*time.Minute)
			return fmt.Sprintf("no node of %s takes new pods (its spoke reports every node cordoned or not Ready), and a member there has been unhealthy beyond the member grace %s: it cannot start again in place", d, grace)
		}
	}
	tp := s.ec.Spec.Topology
	switch {
	case slices.Contains(tp.CordonedClusters, d.Cluster):
		return fmt.Sprintf("member cluster %s is cordoned (spec.topology.cordonedClusters)", d.Cluster)
	case slices.Contains(tp.CordonedZones, d.Zone):
		return fmt.Sprintf("zone %s is cordoned (spec.topology.cordonedZones)", d.Zone)
	case len(tp.Clusters) > 0 && !slices.Contains(tp.Clusters, d.Cluster):
		return fmt.Sprintf("member cluster %s is no longer allowed (spec.topology.clusters: %s)", d.Cluster, strings.Join(tp.Clusters, ", "))
	}
	return ""
}

// beginEvents are the events of an operation that begins: Evacuating for
// a member moved out of its domain because that domain failed or was
// cordoned, break before make (Replace) or make before break (Move). It
// also returns the evidence to keep for the MemberReplaced event at the
// end ("" when the operation gives the member no new incarnation).
func beginEvents(s *snapshot, op *planner.Operation, why string) (events []clusterEvent, evidence string) {
	if op != nil && op.Type == planner.OpRecover && op.Reason == planner.ReasonFromBackup {
		return []clusterEvent{seedVolumeKept(s, op)}, ""
	}
	if op == nil || op.Type != planner.OpReplace && op.Type != planner.OpMove {
		return nil, ""
	}
	evidence = why
	if op.From != nil && op.Reason == string(topology.Evacuate) {
		if e := domainEvidence(s, *op.From); e != "" {
			evidence = fmt.Sprintf("%s: %s", why, e)
		}
		how := ""
		if op.Type == planner.OpMove && !strings.Contains(why, "make before break") {
			how = ", make before break"
		}
		events = append(events, clusterEvent{corev1.EventTypeWarning, etcdfedv1.EventEvacuating, truncate(
			fmt.Sprintf("Evacuating %s [%x] from %s to %s as incarnation %d%s: %s", op.Member, op.MemberID, op.From, domainString(op.To), op.Incarnation, how, evidence), maxEventNote)})
	}
	return events, evidence
}

// replacedEvent is the MemberReplaced event of a replacement (Replace,
// or a Move made before break) that ended.
func replacedEvent(s *snapshot, op *etcdfedv1.MembershipOperation, evidence string) clusterEvent {
	if evidence == "" {
		evidence = fmt.Sprintf("reason %s (the evidence was kept by a hub that restarted since)", op.Reason)
	}
	from, to := "", ""
	if op.From != nil {
		from = op.From.Cluster + "/" + op.From.Zone
	}
	if op.To != nil {
		to = op.To.Cluster + "/" + op.To.Zone
	}
	how := "replaced by"
	if op.Type == etcdfedv1.OperationMove {
		how = "moved make before break to"
	}
	return clusterEvent{corev1.EventTypeNormal, etcdfedv1.EventMemberReplaced, truncate(
		fmt.Sprintf("%s %s incarnation %d: [%s] in %s -> [%s] in %s, %s after it began; why: %s",
			op.Member, how, op.Incarnation, op.MemberID, from, op.NewMemberID, to, s.now.Sub(op.StartedAt.Time).Truncate(time.Second), evidence), maxEventNote)}
}

// maxEventNote keeps a note within what the events API accepts (1 kB).
const maxEventNote = 1000

func domainString(d *topology.Domain) string {
	if d == nil {
		return "-"
	}
	return d.String()
}

// seedVolumeKept is the VolumesRetained event of a recovery from a backup:
// the seed's volumes of earlier incarnations may hold writes newer than
// the backup, and are kept whatever spec.storage.volumeReclaimPolicy says
// (its object's spec.storage.keepVolumesBefore, desiredMember).
func seedVolumeKept(s *snapshot, op *planner.Operation) clusterEvent {
	claim := "its earlier volumes"
	if cs := s.cluster(domainCluster(op.To)); cs != nil {
		if o := cs.members[op.Member]; o != nil && o.Status.Volume.ClaimName != "" {
			claim = fmt.Sprintf("its volume %s/%s in %s (incarnation %d)", o.Namespace, o.Status.Volume.ClaimName, op.To.Cluster, o.Status.Incarnation)
		}
	}
	return clusterEvent{corev1.EventTypeWarning, etcdfedv1.EventVolumesRetained, truncate(fmt.Sprintf(
		"Recovering from a backup into %s as incarnation %d: %s may hold writes newer than the backup and is kept, labelled %s=true, whatever spec.storage.volumeReclaimPolicy says; delete it once you no longer need its data",
		op.Member, op.Incarnation, claim, etcdfedv1.LabelKept), maxEventNote)}
}

func domainCluster(d *topology.Domain) string {
	if d == nil {
		return ""
	}
	return d.Cluster
}
