package nodeagent

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// schedule binds a pending pod to one of the agent's nodes, provisioning
// the pod's unbound claims in that node's zone first. When no node fits,
// the pod gets PodScheduled=False with the reasons, as from the scheduler.
func (a *Agent) schedule(ctx context.Context, pod *corev1.Pod) error {
	if pod.DeletionTimestamp != nil {
		return nil
	}
	nodes, err := a.cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{LabelSelector: LocalNodeLabel + "=true"})
	if err != nil {
		return fmt.Errorf("list nodes: %w", err)
	}
	unbound, volumeTerms, why, err := a.claimsOf(ctx, pod)
	if err != nil {
		return err
	}
	if why != "" {
		return a.unschedulable(ctx, pod, why)
	}
	fits, why := a.fittingNodes(pod, nodes.Items, volumeTerms)
	if len(fits) == 0 {
		return a.unschedulable(ctx, pod, why)
	}
	// Spread: the node with the fewest pods, then by name.
	counts := a.podsPerNode()
	sort.Slice(fits, func(i, j int) bool {
		if counts[fits[i].Name] != counts[fits[j].Name] {
			return counts[fits[i].Name] < counts[fits[j].Name]
		}
		return fits[i].Name < fits[j].Name
	})
	target := fits[0]
	st, _ := a.node(target.Name)
	for _, pvc := range unbound {
		if err := a.provision(ctx, pvc, st); err != nil {
			return err
		}
	}
	a.log.Info("Binding pod", "pod", pod.Namespace+"/"+pod.Name, "node", target.Name, "zone", st.Zone)
	err = a.cs.CoreV1().Pods(pod.Namespace).Bind(ctx, &corev1.Binding{
		ObjectMeta: metav1.ObjectMeta{Name: pod.Name, Namespace: pod.Namespace, UID: pod.UID},
		Target:     corev1.ObjectReference{Kind: "Node", Name: target.Name},
	}, metav1.CreateOptions{})
	if apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
		return nil // gone or bound meanwhile
	}
	if err != nil {
		return fmt.Errorf("bind pod %s/%s: %w", pod.Namespace, pod.Name, err)
	}
	return nil
}

// claimsOf reads the pod's claims: the unbound ones (to provision in the
// chosen node's zone) and the node topology their bound volumes demand.
// why says, as the scheduler would, why a claim keeps the pod from
// scheduling at all.
func (a *Agent) claimsOf(ctx context.Context, pod *corev1.Pod) (unbound []*corev1.PersistentVolumeClaim, volumeTerms []*corev1.NodeSelector, why string, err error) {
	for _, v := range pod.Spec.Volumes {
		if v.PersistentVolumeClaim == nil {
			continue
		}
		pvc, err := a.pvcs.PersistentVolumeClaims(pod.Namespace).Get(v.PersistentVolumeClaim.ClaimName)
		if apierrors.IsNotFound(err) {
			return nil, nil, fmt.Sprintf("persistentvolumeclaim %q not found", v.PersistentVolumeClaim.ClaimName), nil
		}
		if err != nil {
			return nil, nil, "", err
		}
		if pvc.DeletionTimestamp != nil {
			return nil, nil, fmt.Sprintf("persistentvolumeclaim %q is being deleted", pvc.Name), nil
		}
		if pvc.Spec.VolumeName == "" {
			if why := a.canProvision(ctx, pvc); why != "" {
				return nil, nil, why, nil
			}
			unbound = append(unbound, pvc)
			continue
		}
		pv, err := a.pvs.Get(pvc.Spec.VolumeName)
		if err != nil {
			return nil, nil, fmt.Sprintf("persistentvolume %q of claim %q: %v", pvc.Spec.VolumeName, pvc.Name, err), nil
		}
		if pv.Spec.NodeAffinity != nil && pv.Spec.NodeAffinity.Required != nil {
			volumeTerms = append(volumeTerms, pv.Spec.NodeAffinity.Required)
		}
	}
	return unbound, volumeTerms, "", nil
}

