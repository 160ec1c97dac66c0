package nodeagent

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestNodeMatches(t *testing.T) {
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1", Labels: map[string]string{
		"topology.kubernetes.io/zone": "zone-a", "kubernetes.io/hostname": "n1"}}}
	zoneTerm := func(op corev1.NodeSelectorOperator, vals ...string) *corev1.Affinity {
		return &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{
			NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{{
				Key: "topology.kubernetes.io/zone", Operator: op, Values: vals}}}}}}}
	}
	for _, tc := range []struct {
		name string
		spec corev1.PodSpec
		want bool
	}{
		{"no constraints", corev1.PodSpec{}, true},
		{"selector match", corev1.PodSpec{NodeSelector: map[string]string{"topology.kubernetes.io/zone": "zone-a"}}, true},
		{"selector mismatch", corev1.PodSpec{NodeSelector: map[string]string{"topology.kubernetes.io/zone": "zone-b"}}, false},
		{"affinity In", corev1.PodSpec{Affinity: zoneTerm(corev1.NodeSelectorOpIn, "zone-b", "zone-a")}, true},
		{"affinity In other", corev1.PodSpec{Affinity: zoneTerm(corev1.NodeSelectorOpIn, "zone-b")}, false},
		{"affinity NotIn", corev1.PodSpec{Affinity: zoneTerm(corev1.NodeSelectorOpNotIn, "zone-a")}, false},
		{"affinity Exists", corev1.PodSpec{Affinity: zoneTerm(corev1.NodeSelectorOpExists)}, true},
		{"empty term matches nothing", corev1.PodSpec{Affinity: &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{
			RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{}}}}}}, false},
		{"matchFields name", corev1.PodSpec{Affinity: &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{
			RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
				MatchFields: []corev1.NodeSelectorRequirement{{Key: "metadata.name", Operator: corev1.NodeSelectorOpIn, Values: []string{"n1"}}}}}}}}}, true},
	} {
		pod := &corev1.Pod{Spec: tc.spec}
		if got, why := nodeMatches(pod, node); got != tc.want {
			t.Errorf("%s: got %v (%s), want %v", tc.name, got, why, tc.want)
		}
	}

	tainted := node.DeepCopy()
	tainted.Spec.Taints = []corev1.Taint{{Key: "node.kubernetes.io/unreachable", Effect: corev1.TaintEffectNoSchedule}}
	if ok, _ := nodeMatches(&corev1.Pod{}, tainted); ok {
		t.Errorf("pod without toleration scheduled on a tainted node")
	}
	tol := &corev1.Pod{Spec: corev1.PodSpec{Tolerations: []corev1.Toleration{{Key: "node.kubernetes.io/unreachable", Operator: corev1.TolerationOpExists}}}}
	if ok, why := nodeMatches(tol, tainted); !ok {
		t.Errorf("tolerating pod not scheduled: %s", why)
	}
}
