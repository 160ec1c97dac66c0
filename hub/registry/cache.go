package registry

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/selection"
	"k8s.io/apimachinery/pkg/watch"
	toolscache "k8s.io/client-go/tools/cache"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/cluster"

	etcdfedv1 "github.com/etcdfed/etcdfed/api/v1alpha1"
)

// DefaultMaxObjects is how many objects of one kind the hub caches of one
// member cluster at most (MemberCacheOptions): ten times the EtcdMembers of
// the thousand three-member rings hub-scale measures.
const DefaultMaxObjects = 10000

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
//   - At most maxObjects objects of each kind (0: DefaultMaxObjects): the
//     informers take the first maxObjects a list or watch brings and drop
//     the rest (logged), so the number of objects a member cluster labels
//     as etcdfed's cannot grow the hub's memory either.
func MemberCacheOptions(scheme *runtime.Scheme, ringNamespace string, maxObjects int) cluster.Options {
	owned := cache.ByObject{Label: OwnedSelector(), Transform: trimForeignMetadata}
	if maxObjects <= 0 {
		maxObjects = DefaultMaxObjects
	}
	return cluster.Options{
		Scheme: scheme,
		Cache: cache.Options{
			DefaultNamespaces:           map[string]cache.Config{ringNamespace: {}},
			ReaderFailOnMissingInformer: true,
			DefaultTransform:            cache.TransformStripManagedFields(),
			NewInformer: func(lw toolscache.ListerWatcher, obj runtime.Object, resync time.Duration, idx toolscache.Indexers) toolscache.SharedIndexInformer {
				return toolscache.NewSharedIndexInformer(capObjects(lw, fmt.Sprintf("%T", obj), maxObjects), obj, resync, idx)
			},
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

// capObjects wraps an informer's list and watch so that the informer holds
// at most max objects: a list (its pages from the first) keeps its first
// max items, a watch passes events of the objects held and adds new ones
// while fewer than max are held; the rest is dropped, and logged once per
// list.
func capObjects(lw toolscache.ListerWatcher, kind string, max int) toolscache.ListerWatcher {
	inner := toolscache.ToListerWatcherWithContext(lw)
	c := &objectCap{kind: kind, max: max, held: map[string]bool{}}
	return &toolscache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
			list, err := inner.ListWithContext(ctx, opts)
			if err != nil {
				return list, err
			}
			return list, c.list(list, opts.Continue == "")
		},
		WatchFuncWithContext: func(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
			if opts.SendInitialEvents != nil && *opts.SendInitialEvents {
				c.reset() // a streamed list: its events replace the store
			}
			w, err := inner.WatchWithContext(ctx, opts)
			if err != nil {
				return w, err
			}
			return watch.Filter(w, c.event), nil
		},
	}
}

// objectCap is the set of objects (namespace/name) one informer holds.
type objectCap struct {
	kind    string
	max     int
	mu      sync.Mutex
	held    map[string]bool
	dropped int
}

func (c *objectCap) reset() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.held, c.dropped = map[string]bool{}, 0
}

func key(o runtime.Object) (string, bool) {
	m, err := meta.Accessor(o)
	if err != nil {
		return "", false
	}
	return m.GetNamespace() + "/" + m.GetName(), true
}

// take reports whether the object k may be held, holding it.
func (c *objectCap) take(k string) bool {
	if c.held[k] {
		return true
	}
	if len(c.held) >= c.max {
		if c.dropped == 0 {
			capLog.Error(nil, "A member cluster holds more objects than the hub caches; the rest are not seen", "kind", c.kind, "max", c.max, "first", k)
		}
		c.dropped++
		return false
	}
	c.held[k] = true
	return true
}

// list keeps the first items of a list page (first: the list's first
// page, which starts a new set).
func (c *objectCap) list(list runtime.Object, first bool) error {
	items, err := meta.ExtractList(list)
	if err != nil {
		return fmt.Errorf("read %s list: %w", c.kind, err)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if first {
		c.held, c.dropped = map[string]bool{}, 0
	}
	kept := items[:0]
	for _, o := range items {
		if k, ok := key(o); ok && c.take(k) {
			kept = append(kept, o)
		}
	}
	if len(kept) == len(items) {
		return nil
	}
	return meta.SetList(list, kept)
}

// event passes an event of an object held, or of one it may now hold.
func (c *objectCap) event(e watch.Event) (watch.Event, bool) {
	if e.Type != watch.Added && e.Type != watch.Modified && e.Type != watch.Deleted {
		return e, true
	}
	k, ok := key(e.Object)
	if !ok {
		return e, true
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if e.Type == watch.Deleted {
		if !c.held[k] {
			return e, false
		}
		delete(c.held, k)
		return e, true
	}
	return e, c.take(k)
}

var capLog = ctrl.Log.WithName("member-cache")