// fittingNodes returns the agent's nodes the pod fits on: not failed,
// matching the pod's node selection and its volumes' topology. When none
// does, it says why, per node, as the scheduler does.
func (a *Agent) fittingNodes(pod *corev1.Pod, nodes []corev1.Node, volumeTerms []*corev1.NodeSelector) ([]*corev1.Node, string) {
	var fits []*corev1.Node
	reasons := map[string]int{}
	for i := range nodes {
		node := &nodes[i]
		st, ours := a.node(node.Name)
		if !ours {
			continue
		}
		if st.failed {
			reasons["node(s) were unreachable (zone failed)"]++
			continue
		}
		if ok, why := nodeMatches(pod, node); !ok {
			reasons[why]++
			continue
		}
		volOK := true
		for _, term := range volumeTerms {
			if ok, _ := selectorMatches(term, node); !ok {
				volOK = false
			}
		}
		if !volOK {
			reasons["node(s) had volume node affinity conflict"]++
			continue
		}
		fits = append(fits, node)
	}
	if len(fits) > 0 {
		return fits, ""
	}
	var parts []string
	for why, n := range reasons {
		parts = append(parts, fmt.Sprintf("%d %s", n, why))
	}
	sort.Strings(parts)
	return nil, fmt.Sprintf("0/%d nodes are available: %s.", len(nodes), strings.Join(parts, ", "))
}

func (a *Agent) podsPerNode() map[string]int {
	out := map[string]int{}
	pods, _ := a.pods.List(everything)
	for _, p := range pods {
		if p.Spec.NodeName != "" && p.Status.Phase != corev1.PodSucceeded && p.Status.Phase != corev1.PodFailed {
			out[p.Spec.NodeName]++
		}
	}
	return out
}

func (a *Agent) unschedulable(ctx context.Context, pod *corev1.Pod, msg string) error {
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse && c.Message == msg {
			return nil
		}
	}
	a.log.V(1).Info("Pod unschedulable", "pod", pod.Namespace+"/"+pod.Name, "why", msg)
	patch, _ := json.Marshal(map[string]any{
		"metadata": map[string]any{"uid": pod.UID},
		"status": map[string]any{
			"phase": corev1.PodPending,
			"conditions": []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionFalse,
				Reason: corev1.PodReasonUnschedulable, Message: msg, LastTransitionTime: metav1.Now()}},
		},
	})
	_, err := a.cs.CoreV1().Pods(pod.Namespace).Patch(ctx, pod.Name, types.MergePatchType, patch, metav1.PatchOptions{}, "status")
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}

// storageClassFor returns the claim's class ("" when the claim asks for
// none).
func (a *Agent) storageClassFor(ctx context.Context, pvc *corev1.PersistentVolumeClaim) (*storagev1.StorageClass, string) {
	name := ""
	if pvc.Spec.StorageClassName != nil {
		name = *pvc.Spec.StorageClassName
	} else {
		// The DefaultStorageClass admission plugin normally sets it; a
		// claim created before our class existed has none.
		name = a.cfg.StorageClassName
	}
	if name == "" {
		return nil, fmt.Sprintf("persistentvolumeclaim %q is unbound and asks for no storage class (static binding is not supported by the local node agent)", pvc.Name)
	}
	sc, err := a.cs.StorageV1().StorageClasses().Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return nil, fmt.Sprintf("persistentvolumeclaim %q: storage class %q: %v", pvc.Name, name, err)
	}
	return sc, ""
}

func (a *Agent) canProvision(ctx context.Context, pvc *corev1.PersistentVolumeClaim) string {
	sc, why := a.storageClassFor(ctx, pvc)
	if why != "" {
		return why
	}
	if sc.Provisioner != a.cfg.Provisioner {
		return fmt.Sprintf("persistentvolumeclaim %q is unbound and its storage class %q is provisioned by %q, not by the local node agent (%s)",
			pvc.Name, sc.Name, sc.Provisioner, a.cfg.Provisioner)
	}
	return ""
}
