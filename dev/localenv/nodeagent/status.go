package nodeagent

import (
	"context"
	"encoding/json"
	"reflect"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
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

func (w *podWorker) setVolumesErr(msg string) {
	w.mu.Lock()
	changed := w.volumesErr != msg
	w.volumesErr = msg
	w.mu.Unlock()
	if changed {
		if msg != "" {
			w.log.Info("Pod not ready to start", "why", msg)
		}
		w.markDirty()
	}
}

// statusLoop writes the pod status whenever it changed, until the worker
// is done.
func (w *podWorker) statusLoop() {
	defer close(w.flushed)
	var last *corev1.PodStatus
	retry := time.NewTimer(time.Hour)
	defer retry.Stop()
	for {
		select {
		case <-w.dirty:
		case <-retry.C:
		case <-w.done:
			return
		}
		w.mu.Lock()
		noWrites := w.noWrites
		w.mu.Unlock()
		if noWrites {
			continue
		}
		st := w.status()
		if last != nil && reflect.DeepEqual(*last, st) {
			continue
		}
		if err := w.writeStatus(st); err != nil {
			if apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
				continue // gone, or another pod by this name: syncPod stops us
			}
			w.log.V(1).Info("Writing pod status failed, retrying", "err", err.Error())
			retry.Reset(time.Second)
			continue
		}
		last = &st
		// Coalesce bursts of changes.
		time.Sleep(50 * time.Millisecond)
	}
}

func (w *podWorker) writeStatus(st corev1.PodStatus) error {
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"uid": w.uid}, "status": st})
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err = w.a.cs.CoreV1().Pods(w.ns).Patch(ctx, w.name, types.MergePatchType, patch, metav1.PatchOptions{}, "status")
	return err
}
