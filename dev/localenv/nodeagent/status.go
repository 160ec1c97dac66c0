package nodeagent

import (
	"strconv"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// status computes the pod status from the worker's state. Call without
// holding w.mu.
func (w *podWorker) status() corev1.PodStatus {
	w.mu.Lock()
	defer w.mu.Unlock()
	st := corev1.PodStatus{
		HostIP:    w.node.IP.String(),
		HostIPs:   []corev1.HostIP{{IP: w.node.IP.String()}},
		StartTime: w.startTime,
		QOSClass:  w.pod.Status.QOSClass,
	}
	if w.ip.IsValid() {
		st.PodIP = w.ip.String()
		st.PodIPs = []corev1.PodIP{{IP: w.ip.String()}}
	}
	for _, c := range w.inits {
		st.InitContainerStatuses = append(st.InitContainerStatuses, w.containerStatus(c))
	}
	anyRan := false
	allReady := len(w.ctrs) > 0
	for _, c := range w.ctrs {
		cs := w.containerStatus(c)
		st.ContainerStatuses = append(st.ContainerStatuses, cs)
		if c.ran {
			anyRan = true
		}
		if !cs.Ready {
			allReady = false
		}
	}
	switch {
	case w.finalPhase != "":
		st.Phase = w.finalPhase
	case w.initialized && anyRan:
		st.Phase = corev1.PodRunning
	default:
		st.Phase = corev1.PodPending
	}
	if w.volumesErr != "" {
		st.Message = w.volumesErr
		for i := range st.ContainerStatuses {
			if st.ContainerStatuses[i].State.Waiting != nil && st.ContainerStatuses[i].State.Waiting.Reason == "ContainerCreating" {
				st.ContainerStatuses[i].State.Waiting.Message = w.volumesErr
			}
		}
	}
	cond := func(t corev1.PodConditionType, ok bool, reason string) corev1.PodCondition {
		s := corev1.ConditionFalse
		if ok {
			s = corev1.ConditionTrue
			reason = ""
		}
		mark, seen := w.condSince[t]
		if !seen || mark.status != s {
			mark = condMark{status: s, since: metav1.Now()}
			// Keep what the API had when this is a restarted worker.
			for _, old := range w.pod.Status.Conditions {
				if old.Type == t && old.Status == s {
					mark.since = old.LastTransitionTime
				}
			}
			w.condSince[t] = mark
		}
		return corev1.PodCondition{Type: t, Status: s, Reason: reason, LastTransitionTime: mark.since}
	}
	ready := allReady && st.Phase == corev1.PodRunning
	st.Conditions = []corev1.PodCondition{
		cond(corev1.PodReadyToStartContainers, w.ip.IsValid() && w.volumesErr == "", ""),
		cond(corev1.PodInitialized, w.initialized, "ContainersNotInitialized"),
		cond(corev1.ContainersReady, ready, "ContainersNotReady"),
		cond(corev1.PodReady, ready, "ContainersNotReady"),
		cond(corev1.PodScheduled, true, ""),
	}
	return st
}

func (w *podWorker) containerStatus(c *ctr) corev1.ContainerStatus {
	started := c.started && c.state.Running != nil
	cs := corev1.ContainerStatus{
		Name:                 c.spec.Name,
		Image:                c.spec.Image,
		ImageID:              "local://" + c.binary,
		Ready:                c.ready && c.state.Running != nil,
		Started:              &started,
		RestartCount:         c.restarts,
		State:                c.state,
		LastTerminationState: c.last,
	}
	if c.pid != 0 {
		cs.ContainerID = "local://" + strconv.Itoa(c.pid)
	} else if c.state.Terminated != nil {
		cs.ContainerID = c.state.Terminated.ContainerID
	}
	return cs
}
