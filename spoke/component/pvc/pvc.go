// Package pvc is the spoke component for a member's data volumes: one PVC
// per incarnation, named <member>-data-<incarnation>. Build renders the
// current incarnation's PVC, Decide says what to do about it, PlanRetired
// says which PVCs of earlier incarnations to label or delete, and Reconcile
// observes, decides and acts.
//
// A PVC is deleted only when spec.storage.volumeReclaimPolicy is Delete,
// and a retired one only once the new incarnation's pod runs. A PVC of the
// current incarnation that vanished or was replaced (another UID than the
// one reported in status) is never recreated silently: its data is gone and
// only the hub may start a new incarnation.
package pvc

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdfedv1 "github.com/etcdfed/etcdfed/api/v1alpha1"
	"github.com/etcdfed/etcdfed/spoke/internal/spec"
)

// Build renders the PVC of the member's current incarnation. It has no
// owner reference: volumes outlive the EtcdMember unless the reclaim policy
// says otherwise.
func Build(m *etcdfedv1.EtcdMember) *corev1.PersistentVolumeClaim {
	return &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{
			Name:      spec.ClaimName(m, m.Spec.Incarnation),
			Namespace: m.Namespace,
			Labels:    spec.Labels(m, spec.ComponentData, m.Spec.Incarnation),
		},
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes:      []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			StorageClassName: m.Spec.Storage.StorageClassName,
			Resources: corev1.VolumeResourceRequirements{
				Requests: corev1.ResourceList{corev1.ResourceStorage: spec.StorageSize(m)},
			},
		},
	}
}

// Action is what to do about the current incarnation's PVC.
type Action string

const (
	// Keep: the PVC exists and is the member's.
	Keep Action = "Keep"
	// Create the PVC.
	Create Action = "Create"
	// Lost: the PVC the member ran on is gone or was replaced. Nothing is
	// created; the member needs a new incarnation.
	Lost Action = "Lost"
	// Terminating: the PVC is being deleted.
	Terminating Action = "Terminating"
	// Conflict: a PVC of that name exists that the member does not own.
	Conflict Action = "Conflict"
)

// Decision is Decide's answer.
type Decision struct {
	Action  Action
	Message string
}

// Decide says what to do about the current incarnation's PVC (nil if none),
// given what the member's status last reported.
func Decide(m *etcdfedv1.EtcdMember, cur *corev1.PersistentVolumeClaim) Decision {
	name := spec.ClaimName(m, m.Spec.Incarnation)
	known := m.Status.Incarnation == m.Spec.Incarnation && m.Status.Volume.ClaimName == name && m.Status.Volume.UID != ""
	switch {
	case cur == nil && known:
		return Decision{Action: Lost, Message: fmt.Sprintf("PVC %s (UID %s) of incarnation %d is gone: its data is lost; the member needs a new incarnation", name, m.Status.Volume.UID, m.Spec.Incarnation)}
	case cur == nil:
		return Decision{Action: Create}
	case !spec.OwnedBy(m, cur.Labels):
		return Decision{Action: Conflict, Message: fmt.Sprintf("PVC %s exists but is not this member's (cluster UID %q): it is left alone", name, cur.Labels[etcdfedv1.LabelClusterUID])}
	case known && string(cur.UID) != m.Status.Volume.UID:
		return Decision{Action: Lost, Message: fmt.Sprintf("PVC %s was replaced (UID %s, the member ran on %s): its data is not the member's; the member needs a new incarnation", name, cur.UID, m.Status.Volume.UID)}
	case cur.DeletionTimestamp != nil:
		return Decision{Action: Terminating, Message: fmt.Sprintf("PVC %s is being deleted", name)}
	}
	return Decision{Action: Keep}
}

// Plan lists PVCs to label retired and to delete.
type Plan struct {
	Retire []string
	Delete []string
}

// PlanRetired plans for the member's PVCs of earlier incarnations: label
// each retired, and with the Delete policy delete them once the current
// incarnation's pod runs. PVCs of the current or a later incarnation, and
// PVCs without the member's labels, are never touched.
func PlanRetired(m *etcdfedv1.EtcdMember, pvcs []corev1.PersistentVolumeClaim, currentPodRunning bool) Plan {
	var p Plan
	for i := range pvcs {
		c := &pvcs[i]
		inc, ok := spec.Incarnation(c.Labels)
		if !ok || !spec.OwnedBy(m, c.Labels) || inc >= m.Spec.Incarnation || c.DeletionTimestamp != nil {
			continue
		}
		if c.Labels[etcdfedv1.LabelRetired] != "true" {
			p.Retire = append(p.Retire, c.Name)
		}
		if spec.ReclaimPolicy(m) == etcdfedv1.VolumeDelete && currentPodRunning {
			p.Delete = append(p.Delete, c.Name)
		}
	}
	slices.Sort(p.Retire)
	slices.Sort(p.Delete)
	return p
}

