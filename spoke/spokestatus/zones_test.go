package spokestatus

import (
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func node(zone string, ready corev1.ConditionStatus, cordoned bool) corev1.Node {
	n := corev1.Node{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{}}, Spec: corev1.NodeSpec{Unschedulable: cordoned}}
	if zone != "" {
		n.Labels[corev1.LabelTopologyZone] = zone
	}
	if ready != "" {
		n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: ready}}
	}
	return n
}

// A zone takes no new pods when none of its nodes is Ready and uncordoned;
// a cluster without zones is the zone "".
func TestZoneStates(t *testing.T) {
	yes, no, unknown := corev1.ConditionTrue, corev1.ConditionFalse, corev1.ConditionUnknown
	for _, tc := range []struct {
		name                 string
		nodes                []corev1.Node
		zones, unschedulable []string
	}{
		{"no nodes", nil, nil, nil},
		{"one open zone", []corev1.Node{node("a", yes, false)}, []string{"a"}, nil},
		{"a cordoned zone", []corev1.Node{node("a", yes, false), node("b", yes, true)}, []string{"a", "b"}, []string{"b"}},
		{"one node of two cordoned", []corev1.Node{node("b", yes, true), node("b", yes, false)}, []string{"b"}, nil},
		{"a zone not Ready", []corev1.Node{node("a", no, false), node("a", unknown, false), node("b", yes, false)}, []string{"a", "b"}, []string{"a"}},
		{"no Ready condition yet", []corev1.Node{node("a", "", false)}, []string{"a"}, []string{"a"}},
		{"every zone closed", []corev1.Node{node("a", yes, true), node("b", unknown, false)}, []string{"a", "b"}, []string{"a", "b"}},
		{"without zones, open", []corev1.Node{node("", yes, false)}, nil, nil},
		{"without zones, closed", []corev1.Node{node("", yes, true), node("", no, false)}, nil, []string{""}},
		{"a node without a zone among zones", []corev1.Node{node("a", yes, false), node("", no, false)}, []string{"a"}, nil},
	} {
		zones, closed := zoneStates(tc.nodes)
		if !slices.Equal(zones, tc.zones) || !slices.Equal(closed, tc.unschedulable) {
			t.Errorf("%s: zones %q, unschedulable %q; want %q, %q", tc.name, zones, closed, tc.zones, tc.unschedulable)
		}
	}
}
