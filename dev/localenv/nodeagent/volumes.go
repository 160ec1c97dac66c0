package nodeagent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// Annotations and finalizers of the PV machinery the agent plays.
const (
	annProvisionedBy     = "pv.kubernetes.io/provisioned-by"
	annBindCompleted     = "pv.kubernetes.io/bind-completed"
	annBoundByController = "pv.kubernetes.io/bound-by-controller"
	annSelectedNode      = "volume.kubernetes.io/selected-node"
	annStorageProvider   = "volume.kubernetes.io/storage-provisioner"
	pvcProtection        = "kubernetes.io/pvc-protection"
	pvProtection         = "kubernetes.io/pv-protection"
)

// VolumeDir is the directory of a provisioned volume.
func (a *Agent) VolumeDir(pvName string) string {
	return filepath.Join(a.cfg.StateDir, "volumes", pvName)
}

// provision creates a directory and a PV for the claim in the node's zone
// and binds the two, as a CSI provisioner plus the PV controller would.
func (a *Agent) provision(ctx context.Context, pvc *corev1.PersistentVolumeClaim, node nodeState) error {
	sc, why := a.storageClassFor(ctx, pvc)
	if why != "" {
		return errors.New(why)
	}
	name := "pvc-" + string(pvc.UID)
	dir := a.VolumeDir(name)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("provision %s: %w", name, err)
	}
	reclaim := corev1.PersistentVolumeReclaimDelete
	if sc.ReclaimPolicy != nil {
		reclaim = *sc.ReclaimPolicy
	}
	size := pvc.Spec.Resources.Requests[corev1.ResourceStorage]
	if size.IsZero() {
		size = resource.MustParse("1Gi")
	}
	modes := pvc.Spec.AccessModes
	if len(modes) == 0 {
		modes = []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce}
	}
	fs := corev1.PersistentVolumeFilesystem
	pv := &corev1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{
			Name:        name,
			Annotations: map[string]string{annProvisionedBy: a.cfg.Provisioner, annBoundByController: "yes"},
			Labels:      map[string]string{ZoneLabel: node.Zone},
		},
		Spec: corev1.PersistentVolumeSpec{
			Capacity:                      corev1.ResourceList{corev1.ResourceStorage: size},
			AccessModes:                   modes,
			PersistentVolumeReclaimPolicy: reclaim,
			StorageClassName:              sc.Name,
			VolumeMode:                    &fs,
			PersistentVolumeSource:        corev1.PersistentVolumeSource{Local: &corev1.LocalVolumeSource{Path: dir}},
			NodeAffinity: &corev1.VolumeNodeAffinity{Required: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
				MatchExpressions: []corev1.NodeSelectorRequirement{{Key: ZoneLabel, Operator: corev1.NodeSelectorOpIn, Values: []string{node.Zone}}},
			}}}},
			ClaimRef: &corev1.ObjectReference{Kind: "PersistentVolumeClaim", APIVersion: "v1",
				Namespace: pvc.Namespace, Name: pvc.Name, UID: pvc.UID},
		},
	}
	a.log.Info("Provisioning volume", "pvc", pvc.Namespace+"/"+pvc.Name, "pv", name, "zone", node.Zone, "dir", dir)
	created, err := a.cs.CoreV1().PersistentVolumes().Create(ctx, pv, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		created, err = a.cs.CoreV1().PersistentVolumes().Get(ctx, name, metav1.GetOptions{})
	}
	if err != nil {
		return fmt.Errorf("create pv %s: %w", name, err)
	}
	if created.Status.Phase != corev1.VolumeBound {
		created.Status.Phase = corev1.VolumeBound
		if _, err := a.cs.CoreV1().PersistentVolumes().UpdateStatus(ctx, created, metav1.UpdateOptions{}); err != nil {
			return fmt.Errorf("pv %s status: %w", name, err)
		}
	}
	// Bind the claim: spec.volumeName and annotations, then status.
	patch, _ := json.Marshal(map[string]any{
		"metadata": map[string]any{"uid": pvc.UID, "annotations": map[string]string{
			annBindCompleted: "yes", annBoundByController: "yes", annSelectedNode: node.Name, annStorageProvider: a.cfg.Provisioner}},
		"spec": map[string]any{"volumeName": name},
	})
	if _, err := a.cs.CoreV1().PersistentVolumeClaims(pvc.Namespace).Patch(ctx, pvc.Name, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		return fmt.Errorf("bind pvc %s/%s: %w", pvc.Namespace, pvc.Name, err)
	}
	status, _ := json.Marshal(map[string]any{"status": corev1.PersistentVolumeClaimStatus{
		Phase: corev1.ClaimBound, AccessModes: modes, Capacity: corev1.ResourceList{corev1.ResourceStorage: size}}})
	if _, err := a.cs.CoreV1().PersistentVolumeClaims(pvc.Namespace).Patch(ctx, pvc.Name, types.MergePatchType, status, metav1.PatchOptions{}, "status"); err != nil {
		return fmt.Errorf("pvc %s/%s status: %w", pvc.Namespace, pvc.Name, err)
	}
	return nil
}