// PlanDeleted plans for every PVC of a deleted member: delete them all with
// the Delete policy, otherwise label them retired.
func PlanDeleted(m *etcdfedv1.EtcdMember, pvcs []corev1.PersistentVolumeClaim) Plan {
	var p Plan
	for i := range pvcs {
		c := &pvcs[i]
		if !spec.OwnedBy(m, c.Labels) || c.DeletionTimestamp != nil {
			continue
		}
		if spec.ReclaimPolicy(m) == etcdfedv1.VolumeDelete {
			p.Delete = append(p.Delete, c.Name)
		} else if c.Labels[etcdfedv1.LabelRetired] != "true" {
			p.Retire = append(p.Retire, c.Name)
		}
	}
	slices.Sort(p.Retire)
	slices.Sort(p.Delete)
	return p
}

// Result is the current PVC after Reconcile, every PVC of the member and
// the decision taken.
type Result struct {
	Current  *corev1.PersistentVolumeClaim
	All      []corev1.PersistentVolumeClaim
	Decision Decision
}

// Reconcile observes the member's PVCs and creates the current one if it is
// missing and may be created.
func Reconcile(ctx context.Context, c client.Client, live client.Reader, m *etcdfedv1.EtcdMember) (Result, error) {
	all, err := List(ctx, c, m)
	if err != nil {
		return Result{}, err
	}
	name := spec.ClaimName(m, m.Spec.Incarnation)
	var cur *corev1.PersistentVolumeClaim
	for i := range all {
		if all[i].Name == name {
			cur = &all[i]
		}
	}
	if cur == nil {
		// The list selects by label; a PVC of that name without them is
		// found by name.
		obj := &corev1.PersistentVolumeClaim{}
		if err := c.Get(ctx, types.NamespacedName{Namespace: m.Namespace, Name: name}, obj); err == nil {
			cur = obj
		} else if !apierrors.IsNotFound(err) {
			return Result{}, fmt.Errorf("get PVC: %w", err)
		}
	}
	d := Decide(m, cur)
	if cur == nil && d.Action == Lost {
		// Confirm past the cache before calling data lost: the cache may
		// not have seen a PVC created a moment ago.
		obj := &corev1.PersistentVolumeClaim{}
		if err := live.Get(ctx, types.NamespacedName{Namespace: m.Namespace, Name: name}, obj); err == nil {
			cur = obj
			d = Decide(m, cur)
		} else if !apierrors.IsNotFound(err) {
			return Result{}, fmt.Errorf("get PVC: %w", err)
		}
	}
	res := Result{Current: cur, All: all, Decision: d}
	if d.Action != Create {
		return res, nil
	}
	obj := Build(m)
	ctrl.LoggerFrom(ctx).Info("Creating data volume", "pvc", obj.Name, "incarnation", m.Spec.Incarnation)
	if err := c.Create(ctx, obj, client.FieldOwner(spec.FieldOwner)); err != nil {
		if !apierrors.IsAlreadyExists(err) {
			return res, fmt.Errorf("create PVC: %w", err)
		}
		if err := live.Get(ctx, client.ObjectKeyFromObject(obj), obj); err != nil {
			return res, fmt.Errorf("get PVC after create conflict: %w", err)
		}
		res.Decision = Decide(m, obj)
	}
	res.Current = obj
	return res, nil
}

// List returns every PVC of the member (all incarnations), sorted by name.
func List(ctx context.Context, c client.Reader, m *etcdfedv1.EtcdMember) ([]corev1.PersistentVolumeClaim, error) {
	list := &corev1.PersistentVolumeClaimList{}
	if err := c.List(ctx, list, client.InNamespace(m.Namespace), client.MatchingLabels(spec.SelectorLabels(m))); err != nil {
		return nil, fmt.Errorf("list PVCs: %w", err)
	}
	slices.SortFunc(list.Items, func(a, b corev1.PersistentVolumeClaim) int { return strings.Compare(a.Name, b.Name) })
	return list.Items, nil
}

// Apply carries out a plan: it labels PVCs retired and deletes the ones to
// delete.
func Apply(ctx context.Context, c client.Client, m *etcdfedv1.EtcdMember, pvcs []corev1.PersistentVolumeClaim, p Plan) error {
	log := ctrl.LoggerFrom(ctx)
	byName := map[string]*corev1.PersistentVolumeClaim{}
	for i := range pvcs {
		byName[pvcs[i].Name] = &pvcs[i]
	}
	var errs []error
	for _, n := range p.Retire {
		pvc := byName[n]
		if pvc == nil {
			continue
		}
		log.Info("Labelling data volume retired", "pvc", n)
		patch := client.MergeFrom(pvc.DeepCopy())
		if pvc.Labels == nil {
			pvc.Labels = map[string]string{}
		}
		pvc.Labels[etcdfedv1.LabelRetired] = "true"
		if err := c.Patch(ctx, pvc, patch, client.FieldOwner(spec.FieldOwner)); err != nil && !apierrors.IsNotFound(err) {
			errs = append(errs, fmt.Errorf("label PVC %s retired: %w", n, err))
		}
	}
	for _, n := range p.Delete {
		pvc := byName[n]
		if pvc == nil {
			continue
		}
		log.Info("Deleting data volume", "pvc", n, "volumeReclaimPolicy", spec.ReclaimPolicy(m))
		if err := c.Delete(ctx, pvc, client.Preconditions{UID: &pvc.UID}); err != nil && !apierrors.IsNotFound(err) {
			errs = append(errs, fmt.Errorf("delete PVC %s: %w", n, err))
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("retire volumes: %w", errors.Join(errs...))
	}
	return nil
}
