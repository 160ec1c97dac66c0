package member

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	etcdfedv1 "github.com/etcdfed/etcdfed/api/v1alpha1"
)

// A learner, or a pod just started whose etcd gives no view yet, is read
// every JoiningStatusInterval; a voter, or a pod without a view for over a
// minute, at the normal interval.
func TestJoining(t *testing.T) {
	now := time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC)
	started := func(ago time.Duration) *corev1.Pod {
		return &corev1.Pod{Status: corev1.PodStatus{StartTime: &metav1.Time{Time: now.Add(-ago)}}}
	}
	for _, tc := range []struct {
		name string
		view *etcdfedv1.MemberEtcdView
		pod  *corev1.Pod
		want bool
	}{
		{"learner", &etcdfedv1.MemberEtcdView{IsLearner: true}, started(time.Hour), true},
		{"voter", &etcdfedv1.MemberEtcdView{}, started(time.Second), false},
		{"no view, pod started 5s ago", nil, started(5 * time.Second), true},
		{"no view for over a minute", nil, started(61 * time.Second), false},
		{"no view, no start time", nil, &corev1.Pod{}, false},
	} {
		if got := joining(tc.view, tc.pod, now); got != tc.want {
			t.Errorf("%s: joining %v, want %v", tc.name, got, tc.want)
		}
	}
}
