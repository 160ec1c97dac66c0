// Package budget is the spoke's component for a member's
// PodDisruptionBudget: one per member, selecting the member's pod of any
// incarnation, that blocks voluntary eviction (minAvailable 1) unless
// the hub has granted the member its one disruption
// (spec.disruption.allowed: minAvailable 0). minAvailable, not
// maxUnavailable: kube-controller-manager's disruption controller computes
// maxUnavailable from the scale of the pod's controller, and an EtcdMember
// has no scale subresource, so it would never allow an eviction; an
// integer minAvailable needs only the pods. The hub owns the ring's
// budget; the spoke only renders its grant (docs/architecture.md,
// "Operations on a running ring").
package budget

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	etcdfedv1 "github.com/etcdfed/etcdfed/api/v1alpha1"
	"github.com/etcdfed/etcdfed/spoke/internal/spec"
)

// Component is the value of the component label on the budget.
const Component = "budget"

// Name is the budget's name: the member's.
func Name(m *etcdfedv1.EtcdMember) string { return m.Name }

// Allowed reports whether the hub granted the member a disruption.
func Allowed(m *etcdfedv1.EtcdMember) bool {
	return m.Spec.Disruption != nil && m.Spec.Disruption.Allowed
}

// Build renders the member's budget.
func Build(m *etcdfedv1.EtcdMember) *policyv1.PodDisruptionBudget {
	minAvailable := intstr.FromInt32(1)
	if Allowed(m) {
		minAvailable = intstr.FromInt32(0)
	}
	return &policyv1.PodDisruptionBudget{
		ObjectMeta: metav1.ObjectMeta{Namespace: m.Namespace, Name: Name(m), Labels: spec.Labels(m, Component, m.Spec.Incarnation)},
		Spec: policyv1.PodDisruptionBudgetSpec{
			// The default unhealthy-pod policy (IfHealthyBudget): a pod
			// that is not ready is not evicted either, even when granted.
			// A readiness probe that fails under load says nothing sure
			// about the member, and a second member down is what the
			// budget is for.
			MinAvailable: &minAvailable,
			Selector:     &metav1.LabelSelector{MatchLabels: spec.PodSelector(m)},
		},
	}
}

// Action is what the budget needs.
type Action string

const (
	// Keep: the budget is as the member's spec wants it.
	Keep Action = "Keep"
	// Create: the member has no budget yet.
	Create Action = "Create"
	// Update: the budget differs from Build's in the grant, a
	// maxUnavailable set, the selector, the unhealthy-pod eviction policy
	// or the labels.
	Update Action = "Update"
	// Conflict: a budget of the member's name is not the member's.
	Conflict Action = "Conflict"
)

// Decision is Decide's answer; Object is the object to create or the
// updated one.
type Decision struct {
	Action  Action
	Object  *policyv1.PodDisruptionBudget
	Message string
}

// Decide compares the budget with what the member's spec wants.
func Decide(m *etcdfedv1.EtcdMember, cur *policyv1.PodDisruptionBudget) Decision {
	want := Build(m)
	if cur == nil {
		return Decision{Action: Create, Object: want, Message: message(m)}
	}
	if !spec.OwnedBy(m, cur.Labels) {
		return Decision{Action: Conflict, Message: fmt.Sprintf("PodDisruptionBudget %s exists and is not this member's", cur.Name)}
	}
	if equality.Semantic.DeepEqual(cur.Spec.MinAvailable, want.Spec.MinAvailable) && cur.Spec.MaxUnavailable == nil &&
		equality.Semantic.DeepEqual(cur.Spec.Selector, want.Spec.Selector) &&
		equality.Semantic.DeepEqual(cur.Spec.UnhealthyPodEvictionPolicy, want.Spec.UnhealthyPodEvictionPolicy) &&
		equality.Semantic.DeepEqual(cur.Labels, want.Labels) {
		return Decision{Action: Keep}
	}
	upd := cur.DeepCopy()
	upd.Labels = want.Labels
	upd.Spec.MinAvailable, upd.Spec.MaxUnavailable = want.Spec.MinAvailable, nil
	upd.Spec.Selector = want.Spec.Selector
	upd.Spec.UnhealthyPodEvictionPolicy = want.Spec.UnhealthyPodEvictionPolicy
	return Decision{Action: Update, Object: upd, Message: message(m)}
}

func message(m *etcdfedv1.EtcdMember) string {
	if Allowed(m) {
		return "the hub granted this member the ring's one disruption: one eviction allowed"
	}
	return "evictions blocked: the hub grants one disruption at a time across the ring"
}

// Requested says whether the node of the member's pod is being drained:
// cordoned (spec.unschedulable), the first step of kubectl drain.
func Requested(node *corev1.Node) (bool, string) {
	if node == nil || !node.Spec.Unschedulable {
		return false, ""
	}
	return true, fmt.Sprintf("node %s is cordoned", node.Name)
}
