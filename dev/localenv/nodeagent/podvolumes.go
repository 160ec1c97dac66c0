package nodeagent

import (
	"bytes"
	"context"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// prepareVolumes makes every volume of the pod a directory and records
// each container's mounts (mountPath -> directory).
func (w *podWorker) prepareVolumes() error {
	w.mu.Lock()
	pod := w.pod.DeepCopy()
	w.mu.Unlock()
	ctx, cancel := context.WithTimeout(w.ctx, 15*time.Second)
	defer cancel()
	dirs := map[string]string{}
	for _, v := range pod.Spec.Volumes {
		d, err := w.volumeDir(ctx, pod, v)
		if err != nil {
			return err
		}
		dirs[v.Name] = d
	}
	mounts := map[string]map[string]string{}
	for _, c := range append(append([]corev1.Container{}, pod.Spec.InitContainers...), pod.Spec.Containers...) {
		m := map[string]string{}
		for _, vm := range c.VolumeMounts {
			d, ok := dirs[vm.Name]
			if !ok {
				return &configError{reasonCreateContainerConfigError, fmt.Sprintf("volumeMount %q of container %q names no volume", vm.Name, c.Name)}
			}
			if vm.SubPath != "" {
				if strings.Contains(vm.SubPath, "..") || filepath.IsAbs(vm.SubPath) {
					return &configError{reasonCreateContainerConfigError, fmt.Sprintf("invalid subPath %q", vm.SubPath)}
				}
				d = filepath.Join(d, vm.SubPath)
				if err := os.MkdirAll(d, 0o755); err != nil {
					return err
				}
			}
			m[vm.MountPath] = d
		}
		mounts[c.Name] = m
	}
	w.mu.Lock()
	w.mounts = mounts
	w.refreshed = time.Now()
	w.mu.Unlock()
	return nil
}

func (w *podWorker) volumeDir(ctx context.Context, pod *corev1.Pod, v corev1.Volume) (string, error) {
	own := filepath.Join(w.dir, "volumes", v.Name)
	switch {
	case v.EmptyDir != nil:
		return own, os.MkdirAll(own, 0o755)
	case v.HostPath != nil:
		return v.HostPath.Path, nil
	case v.PersistentVolumeClaim != nil:
		name := v.PersistentVolumeClaim.ClaimName
		pvc, err := w.a.cs.CoreV1().PersistentVolumeClaims(pod.Namespace).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return "", fmt.Errorf("persistentvolumeclaim %q: %w", name, err)
		}
		if pvc.Spec.VolumeName == "" {
			return "", fmt.Errorf("persistentvolumeclaim %q is not bound", name)
		}
		pv, err := w.a.cs.CoreV1().PersistentVolumes().Get(ctx, pvc.Spec.VolumeName, metav1.GetOptions{})
		if err != nil {
			return "", fmt.Errorf("persistentvolume %q: %w", pvc.Spec.VolumeName, err)
		}
		var dir string
		switch {
		case pv.Spec.Local != nil:
			dir = pv.Spec.Local.Path
		case pv.Spec.HostPath != nil:
			dir = pv.Spec.HostPath.Path
		default:
			return "", &configError{reasonCreateContainerConfigError, fmt.Sprintf("persistentvolume %q is neither local nor hostPath", pv.Name)}
		}
		return dir, os.MkdirAll(dir, 0o755)
	case v.Secret != nil:
		s, err := w.a.cs.CoreV1().Secrets(pod.Namespace).Get(ctx, v.Secret.SecretName, metav1.GetOptions{})
		if apierrors.IsNotFound(err) && v.Secret.Optional != nil && *v.Secret.Optional {
			return own, writeFiles(own, nil, nil, v.Secret.DefaultMode)
		}
		if err != nil {
			return "", fmt.Errorf("secret %q: %w", v.Secret.SecretName, err)
		}
		return own, writeFiles(own, s.Data, v.Secret.Items, v.Secret.DefaultMode)
	case v.ConfigMap != nil:
		cm, err := w.a.cs.CoreV1().ConfigMaps(pod.Namespace).Get(ctx, v.ConfigMap.Name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) && v.ConfigMap.Optional != nil && *v.ConfigMap.Optional {
			return own, writeFiles(own, nil, nil, v.ConfigMap.DefaultMode)
		}
		if err != nil {
			return "", fmt.Errorf("configmap %q: %w", v.ConfigMap.Name, err)
		}
		data := map[string][]byte{}
		for k, s := range cm.Data {
			data[k] = []byte(s)
		}
		for k, b := range cm.BinaryData {
			data[k] = b
		}
		return own, writeFiles(own, data, v.ConfigMap.Items, v.ConfigMap.DefaultMode)
	}
	return "", &configError{reasonCreateContainerConfigError, fmt.Sprintf("volume %q: only persistentVolumeClaim, secret, configMap, emptyDir and hostPath volumes run on the local node", v.Name)}
}

// writeFiles makes dir hold exactly the given keys (all, or the mapped
// items), rewriting only files whose content changed.
func writeFiles(dir string, data map[string][]byte, items []corev1.KeyToPath, defaultMode *int32) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	mode := fs.FileMode(0o644)
	if defaultMode != nil {
		mode = fs.FileMode(*defaultMode)
	}
	want := map[string][]byte{}
	modes := map[string]fs.FileMode{}
	if len(items) == 0 {
		for k, v := range data {
			want[k] = v
			modes[k] = mode
		}
	} else {
		for _, it := range items {
			v, ok := data[it.Key]
			if !ok {
				return fmt.Errorf("key %q not found", it.Key)
			}
			if strings.Contains(it.Path, "..") || filepath.IsAbs(it.Path) {
				return &configError{reasonCreateContainerConfigError, fmt.Sprintf("invalid item path %q", it.Path)}
			}
			want[it.Path] = v
			modes[it.Path] = mode
			if it.Mode != nil {
				modes[it.Path] = fs.FileMode(*it.Mode)
			}
		}
	}
	for rel, content := range want {
		p := filepath.Join(dir, rel)
		if old, err := os.ReadFile(p); err == nil && bytes.Equal(old, content) {
			_ = os.Chmod(p, modes[rel])
			continue
		}
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return err
		}
		tmp := p + ".tmp"
		if err := os.WriteFile(tmp, content, modes[rel]); err != nil {
			return err
		}
		if err := os.Chmod(tmp, modes[rel]); err != nil {
			return err
		}
		if err := os.Rename(tmp, p); err != nil {
			return err
		}
	}
	// Remove files for keys that are gone.
	return filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return nil
		}
		rel, _ := filepath.Rel(dir, p)
		if _, ok := want[rel]; !ok {
			_ = os.Remove(p)
		}
		return nil
	})
}

// refreshVolumes rewrites Secret and ConfigMap volumes whose source
// changed (kubelet syncs them periodically too). Errors are left for the
// next try.
func (w *podWorker) refreshVolumes() {
	w.mu.Lock()
	due := !w.refreshed.IsZero() && time.Since(w.refreshed) > 10*time.Second
	pod := w.pod.DeepCopy()
	w.mu.Unlock()
	if !due {
		return
	}
	ctx, cancel := context.WithTimeout(w.ctx, 10*time.Second)
	defer cancel()
	for _, v := range pod.Spec.Volumes {
		if v.Secret != nil || v.ConfigMap != nil {
			_, _ = w.volumeDir(ctx, pod, v)
		}
	}
	w.mu.Lock()
	w.refreshed = time.Now()
	w.mu.Unlock()
}
