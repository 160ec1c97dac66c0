package install

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"reflect"
	"slices"
	"sort"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"
)

// applier writes objects into one cluster, server-side, and only what
// differs; with dryRun set it prints them instead.
type applier struct {
	c       client.Client
	cluster string
	dryRun  io.Writer
}

// applied counts what one apply did.
type applied struct {
	Created, Updated, Unchanged int
	// Names lists the objects created or updated ("Kind/name").
	Names []string
}

func (a applied) String() string {
	if a.Created+a.Updated == 0 {
		return fmt.Sprintf("%d unchanged", a.Unchanged)
	}
	return fmt.Sprintf("%d created, %d updated, %d unchanged", a.Created, a.Updated, a.Unchanged)
}

// then is a followed by b, where b applied a superset of a's objects:
// each object counts once, created or updated if either changed it.
func (a applied) then(b applied) applied {
	changed := map[string]bool{}
	for _, n := range append(slices.Clone(a.Names), b.Names...) {
		changed[n] = true
	}
	out := applied{Created: a.Created + b.Created, Names: slices.Sorted(maps.Keys(changed))}
	out.Updated = len(changed) - out.Created
	out.Unchanged = b.Created + b.Updated + b.Unchanged - len(changed)
	return out
}

// apply applies each object. An object whose every field already has the
// wanted value is not written at all, so a second run changes no
// resourceVersion; the others are applied with FieldManager, taking over
// fields another manager set.
func (a *applier) apply(ctx context.Context, objs []*unstructured.Unstructured) (applied, error) {
	var st applied
	for _, o := range objs {
		if a.dryRun != nil {
			if err := printObject(a.dryRun, a.cluster, o); err != nil {
				return st, err
			}
			continue
		}
		cur := &unstructured.Unstructured{}
		cur.SetGroupVersionKind(o.GroupVersionKind())
		err := a.c.Get(ctx, client.ObjectKeyFromObject(o), cur)
		switch {
		case apierrors.IsNotFound(err):
			st.Created++
		case err != nil:
			return st, fmt.Errorf("%s: read %s: %w", a.cluster, describe(o), err)
		case contains(cur.Object, o.Object):
			st.Unchanged++
			continue
		default:
			st.Updated++
		}
		st.Names = append(st.Names, describe(o))
		if err := a.c.Apply(ctx, client.ApplyConfigurationFromUnstructured(o.DeepCopy()), client.FieldOwner(FieldManager), client.ForceOwnership); err != nil {
			return st, fmt.Errorf("%s: apply %s: %w", a.cluster, describe(o), err)
		}
	}
	return st, nil
}

// printObject writes o as one YAML document, naming its cluster.
func printObject(w io.Writer, cluster string, o *unstructured.Unstructured) error {
	data, err := yaml.Marshal(o.Object)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(w, "---\n# %s: %s\n%s", cluster, describe(o), data)
	return err
}

func describe(o client.Object) string {
	kind := o.GetObjectKind().GroupVersionKind().Kind
	if o.GetNamespace() != "" {
		return kind + " " + o.GetNamespace() + "/" + o.GetName()
	}
	return kind + " " + o.GetName()
}

// contains reports whether every field of want is in have with the same
// value (maps recursively; lists element by element, of the same
// length). What the apiserver adds (defaults, status, metadata) is
// ignored.
func contains(have, want any) bool {
	switch w := want.(type) {
	case map[string]any:
		h, ok := have.(map[string]any)
		if !ok {
			return false
		}
		for k, wv := range w {
			hv, ok := h[k]
			if !ok || !contains(hv, wv) {
				return false
			}
		}
		return true
	case []any:
		h, ok := have.([]any)
		if !ok || len(h) != len(w) {
			return false
		}
		for i := range w {
			if !contains(h[i], w[i]) {
				return false
			}
		}
		return true
	default:
		if hf, ok := number(have); ok {
			wf, ok := number(want)
			return ok && hf == wf
		}
		return reflect.DeepEqual(have, want)
	}
}

func number(v any) (float64, bool) {
	switch n := v.(type) {
	case int64:
		return float64(n), true
	case int:
		return float64(n), true
	case int32:
		return float64(n), true
	case float64:
		return n, true
	}
	return 0, false
}

