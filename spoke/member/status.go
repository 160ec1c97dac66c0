package member

import (
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	etcdfedv1 "github.com/etcdfed/etcdfed/api/v1alpha1"
	"github.com/etcdfed/etcdfed/internal/text"
	"github.com/etcdfed/etcdfed/spoke/component/budget"
	"github.com/etcdfed/etcdfed/spoke/component/pod"
	"github.com/etcdfed/etcdfed/spoke/component/pvc"
	"github.com/etcdfed/etcdfed/spoke/component/service"
	"github.com/etcdfed/etcdfed/spoke/internal/spec"
)

// computeStatus is the EtcdMember's whole status after a pass whose writes
// all succeeded, computed here and nowhere else: from the snapshot, the
// decision and the objects as apply left them (out), one small setter per
// condition. Only such a pass moves observedGeneration.
func computeStatus(s *snapshot, d *decision, out outcome) etcdfedv1.EtcdMemberStatus {
	m := s.m
	st := m.Status.DeepCopy()
	gen := m.Generation
	cur := currentPod(m, out.pod)

	setStorageReady(st, gen, d.claim, out.claim)
	setEtcdView(st, m.Spec.Incarnation, m.QuotaBytes(), s.etcd)
	st.Incarnation = m.Spec.Incarnation
	setPodFields(st, cur, s.zone)
	setExposed(st, gen, m, d.service, out.service, cur)
	setPodReady(st, gen, m, d, out.pod)
	setMemberHealthy(st, gen, s.etcd)
	setPeerConnections(st, gen, s.log)
	setRunsAs(st, s.log)
	setDisruption(st, s, d, cur)
	st.ObservedGeneration = gen
	return *st
}

func setCondition(st *etcdfedv1.EtcdMemberStatus, gen int64, t string, status metav1.ConditionStatus, reason, msg string) {
	meta.SetStatusCondition(&st.Conditions, metav1.Condition{
		Type: t, Status: status, Reason: reason, Message: text.Truncate(msg, 32768), ObservedGeneration: gen,
	})
}

// setInvalidSpec: the spec cannot be run (reason ReasonInvalidSpec) or
// this cluster's policy refuses it (ReasonRefusedByPolicy); nothing else
// changes.
func setInvalidSpec(st *etcdfedv1.EtcdMemberStatus, gen int64, reason string, err error) {
	setCondition(st, gen, etcdfedv1.ConditionPodReady, metav1.ConditionFalse, reason, err.Error())
}

// setStorageReady sets StorageReady and, for a volume the member may run
// on, status.volume (once the volume has a UID). A lost or foreign volume
// leaves status.volume as it was: it names the volume the member ran on.
func setStorageReady(st *etcdfedv1.EtcdMemberStatus, gen int64, d pvc.Decision, c *corev1.PersistentVolumeClaim) {
	status, reason, msg := storageReadiness(d, c)
	setCondition(st, gen, etcdfedv1.ConditionStorageReady, status, reason, msg)
	if d.Action == pvc.Lost || d.Action == pvc.Conflict {
		return
	}
	if c != nil && c.UID != "" {
		st.Volume = etcdfedv1.VolumeReference{ClaimName: c.Name, UID: string(c.UID)}
	}
}

// setEtcdView keeps the last view of etcd (cleared when the incarnation
// changes) and replaces it with a new read; a failed read keeps the last
// view with the error.
func setEtcdView(st *etcdfedv1.EtcdMemberStatus, incarnation, quota int64, e etcdRead) {
	if st.Incarnation != incarnation {
		st.Etcd = nil
	}
	switch {
	case e.pod == nil || e.blocked != nil:
	case e.err != nil:
		if st.Etcd == nil {
			st.Etcd = &etcdfedv1.MemberEtcdView{}
		}
		st.Etcd.Error = text.Truncate(e.err.Error(), 1024)
	default:
		if !etcdViewNews(st.Etcd, e.view, quota) {
			return
		}
		st.Etcd = e.view
	}
}

