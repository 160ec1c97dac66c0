package member

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	etcdfedv1 "github.com/etcdfed/etcdfed/api/v1alpha1"
	"github.com/etcdfed/etcdfed/spoke/component/budget"
	"github.com/etcdfed/etcdfed/spoke/component/pvc"
	"github.com/etcdfed/etcdfed/spoke/internal/spec"
)

// ownedKind is a kind of object the spoke keeps for an EtcdMember. This list
// is the one place they are named: SetupWithManager watches each, observe
// reads each, the one writer (writeOwned) creates, updates and deletes only
// these, and a deleted member's objects go through each kind's delete hook.
type ownedKind struct {
	kind   string
	newObj func() client.Object
	// controlled objects get the EtcdMember as controller owner: the
	// garbage collector removes them after it, and their events requeue
	// it. A PVC is not: it outlives the member unless the reclaim policy
	// says otherwise, and maps back by its member label.
	controlled bool
	// read returns the objects of this kind that bear the member's names
	// or labels: the member's own, and one of its name that another owns.
	// It reads the cache (c) and, when live is set, looks up past it an
	// object of a name the member would create that the cache does not
	// show: the cache holds only objects labelled managed-by etcdfed, and
	// no create may be decided on a name another object holds.
	read func(ctx context.Context, c, live client.Reader, m *etcdfedv1.EtcdMember) ([]client.Object, error)
	// memberDeleted is the kind's delete hook: the writes that dispose of
	// objs (what read returned) when the member is deleted.
	memberDeleted func(m *etcdfedv1.EtcdMember, objs []client.Object) []write
}

// ownedKinds in the order a deleted member's objects go: the pod first, the
// volumes last.
var ownedKinds = []ownedKind{
	{kind: "Pod", newObj: func() client.Object { return &corev1.Pod{} }, controlled: true,
		read: readNamed[corev1.Pod](spec.PodName), memberDeleted: deleteIfOwned},
	{kind: "Service", newObj: func() client.Object { return &corev1.Service{} }, controlled: true,
		read: readService, memberDeleted: deleteIfOwned},
	{kind: "PodDisruptionBudget", newObj: func() client.Object { return &policyv1.PodDisruptionBudget{} }, controlled: true,
		read: readNamed[policyv1.PodDisruptionBudget](budget.Name), memberDeleted: deleteIfOwned},
	{kind: "PersistentVolumeClaim", newObj: func() client.Object { return &corev1.PersistentVolumeClaim{} },
		read: readClaims, memberDeleted: claimsOfDeletedMember},
}

// kindOf finds o's kind in ownedKinds; nil when the spoke does not own
// objects of that type.
func kindOf(o client.Object) *ownedKind {
	for i := range ownedKinds {
		if reflect.TypeOf(ownedKinds[i].newObj()) == reflect.TypeOf(o) {
			return &ownedKinds[i]
		}
	}
	return nil
}

// readNamed reads the object of the member's name from the cache, and
// past it (live) when the cache does not show it and live is set.
func readNamed[T any, PT interface {
	*T
	client.Object
}](name func(*etcdfedv1.EtcdMember) string) func(context.Context, client.Reader, client.Reader, *etcdfedv1.EtcdMember) ([]client.Object, error) {
	return func(ctx context.Context, c, live client.Reader, m *etcdfedv1.EtcdMember) ([]client.Object, error) {
		key := types.NamespacedName{Namespace: m.Namespace, Name: name(m)}
		for _, r := range []client.Reader{c, live} {
			if r == nil {
				continue
			}
			obj := PT(new(T))
			err := r.Get(ctx, key, obj)
			if err == nil {
				return []client.Object{obj}, nil
			}
			if !apierrors.IsNotFound(err) {
				return nil, fmt.Errorf("get %s: %w", key.Name, err)
			}
		}
		return nil, nil
	}
}

// readService reads the member's Service; with PodIP exposure, which
// creates none, the cache's view is enough.
func readService(ctx context.Context, c, live client.Reader, m *etcdfedv1.EtcdMember) ([]client.Object, error) {
	if spec.ExposeType(m) == etcdfedv1.ExposePodIP {
		live = nil
	}
	return readNamed[corev1.Service](spec.ServiceName)(ctx, c, live, m)
}

