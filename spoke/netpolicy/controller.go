// Package netpolicy keeps each EtcdMember's NetworkPolicy
// (spoke/component/netpolicy) in step with its spec.expose.networkPolicy
// and with the addresses the ring's DNS zone publishes: a member that
// moves or a new incarnation is admitted to its peers' peer ports as soon
// as the hub publishes its address, before its etcd starts (its init
// container waits for that record).
package netpolicy

import (
	"context"
	"fmt"

	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	etcdfedv1 "github.com/etcdfed/etcdfed/api/v1alpha1"
	"github.com/etcdfed/etcdfed/spoke/component/netpolicy"
)

// FieldOwner of the writes.
const FieldOwner = "etcdfed-spoke"

// Reconciler writes one NetworkPolicy per EtcdMember that asks for one.
type Reconciler struct {
	Client client.Client
	Scheme *runtime.Scheme
}

// SetupWithManager registers the controller: EtcdMembers (spec changes),
// their NetworkPolicies, and the ring's EtcdDNSZones.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).
		Named("etcdmember-networkpolicy").
		For(&etcdfedv1.EtcdMember{}, builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		Owns(&networkingv1.NetworkPolicy{}).
		Watches(&etcdfedv1.EtcdDNSZone{}, handler.EnqueueRequestsFromMapFunc(r.membersOfZone)).
		Complete(r)
}

func (r *Reconciler) membersOfZone(ctx context.Context, o client.Object) []reconcile.Request {
	z, ok := o.(*etcdfedv1.EtcdDNSZone)
	if !ok {
		return nil
	}
	var list etcdfedv1.EtcdMemberList
	if err := r.Client.List(ctx, &list, client.InNamespace(z.Namespace)); err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "List EtcdMembers for a DNS zone", "zone", z.Name)
		return nil
	}
	var out []reconcile.Request
	for _, m := range list.Items {
		if m.Spec.Cluster.UID == z.Spec.Cluster.UID {
			out = append(out, reconcile.Request{NamespacedName: types.NamespacedName{Namespace: m.Namespace, Name: m.Name}})
		}
	}
	return out
}

// Reconcile reads the member, the ring's zones and the policy there is,
// and writes what netpolicy.Decide says.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	m := &etcdfedv1.EtcdMember{}
	if err := r.Client.Get(ctx, req.NamespacedName, m); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if !m.DeletionTimestamp.IsZero() {
		return ctrl.Result{}, nil // the policy goes with its owner
	}
	var zones etcdfedv1.EtcdDNSZoneList
	if err := r.Client.List(ctx, &zones, client.InNamespace(m.Namespace)); err != nil {
		return ctrl.Result{}, fmt.Errorf("list EtcdDNSZones: %w", err)
	}
	desired := netpolicy.Build(m, netpolicy.PeerAddresses(m, zones.Items))
	var cur *networkingv1.NetworkPolicy
	got := &networkingv1.NetworkPolicy{}
	switch err := r.Client.Get(ctx, client.ObjectKey{Namespace: m.Namespace, Name: netpolicy.Name(m)}, got); {
	case err == nil:
		cur = got
	case !apierrors.IsNotFound(err):
		return ctrl.Result{}, fmt.Errorf("get NetworkPolicy: %w", err)
	}
	d := netpolicy.Decide(m, desired, cur)
	log := ctrl.LoggerFrom(ctx)
	switch d.Action {
	case netpolicy.Create:
		if err := controllerutil.SetControllerReference(m, d.Object, r.Scheme); err != nil {
			return ctrl.Result{}, fmt.Errorf("own NetworkPolicy: %w", err)
		}
		log.Info("Creating NetworkPolicy", "name", d.Object.Name)
		if err := r.Client.Create(ctx, d.Object, client.FieldOwner(FieldOwner)); err != nil {
			return ctrl.Result{}, fmt.Errorf("create NetworkPolicy: %w", err)
		}
	case netpolicy.Update:
		log.Info("Updating NetworkPolicy", "name", d.Object.Name)
		if err := r.Client.Update(ctx, d.Object, client.FieldOwner(FieldOwner)); err != nil {
			return ctrl.Result{}, fmt.Errorf("update NetworkPolicy: %w", err)
		}
	case netpolicy.Delete:
		log.Info("Deleting NetworkPolicy", "name", cur.Name, "why", d.Message)
		if err := r.Client.Delete(ctx, cur); client.IgnoreNotFound(err) != nil {
			return ctrl.Result{}, fmt.Errorf("delete NetworkPolicy: %w", err)
		}
	case netpolicy.Conflict:
		log.Info("Leaving a NetworkPolicy alone", "why", d.Message)
	}
	return ctrl.Result{}, nil
}