// etcdViewRefresh is how often a view that only moved in its counters
// (raft index, database sizes, read time) is written anyway: the status of
// a member at rest is patched once in five minutes, not on every read. The
// raft index waits on no decision (the hub reads raft indexes from etcd
// itself, and a member that loses its leader, the moment a quorum is lost,
// writes its view at once, raft index included). The database sizes do:
// the hub reads them from etcd too, but looks at a ring at rest only when
// something wakes it, so a move of the sizes that a size policy may act on
// (etcdfedv1.SizeNews: fragmentation, the NOSPACE guard, any move of a
// tenth) is written at once, and the hub wakes for it. Liveness is the
// spoke's Lease, not this view.
const etcdViewRefresh = 5 * time.Minute

// etcdViewNews says whether a new read is worth a status write: its first
// view, anything other than the counters changed (ID, learner, leader,
// term, version, error, the peers it is connected to), the sizes moved in
// a way a size policy acts on (SizeNews, with the member's quota), or the
// last written view is older than etcdViewRefresh. A peer lost or regained
// is news: the hub's zone witness waits on it.
func etcdViewNews(old, cur *etcdfedv1.MemberEtcdView, quota int64) bool {
	if old == nil || cur == nil || old.ObservedAt == nil || cur.ObservedAt == nil {
		return true
	}
	a, b := *old, *cur
	a.RaftIndex, a.Revision, a.DBSize, a.DBSizeInUse, a.ObservedAt, a.Peers, a.WALFsync = 0, 0, 0, 0, nil, nil, nil
	b.RaftIndex, b.Revision, b.DBSize, b.DBSizeInUse, b.ObservedAt, b.Peers, b.WALFsync = 0, 0, 0, 0, nil, nil, nil
	return a != b || !equality.Semantic.DeepEqual(old.Peers, cur.Peers) || etcdfedv1.SizeNews(old, cur, quota) ||
		diskNews(old.WALFsync, cur.WALFsync) || cur.ObservedAt.Sub(old.ObservedAt.Time) >= etcdViewRefresh
}

// diskNews says whether a disk view moved in a way worth a write at once:
// one appeared or went, its slowest sync moved from or to a stall
// (stallMillis or more), which an election timeout may not outlast, or
// its window came to reach its full length (timingFloor Disk lowers a
// ring's timing only on full windows), or late heartbeats came into or
// left it (timingFloor Disk keeps etcd's defaults while they are). The
// sync count and the window move with every read, and a quick disk's
// tail between buckets of a few milliseconds with the load: those wait
// for the view's refresh (etcdViewRefresh).
func diskNews(old, cur *etcdfedv1.MemberDiskView) bool {
	if old == nil || cur == nil {
		return (old == nil) != (cur == nil)
	}
	full := func(v *etcdfedv1.MemberDiskView) bool { return v.WindowSeconds >= etcdfedv1.DiskWindowSeconds }
	late := func(v *etcdfedv1.MemberDiskView) bool { return v.LateHeartbeats > 0 }
	return old.MaxMillis != cur.MaxMillis && max(old.MaxMillis, cur.MaxMillis) >= stallMillis || full(old) != full(cur) || late(old) != late(cur)
}

// stallMillis is the slowest WAL sync that is news (etcd's 128 ms bucket;
// the shortest election timeout etcdfed's timing chooses is ten times
// that at least).
const stallMillis = 128

// setPodFields reports the current pod, its node and the node's zone.
func setPodFields(st *etcdfedv1.EtcdMemberStatus, cur *corev1.Pod, zone string) {
	st.PodName, st.PodIP, st.NodeName, st.Zone = "", "", "", ""
	if cur == nil {
		return
	}
	st.PodName, st.PodIP, st.NodeName = cur.Name, cur.Status.PodIP, cur.Spec.NodeName
	if cur.Spec.NodeName != "" {
		st.Zone = zone
	}
}

