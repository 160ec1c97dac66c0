package etcdlog_test

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/etcdfed/etcdfed/spoke/etcdlog"
)

func TestPlanRead(t *testing.T) {
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	running := func(age time.Duration) corev1.ContainerStatus {
		return corev1.ContainerStatus{Name: "etcd", State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: metav1.NewTime(now.Add(-age))}}}
	}
	waiting := corev1.ContainerStatus{Name: "etcd", State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "CrashLoopBackOff"}},
		LastTerminationState: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 1}}}
	creating := corev1.ContainerStatus{Name: "etcd", State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "ContainerCreating"}}}
	pod := func(ready bool, cs ...corev1.ContainerStatus) *corev1.Pod {
		st := corev1.ConditionFalse
		if ready {
			st = corev1.ConditionTrue
		}
		return &corev1.Pod{Status: corev1.PodStatus{Phase: corev1.PodRunning, ContainerStatuses: cs,
			Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: st}}}}
	}
	tests := []struct {
		name string
		pod  *corev1.Pod
		want etcdlog.Plan
	}{
		{"ready: not read", pod(true, running(time.Hour)), etcdlog.Plan{Ready: true}},
		{"just started: wait out the warmup", pod(false, running(2*time.Second)), etcdlog.Plan{After: 3 * time.Second}},
		{"running past the warmup", pod(false, running(etcdlog.Warmup)), etcdlog.Plan{Read: true}},
		{"waiting to restart: its last run", pod(false, waiting), etcdlog.Plan{Read: true, Previous: true}},
		{"never started", pod(false, creating), etcdlog.Plan{}},
		{"no status for the container yet", pod(false), etcdlog.Plan{}},
		{"another container's status", pod(false, corev1.ContainerStatus{Name: "sidecar", State: running(time.Hour).State}), etcdlog.Plan{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := etcdlog.PlanRead(tt.pod, "etcd", now); got != tt.want {
				t.Errorf("PlanRead = %+v, want %+v", got, tt.want)
			}
		})
	}
}