// syncPVC plays the pvc-protection controller: a claim being deleted loses
// its finalizer once no pod that may still run uses it; then its volume is
// reclaimed.
func (a *Agent) syncPVC(ctx context.Context, key string) error {
	ns, name, _ := strings.Cut(key, "/")
	pvc, err := a.pvcs.PersistentVolumeClaims(ns).Get(name)
	if apierrors.IsNotFound(err) {
		// Reclaim whatever volume pointed at it.
		pvs, _ := a.pvs.List(everything)
		for _, pv := range pvs {
			if ref := pv.Spec.ClaimRef; ref != nil && ref.Namespace == ns && ref.Name == name {
				a.queue.Add("pv/" + pv.Name)
			}
		}
		return nil
	}
	if err != nil {
		return err
	}
	if pvc.DeletionTimestamp == nil || !slices.Contains(pvc.Finalizers, pvcProtection) {
		return nil
	}
	if user := a.podUsing(pvc); user != "" {
		a.log.V(1).Info("Claim still in use", "pvc", key, "pod", user)
		a.queue.AddAfter("pvc/"+key, time.Second)
		return nil
	}
	return a.dropFinalizer(ctx, "pvc", pvc.Namespace, pvc.Name, pvc.UID, pvc.Finalizers, pvcProtection)
}

// podUsing returns a pod that uses the claim and may still run.
func (a *Agent) podUsing(pvc *corev1.PersistentVolumeClaim) string {
	pods, _ := a.pods.Pods(pvc.Namespace).List(everything)
	for _, p := range pods {
		if p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
			continue
		}
		for _, v := range p.Spec.Volumes {
			if v.PersistentVolumeClaim != nil && v.PersistentVolumeClaim.ClaimName == pvc.Name {
				return p.Name
			}
		}
	}
	return ""
}

func (a *Agent) dropFinalizer(ctx context.Context, kind, ns, name string, uid types.UID, finalizers []string, drop string) error {
	var keep []string
	for _, f := range finalizers {
		if f != drop {
			keep = append(keep, f)
		}
	}
	patch, _ := json.Marshal(map[string]any{"metadata": map[string]any{"uid": uid, "finalizers": keep}})
	var err error
	switch kind {
	case "pvc":
		_, err = a.cs.CoreV1().PersistentVolumeClaims(ns).Patch(ctx, name, types.MergePatchType, patch, metav1.PatchOptions{})
	case "pv":
		_, err = a.cs.CoreV1().PersistentVolumes().Patch(ctx, name, types.MergePatchType, patch, metav1.PatchOptions{})
	}
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("remove finalizer %s from %s %s: %w", drop, kind, name, err)
	}
	return nil
}

// syncPV reclaims a volume the agent provisioned once its claim is gone:
// Delete removes the directory and the PV, Retain leaves both and marks the
// PV Released.
func (a *Agent) syncPV(ctx context.Context, name string) error {
	pv, err := a.pvs.Get(name)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	if pv.Annotations[annProvisionedBy] != a.cfg.Provisioner {
		return nil
	}
	if pv.DeletionTimestamp != nil {
		// Deleted (by us or a user): pv-protection lets go once no claim
		// is bound to it.
		if a.claimExists(ctx, pv) {
			return nil
		}
		if pv.Spec.PersistentVolumeReclaimPolicy == corev1.PersistentVolumeReclaimDelete {
			if err := a.removeVolumeDir(pv); err != nil {
				return err
			}
		}
		if slices.Contains(pv.Finalizers, pvProtection) {
			return a.dropFinalizer(ctx, "pv", "", pv.Name, pv.UID, pv.Finalizers, pvProtection)
		}
		return nil
	}
	if pv.Spec.ClaimRef == nil || a.claimExists(ctx, pv) {
		return nil
	}
	switch pv.Spec.PersistentVolumeReclaimPolicy {
	case corev1.PersistentVolumeReclaimDelete:
		a.log.Info("Deleting volume of a deleted claim", "pv", pv.Name, "claim", pv.Spec.ClaimRef.Namespace+"/"+pv.Spec.ClaimRef.Name)
		if err := a.removeVolumeDir(pv); err != nil {
			return err
		}
		err := a.cs.CoreV1().PersistentVolumes().Delete(ctx, pv.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &pv.UID}})
		if err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("delete pv %s: %w", pv.Name, err)
		}
		a.queue.Add("pv/" + pv.Name) // drop pv-protection
		return nil
	default:
		if pv.Status.Phase == corev1.VolumeReleased {
			return nil
		}
		a.log.Info("Releasing retained volume", "pv", pv.Name)
		cp := pv.DeepCopy()
		cp.Status.Phase = corev1.VolumeReleased
		_, err := a.cs.CoreV1().PersistentVolumes().UpdateStatus(ctx, cp, metav1.UpdateOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("release pv %s: %w", pv.Name, err)
		}
		return nil
	}
}

// claimExists asks the apiserver (not the cache: a stale cache must never
// delete data) whether the PV's claim still exists with the same UID.
func (a *Agent) claimExists(ctx context.Context, pv *corev1.PersistentVolume) bool {
	ref := pv.Spec.ClaimRef
	if ref == nil {
		return false
	}
	pvc, err := a.cs.CoreV1().PersistentVolumeClaims(ref.Namespace).Get(ctx, ref.Name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return false
	}
	if err != nil {
		return true // unknown: keep the data
	}
	return ref.UID == "" || pvc.UID == ref.UID
}

func (a *Agent) removeVolumeDir(pv *corev1.PersistentVolume) error {
	if pv.Spec.Local == nil {
		return nil
	}
	dir := pv.Spec.Local.Path
	// Only ever delete inside our own volumes directory.
	root := filepath.Join(a.cfg.StateDir, "volumes") + string(filepath.Separator)
	if !strings.HasPrefix(filepath.Clean(dir)+string(filepath.Separator), root) || filepath.Clean(dir)+string(filepath.Separator) == root {
		return fmt.Errorf("refusing to delete %s: not a volume directory of this agent", dir)
	}
	if err := os.RemoveAll(dir); err != nil {
		return fmt.Errorf("delete volume directory %s: %w", dir, err)
	}
	return nil
}
