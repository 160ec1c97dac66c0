package etcdcluster

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdfedv1 "github.com/etcdfed/etcdfed/api/v1alpha1"
	"github.com/etcdfed/etcdfed/hub/pki"
)

// ownedKind is a kind of object the hub writes into member clusters for an
// EtcdCluster. Every such object carries ownerLabels; observe lists them,
// the sweep and a member's deletion delete them, and deleting the
// EtcdCluster deletes them all, each through this one list.
type ownedKind struct {
	kind    string
	newList func() client.ObjectList
	newObj  func() client.Object
	// perMember: each object belongs to one member (LabelMember) and goes
	// with it; otherwise there is one per EtcdCluster and cluster.
	perMember bool
}

var ownedKinds = []ownedKind{
	{kind: "EtcdMember", newList: func() client.ObjectList { return &etcdfedv1.EtcdMemberList{} }, newObj: func() client.Object { return &etcdfedv1.EtcdMember{} }, perMember: true},
	{kind: "Secret", newList: func() client.ObjectList { return &corev1.SecretList{} }, newObj: func() client.Object { return &corev1.Secret{} }, perMember: true},
	{kind: "EtcdDNSZone", newList: func() client.ObjectList { return &etcdfedv1.EtcdDNSZoneList{} }, newObj: func() client.Object { return &etcdfedv1.EtcdDNSZone{} }},
}

// ownerLabels are set on every object the hub writes for ec.
func ownerLabels(ec *etcdfedv1.EtcdCluster) map[string]string {
	return map[string]string{
		etcdfedv1.LabelClusterName:      ec.Name,
		etcdfedv1.LabelClusterNamespace: ec.Namespace,
		etcdfedv1.LabelClusterUID:       string(ec.RingUID()),
		etcdfedv1.LabelManagedBy:        etcdfedv1.ManagedByValue,
	}
}

// ownedSelector selects ec's objects in a member cluster.
func ownedSelector(uid types.UID) client.MatchingLabels {
	return client.MatchingLabels{etcdfedv1.LabelClusterUID: string(uid)}
}

// listOwned lists every owned kind of the EtcdCluster uid in ns and sorts
// the objects into cs.
func listOwned(ctx context.Context, c client.Reader, ns string, uid types.UID, cs *clusterSnapshot) error {
	for _, k := range ownedKinds {
		list := k.newList()
		if err := c.List(ctx, list, client.InNamespace(ns), ownedSelector(uid)); err != nil {
			return fmt.Errorf("list %ss in %s: %w", k.kind, cs.name, err)
		}
		items, err := meta.ExtractList(list)
		if err != nil {
			return fmt.Errorf("list %ss in %s: %w", k.kind, cs.name, err)
		}
		for _, it := range items {
			switch o := it.(type) {
			case *etcdfedv1.EtcdMember:
				// By member name, whatever the object's name: the scheme's
				// (MemberObjectName), an incarnation's, or the member's
				// alone for an object written before the scheme, which the
				// hub keeps using.
				cs.add(o)
			case *corev1.Secret:
				cs.secrets[o.Name] = o
			case *etcdfedv1.EtcdDNSZone:
				cs.zones[o.Name] = o
			}
		}
	}
	return nil
}

// preferObject: of two EtcdMembers of one member in one cluster (a Move
// inside the cluster keeps its old incarnation's beside the new one), the
// one of the later incarnation is the member's current object, then the
// one named by the scheme; settle prefers the one of the incarnation the
// ledger records. The other is kept in others: deleted by the Move's last
// step or swept, never written.
func preferObject(a, b *etcdfedv1.EtcdMember) bool {
	if a.Spec.Incarnation != b.Spec.Incarnation {
		return a.Spec.Incarnation > b.Spec.Incarnation
	}
	return a.Name != a.Spec.MemberName && b.Name == b.Spec.MemberName
}