// setExposed reports the address and the advertised URLs, and Exposed.
func setExposed(st *etcdfedv1.EtcdMemberStatus, gen int64, m *etcdfedv1.EtcdMember, d service.Decision, svc *corev1.Service, cur *corev1.Pod) {
	st.Address, st.PeerURL, st.ClientURL = "", "", ""
	if d.Action == service.Conflict {
		setCondition(st, gen, etcdfedv1.ConditionExposed, metav1.ConditionFalse, ReasonServiceConflict, d.Message)
		return
	}
	exp := service.ExposureOf(m, svc)
	if exp.Ports.Peer != 0 {
		st.PeerURL, st.ClientURL = spec.PeerURL(m, exp.Ports), spec.ClientURL(m, exp.Ports)
	}
	reason, waiting := "", ""
	switch spec.ExposeType(m) {
	case etcdfedv1.ExposePodIP:
		st.Address = st.PodIP
		reason, waiting = ReasonWaitingForPodIP, "the address is the pod IP, known once the pod runs"
	case etcdfedv1.ExposeNodePort:
		if exp.Waiting != "" {
			reason, waiting = ReasonWaitingForNodePorts, exp.Waiting
		} else {
			if cur != nil {
				st.Address = cur.Status.HostIP
			}
			reason, waiting = ReasonWaitingForNodeIP, "the address is the IP of the pod's node, known once the pod is scheduled and started"
		}
	case etcdfedv1.ExposeLoadBalancer:
		st.Address = exp.LoadBalancerAddress
		reason, waiting = ReasonWaitingForLoadBalancer, exp.Waiting
	}
	if st.Address != "" && st.PeerURL != "" {
		setCondition(st, gen, etcdfedv1.ConditionExposed, metav1.ConditionTrue, ReasonExposed,
			fmt.Sprintf("%s exposure: address %s, peer URL %s, client URL %s", spec.ExposeType(m), st.Address, st.PeerURL, st.ClientURL))
	} else {
		setCondition(st, gen, etcdfedv1.ConditionExposed, metav1.ConditionFalse, reason, waiting)
	}
}

// setPodReady sets PodReady from the pod decision and the pod after apply
// (p), or why there is none. A learner is told from etcd's view in st.
func setPodReady(st *etcdfedv1.EtcdMemberStatus, gen int64, m *etcdfedv1.EtcdMember, d *decision, p *corev1.Pod) {
	status, reason, msg := podReadiness(m, d.pod, p, d.blocker, st.Etcd)
	setCondition(st, gen, etcdfedv1.ConditionPodReady, status, reason, msg)
}

// podReadiness turns the pod (or why there is none) into PodReady.
func podReadiness(m *etcdfedv1.EtcdMember, d pod.Decision, p *corev1.Pod, blocker *pod.Blocker, view *etcdfedv1.MemberEtcdView) (metav1.ConditionStatus, string, string) {
	outdated := ""
	if d.Outdated {
		outdated = "; " + d.Message
	}
	switch d.Action {
	case pod.Conflict:
		return metav1.ConditionFalse, ReasonPodConflict, d.Message
	case pod.Create:
		return metav1.ConditionFalse, ReasonPodCreated, fmt.Sprintf("pod %s created", p.Name)
	case pod.DeleteOldIncarnation, pod.DeleteTerminated:
		return metav1.ConditionFalse, ReasonPodTerminating, "deleting: " + d.Message
	case pod.Replace:
		return metav1.ConditionFalse, ReasonPodReplaced, "replacing: " + d.Message
	}
	if p == nil {
		return metav1.ConditionFalse, blocker.Reason, blocker.Message
	}
	if p.DeletionTimestamp != nil {
		return metav1.ConditionFalse, ReasonPodTerminating, d.Message
	}
	if inc, _ := spec.Incarnation(p.Labels); inc != m.Spec.Incarnation {
		return metav1.ConditionFalse, ReasonPodPending, d.Message
	}
	switch p.Status.Phase {
	case corev1.PodFailed, corev1.PodSucceeded:
		return metav1.ConditionFalse, ReasonPodTerminated, d.Message
	}
	if isReady(p) {
		return metav1.ConditionTrue, ReasonReady, fmt.Sprintf("pod %s is ready on node %s%s", p.Name, p.Spec.NodeName, outdated)
	}
	if p.Spec.NodeName == "" {
		return metav1.ConditionFalse, ReasonPodPending, fmt.Sprintf("pod %s is not scheduled%s", p.Name, outdated)
	}
	for _, cs := range p.Status.InitContainerStatuses {
		done := cs.State.Terminated != nil && cs.State.Terminated.ExitCode == 0
		if cs.Name == pod.ContainerWaitDNS && !done {
			return metav1.ConditionFalse, ReasonWaitingForDNS, fmt.Sprintf("init container %s waits until %s resolves to the member's address%s", pod.ContainerWaitDNS, m.Spec.DNSName, outdated)
		}
	}
	if msg := containerFailing(p); msg != "" {
		return metav1.ConditionFalse, etcdfedv1.ReasonContainerFailing, msg + outdated
	}
	if msg := podInitializing(p); msg != "" {
		return metav1.ConditionFalse, ReasonPodInitializing, msg + outdated
	}
	if p.Status.Phase == corev1.PodRunning {
		if view != nil && view.IsLearner && view.Error == "" {
			return metav1.ConditionFalse, ReasonLearner, fmt.Sprintf("etcd runs as a learner and waits for promotion%s", outdated)
		}
		return metav1.ConditionFalse, ReasonPodNotReady, fmt.Sprintf("etcd runs but is not ready (/readyz)%s", outdated)
	}
	return metav1.ConditionFalse, ReasonPodPending, fmt.Sprintf("pod %s is %s%s", p.Name, phaseOr(string(p.Status.Phase), "Pending"), outdated)
}

