package member

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/etcdfed/etcdfed/spoke/component/pod"
)

// A prepare-data init container that keeps failing is the pod's failure, with
// what it said; one still running, or the DNS wait, is not.
func TestContainerFailingRestore(t *testing.T) {
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "main-1"}}
	said := "restore-snapshot: snapshot s3://b/x.db: etcdsnapshot: invalid snapshot: sha256 of the database does not match"
	p.Status.InitContainerStatuses = []corev1.ContainerStatus{{
		Name: pod.ContainerPrepareData, Image: "etcdfed:v1", RestartCount: 2,
		State:                corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "CrashLoopBackOff", Message: "back-off 20s"}},
		LastTerminationState: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 1, Reason: "Error", Message: said}},
	}}
	got := containerFailing(p)
	for _, want := range []string{"container prepare-data of pod main-1", "CrashLoopBackOff", "exited with code 1", said} {
		if !strings.Contains(got, want) {
			t.Errorf("containerFailing = %q, want it to say %q", got, want)
		}
	}
	p.Status.InitContainerStatuses[0].State = corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 1, Message: said}}
	if got := containerFailing(p); !strings.Contains(got, said) {
		t.Errorf("a restore that just exited 1: %q", got)
	}
	p.Status.InitContainerStatuses[0].State = corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}
	if got := containerFailing(p); got != "" {
		t.Errorf("a running restore is failing: %q", got)
	}
	p.Status.InitContainerStatuses = []corev1.ContainerStatus{{Name: pod.ContainerWaitDNS, State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 1}}}}
	if got := containerFailing(p); got != "" {
		t.Errorf("the DNS wait timing out is failing: %q", got)
	}
}