// memberObjectName is the name of member's EtcdMember in cs, which also
// names its certificate Secret and, in the spoke, its pod, Service and
// volumes: the existing object's name when there is one (one named after
// the member alone, written before the scheme, is kept: renaming it would
// restart the member), else the scheme's (etcdfedv1.MemberObjectName).
func memberObjectName(ec *etcdfedv1.EtcdCluster, cs *clusterSnapshot, member string) string {
	if cs != nil {
		if o := cs.members[member]; o != nil {
			return o.Name
		}
	}
	return etcdfedv1.MemberObjectName(ec.Namespace, ec.Name, member)
}

// zoneObject is the ring's EtcdDNSZone in cs (nil when none): the one of
// the scheme's name, else one of another name (written before the scheme,
// named after the ring), which the hub keeps.
func zoneObject(ec *etcdfedv1.EtcdCluster, cs *clusterSnapshot) *etcdfedv1.EtcdDNSZone {
	if cs == nil {
		return nil
	}
	if z := cs.zones[etcdfedv1.RingObjectName(ec.Namespace, ec.Name)]; z != nil {
		return z
	}
	for _, name := range slices.Sorted(maps.Keys(cs.zones)) {
		return cs.zones[name]
	}
	return nil
}

// zoneObjects are the ring's EtcdDNSZones in cs (whatever their names).
func zoneObjects(cs *clusterSnapshot) []client.Object {
	var out []client.Object
	for _, name := range slices.Sorted(maps.Keys(cs.zones)) {
		out = append(out, cs.zones[name])
	}
	return out
}

// memberObjects are the owned objects ref names in a cluster: its
// EtcdMember and the member's Secrets there, but those named after
// another of the member's EtcdMembers, which stays (a Move inside the
// cluster deletes the old incarnation's object and keeps the new one's).
func memberObjects(cs *clusterSnapshot, ref memberRef) []client.Object {
	var out []client.Object
	obj := cs.refObject(ref)
	if obj != nil {
		out = append(out, obj)
	}
	staying := map[string]bool{}
	for _, o := range cs.objectsOf(ref.member) {
		if o != obj {
			for _, n := range objectSecretNames(o.Name) {
				staying[n] = true
			}
		}
	}
	for _, o := range cs.secrets {
		if o.Labels[etcdfedv1.LabelMember] == ref.member && !staying[o.Name] {
			out = append(out, o)
		}
	}
	return out
}

// objectSecretNames are the Secrets the hub names after an EtcdMember:
// its certificate and its copy of a restore store's credentials.
func objectSecretNames(object string) []string {
	return []string{pki.MemberSecretName(object), StoreCredentialsSecretName(object)}
}

// certObjectName is the name of the EtcdMember whose certificate Secret
// is written for member in cs: obj's, or the member's current one's.
func certObjectName(ec *etcdfedv1.EtcdCluster, cs *clusterSnapshot, member string, obj *etcdfedv1.EtcdMember) string {
	if obj != nil {
		return obj.Name
	}
	return memberObjectName(ec, cs, member)
}

// ownedMembers lists the member names that own objects in a cluster.
func ownedMembers(cs *clusterSnapshot) map[string]bool {
	out := map[string]bool{}
	for name := range cs.members {
		out[name] = true
	}
	for _, o := range cs.secrets {
		if m := o.Labels[etcdfedv1.LabelMember]; m != "" {
			out[m] = true
		}
	}
	return out
}

// deleteAllOwned deletes every owned object of the EtcdCluster uid in a
// cluster.
func deleteAllOwned(ctx context.Context, c client.Client, ns string, uid types.UID, where string) error {
	var errs []error
	for _, k := range ownedKinds {
		if err := c.DeleteAllOf(ctx, k.newObj(), client.InNamespace(ns), ownedSelector(uid)); err != nil && !apierrors.IsNotFound(err) {
			errs = append(errs, fmt.Errorf("delete %ss in %s: %w", k.kind, where, err))
		}
	}
	return errors.Join(errs...)
}

// deleteOwned deletes objects the hub owns; one already gone is deleted.
func deleteOwned(ctx context.Context, c client.Client, where string, objs ...client.Object) error {
	var errs []error
	for _, o := range objs {
		if err := c.Delete(ctx, o); err != nil && !apierrors.IsNotFound(err) {
			errs = append(errs, fmt.Errorf("delete %s %s in %s: %w", kindOf(o), o.GetName(), where, err))
		}
	}
	return errors.Join(errs...)
}

