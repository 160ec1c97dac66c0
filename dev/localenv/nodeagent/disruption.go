package nodeagent

import (
	"context"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// The local environment runs no kube-controller-manager, so no disruption
// controller fills PodDisruptionBudget status, and the Eviction API (the
// apiserver's own logic) refuses every eviction a budget covers. The node
// agent stands in for that controller, for the budgets Kubernetes computes
// from pods alone (an integer minAvailable, which is what etcdfed's spoke
// writes): expected pods, healthy pods, disruptionsAllowed, the pods an
// eviction recorded as disrupted, observedGeneration. A budget with
// maxUnavailable or a percentage needs its pods' controllers' scale; it
// gets disruptionsAllowed 0 here, as kube-controller-manager gives a
// budget whose controller it cannot find.

// budgetSyncInterval is how often budgets are brought up to date.
const budgetSyncInterval = time.Second

// disruptedPodTimeout is how long a pod an eviction recorded stays
// counted as disrupted without being deleted (the controller's
// DeletionTimeout).
const disruptedPodTimeout = 2 * time.Minute

func (a *Agent) disruptionBudgets(ctx context.Context) {
	t := time.NewTicker(budgetSyncInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			a.syncBudgets(ctx)
		}
	}
}

func (a *Agent) syncBudgets(ctx context.Context) {
	list, err := a.cs.PolicyV1().PodDisruptionBudgets("").List(ctx, metav1.ListOptions{})
	if err != nil {
		a.log.V(1).Info("Listing PodDisruptionBudgets", "err", err.Error())
		return
	}
	for i := range list.Items {
		pdb := &list.Items[i]
		sel, err := metav1.LabelSelectorAsSelector(pdb.Spec.Selector)
		if err != nil || pdb.Spec.Selector == nil {
			sel = labels.Nothing()
		}
		pods, err := a.pods.Pods(pdb.Namespace).List(sel)
		if err != nil {
			continue
		}
		st := BudgetStatus(pdb, pods, time.Now())
		if equality.Semantic.DeepEqual(st, pdb.Status) {
			continue
		}
		upd := pdb.DeepCopy()
		upd.Status = st
		// Optimistic: an eviction that updated the status meanwhile wins,
		// and the next sync starts from its answer.
		if _, err := a.cs.PolicyV1().PodDisruptionBudgets(pdb.Namespace).UpdateStatus(ctx, upd, metav1.UpdateOptions{}); err != nil && !apierrors.IsConflict(err) && !apierrors.IsNotFound(err) {
			a.log.V(1).Info("Updating PodDisruptionBudget status", "pdb", pdb.Namespace+"/"+pdb.Name, "err", err.Error())
		}
	}
}

// BudgetStatus computes a budget's status as kube-controller-manager's
// disruption controller does for an integer minAvailable.
func BudgetStatus(pdb *policyv1.PodDisruptionBudget, pods []*corev1.Pod, now time.Time) policyv1.PodDisruptionBudgetStatus {
	st := policyv1.PodDisruptionBudgetStatus{ObservedGeneration: pdb.Generation, Conditions: pdb.Status.Conditions}
	// Pods an eviction recorded, while they exist and are not deleted yet.
	exists := map[string]*corev1.Pod{}
	for _, p := range pods {
		exists[p.Name] = p
	}
	for name, at := range pdb.Status.DisruptedPods {
		p := exists[name]
		if p == nil || p.DeletionTimestamp != nil || !at.Add(disruptedPodTimeout).After(now) {
			continue
		}
		if st.DisruptedPods == nil {
			st.DisruptedPods = map[string]metav1.Time{}
		}
		st.DisruptedPods[name] = at
	}
	for _, p := range pods {
		if p.DeletionTimestamp != nil {
			continue
		}
		if _, disrupted := st.DisruptedPods[p.Name]; disrupted {
			continue
		}
		if podReady(p) {
			st.CurrentHealthy++
		}
	}
	st.ExpectedPods = int32(len(pods))
	ok := pdb.Spec.MinAvailable != nil && pdb.Spec.MaxUnavailable == nil && pdb.Spec.MinAvailable.Type == intstr.Int
	if ok {
		st.DesiredHealthy = pdb.Spec.MinAvailable.IntVal
		if st.ExpectedPods > 0 && st.CurrentHealthy > st.DesiredHealthy {
			st.DisruptionsAllowed = st.CurrentHealthy - st.DesiredHealthy
		}
	}
	cond := metav1.Condition{Type: policyv1.DisruptionAllowedCondition, Status: metav1.ConditionFalse, Reason: policyv1.InsufficientPodsReason,
		ObservedGeneration: pdb.Generation, LastTransitionTime: metav1.NewTime(now)}
	switch {
	case !ok:
		cond.Reason, cond.Message = policyv1.SyncFailedReason, "the local environment computes only an integer minAvailable"
	case st.DisruptionsAllowed > 0:
		cond.Status, cond.Reason = metav1.ConditionTrue, policyv1.SufficientPodsReason
	}
	if prev := meta.FindStatusCondition(st.Conditions, cond.Type); prev != nil && prev.Status == cond.Status {
		cond.LastTransitionTime = prev.LastTransitionTime
	}
	st.Conditions = nil
	meta.SetStatusCondition(&st.Conditions, cond)
	return st
}

func podReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}
