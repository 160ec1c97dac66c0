package member

import (
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	etcdfedv1 "github.com/etcdfed/etcdfed/api/v1alpha1"
	"github.com/etcdfed/etcdfed/spoke/component/budget"
	"github.com/etcdfed/etcdfed/spoke/component/pod"
	"github.com/etcdfed/etcdfed/spoke/component/pvc"
	"github.com/etcdfed/etcdfed/spoke/component/service"
	"github.com/etcdfed/etcdfed/spoke/internal/spec"
)

// params are the spoke's settings decide renders the pod with.
type params struct {
	helperImage    string
	waitDNSTimeout time.Duration
}

// decision is what decide made of a snapshot: each component's decision,
// the writes that carry them out, in order, and the objects as they stand
// once the writes succeed.
type decision struct {
	claim   pvc.Decision
	service service.Decision
	// exposure is what the observed Service tells (the advertised ports,
	// the load balancer's address); Waiting is also set on a Service
	// conflict.
	exposure service.Exposure
	// blocker says why no pod can be created now; nil when one can.
	blocker *pod.Blocker
	pod     pod.Decision
	budget  budget.Decision
	// writes, in order: the current volume, the exposure, the pod, the
	// disruption budget, the volumes of earlier incarnations.
	writes []write
	// events are recorded whether or not the writes succeed.
	events []memberEvent
	// after are the objects once the writes succeed, as rendered; apply
	// replaces them with the apiserver's answers.
	after outcome
	// requeueAfter is when the pass wants to run again; 0: on events only.
	requeueAfter time.Duration
}

// outcome is the member's objects after a pass's writes.
type outcome struct {
	claim   *corev1.PersistentVolumeClaim
	service *corev1.Service
	pod     *corev1.Pod
}

// set replaces the object of o's kind.
func (out *outcome) set(o any) {
	switch o := o.(type) {
	case *corev1.PersistentVolumeClaim:
		out.claim = o
	case *corev1.Service:
		out.service = o
	case *corev1.Pod:
		out.pod = o
	}
}

// loadBalancerPoll is how often a LoadBalancer Service without an address
// is looked at again: providers report the address without an event we
// watch for sure.
const loadBalancerPoll = 10 * time.Second

// decide turns a snapshot into a decision. It is pure: it reads s and
// writes nothing. The current incarnation's volume is created only when
// none exists and the status names none the member ran on (pvc.Decide: a
// lost volume is never recreated); a volume of an earlier incarnation is
// deleted only with the Delete policy, once the new incarnation's pod runs
// (pvc.PlanRetired); a pod only for a hub decision or a pod that cannot run
// again (pod.Decide); the disruption budget is opened only for the hub's
// grant (budget.Decide).
func decide(s *snapshot, p params) *decision {
	m := s.m
	d := &decision{after: outcome{claim: s.claim, service: s.service, pod: s.pod}}

	// The data volume of the current incarnation.
	d.claim = pvc.Decide(m, s.claim)
	switch d.claim.Action {
	case pvc.Create:
		obj := pvc.Build(m)
		d.writes = append(d.writes, write{op: opCreate, obj: obj, why: fmt.Sprintf("data volume of incarnation %d", m.Spec.Incarnation)})
		d.after.claim = obj
	case pvc.Lost:
		d.events = append(d.events, memberEvent{typ: corev1.EventTypeWarning, reason: ReasonVolumeLost, note: d.claim.Message})
	}

	// The exposure.
	d.service = service.Decide(m, s.service, s.pod != nil)
	switch d.service.Action {
	case service.Create, service.Update:
		d.writes = append(d.writes, write{op: writeOpOf(d.service.Action), obj: d.service.Object, why: fmt.Sprintf("%s exposure", spec.ExposeType(m))})
		d.after.service = d.service.Object
	case service.Delete:
		d.writes = append(d.writes, write{op: opDelete, obj: s.service, why: d.service.Message})
		d.after.service = nil
	}
	if d.service.Action == service.Conflict {
		d.exposure = service.Exposure{Waiting: d.service.Message}
	} else {
		d.exposure = service.ExposureOf(m, s.service)
		if d.exposure.Waiting != "" && spec.ExposeType(m) == etcdfedv1.ExposeLoadBalancer {
			d.requeueAfter = loadBalancerPoll
		}
	}

	// The pod.
	d.blocker = blocker(s, d)
	var desired *corev1.Pod
	if d.blocker == nil {
		desired = pod.Build(m, pod.Params{
			HelperImage:         p.helperImage,
			WaitDNSTimeout:      p.waitDNSTimeout,
			ClaimName:           d.after.claim.Name,
			Advertised:          d.exposure.Ports,
			LoadBalancerAddress: d.exposure.LoadBalancerAddress,
		})
	}
	d.pod = pod.Decide(m, s.pod, desired, d.blocker)
	switch d.pod.Action {
	case pod.Create:
		state := etcdfedv1.InitialClusterState("")
		if b := m.Spec.Bootstrap; b != nil {
			state = b.InitialClusterState
		}
		d.writes = append(d.writes, write{op: opCreate, obj: desired,
			why:   fmt.Sprintf("incarnation %d, initialClusterState %s", m.Spec.Incarnation, state),
			event: &memberEvent{typ: corev1.EventTypeNormal, reason: ReasonPodCreated, note: fmt.Sprintf("Created pod %s for incarnation %d", desired.Name, m.Spec.Incarnation)}})
		d.after.pod = desired
	case pod.DeleteOldIncarnation, pod.DeleteTerminated:
		d.writes = append(d.writes, write{op: opDelete, obj: s.pod, why: d.pod.Message,
			event: &memberEvent{typ: corev1.EventTypeNormal, reason: ReasonPodTerminating, note: "Deleted pod: " + d.pod.Message}})
	case pod.Replace:
		d.writes = append(d.writes, write{op: opDelete, obj: s.pod, why: d.pod.Message,
			event: &memberEvent{typ: corev1.EventTypeNormal, reason: ReasonPodReplaced, note: "Replacing pod: " + d.pod.Message}})
	}

	// The disruption budget: closed unless the hub granted the member the
	// ring's one disruption.
	d.budget = budget.Decide(m, s.budget)
	switch d.budget.Action {
	case budget.Create:
		d.writes = append(d.writes, write{op: opCreate, obj: d.budget.Object, why: d.budget.Message})
	case budget.Update:
		d.writes = append(d.writes, write{op: opUpdate, obj: d.budget.Object, why: d.budget.Message,
			event: &memberEvent{typ: corev1.EventTypeNormal, reason: ReasonBudgetChanged, note: d.budget.Message}})
	}

	// The volumes of earlier incarnations.
	cur := currentPod(m, s.pod)
	running := cur != nil && cur.Status.Phase == corev1.PodRunning
	d.writes = append(d.writes, claimWrites(m, s.claims, pvc.PlanRetired(m, s.claims, running), fmt.Sprintf("of an incarnation before %d", m.Spec.Incarnation))...)

	// The etcd status read and the log read come back on their own clocks.
	if s.etcd.pod != nil {
		d.requeueAfter = lowest(d.requeueAfter, s.etcd.next)
	}
	if s.log.state == logNotDue || s.log.state == logWasRead {
		d.requeueAfter = lowest(d.requeueAfter, s.log.next)
	}
	return d
}