// setMemberHealthy sets MemberHealthy from the etcd read.
func setMemberHealthy(st *etcdfedv1.EtcdMemberStatus, gen int64, e etcdRead) {
	set := func(status metav1.ConditionStatus, reason, msg string) {
		setCondition(st, gen, etcdfedv1.ConditionMemberHealthy, status, reason, msg)
	}
	switch {
	case e.pod == nil:
		set(metav1.ConditionFalse, ReasonNoPod, "no running pod of the current incarnation")
	case e.blocked != nil:
		set(metav1.ConditionFalse, e.blocked.Reason, e.blocked.Message)
	case e.err != nil:
		set(metav1.ConditionFalse, ReasonUnreachable, e.err.Error())
	case e.view.Error != "":
		set(metav1.ConditionFalse, ReasonAlarm, e.view.Error)
	case e.view.LeaderID == "":
		set(metav1.ConditionFalse, ReasonNoLeader, fmt.Sprintf("member %s answers but sees no leader", e.view.ID))
	default:
		role := "voter"
		if e.view.IsLearner {
			role = "learner"
		}
		set(metav1.ConditionTrue, ReasonHealthy, fmt.Sprintf("member %s (%s) sees leader %s at raft term %d", e.view.ID, role, e.view.LeaderID, e.view.RaftTerm))
	}
}

// setPeerConnections explains a member that is not ready from etcd's own
// log (etcdlog.Diagnosis: the member removed from the cluster, a peer of
// another cluster, certificates of another CA or expired, a peer
// certificate that does not name its source address, a peer name that does
// not resolve). A ready member's condition is True without a read; without
// a running pod the condition goes; while the log is not read (off, or not
// due) it stays as it was.
func setPeerConnections(st *etcdfedv1.EtcdMemberStatus, gen int64, l logRead) {
	switch l.state {
	case logOff, logNotDue:
	case logNoPod:
		meta.RemoveStatusCondition(&st.Conditions, etcdfedv1.ConditionPeerConnections)
	case logReady:
		setCondition(st, gen, etcdfedv1.ConditionPeerConnections, metav1.ConditionTrue, etcdfedv1.ReasonPeersReady,
			"etcd is ready, so it reaches a quorum of its peers (its log is read only while it is not ready)")
	case logWasRead:
		if l.result.Err != nil {
			setCondition(st, gen, etcdfedv1.ConditionPeerConnections, metav1.ConditionUnknown, etcdfedv1.ReasonEtcdLogUnavailable, l.result.Err.Error())
			return
		}
		status, reason, msg := l.result.Diagnosis.Condition()
		if l.previous {
			msg = "etcd exited and waits to restart; its last run's log: " + msg
		}
		setCondition(st, gen, etcdfedv1.ConditionPeerConnections, status, reason, msg)
	}
}