// writeOwned is the one writer of the objects the hub owns, in member
// clusters and in the hub: it creates want when existing (what observe saw)
// is nil, and otherwise patches existing to want's labels and content (an
// object's spec, a Secret's data) when they differ. It never touches an
// object another EtcdCluster owns (the owner is the LabelClusterUID label,
// which every owned object carries) nor one observe did not see.
func writeOwned(ctx context.Context, c client.Client, uid types.UID, where string, existing, want client.Object) error {
	kind := kindOf(want)
	if existing == nil {
		err := c.Create(ctx, want)
		if !apierrors.IsAlreadyExists(err) {
			if err != nil {
				return fmt.Errorf("create %s %s in %s: %w", kind, want.GetName(), where, err)
			}
			return nil
		}
		// There since observe looked, or observe could not see it (another
		// EtcdCluster's): never overwritten unseen. The next pass reads it.
		found := want.DeepCopyObject().(client.Object)
		if gerr := c.Get(ctx, client.ObjectKeyFromObject(want), found); gerr == nil {
			if owner := found.GetLabels()[etcdfedv1.LabelClusterUID]; owner != string(uid) {
				return fmt.Errorf("%s %s in %s belongs to another EtcdCluster (uid %q)", kind, want.GetName(), where, owner)
			}
		}
		return fmt.Errorf("create %s %s in %s: %w", kind, want.GetName(), where, err)
	}
	if owner := existing.GetLabels()[etcdfedv1.LabelClusterUID]; owner != string(uid) {
		return fmt.Errorf("%s %s in %s belongs to another EtcdCluster (uid %q)", kind, want.GetName(), where, owner)
	}
	if maps.Equal(existing.GetLabels(), want.GetLabels()) && sameContent(existing, want) {
		return nil
	}
	patched := existing.DeepCopyObject().(client.Object)
	patched.SetLabels(want.GetLabels())
	copyContent(patched, want)
	if err := c.Patch(ctx, patched, client.MergeFrom(existing)); err != nil {
		return fmt.Errorf("update %s %s in %s: %w", kind, want.GetName(), where, err)
	}
	return nil
}

// sameContent compares what the hub owns of an object.
func sameContent(a, b client.Object) bool {
	switch a := a.(type) {
	case *etcdfedv1.EtcdMember:
		return equality.Semantic.DeepEqual(a.Spec, b.(*etcdfedv1.EtcdMember).Spec)
	case *etcdfedv1.EtcdDNSZone:
		return equality.Semantic.DeepEqual(a.Spec, b.(*etcdfedv1.EtcdDNSZone).Spec)
	case *corev1.Secret:
		return equality.Semantic.DeepEqual(a.Data, b.(*corev1.Secret).Data)
	}
	panic(fmt.Sprintf("etcdcluster: %T is not an owned kind", a))
}

// copyContent copies what the hub owns of src into dst.
func copyContent(dst, src client.Object) {
	switch d := dst.(type) {
	case *etcdfedv1.EtcdMember:
		d.Spec = src.(*etcdfedv1.EtcdMember).Spec
	case *etcdfedv1.EtcdDNSZone:
		d.Spec = src.(*etcdfedv1.EtcdDNSZone).Spec
	case *corev1.Secret:
		d.Data = src.(*corev1.Secret).Data // the type is immutable
	default:
		panic(fmt.Sprintf("etcdcluster: %T is not an owned kind", dst))
	}
}

// present is o as a client.Object, nil when o is a nil pointer (observe
// found no such object).
func present[T any, PT interface {
	*T
	client.Object
}](o PT) client.Object {
	if o == nil {
		return nil
	}
	return o
}

func kindOf(o client.Object) string {
	switch o.(type) {
	case *etcdfedv1.EtcdMember:
		return "EtcdMember"
	case *etcdfedv1.EtcdDNSZone:
		return "EtcdDNSZone"
	case *corev1.Secret:
		return "Secret"
	}
	return fmt.Sprintf("%T", o)
}
