package etcdcluster

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/cluster"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	mchandler "sigs.k8s.io/multicluster-runtime/pkg/handler"
	mcmanager "sigs.k8s.io/multicluster-runtime/pkg/manager"
	"sigs.k8s.io/multicluster-runtime/pkg/multicluster"
	mcreconcile "sigs.k8s.io/multicluster-runtime/pkg/reconcile"

	etcdfedv1 "github.com/etcdfed/etcdfed/api/v1alpha1"
	"github.com/etcdfed/etcdfed/hub/tenancy"
)

// Admission (rule 14): before a pass writes anything for an EtcdCluster,
// the hub checks that its domain is its own and that its spec keeps to the
// hub's tenancy policy. A refused EtcdCluster is not reconciled: nothing is
// written for it anywhere (members it already has keep running as their
// spokes run them), and its conditions say why, naming the EtcdCluster
// that owns the domain or the field the policy refuses.

// refusal is why a pass does not go on, with its reason.
type refusal struct {
	reason, message string
}

// admit returns the refusal of ec, nil when the pass may go on.
func (r *Reconciler) admit(ctx context.Context, ec *etcdfedv1.EtcdCluster) (*refusal, error) {
	var rings etcdfedv1.EtcdClusterList
	if err := r.hub().List(ctx, &rings); err != nil {
		return nil, fmt.Errorf("list EtcdClusters for their domains: %w", err)
	}
	if c, refused := tenancy.DomainOwner(ec, rings.Items); refused {
		return &refusal{reason: etcdfedv1.ReasonDomainInUse, message: c.Error()}, nil
	}
	if err := r.Policy.CheckPods(ec); err != nil {
		return &refusal{reason: etcdfedv1.ReasonPolicyViolation, message: "the hub's tenancy policy refuses: " + err.Error() + "; this EtcdCluster writes nothing until its spec complies"}, nil
	}
	return nil, nil
}

// setRefused writes a refusal into ec's conditions (Available and
// Progressing False, Degraded True, each with the refusal's reason and
// message) and records an event when it is new.
func (r *Reconciler) setRefused(ec *etcdfedv1.EtcdCluster, f *refusal) {
	prev := meta.FindStatusCondition(ec.Status.Conditions, etcdfedv1.ConditionDegraded)
	msg := truncate(f.message, 4000)
	if prev == nil || prev.Reason != f.reason || prev.Message != msg {
		r.event(ec, corev1.EventTypeWarning, f.reason, "Admit", "%s", msg)
	}
	gen := ec.Generation
	setCondition(&ec.Status, gen, etcdfedv1.ConditionAvailable, false, f.reason, msg)
	setCondition(&ec.Status, gen, etcdfedv1.ConditionProgressing, false, f.reason, msg)
	setCondition(&ec.Status, gen, etcdfedv1.ConditionDegraded, true, f.reason, msg)
}

// mapDomainRivals maps a deleted EtcdCluster to the others whose domain
// overlaps its own: one of them may now own it.
func (r *Reconciler) mapDomainRivals() mchandler.TypedEventHandlerFunc[client.Object, mcreconcile.Request] {
	return func(_ multicluster.ClusterName, _ cluster.Cluster) handler.TypedEventHandler[client.Object, mcreconcile.Request] {
		return mchandler.TypedEnqueueRequestsFromMapFuncWithClusterPreservation(func(ctx context.Context, obj client.Object) []mcreconcile.Request {
			gone, ok := obj.(*etcdfedv1.EtcdCluster)
			if !ok {
				return nil
			}
			var rings etcdfedv1.EtcdClusterList
			if err := r.hub().List(ctx, &rings); err != nil {
				return nil
			}
			var out []mcreconcile.Request
			for i := range rings.Items {
				o := &rings.Items[i]
				if o.UID == gone.UID {
					continue
				}
				if _, refused := tenancy.DomainOwner(o, []etcdfedv1.EtcdCluster{*gone}); refused {
					out = append(out, mcreconcile.Request{Request: reconcile.Request{NamespacedName: types.NamespacedName{Namespace: o.Namespace, Name: o.Name}}, ClusterName: mcmanager.LocalCluster})
				}
			}
			return out
		})
	}
}

// onDelete passes delete events only.
func onDelete() predicate.Predicate {
	return predicate.Funcs{
		CreateFunc:  func(event.CreateEvent) bool { return false },
		UpdateFunc:  func(event.UpdateEvent) bool { return false },
		GenericFunc: func(event.GenericEvent) bool { return false },
		DeleteFunc:  func(event.DeleteEvent) bool { return true },
	}
}
