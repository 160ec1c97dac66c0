// Package pvc is the spoke component for a member's data volumes: one PVC
// per incarnation, named <member>-data-<incarnation>. Build renders the
// current incarnation's PVC, Decide says what to do about it, PlanRetired
// says which PVCs of earlier incarnations to label retired or delete, and
// PlanDeleted the same for every PVC of a deleted member. All are pure; spoke/member reads and
// writes.
//
// A PVC is deleted only when spec.storage.volumeReclaimPolicy is Delete,
// and a retired one only once the new incarnation's pod runs; one labelled
// kept (etcdfed.dev/kept: the hub swept its member and asked to keep it)
// never. A PVC of the
// current incarnation that vanished or was replaced (another UID than the
// one reported in status) is never recreated silently: its data is gone and
// only the hub may start a new incarnation.
package pvc

import (
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

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
// PVCs without the member's labels, are never touched. One of an
// incarnation below spec.storage.keepVolumesBefore (the seed of a
// recovery from a backup) is labelled retired and kept (the write adds
// LabelKept), never deleted.
func PlanRetired(m *etcdfedv1.EtcdMember, pvcs []corev1.PersistentVolumeClaim, currentPodRunning bool) Plan {
	var p Plan
	for i := range pvcs {
		c := &pvcs[i]
		inc, ok := spec.Incarnation(c.Labels)
		if !ok || !spec.OwnedBy(m, c.Labels) || inc >= m.Spec.Incarnation || c.DeletionTimestamp != nil {
			continue
		}
		keep := m.Spec.Storage.KeepsVolume(inc)
		if c.Labels[etcdfedv1.LabelRetired] != "true" || (keep && c.Labels[etcdfedv1.LabelKept] != "true") {
			p.Retire = append(p.Retire, c.Name)
		}
		if keep {
			continue
		}
		if spec.ReclaimPolicy(m) == etcdfedv1.VolumeDelete && currentPodRunning && c.Labels[etcdfedv1.LabelKept] != "true" {
			p.Delete = append(p.Delete, c.Name)
		}
	}
	slices.Sort(p.Retire)
	slices.Sort(p.Delete)
	return p
}

// PlanDeleted plans for every PVC of a deleted member: delete them all with
// the Delete policy, otherwise label them retired. A member the hub deleted
// with its volumes to be kept (LabelKeepVolumes) deletes none, and its
// volumes are labelled kept as they are retired (the write adds LabelKept);
// so are volumes of incarnations below spec.storage.keepVolumesBefore.
func PlanDeleted(m *etcdfedv1.EtcdMember, pvcs []corev1.PersistentVolumeClaim) Plan {
	var p Plan
	keep := m.Labels[etcdfedv1.LabelKeepVolumes] == "true"
	for i := range pvcs {
		c := &pvcs[i]
		if !spec.OwnedBy(m, c.Labels) || c.DeletionTimestamp != nil {
			continue
		}
		if inc, ok := spec.Incarnation(c.Labels); keep || (ok && m.Spec.Storage.KeepsVolume(inc)) {
			if c.Labels[etcdfedv1.LabelKept] != "true" {
				p.Retire = append(p.Retire, c.Name)
			}
			continue
		}
		if spec.ReclaimPolicy(m) == etcdfedv1.VolumeDelete && c.Labels[etcdfedv1.LabelKept] != "true" {
			p.Delete = append(p.Delete, c.Name)
		} else if c.Labels[etcdfedv1.LabelRetired] != "true" {
			p.Retire = append(p.Retire, c.Name)
		}
	}
	slices.Sort(p.Retire)
	slices.Sort(p.Delete)
	return p
}
