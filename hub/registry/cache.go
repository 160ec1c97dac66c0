package registry

import (
	"strings"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/selection"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/cluster"

	etcdfedv1 "github.com/etcdfed/etcdfed/api/v1alpha1"
)

// MaxCachedAnnotation bounds one etcdfed.dev/ annotation the hub keeps of
// an object in a member cluster; longer ones are dropped from its copy.
const MaxCachedAnnotation = 4096

// OwnedSelector selects the objects the hub writes for rings in a member
// cluster (EtcdMember, EtcdDNSZone, member Secrets): managed by etcdfed and
// labelled with their EtcdCluster's UID.
func OwnedSelector() labels.Selector {
	managed, _ := labels.NewRequirement(etcdfedv1.LabelManagedBy, selection.Equals, []string{etcdfedv1.ManagedByValue})
	owned, _ := labels.NewRequirement(etcdfedv1.LabelClusterUID, selection.Exists, nil)
	return labels.NewSelector().Add(*managed, *owned)
}

// MemberCacheOptions are the hub's client and cache options for every
// member cluster. A member cluster is trusted with its own members only
// (rule 14): what it can make the hub hold is bounded.
//
//   - Only the ring namespace, and a read of a kind no controller watches
//     fails at once instead of starting an informer and waiting for it to
//     sync: nothing in the hub may wait on a member cluster without a
//     bound. Two exceptions for the zone witness, each as narrow as it
//     goes: Leases also in kube-node-lease (kubelet's node Leases), and
//     Nodes as metadata only (their zone label; never their status).
//   - EtcdMembers, EtcdDNSZones and Secrets only when etcdfed wrote them
//     for a ring (OwnedSelector): any other object a member cluster makes
//     in the ring namespace never reaches the hub's memory.
//   - Of every object, no managedFields, and of EtcdMembers and
//     EtcdDNSZones only etcdfed's own labels and annotations
//     (etcdfed.dev/..., app.kubernetes.io/...), each annotation at most
//     MaxCachedAnnotation bytes: a member cluster cannot grow the hub's
//     copy of an object beyond what the CRD's bounds allow.
func MemberCacheOptions(scheme *runtime.Scheme, ringNamespace string) cluster.Options {
	owned := cache.ByObject{Label: OwnedSelector(), Transform: trimForeignMetadata}
	return cluster.Options{
		Scheme: scheme,
		Cache: cache.Options{
			DefaultNamespaces:           map[string]cache.Config{ringNamespace: {}},
			ReaderFailOnMissingInformer: true,
			DefaultTransform:            cache.TransformStripManagedFields(),
			ByObject: map[client.Object]cache.ByObject{
				&etcdfedv1.EtcdMember{}:  owned,
				&etcdfedv1.EtcdDNSZone{}: owned,
				// Of the Secrets, only the certificates the hub writes.
				&corev1.Secret{}: {Label: labels.SelectorFromSet(labels.Set{etcdfedv1.LabelManagedBy: etcdfedv1.ManagedByValue})},
				&coordinationv1.Lease{}: {Namespaces: map[string]cache.Config{
					ringNamespace: {}, corev1.NamespaceNodeLease: {},
				}},
			},
		},
	}
}

var _ toolscache.TransformFunc = trimForeignMetadata

// trimForeignMetadata keeps etcdfed's labels and annotations of an object
// (bounded) and drops managedFields and the rest. The hub patches objects
// it owns with a merge patch from its copy, so what is trimmed here is
// never written back or removed.
func trimForeignMetadata(in any) (any, error) {
	obj, err := meta.Accessor(in)
	if err != nil {
		return in, nil
	}
	if obj.GetManagedFields() != nil {
		obj.SetManagedFields(nil)
	}
	ours := func(k string) bool {
		return strings.HasPrefix(k, "etcdfed.dev/") || strings.HasPrefix(k, "app.kubernetes.io/")
	}
	if l := obj.GetLabels(); len(l) > 0 {
		for k := range l {
			if !ours(k) {
				delete(l, k)
			}
		}
		obj.SetLabels(l)
	}
	if a := obj.GetAnnotations(); len(a) > 0 {
		for k, v := range a {
			if !ours(k) || len(v) > MaxCachedAnnotation {
				delete(a, k)
			}
		}
		obj.SetAnnotations(a)
	}
	return in, nil
}