func writeOpOf(a service.Action) writeOp {
	if a == service.Create {
		return opCreate
	}
	return opUpdate
}

// usableVolume reports whether a pod may be created on the current PVC.
func (d *decision) usableVolume() bool {
	a := d.claim.Action
	return d.after.claim != nil && (a == pvc.Keep || a == pvc.Create)
}

// blocker says why no pod can be created now, or nil.
func blocker(s *snapshot, d *decision) *pod.Blocker {
	m := s.m
	switch {
	case m.Spec.Bootstrap == nil:
		return &pod.Blocker{Reason: ReasonWaitingForBootstrap, Message: "spec.bootstrap is not set: the volume and the exposure are prepared, the pod starts once the hub sets bootstrap"}
	case tlsBlocker(m, s.secret) != nil:
		return tlsBlocker(m, s.secret)
	case !d.usableVolume():
		_, _, msg := storageReadiness(d.claim, d.after.claim)
		return &pod.Blocker{Reason: ReasonWaitingForStorage, Message: "the data volume cannot be used: " + msg}
	case d.service.Action == service.Conflict:
		return &pod.Blocker{Reason: ReasonServiceConflict, Message: d.service.Message}
	case d.exposure.Waiting != "":
		return &pod.Blocker{Reason: ReasonWaitingForExposure, Message: d.exposure.Waiting}
	}
	if err := spec.CheckBootstrap(m, spec.PeerURL(m, d.exposure.Ports)); err != nil {
		return &pod.Blocker{Reason: ReasonBootstrapMismatch, Message: err.Error()}
	}
	// A new incarnation founding a cluster of its own from an empty volume
	// would split the ring; one restored from a snapshot (a recovery from a
	// backup) founds the new cluster on purpose, with a new token.
	if m.Spec.Bootstrap.InitialClusterState == etcdfedv1.InitialClusterNew && m.Spec.Bootstrap.Restore == nil {
		for _, c := range s.claims {
			if inc, ok := spec.Incarnation(c.Labels); ok && inc < m.Spec.Incarnation {
				return &pod.Blocker{Reason: ReasonBootstrapRefused, Message: fmt.Sprintf(
					"initialClusterState is new but the member had incarnation %d (PVC %s): a new incarnation must join the existing cluster (state existing), or it would found a second cluster", inc, c.Name)}
			}
		}
	}
	return nil
}

// storageReadiness turns the current volume's decision and the volume into
// StorageReady.
func storageReadiness(d pvc.Decision, c *corev1.PersistentVolumeClaim) (metav1.ConditionStatus, string, string) {
	switch d.Action {
	case pvc.Lost:
		return metav1.ConditionFalse, ReasonVolumeLost, d.Message
	case pvc.Conflict:
		return metav1.ConditionFalse, ReasonVolumeConflict, d.Message
	case pvc.Terminating:
		return metav1.ConditionFalse, ReasonVolumeTerminating, d.Message
	}
	if c.Status.Phase == corev1.ClaimBound {
		return metav1.ConditionTrue, ReasonBound, fmt.Sprintf("PVC %s is bound to %s", c.Name, c.Spec.VolumeName)
	}
	return metav1.ConditionFalse, ReasonVolumePending,
		fmt.Sprintf("PVC %s is %s; a WaitForFirstConsumer class binds it when the pod is scheduled", c.Name, phaseOr(string(c.Status.Phase), "Pending"))
}

func lowest(a, b time.Duration) time.Duration {
	switch {
	case a == 0:
		return b
	case b == 0:
		return a
	}
	return min(a, b)
}
