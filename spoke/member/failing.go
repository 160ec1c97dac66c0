package member

import (
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/etcdfed/etcdfed/spoke/component/pod"
)

// failingReasons are the waiting reasons of a container that cannot run
// as specified: the kubelet (or the local node) will not get further
// without a change of spec, or it keeps crashing.
var failingReasons = map[string]bool{
	"CreateContainerError":       true,
	"CreateContainerConfigError": true,
	"RunContainerError":          true,
	"CrashLoopBackOff":           true,
	"ErrImagePull":               true,
	"ImagePullBackOff":           true,
	"InvalidImageName":           true,
	"ErrImageNeverPull":          true,
}

// containerFailing says why the pod's etcd container, or its prepare-data
// init container (a refused snapshot, data of another cluster), cannot run
// (its waiting reason and message, and how its last run ended, with what
// it said), "" when neither is stuck. The hub halts a rollout on it
// (PodReady reason ContainerFailing) and names the member of a restore
// that fails.
func containerFailing(p *corev1.Pod) string {
	for _, cs := range p.Status.InitContainerStatuses {
		if cs.Name != pod.ContainerPrepareData {
			continue
		}
		if msg := failing(p, cs); msg != "" {
			return msg
		}
		if t := cs.State.Terminated; t != nil && t.ExitCode != 0 {
			return fmt.Sprintf("container %s of pod %s (image %s) exited with code %d%s", cs.Name, p.Name, cs.Image, t.ExitCode, said(t))
		}
	}
	for _, cs := range p.Status.ContainerStatuses {
		if cs.Name != pod.ContainerEtcd {
			continue
		}
		if msg := failing(p, cs); msg != "" {
			return msg
		}
	}
	return ""
}

// failing describes a container waiting for a reason that will not pass
// by itself, "" otherwise.
func failing(p *corev1.Pod, cs corev1.ContainerStatus) string {
	if cs.State.Waiting == nil || !failingReasons[cs.State.Waiting.Reason] {
		return ""
	}
	msg := fmt.Sprintf("container %s of pod %s (image %s): %s", cs.Name, p.Name, cs.Image, cs.State.Waiting.Reason)
	if m := cs.State.Waiting.Message; m != "" {
		msg += ": " + m
	}
	if t := cs.LastTerminationState.Terminated; t != nil {
		msg += fmt.Sprintf("; its last run exited with code %d (%s) after %d restart(s)%s", t.ExitCode, t.Reason, cs.RestartCount, said(t))
	}
	return msg
}

// said is the container's termination message (the tail of its log with
// FallbackToLogsOnError), bounded.
func said(t *corev1.ContainerStateTerminated) string {
	m := strings.TrimSpace(t.Message)
	if m == "" {
		return ""
	}
	const max = 1024
	if len(m) > max {
		m = "..." + m[len(m)-max:]
	}
	return ": " + m
}
