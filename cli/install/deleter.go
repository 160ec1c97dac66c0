package install

import (
	"context"
	"fmt"
	"io"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdfedv1 "github.com/etcdfed/etcdfed/api/v1alpha1"
)

// deleter deletes objects of one cluster, or with dryRun prints them.
type deleter struct {
	c       client.Client
	cluster string
	dryRun  io.Writer
	n       int
}

func (d *deleter) delete(ctx context.Context, o *unstructured.Unstructured) error {
	if d.dryRun != nil {
		_, err := fmt.Fprintf(d.dryRun, "# %s: delete %s\n", d.cluster, describe(o))
		return err
	}
	err := d.c.Delete(ctx, o)
	switch {
	case err == nil:
		d.n++
	case apierrors.IsNotFound(err):
	default:
		return fmt.Errorf("%s: delete %s: %w", d.cluster, describe(o), err)
	}
	return nil
}

var crdGVK = schema.GroupVersionKind{Group: "apiextensions.k8s.io", Version: "v1", Kind: "CustomResourceDefinition"}

// sharedOnes deletes the CRDs and the namespace Join labelled when
// nothing else is left in them and `hub install` did not install them
// too; otherwise it only removes Join's label, and says what keeps them.
func (d *deleter) sharedOnes(ctx context.Context, name string) ([]string, error) {
	sel := labels.SelectorFromSet(labels.Set{LabelJoinedAs: name})
	var kept []string
	crds, err := labelled(ctx, d.c, sel, []schema.GroupVersionKind{crdGVK})
	if err != nil {
		return nil, err
	}
	remaining := 0
	for _, k := range []client.ObjectList{&etcdfedv1.EtcdClusterList{}, &etcdfedv1.EtcdMemberList{}, &etcdfedv1.EtcdSpokeList{}, &etcdfedv1.EtcdDNSZoneList{}} {
		if err := d.c.List(ctx, k); err != nil {
			if isNoMatch(err) {
				continue
			}
			return nil, err
		}
		remaining += len(itemsOf(k))
	}
	if len(crds) > 0 {
		if remaining > 0 || crds[0].GetLabels()[LabelHubInstall] != "" {
			kept = append(kept, fmt.Sprintf("the etcdfed CRDs (%d etcdfed objects remain, or the hub is installed here)", remaining))
			for _, c := range crds {
				if err := d.unlabel(ctx, c); err != nil {
					return nil, err
				}
			}
		} else {
			for _, c := range crds {
				if err := d.delete(ctx, c); err != nil {
					return nil, err
				}
			}
		}
	}
	nss, err := labelled(ctx, d.c, sel, []schema.GroupVersionKind{{Version: "v1", Kind: "Namespace"}})
	if err != nil || len(nss) == 0 {
		return kept, err
	}
	what, err := d.namespaceContents(ctx)
	if err != nil {
		return nil, err
	}
	if len(what) > 0 || nss[0].GetLabels()[LabelHubInstall] != "" {
		if nss[0].GetLabels()[LabelHubInstall] != "" {
			what = append(what, "the hub is installed there")
		}
		kept = append(kept, fmt.Sprintf("namespace %s (%s)", Namespace, strings.Join(what, ", ")))
		return kept, d.unlabel(ctx, nss[0])
	}
	return kept, d.delete(ctx, nss[0])
}

func itemsOf(l client.ObjectList) []any {
	switch l := l.(type) {
	case *etcdfedv1.EtcdClusterList:
		return make([]any, len(l.Items))
	case *etcdfedv1.EtcdMemberList:
		return make([]any, len(l.Items))
	case *etcdfedv1.EtcdSpokeList:
		return make([]any, len(l.Items))
	case *etcdfedv1.EtcdDNSZoneList:
		return make([]any, len(l.Items))
	}
	return nil
}

// namespaceContents says what, not Join's, is left in the ring
// namespace: above all volumes of members (their data), which Unjoin
// never deletes.
func (d *deleter) namespaceContents(ctx context.Context) ([]string, error) {
	var what []string
	var pvcs corev1.PersistentVolumeClaimList
	if err := d.c.List(ctx, &pvcs, client.InNamespace(Namespace)); err != nil {
		return nil, err
	}
	if n := len(pvcs.Items); n > 0 {
		names := make([]string, 0, n)
		for _, p := range pvcs.Items {
			names = append(names, p.Name)
		}
		what = append(what, fmt.Sprintf("%d PersistentVolumeClaims, data of members that lived here: %s; delete them yourself once no ring needs them", n, strings.Join(names, " ")))
	}
	var pods corev1.PodList
	if err := d.c.List(ctx, &pods, client.InNamespace(Namespace)); err != nil {
		return nil, err
	}
	if n := len(pods.Items); n > 0 {
		what = append(what, fmt.Sprintf("%d pods", n))
	}
	var secrets corev1.SecretList
	if err := d.c.List(ctx, &secrets, client.InNamespace(Namespace)); err != nil {
		return nil, err
	}
	if n := len(secrets.Items); n > 0 {
		what = append(what, fmt.Sprintf("%d Secrets", n))
	}
	var svcs corev1.ServiceList
	if err := d.c.List(ctx, &svcs, client.InNamespace(Namespace)); err != nil {
		return nil, err
	}
	if n := len(svcs.Items); n > 0 {
		what = append(what, fmt.Sprintf("%d Services", n))
	}
	return what, nil
}

// unlabel removes Join's label (the object stays).
func (d *deleter) unlabel(ctx context.Context, o *unstructured.Unstructured) error {
	if d.dryRun != nil {
		_, err := fmt.Fprintf(d.dryRun, "# %s: keep %s, remove label %s\n", d.cluster, describe(o), LabelJoinedAs)
		return err
	}
	patch := []byte(`{"metadata":{"labels":{"` + LabelJoinedAs + `":null}}}`)
	if err := d.c.Patch(ctx, o, client.RawPatch("application/merge-patch+json", patch)); client.IgnoreNotFound(err) != nil {
		return fmt.Errorf("%s: remove label %s from %s: %w", d.cluster, LabelJoinedAs, describe(o), err)
	}
	return nil
}
