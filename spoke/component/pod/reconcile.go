package pod

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	etcdfedv1 "github.com/etcdfed/etcdfed/api/v1alpha1"
	"github.com/etcdfed/etcdfed/spoke/internal/spec"
)

// Result is the member's pod after Reconcile and what was decided.
type Result struct {
	// Pod as observed (after acting); nil when there is none.
	Pod *corev1.Pod
	// Decision taken.
	Decision Decision
}

// Reconcile observes the member's pod, decides with Decide and acts.
// desired is Build's pod, nil when blocker says why none can be built.
// live reads past the cache when a create finds the name taken.
func Reconcile(ctx context.Context, c client.Client, live client.Reader, scheme *runtime.Scheme,
	m *etcdfedv1.EtcdMember, desired *corev1.Pod, blocker *Blocker) (Result, error) {
	log := ctrl.LoggerFrom(ctx)
	key := types.NamespacedName{Namespace: m.Namespace, Name: spec.PodName(m)}
	var pod *corev1.Pod
	cur := &corev1.Pod{}
	if err := c.Get(ctx, key, cur); err == nil {
		pod = cur
	} else if !apierrors.IsNotFound(err) {
		return Result{}, fmt.Errorf("get pod: %w", err)
	}
	d := Decide(m, pod, desired, blocker)
	res := Result{Pod: pod, Decision: d}
	switch d.Action {
	case Create:
		obj := desired.DeepCopy()
		if err := controllerutil.SetControllerReference(m, obj, scheme); err != nil {
			return res, fmt.Errorf("set owner of pod: %w", err)
		}
		state := etcdfedv1.InitialClusterState("")
		if b := m.Spec.Bootstrap; b != nil {
			state = b.InitialClusterState
		}
		log.Info("Creating pod", "pod", key.Name, "incarnation", m.Spec.Incarnation, "initialClusterState", state)
		if err := c.Create(ctx, obj, client.FieldOwner(spec.FieldOwner)); err != nil {
			if !apierrors.IsAlreadyExists(err) {
				return res, fmt.Errorf("create pod: %w", err)
			}
			// The cache lags behind our own create, or the name is taken.
			if err := live.Get(ctx, key, cur); err != nil {
				return res, fmt.Errorf("get pod after create conflict: %w", err)
			}
			res.Pod = cur
			res.Decision = Decide(m, cur, desired, blocker)
			if res.Decision.Action != Conflict {
				res.Decision = Decision{Action: Keep}
			}
			return res, nil
		}
		res.Pod = obj
	case DeleteOldIncarnation, DeleteTerminated, Replace:
		log.Info("Deleting pod", "pod", key.Name, "why", d.Message)
		if err := c.Delete(ctx, pod, client.Preconditions{UID: &pod.UID}); err != nil && !apierrors.IsNotFound(err) {
			return res, fmt.Errorf("delete pod: %w", err)
		}
	}
	return res, nil
}