// kinds are the kinds the install packages hold, which prune and unjoin
// look through by label.
var kinds = []schema.GroupVersionKind{
	{Group: "apps", Version: "v1", Kind: "Deployment"},
	{Group: "policy", Version: "v1", Kind: "PodDisruptionBudget"},
	{Version: "v1", Kind: "Service"},
	{Version: "v1", Kind: "ConfigMap"},
	{Version: "v1", Kind: "Secret"},
	{Version: "v1", Kind: "ServiceAccount"},
	{Group: "rbac.authorization.k8s.io", Version: "v1", Kind: "RoleBinding"},
	{Group: "rbac.authorization.k8s.io", Version: "v1", Kind: "Role"},
	{Group: "rbac.authorization.k8s.io", Version: "v1", Kind: "ClusterRoleBinding"},
	{Group: "rbac.authorization.k8s.io", Version: "v1", Kind: "ClusterRole"},
	{Group: "monitoring.coreos.com", Version: "v1", Kind: "ServiceMonitor"},
	{Group: "monitoring.coreos.com", Version: "v1", Kind: "PrometheusRule"},
}

// Kinds are every kind the installs write: the CRDs and the namespace,
// and kinds (which prune looks through).
func Kinds() []schema.GroupVersionKind {
	return append([]schema.GroupVersionKind{crdGVK, {Version: "v1", Kind: "Namespace"}}, kinds...)
}

// Inventory maps "Kind namespace/name" to the resourceVersion of every
// object of Kinds labelled sel and not being deleted (a namespace stays
// Terminating where no namespace controller runs): what an install left
// in a cluster, to count, or to compare before and after a second run.
func Inventory(ctx context.Context, c client.Client, sel labels.Selector) (map[string]string, error) {
	objs, err := labelled(ctx, c, sel, Kinds())
	if err != nil {
		return nil, err
	}
	out := map[string]string{}
	for _, o := range objs {
		if o.GetDeletionTimestamp() == nil {
			out[o.GetKind()+" "+o.GetNamespace()+"/"+o.GetName()] = o.GetResourceVersion()
		}
	}
	return out, nil
}

// labelled lists the objects of kinds carrying sel, everywhere. A kind
// the cluster does not serve (the Prometheus Operator's) has none.
func labelled(ctx context.Context, c client.Client, sel labels.Selector, gvks []schema.GroupVersionKind) ([]*unstructured.Unstructured, error) {
	var out []*unstructured.Unstructured
	for _, gvk := range gvks {
		list := &unstructured.UnstructuredList{}
		list.SetGroupVersionKind(gvk.GroupVersion().WithKind(gvk.Kind + "List"))
		err := c.List(ctx, list, client.MatchingLabelsSelector{Selector: sel})
		if meta.IsNoMatchError(err) || apierrors.IsNotFound(err) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("list %s: %w", gvk.Kind, err)
		}
		for i := range list.Items {
			out = append(out, &list.Items[i])
		}
	}
	return out, nil
}

// prune deletes the objects of kinds labelled sel that keep does not hold
// (an old ConfigMap of the spoke, an object a newer version no longer
// installs), and returns what it deleted.
func (a *applier) prune(ctx context.Context, sel labels.Selector, keep []*unstructured.Unstructured) ([]string, error) {
	if a.dryRun != nil {
		return nil, nil
	}
	wanted := map[string]bool{}
	for _, o := range keep {
		wanted[objectKey(o)] = true
	}
	have, err := labelled(ctx, a.c, sel, kinds)
	if err != nil {
		return nil, err
	}
	var deleted []string
	var errs []error
	for _, o := range have {
		if wanted[objectKey(o)] {
			continue
		}
		if err := a.c.Delete(ctx, o); client.IgnoreNotFound(err) != nil {
			errs = append(errs, fmt.Errorf("%s: delete %s: %w", a.cluster, describe(o), err))
			continue
		}
		deleted = append(deleted, describe(o))
	}
	sort.Strings(deleted)
	return deleted, errors.Join(errs...)
}

func objectKey(o *unstructured.Unstructured) string {
	gvk := o.GroupVersionKind()
	return strings.Join([]string{gvk.Group, gvk.Kind, o.GetNamespace(), o.GetName()}, "/")
}
