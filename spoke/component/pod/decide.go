package pod

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"

	etcdfedv1 "github.com/etcdfed/etcdfed/api/v1alpha1"
	"github.com/etcdfed/etcdfed/spoke/internal/spec"
)

// Action is what the spoke does about the member's pod.
type Action string

const (
	// Keep leaves the existing pod as it is (or, with no pod, does nothing
	// because Blocker says why a pod cannot be created yet).
	Keep Action = "Keep"
	// Create creates the pod.
	Create Action = "Create"
	// DeleteOldIncarnation deletes the pod of an earlier incarnation: the hub
	// raised spec.incarnation, an explicit decision to start the member anew.
	DeleteOldIncarnation Action = "DeleteOldIncarnation"
	// DeleteTerminated deletes a pod that will never run again (phase Failed
	// or Succeeded, as after an eviction) so that it is recreated on the same
	// volume. Only when a replacement can be created right away.
	DeleteTerminated Action = "DeleteTerminated"
	// Replace deletes a running pod built from an earlier EtcdMember spec
	// (image, version, etcd flags, TLS and CA trust, exposure or pod
	// settings changed by the hub, which rolls such changes one member at a
	// time; anything but spec.bootstrap and spec.disruption, see
	// MemberSpecHash), or one the hub asked to restart
	// (etcdfedv1.AnnotationRestart, once per token); it is recreated from
	// the current spec on the same volume.
	Replace Action = "Replace"
	// Conflict: a pod of that name exists that the member does not own. It
	// is left alone.
	Conflict Action = "Conflict"
)

// Blocker says why a pod cannot be created now.
type Blocker struct {
	Reason  string
	Message string
}

// Decision is Decide's answer.
type Decision struct {
	Action  Action
	Message string
	// Outdated is set with Keep when the pod differs from what Build gives
	// now although the hub did not change what the member runs (a spoke
	// upgrade renders it differently, or a field that restarts nothing
	// changed, such as spec.bootstrap's cluster ID once the ring formed):
	// the difference applies when the pod is next created.
	Outdated bool
}

// Decide says what to do about the member's pod given the observed pod (nil
// if none), the pod Build gives now (nil when blocker says why none can be
// built). It never deletes a pod because bootstrap is unset or something
// looks odd; only for a hub decision (a raised incarnation, a changed
// member spec) or a pod that cannot run again, and for the last two only
// when the replacement can be created right away.
func Decide(m *etcdfedv1.EtcdMember, pod *corev1.Pod, desired *corev1.Pod, blocker *Blocker) Decision {
	if pod == nil {
		if blocker != nil {
			return Decision{Action: Keep, Message: blocker.Message}
		}
		return Decision{Action: Create}
	}
	if !spec.OwnedBy(m, pod.Labels) {
		return Decision{Action: Conflict, Message: fmt.Sprintf("pod %s exists but is not this member's (cluster UID %q, member %q): it is left alone", pod.Name, pod.Labels[etcdfedv1.LabelClusterUID], pod.Labels[etcdfedv1.LabelMember])}
	}
	inc, ok := spec.Incarnation(pod.Labels)
	if !ok {
		return Decision{Action: Conflict, Message: fmt.Sprintf("pod %s has no valid %s label: it is left alone", pod.Name, etcdfedv1.LabelIncarnation)}
	}
	if pod.DeletionTimestamp != nil {
		return Decision{Action: Keep, Message: fmt.Sprintf("pod %s is terminating", pod.Name)}
	}
	switch {
	case inc < m.Spec.Incarnation:
		return Decision{Action: DeleteOldIncarnation, Message: fmt.Sprintf("pod %s runs incarnation %d, the member moved to incarnation %d", pod.Name, inc, m.Spec.Incarnation)}
	case inc > m.Spec.Incarnation:
		return Decision{Action: Keep, Message: fmt.Sprintf("pod %s runs incarnation %d, newer than spec.incarnation %d: it is left alone", pod.Name, inc, m.Spec.Incarnation)}
	}
	if pod.Status.Phase == corev1.PodFailed || pod.Status.Phase == corev1.PodSucceeded {
		if blocker != nil {
			return Decision{Action: Keep, Message: fmt.Sprintf("pod %s is %s and is kept until a replacement can start: %s", pod.Name, pod.Status.Phase, blocker.Message)}
		}
		return Decision{Action: DeleteTerminated, Message: fmt.Sprintf("pod %s is %s (%s) and will not run again", pod.Name, pod.Status.Phase, pod.Status.Reason)}
	}
	if token := m.Annotations[etcdfedv1.AnnotationRestart]; token != "" && pod.Annotations[etcdfedv1.AnnotationRestart] != token && desired != nil {
		// The hub asked for a restart in place (a member that hears no
		// leader after a partition healed): the pod is replaced once per
		// request; the one created next carries the token.
		return Decision{Action: Replace, Message: fmt.Sprintf("pod %s restarted at the hub's request %q (%s): the member answered but heard no leader", pod.Name, token, etcdfedv1.AnnotationRestart)}
	}
	if desired == nil {
		return Decision{Action: Keep}
	}
	podHash := pod.Annotations[AnnotationSpecHash]
	if podHash == desired.Annotations[AnnotationSpecHash] && containerImage(pod, ContainerEtcd) == m.Spec.Image {
		return Decision{Action: Keep}
	}
	if built := pod.Annotations[AnnotationMemberSpecHash]; built != "" && built != desired.Annotations[AnnotationMemberSpecHash] {
		return Decision{Action: Replace, Message: fmt.Sprintf("pod %s was built from an earlier member spec (image %s; now %s or other etcd or pod settings)", pod.Name, containerImage(pod, ContainerEtcd), m.Spec.Image)}
	}
	return Decision{Action: Keep, Outdated: true, Message: fmt.Sprintf("pod %s differs from what this spoke renders for the unchanged member spec (a spoke upgrade, or a change that restarts nothing such as spec.bootstrap once the ring formed): the difference applies when the pod is next created", pod.Name)}
}

func containerImage(pod *corev1.Pod, name string) string {
	for _, c := range pod.Spec.Containers {
		if c.Name == name {
			return c.Image
		}
	}
	return ""
}
