package multicluster

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	etcdfedv1 "github.com/etcdfed/etcdfed/api/v1alpha1"
)

// Evict asks the Eviction API (what kubectl drain calls) to evict a
// member's pod in the ring namespace (pod: the member's object name,
// ManagedEtcd.ObjectName): nil when evicted, the apiserver's error
// otherwise (429 TooManyRequests when a budget refuses it).
func Evict(ctx context.Context, c *Cluster, pod string) error {
	return c.Clientset.PolicyV1().Evictions(etcdfedv1.DefaultRingNamespace).Evict(ctx, &policyv1.Eviction{
		ObjectMeta: metav1.ObjectMeta{Name: pod, Namespace: etcdfedv1.DefaultRingNamespace},
	})
}

// SetCordon cordons (or uncordons) a node, as kubectl cordon does.
func SetCordon(ctx context.Context, c *Cluster, node string, cordoned bool) error {
	patch := fmt.Sprintf(`{"spec":{"unschedulable":%t}}`, cordoned)
	_, err := c.Clientset.CoreV1().Nodes().Patch(ctx, node, types.MergePatchType, []byte(patch), metav1.PatchOptions{})
	return err
}

// MemberNode is the node a member's pod (ManagedEtcd.ObjectName) runs on.
func MemberNode(ctx context.Context, c *Cluster, pod string) (string, error) {
	p, err := c.Clientset.CoreV1().Pods(etcdfedv1.DefaultRingNamespace).Get(ctx, pod, metav1.GetOptions{})
	if err != nil {
		return "", err
	}
	if p.Spec.NodeName == "" {
		return "", fmt.Errorf("pod %s is not scheduled", pod)
	}
	return p.Spec.NodeName, nil
}

// WaitForBudgetInput names a member's PodDisruptionBudget.
type WaitForBudgetInput struct {
	Cluster *Cluster
	// Member is the member's object name (ManagedEtcd.ObjectName), which
	// names its budget and its pod.
	Member string
	// Allowed is the disruptionsAllowed to wait for.
	Allowed int32
	Timeout time.Duration
}

// WaitForBudget waits until the member's budget has been observed at its
// latest generation with the member's pod ready and Allowed disruptions.
func WaitForBudget(ctx context.Context, in WaitForBudgetInput) error {
	return poll(ctx, orDefault(in.Timeout, time.Minute), fmt.Sprintf("budget of %s in %s allowing %d", in.Member, in.Cluster.Name, in.Allowed), func(ctx context.Context) (string, error) {
		pdb, err := in.Cluster.Clientset.PolicyV1().PodDisruptionBudgets(etcdfedv1.DefaultRingNamespace).Get(ctx, in.Member, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return "no budget", nil
		}
		if err != nil {
			return "", err
		}
		// The pod must be ready (counted healthy): a pod that is not is
		// another case of the budget (IfHealthyBudget).
		if pdb.Status.ObservedGeneration != pdb.Generation || pdb.Status.DisruptionsAllowed != in.Allowed || pdb.Status.CurrentHealthy != 1 {
			return fmt.Sprintf("generation %d observed %d, minAvailable %v, disruptionsAllowed %d, currentHealthy %d", pdb.Generation, pdb.Status.ObservedGeneration, pdb.Spec.MinAvailable, pdb.Status.DisruptionsAllowed, pdb.Status.CurrentHealthy), nil
		}
		return "", nil
	})
}

// WaitForDisruptInput waits for the hub's Disrupt operation.
type WaitForDisruptInput struct {
	Hub  *Cluster
	Etcd *ManagedEtcd
	// Step is the step to wait for (GrantDisruption, AwaitReturn).
	Step string
	// Member, when set, must be the operation's member.
	Member  string
	Timeout time.Duration
}

// WaitForDisrupt waits until status.operation is a Disrupt at Step and
// returns its member.
func WaitForDisrupt(ctx context.Context, in WaitForDisruptInput) (string, error) {
	var member string
	err := WaitForStatus(ctx, WaitForStatusInput{Hub: in.Hub, Etcd: in.Etcd, What: fmt.Sprintf("a Disrupt operation at step %s %s", in.Step, in.Member), Timeout: orDefault(in.Timeout, 2*time.Minute), Until: func(ec *etcdfedv1.EtcdCluster) string {
		op := ec.Status.Operation
		if op == nil {
			return "no operation"
		}
		if op.Type != etcdfedv1.OperationDisrupt || op.Step != in.Step || (in.Member != "" && op.Member != in.Member) {
			return fmt.Sprintf("operation %s of %s at %s: %s", op.Type, op.Member, op.Step, op.Message)
		}
		member = op.Member
		return ""
	}})
	return member, err
}

// podOf is the pod of that name (ManagedEtcd.ObjectName), nil when none.
func podOf(ctx context.Context, c *Cluster, name string) (*corev1.Pod, error) {
	p, err := c.Clientset.CoreV1().Pods(etcdfedv1.DefaultRingNamespace).Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	return p, err
}
