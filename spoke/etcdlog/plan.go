package etcdlog

import (
	"time"

	corev1 "k8s.io/api/core/v1"
)

// Warmup is how long etcd runs before its log is first read: its first
// peer connections, and their rejections, happen within it.
const Warmup = 5 * time.Second

// Plan says what to do about a member pod's etcd log now.
type Plan struct {
	// Ready: the pod is ready; its log is not read.
	Ready bool
	// Read: read the log now; Previous: of the container's last
	// terminated run (it waits to restart).
	Read, Previous bool
	// After: nothing to read yet; look again after this long (0: when the
	// pod changes).
	After time.Duration
}

// PlanRead decides from a running pod alone whether its etcd container's
// log is worth reading now: not while the pod is ready; a running
// container once it ran Warmup; a container waiting to restart, its last
// run. It is pure.
func PlanRead(p *corev1.Pod, container string, now time.Time) Plan {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue {
			return Plan{Ready: true}
		}
	}
	for _, cs := range p.Status.ContainerStatuses {
		if cs.Name != container {
			continue
		}
		switch {
		case cs.State.Running != nil:
			if age := now.Sub(cs.State.Running.StartedAt.Time); age < Warmup {
				return Plan{After: Warmup - age}
			}
			return Plan{Read: true}
		case cs.LastTerminationState.Terminated != nil:
			return Plan{Read: true, Previous: true}
		}
	}
	return Plan{}
}