// readClaims lists the member's PVCs of every incarnation by label, sorted
// by name, and adds the current incarnation's by name when the list lacks it
// (a PVC of that name without the member's labels, or one the cache has not
// seen yet).
func readClaims(ctx context.Context, c, live client.Reader, m *etcdfedv1.EtcdMember) ([]client.Object, error) {
	list := &corev1.PersistentVolumeClaimList{}
	if err := c.List(ctx, list, client.InNamespace(m.Namespace), client.MatchingLabels(spec.SelectorLabels(m))); err != nil {
		return nil, fmt.Errorf("list PVCs: %w", err)
	}
	slices.SortFunc(list.Items, func(a, b corev1.PersistentVolumeClaim) int { return strings.Compare(a.Name, b.Name) })
	out := make([]client.Object, 0, len(list.Items)+1)
	name := spec.ClaimName(m, m.Spec.Incarnation)
	listed := false
	for i := range list.Items {
		out = append(out, &list.Items[i])
		listed = listed || list.Items[i].Name == name
	}
	if !listed {
		named, err := readNamed[corev1.PersistentVolumeClaim](func(m *etcdfedv1.EtcdMember) string { return name })(ctx, c, live, m)
		if err != nil {
			return nil, err
		}
		out = append(out, named...)
	}
	return out, nil
}

// deleteIfOwned is the delete hook of the pod, the Service and the
// PodDisruptionBudget: the member's own goes with it; another's, or one already being deleted, is
// left alone.
func deleteIfOwned(m *etcdfedv1.EtcdMember, objs []client.Object) []write {
	var ws []write
	for _, o := range objs {
		if spec.OwnedBy(m, o.GetLabels()) && o.GetDeletionTimestamp() == nil {
			ws = append(ws, write{op: opDelete, obj: o, why: "the member is deleted"})
		}
	}
	return ws
}

// claimsOfDeletedMember is the PVCs' delete hook: pvc.PlanDeleted, which
// deletes them only with the Delete reclaim policy and otherwise labels them
// retired.
func claimsOfDeletedMember(m *etcdfedv1.EtcdMember, objs []client.Object) []write {
	var claims []corev1.PersistentVolumeClaim
	for _, o := range objs {
		claims = append(claims, *o.(*corev1.PersistentVolumeClaim))
	}
	return claimWrites(m, claims, pvc.PlanDeleted(m, claims), "the member is deleted")
}

// claimWrites turns a plan for the member's PVCs into writes.
func claimWrites(m *etcdfedv1.EtcdMember, claims []corev1.PersistentVolumeClaim, p pvc.Plan, why string) []write {
	byName := map[string]*corev1.PersistentVolumeClaim{}
	for i := range claims {
		byName[claims[i].Name] = &claims[i]
	}
	var ws []write
	for _, n := range p.Retire {
		if c := byName[n]; c != nil {
			ws = append(ws, write{op: opRetire, obj: c, why: why})
		}
	}
	for _, n := range p.Delete {
		if c := byName[n]; c != nil {
			ws = append(ws, write{op: opDelete, obj: c, why: fmt.Sprintf("%s; volumeReclaimPolicy %s", why, spec.ReclaimPolicy(m))})
		}
	}
	return ws
}

// writeOp is what a write does.
type writeOp string

const (
	opCreate writeOp = "Create"
	// opUpdate replaces the object with obj (read, then changed).
	opUpdate writeOp = "Update"
	// opRetire labels a PVC retired.
	opRetire writeOp = "Retire"
	opDelete writeOp = "Delete"
)

// write is one write of an owned object, rendered by decide or a delete
// hook and carried out by writeOwned.
type write struct {
	op writeOp
	// obj is the object to create, the updated object, or the object to
	// retire or delete as observed.
	obj client.Object
	// why is logged.
	why string
	// event is recorded on the EtcdMember once the write succeeded.
	event *memberEvent
}

// memberEvent is an event on the EtcdMember.
type memberEvent struct {
	typ, reason, note string
}

var (
	// errNameTaken: a create found the name taken; what observe saw is
	// stale.
	errNameTaken = errors.New("member: the name is taken")
	// errNotOwned: the object is not the member's; it is left alone.
	errNotOwned = errors.New("member: not the member's object")
	// errVolumeRetained: a volume the reclaim policy keeps was to be
	// deleted. Never done.
	errVolumeRetained = errors.New("member: the volume is retained")
)

// mayDeleteVolume is the one rule for deleting a member's data volume:
// only with the Delete reclaim policy, never one labelled kept, and only a
// volume of an earlier incarnation or of a member that is being deleted.
// The spoke never deletes a volume on its own initiative; when to delete
// within this rule (a retired volume once the new incarnation's pod runs)
// is pvc's plan.
func mayDeleteVolume(m *etcdfedv1.EtcdMember, c *corev1.PersistentVolumeClaim) bool {
	if spec.ReclaimPolicy(m) != etcdfedv1.VolumeDelete || !spec.OwnedBy(m, c.Labels) || c.Labels[etcdfedv1.LabelKept] == "true" {
		return false
	}
	if inc, ok := spec.Incarnation(c.Labels); ok && m.Spec.Storage.KeepsVolume(inc) {
		return false // spec.storage.keepVolumesBefore
	}
	if !m.DeletionTimestamp.IsZero() {
		return true
	}
	inc, ok := spec.Incarnation(c.Labels)
	return ok && inc < m.Spec.Incarnation
}

