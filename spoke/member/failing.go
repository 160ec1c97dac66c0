package member

import (
	"fmt"

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

// containerFailing says why the pod's etcd container cannot run (its
// waiting reason and message, and how its last run ended), "" when it is
// not stuck. The hub halts a rollout on it (PodReady reason
// ContainerFailing).
func containerFailing(p *corev1.Pod) string {
	for _, cs := range p.Status.ContainerStatuses {
		if cs.Name != pod.ContainerEtcd || cs.State.Waiting == nil || !failingReasons[cs.State.Waiting.Reason] {
			continue
		}
		msg := fmt.Sprintf("container %s of pod %s (image %s): %s", cs.Name, p.Name, cs.Image, cs.State.Waiting.Reason)
		if m := cs.State.Waiting.Message; m != "" {
			msg += ": " + m
		}
		if t := cs.LastTerminationState.Terminated; t != nil {
			msg += fmt.Sprintf("; its last run exited with code %d (%s) after %d restart(s)", t.ExitCode, t.Reason, cs.RestartCount)
		}
		return msg
	}
	return ""
}
