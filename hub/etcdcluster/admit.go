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
	"github.com/etcdfed/etcdfed/hub/pki"
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

// Indexes of EtcdClusters in the hub's cache: the domain, and the domain
// with every domain it lies inside (so that a pass reads only the rings
// whose domain overlaps its own, not every ring).
const (
	indexDomain        = "etcdfed.dev/domain"
	indexDomainParents = "etcdfed.dev/domain-and-parents"
)

func indexDomains(ctx context.Context, mgr mcmanager.Manager) error {
	fi := mgr.GetLocalManager().GetFieldIndexer()
	if err := fi.IndexField(ctx, &etcdfedv1.EtcdCluster{}, indexDomain, func(o client.Object) []string {
		return []string{tenancy.Domain(o.(*etcdfedv1.EtcdCluster).Spec.DNS.Domain)}
	}); err != nil {
		return err
	}
	return fi.IndexField(ctx, &etcdfedv1.EtcdCluster{}, indexDomainParents, func(o client.Object) []string {
		d := tenancy.Domain(o.(*etcdfedv1.EtcdCluster).Spec.DNS.Domain)
		return append([]string{d}, tenancy.Parents(d)...)
	})
}

// indexCAFingerprint indexes EtcdClusters by status.caFingerprint, the key
// of the CA named in spec.tls.caSecretName (admit: a CA shared across
// namespaces).
const indexCAFingerprint = "etcdfed.dev/ca-fingerprint"

func indexCAs(ctx context.Context, mgr mcmanager.Manager) error {
	return mgr.GetLocalManager().GetFieldIndexer().IndexField(ctx, &etcdfedv1.EtcdCluster{}, indexCAFingerprint, func(o client.Object) []string {
		if fp := o.(*etcdfedv1.EtcdCluster).Status.CAFingerprint; fp != "" {
			return []string{fp}
		}
		return nil
	})
}

// userCAFingerprint is the key fingerprint of the CA ec names in
// spec.tls.caSecretName, read uncached; "" when it names none, TLS is off,
// or the Secret cannot be read yet (the pass's observation says why).
func (r *Reconciler) userCAFingerprint(ctx context.Context, ec *etcdfedv1.EtcdCluster) string {
	if ec.Spec.TLS.CASecretName == "" || !ec.Spec.TLS.Mode.Enabled() {
		return ""
	}
	sec := &corev1.Secret{}
	if err := r.hubReader().Get(ctx, client.ObjectKey{Namespace: ec.Namespace, Name: ec.Spec.TLS.CASecretName}, sec); err != nil {
		return ""
	}
	a, err := pki.LoadAuthority(sec.Data)
	if err != nil {
		return ""
	}
	return pki.KeyFingerprint(a.Signer.Cert)
}

// caRivals are the EtcdClusters that recorded the CA key fingerprint fp.
func (r *Reconciler) caRivals(ctx context.Context, fp string) ([]etcdfedv1.EtcdCluster, error) {
	var list etcdfedv1.EtcdClusterList
	if err := r.hub().List(ctx, &list, client.MatchingFields{indexCAFingerprint: fp}); err != nil {
		return nil, fmt.Errorf("list EtcdClusters for their CA: %w", err)
	}
	return list.Items, nil
}

// domainRivals are the EtcdClusters whose domain overlaps ec's: the same,
// inside it, or one it lies inside.
func (r *Reconciler) domainRivals(ctx context.Context, ec *etcdfedv1.EtcdCluster) ([]etcdfedv1.EtcdCluster, error) {
	d := tenancy.Domain(ec.Spec.DNS.Domain)
	var out []etcdfedv1.EtcdCluster
	queries := []client.MatchingFields{{indexDomainParents: d}}
	for _, p := range tenancy.Parents(d) {
		queries = append(queries, client.MatchingFields{indexDomain: p})
	}
	for _, q := range queries {
		var list etcdfedv1.EtcdClusterList
		if err := r.hub().List(ctx, &list, q); err != nil {
			return nil, fmt.Errorf("list EtcdClusters for their domains: %w", err)
		}
		out = append(out, list.Items...)
	}
	return out, nil
}