// writeOwned is the one writer of the objects the spoke keeps for a
// member. It creates w.obj (with the member as controller owner for a
// controlled kind), updates it, labels a PVC retired or deletes the object
// observed (with its UID as precondition). It deletes only the member's own
// objects and a volume only as mayDeleteVolume allows. It returns the
// object as the apiserver answered (created or updated) and errNameTaken
// when a create finds the name taken.
func (r *Reconciler) writeOwned(ctx context.Context, m *etcdfedv1.EtcdMember, w write) (client.Object, error) {
	k := kindOf(w.obj)
	if k == nil {
		return nil, fmt.Errorf("write %T: not a kind the spoke owns", w.obj)
	}
	name := w.obj.GetName()
	log := ctrl.LoggerFrom(ctx).WithValues("kind", k.kind, "name", name)
	switch w.op {
	case opCreate:
		obj := w.obj.DeepCopyObject().(client.Object)
		if k.controlled {
			if err := controllerutil.SetControllerReference(m, obj, r.Scheme); err != nil {
				return nil, fmt.Errorf("set owner of %s %s: %w", k.kind, name, err)
			}
		}
		log.Info("Creating "+k.kind, "why", w.why)
		if err := r.Client.Create(ctx, obj, client.FieldOwner(spec.FieldOwner)); err != nil {
			if apierrors.IsAlreadyExists(err) {
				return nil, fmt.Errorf("create %s %s: %w", k.kind, name, errNameTaken)
			}
			return nil, fmt.Errorf("create %s %s: %w", k.kind, name, err)
		}
		return obj, nil
	case opUpdate:
		obj := w.obj.DeepCopyObject().(client.Object)
		log.Info("Updating "+k.kind, "why", w.why)
		if err := r.Client.Update(ctx, obj, client.FieldOwner(spec.FieldOwner)); err != nil {
			return nil, fmt.Errorf("update %s %s: %w", k.kind, name, err)
		}
		return obj, nil
	case opRetire:
		c, ok := w.obj.(*corev1.PersistentVolumeClaim)
		if !ok {
			return nil, fmt.Errorf("retire %s %s: only volumes are retired", k.kind, name)
		}
		log.Info("Labelling data volume retired", "why", w.why)
		patched := c.DeepCopy()
		if patched.Labels == nil {
			patched.Labels = map[string]string{}
		}
		patched.Labels[etcdfedv1.LabelRetired] = "true"
		if m.Labels[etcdfedv1.LabelKeepVolumes] == "true" && !m.DeletionTimestamp.IsZero() {
			patched.Labels[etcdfedv1.LabelKept] = "true"
		}
		if inc, ok := spec.Incarnation(c.Labels); ok && m.Spec.Storage.KeepsVolume(inc) {
			patched.Labels[etcdfedv1.LabelKept] = "true"
		}
		if err := r.Client.Patch(ctx, patched, client.MergeFrom(c), client.FieldOwner(spec.FieldOwner)); err != nil && !apierrors.IsNotFound(err) {
			return nil, fmt.Errorf("label PVC %s retired: %w", name, err)
		}
		return nil, nil
	case opDelete:
		if !spec.OwnedBy(m, w.obj.GetLabels()) {
			return nil, fmt.Errorf("delete %s %s: %w", k.kind, name, errNotOwned)
		}
		if c, ok := w.obj.(*corev1.PersistentVolumeClaim); ok && !mayDeleteVolume(m, c) {
			return nil, fmt.Errorf("delete PVC %s (volumeReclaimPolicy %s): %w", name, spec.ReclaimPolicy(m), errVolumeRetained)
		}
		log.Info("Deleting "+k.kind, "why", w.why)
		uid := w.obj.GetUID()
		if err := r.Client.Delete(ctx, w.obj, client.Preconditions{UID: &uid}); err != nil && !apierrors.IsNotFound(err) {
			return nil, fmt.Errorf("delete %s %s: %w", k.kind, name, err)
		}
		return nil, nil
	}
	return nil, fmt.Errorf("write %s %s: unknown operation %q", k.kind, name, w.op)
}

// deleteMember is the delete path's one call: every owned kind's objects
// go through the kind's delete hook and the one writer. Every kind is
// tried; the errors are joined.
func (r *Reconciler) deleteMember(ctx context.Context, m *etcdfedv1.EtcdMember) error {
	var errs []error
	for _, k := range ownedKinds {
		// The cache's view: nothing is created, and what it does not show
		// is not the member's.
		objs, err := k.read(ctx, r.Client, nil, m)
		if err != nil {
			errs = append(errs, fmt.Errorf("read %ss: %w", k.kind, err))
			continue
		}
		for _, w := range k.memberDeleted(m, objs) {
			if _, err := r.writeOwned(ctx, m, w); err != nil {
				errs = append(errs, err)
			}
		}
	}
	return errors.Join(errs...)
}
