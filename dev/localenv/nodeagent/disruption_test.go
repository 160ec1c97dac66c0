package nodeagent

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

func TestBudgetStatus(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	ready := func(name string) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name}, Status: corev1.PodStatus{Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}}}
	}
	notReady := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p"}}
	deleting := ready("p")
	deleting.DeletionTimestamp = &metav1.Time{Time: now}
	pdb := func(minAvailable int32, disrupted map[string]metav1.Time) *policyv1.PodDisruptionBudget {
		v := intstr.FromInt32(minAvailable)
		return &policyv1.PodDisruptionBudget{ObjectMeta: metav1.ObjectMeta{Generation: 3},
			Spec: policyv1.PodDisruptionBudgetSpec{MinAvailable: &v}, Status: policyv1.PodDisruptionBudgetStatus{DisruptedPods: disrupted}}
	}
	pct := intstr.FromString("50%")
	for _, tc := range []struct {
		name string
		pdb  *policyv1.PodDisruptionBudget
		pods []*corev1.Pod
		want int32
	}{
		{"closed (minAvailable 1), pod ready", pdb(1, nil), []*corev1.Pod{ready("p")}, 0},
		{"granted (minAvailable 0), pod ready", pdb(0, nil), []*corev1.Pod{ready("p")}, 1},
		{"granted, pod not ready", pdb(0, nil), []*corev1.Pod{notReady}, 0},
		{"granted, pod being deleted", pdb(0, nil), []*corev1.Pod{deleting}, 0},
		{"granted, no pod", pdb(0, nil), nil, 0},
		{"granted, the pod an eviction just recorded", pdb(0, map[string]metav1.Time{"p": {Time: now}}), []*corev1.Pod{ready("p")}, 0},
		{"granted, a recorded eviction that expired", pdb(0, map[string]metav1.Time{"p": {Time: now.Add(-3 * time.Minute)}}), []*corev1.Pod{ready("p")}, 1},
		{"a percentage (needs controllers' scale): none", &policyv1.PodDisruptionBudget{Spec: policyv1.PodDisruptionBudgetSpec{MinAvailable: &pct}}, []*corev1.Pod{ready("p")}, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st := BudgetStatus(tc.pdb, tc.pods, now)
			if st.DisruptionsAllowed != tc.want || st.ObservedGeneration != tc.pdb.Generation {
				t.Fatalf("disruptionsAllowed %d observed %d, want %d observed %d", st.DisruptionsAllowed, st.ObservedGeneration, tc.want, tc.pdb.Generation)
			}
		})
	}
}