// admit returns the refusal of ec, nil when the pass may go on.
func (r *Reconciler) admit(ctx context.Context, ec *etcdfedv1.EtcdCluster) (*refusal, error) {
	rings, err := r.domainRivals(ctx, ec)
	if err != nil {
		return nil, err
	}
	// A ring that has begun keeps its domain (and its management) whatever
	// the domain policy says now: refusing it would leave running members
	// unrepaired. Only rings that have not begun are held to it.
	if err := r.Policy.CheckDomain(ec); err != nil && !tenancy.Claimed(ec) {
		return &refusal{reason: etcdfedv1.ReasonPolicyViolation, message: "the hub's tenancy policy refuses: " + err.Error() + "; this EtcdCluster writes nothing (delete it and create it with another domain)"}, nil
	}
	if c, refused := tenancy.DomainOwner(ec, rings, r.Policy); refused {
		return &refusal{reason: etcdfedv1.ReasonDomainInUse, message: c.Error()}, nil
	}
	if fp := r.userCAFingerprint(ctx, ec); fp != "" && !r.Policy.SharedCA {
		rivals, err := r.caRivals(ctx, fp)
		if err != nil {
			return nil, err
		}
		if c, refused := tenancy.CAOwner(ec, fp, rivals, r.Policy); refused {
			return &refusal{reason: etcdfedv1.ReasonPolicyViolation, message: c.Error()}, nil
		}
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

// mapDomainRivals maps a deleted EtcdCluster, or one that stopped holding
// its domain, to the refused others whose domain overlaps its own or whose
// CA has its CA's key: one of them may now have it.
func (r *Reconciler) mapDomainRivals() mchandler.TypedEventHandlerFunc[client.Object, mcreconcile.Request] {
	return func(_ multicluster.ClusterName, _ cluster.Cluster) handler.TypedEventHandler[client.Object, mcreconcile.Request] {
		return mchandler.TypedEnqueueRequestsFromMapFuncWithClusterPreservation(func(ctx context.Context, obj client.Object) []mcreconcile.Request {
			gone, ok := obj.(*etcdfedv1.EtcdCluster)
			if !ok {
				return nil
			}
			rings, err := r.domainRivals(ctx, gone)
			if err != nil {
				return nil
			}
			if fp := gone.Status.CAFingerprint; fp != "" {
				if more, err := r.caRivals(ctx, fp); err == nil {
					rings = append(rings, more...)
				}
			}
			var out []mcreconcile.Request
			for i := range rings {
				o := &rings[i]
				if o.UID == gone.UID {
					continue
				}
				// Every overlapping ring that is refused itself: the one
				// gone (or no longer holding) may have been its owner.
				if tenancy.Refused(o) {
					out = append(out, mcreconcile.Request{Request: reconcile.Request{NamespacedName: types.NamespacedName{Namespace: o.Namespace, Name: o.Name}}, ClusterName: mcmanager.LocalCluster})
				}
			}
			return out
		})
	}
}

// onDomainHoldChange passes deletes, and updates that change whether an
// EtcdCluster holds its domain against others (it began, or the hub
// refused or stopped refusing it): a ring it kept from its domain may now
// have it.
func onDomainHoldChange() predicate.Predicate {
	return predicate.Funcs{
		CreateFunc:  func(event.CreateEvent) bool { return false },
		GenericFunc: func(event.GenericEvent) bool { return false },
		DeleteFunc:  func(event.DeleteEvent) bool { return true },
		UpdateFunc: func(e event.UpdateEvent) bool {
			o, ok1 := e.ObjectOld.(*etcdfedv1.EtcdCluster)
			n, ok2 := e.ObjectNew.(*etcdfedv1.EtcdCluster)
			return ok1 && ok2 && (tenancy.Claimed(o) != tenancy.Claimed(n) || tenancy.Refused(o) != tenancy.Refused(n))
		},
	}
}