// setRunsAs fills status.etcd.id from etcd's log when its status read
// gives none and the log shows it joined under another member's ID
// (JoinedAsAnotherMember): such a member does not answer a status read,
// and the ID it runs under is what tells the hub its learner can never
// start.
func setRunsAs(st *etcdfedv1.EtcdMemberStatus, l logRead) {
	if l.state != logWasRead || l.result.Err != nil {
		return
	}
	id := l.result.Diagnosis.RunsAs()
	if id == "" || st.Etcd != nil && st.Etcd.ID != "" {
		return
	}
	if st.Etcd == nil {
		st.Etcd = &etcdfedv1.MemberEtcdView{}
	}
	st.Etcd.ID = id
}

// transitionEvents are the events of conditions a user sees change: a new
// cause of failing peer connections.
func transitionEvents(before, after *etcdfedv1.EtcdMemberStatus) []memberEvent {
	c := meta.FindStatusCondition(after.Conditions, etcdfedv1.ConditionPeerConnections)
	if c == nil || c.Status != metav1.ConditionFalse {
		return nil
	}
	if prev := meta.FindStatusCondition(before.Conditions, etcdfedv1.ConditionPeerConnections); prev != nil && prev.Reason == c.Reason {
		return nil
	}
	return []memberEvent{{typ: corev1.EventTypeWarning, reason: c.Reason, note: c.Message}}
}

func phaseOr(p, def string) string {
	if p == "" {
		return def
	}
	return p
}

// setDisruption reports the member's budget and whether the node of its
// pod is being drained (cordoned), which asks the hub for the ring's one
// disruption. The request keeps the time it was first seen.
func setDisruption(st *etcdfedv1.EtcdMemberStatus, s *snapshot, d *decision, cur *corev1.Pod) {
	ds := &etcdfedv1.MemberDisruptionStatus{Budget: budget.Name(s.m)}
	if s.budget != nil && d.budget.Action != budget.Conflict {
		ds.DisruptionsAllowed = s.budget.Status.DisruptionsAllowed
	}
	if cur != nil {
		ds.Requested, ds.Reason = budget.Requested(s.node)
	}
	if ds.Requested {
		if prev := st.Disruption; prev != nil && prev.Requested && prev.Reason == ds.Reason && prev.Since != nil {
			ds.Since = prev.Since
		} else {
			now := metav1.Now()
			ds.Since = &now
		}
	}
	st.Disruption = ds
}

// podInitializing says which init container the pod runs, or has just run,
// while its etcd container waits for them (kubelet's PodInitializing), ""
// otherwise. Such a pod is Pending to Kubernetes but not to the hub: its
// cluster scheduled it, pulled its init image and runs it. Reported as
// PodPending, a pod that a slow node took more than the member grace to
// bring back through its init containers (the old pod's termination
// counted) made the hub judge its cluster unable to start the ring's spec
// (planner.NotStarting): a crash-looping member on real nodes was moved
// out of its cluster, and the cluster closed to the ring for the spec,
// instead of being replaced in place (TestScenarioCrashLoop,
// ETCDFED_NODES=real, 2026-11-29). A pod whose sandbox never starts, or
// whose etcd image is being pulled after its init containers (the etcd
// container waits with ContainerCreating), stays PodPending.
func podInitializing(p *corev1.Pod) string {
	if p.Spec.NodeName == "" || p.Status.Phase != corev1.PodPending {
		return ""
	}
	for _, cs := range p.Status.ContainerStatuses {
		if cs.Name == pod.ContainerEtcd && (cs.State.Waiting == nil || cs.State.Waiting.Reason != "PodInitializing") {
			return ""
		}
	}
	last := ""
	for _, cs := range p.Status.InitContainerStatuses {
		switch {
		case cs.State.Running != nil:
			return fmt.Sprintf("pod %s runs its init container %s on node %s", p.Name, cs.Name, p.Spec.NodeName)
		case cs.State.Terminated != nil && cs.State.Terminated.ExitCode == 0:
			last = cs.Name
		}
	}
	if last == "" {
		return ""
	}
	return fmt.Sprintf("pod %s has run its init container %s on node %s and starts the next", p.Name, last, p.Spec.NodeName)
}
