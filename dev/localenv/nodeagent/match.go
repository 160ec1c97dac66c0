package nodeagent

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"
	"k8s.io/klog/v2"
)

// nodeMatches reports whether node satisfies the pod's nodeSelector and
// required node affinity, and if not, why.
func nodeMatches(pod *corev1.Pod, node *corev1.Node) (bool, string) {
	if len(pod.Spec.NodeSelector) > 0 {
		if !labels.SelectorFromSet(pod.Spec.NodeSelector).Matches(labels.Set(node.Labels)) {
			return false, "node(s) didn't match Pod's node selector"
		}
	}
	if a := pod.Spec.Affinity; a != nil && a.NodeAffinity != nil && a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution != nil {
		ok, err := selectorMatches(a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution, node)
		if err != nil {
			return false, fmt.Sprintf("invalid node affinity: %v", err)
		}
		if !ok {
			return false, "node(s) didn't match Pod's node affinity/selector"
		}
	}
	// A cordoned node takes no new pods (the scheduler's NodeUnschedulable
	// plugin), unless they tolerate the taint a cordon stands for.
	if node.Spec.Unschedulable && !tolerates(pod.Spec.Tolerations, corev1.Taint{Key: corev1.TaintNodeUnschedulable, Effect: corev1.TaintEffectNoSchedule}) {
		return false, "node(s) were unschedulable"
	}
	for _, taint := range node.Spec.Taints {
		if taint.Effect != corev1.TaintEffectNoSchedule && taint.Effect != corev1.TaintEffectNoExecute {
			continue
		}
		if !tolerates(pod.Spec.Tolerations, taint) {
			return false, fmt.Sprintf("node(s) had untolerated taint {%s: %s}", taint.Key, taint.Value)
		}
	}
	return true, ""
}

// selectorMatches evaluates a NodeSelector (terms ORed, requirements
// ANDed) against a node, as the scheduler does. An empty term matches
// nothing.
func selectorMatches(sel *corev1.NodeSelector, node *corev1.Node) (bool, error) {
	for _, term := range sel.NodeSelectorTerms {
		if len(term.MatchExpressions) == 0 && len(term.MatchFields) == 0 {
			continue
		}
		ok, err := termMatches(term, node)
		if err != nil {
			return false, err
		}
		if ok {
			return true, nil
		}
	}
	return false, nil
}

func termMatches(term corev1.NodeSelectorTerm, node *corev1.Node) (bool, error) {
	if len(term.MatchExpressions) > 0 {
		sel, err := requirementsSelector(term.MatchExpressions)
		if err != nil {
			return false, err
		}
		if !sel.Matches(labels.Set(node.Labels)) {
			return false, nil
		}
	}
	if len(term.MatchFields) > 0 {
		for _, r := range term.MatchFields {
			if r.Key != "metadata.name" {
				return false, fmt.Errorf("unsupported field %q in matchFields", r.Key)
			}
		}
		sel, err := requirementsSelector(term.MatchFields)
		if err != nil {
			return false, err
		}
		if !sel.Matches(labels.Set{"metadata.name": node.Name}) {
			return false, nil
		}
	}
	return true, nil
}

func requirementsSelector(reqs []corev1.NodeSelectorRequirement) (labels.Selector, error) {
	sel := labels.NewSelector()
	for _, r := range reqs {
		var op selection.Operator
		switch r.Operator {
		case corev1.NodeSelectorOpIn:
			op = selection.In
		case corev1.NodeSelectorOpNotIn:
			op = selection.NotIn
		case corev1.NodeSelectorOpExists:
			op = selection.Exists
		case corev1.NodeSelectorOpDoesNotExist:
			op = selection.DoesNotExist
		case corev1.NodeSelectorOpGt:
			op = selection.GreaterThan
		case corev1.NodeSelectorOpLt:
			op = selection.LessThan
		default:
			return nil, fmt.Errorf("unknown operator %q", r.Operator)
		}
		req, err := labels.NewRequirement(r.Key, op, r.Values)
		if err != nil {
			return nil, err
		}
		sel = sel.Add(*req)
	}
	return sel, nil
}

func tolerates(tols []corev1.Toleration, taint corev1.Taint) bool {
	for i := range tols {
		if tols[i].ToleratesTaint(klog.Background(), &taint, true) {
			return true
		}
	}
	return false
}
