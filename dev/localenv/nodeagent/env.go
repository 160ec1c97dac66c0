package nodeagent

import (
	"context"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// containerEnv resolves a container's environment in kubelet's order:
// envFrom, then env (later wins), each value expanded against the variables
// defined before it. It returns the values and the names in order.
func (a *Agent) containerEnv(pod *corev1.Pod, c *corev1.Container, podIP string, node nodeState) (map[string]string, []string, error) {
	vars := map[string]string{}
	var order []string
	set := func(k, v string) {
		if _, ok := vars[k]; !ok {
			order = append(order, k)
		}
		vars[k] = v
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, from := range c.EnvFrom {
		switch {
		case from.SecretRef != nil:
			s, err := a.cs.CoreV1().Secrets(pod.Namespace).Get(ctx, from.SecretRef.Name, metav1.GetOptions{})
			if err != nil {
				if apierrors.IsNotFound(err) && from.SecretRef.Optional != nil && *from.SecretRef.Optional {
					continue
				}
				return nil, nil, &configError{reasonCreateContainerConfigError, fmt.Sprintf("secret %q: %v", from.SecretRef.Name, err)}
			}
			for k, v := range s.Data {
				set(from.Prefix+k, string(v))
			}
		case from.ConfigMapRef != nil:
			cm, err := a.cs.CoreV1().ConfigMaps(pod.Namespace).Get(ctx, from.ConfigMapRef.Name, metav1.GetOptions{})
			if err != nil {
				if apierrors.IsNotFound(err) && from.ConfigMapRef.Optional != nil && *from.ConfigMapRef.Optional {
					continue
				}
				return nil, nil, &configError{reasonCreateContainerConfigError, fmt.Sprintf("configmap %q: %v", from.ConfigMapRef.Name, err)}
			}
			for k, v := range cm.Data {
				set(from.Prefix+k, v)
			}
		}
	}
	for _, e := range c.Env {
		if e.ValueFrom == nil {
			set(e.Name, expand(e.Value, vars))
			continue
		}
		v, ok, err := a.envSource(ctx, pod, e.ValueFrom, podIP, node)
		if err != nil {
			return nil, nil, &configError{reasonCreateContainerConfigError, fmt.Sprintf("env %s: %v", e.Name, err)}
		}
		if ok {
			set(e.Name, v)
		}
	}
	return vars, order, nil
}

func (a *Agent) envSource(ctx context.Context, pod *corev1.Pod, src *corev1.EnvVarSource, podIP string, node nodeState) (string, bool, error) {
	switch {
	case src.FieldRef != nil:
		v, err := fieldValue(pod, src.FieldRef.FieldPath, podIP, node)
		return v, err == nil, err
	case src.SecretKeyRef != nil:
		ref := src.SecretKeyRef
		optional := ref.Optional != nil && *ref.Optional
		s, err := a.cs.CoreV1().Secrets(pod.Namespace).Get(ctx, ref.Name, metav1.GetOptions{})
		if err != nil {
			if apierrors.IsNotFound(err) && optional {
				return "", false, nil
			}
			return "", false, fmt.Errorf("secret %q: %w", ref.Name, err)
		}
		v, ok := s.Data[ref.Key]
		if !ok {
			if optional {
				return "", false, nil
			}
			return "", false, fmt.Errorf("couldn't find key %s in Secret %s/%s", ref.Key, pod.Namespace, ref.Name)
		}
		return string(v), true, nil
	case src.ConfigMapKeyRef != nil:
		ref := src.ConfigMapKeyRef
		optional := ref.Optional != nil && *ref.Optional
		cm, err := a.cs.CoreV1().ConfigMaps(pod.Namespace).Get(ctx, ref.Name, metav1.GetOptions{})
		if err != nil {
			if apierrors.IsNotFound(err) && optional {
				return "", false, nil
			}
			return "", false, fmt.Errorf("configmap %q: %w", ref.Name, err)
		}
		v, ok := cm.Data[ref.Key]
		if !ok {
			if optional {
				return "", false, nil
			}
			return "", false, fmt.Errorf("couldn't find key %s in ConfigMap %s/%s", ref.Key, pod.Namespace, ref.Name)
		}
		return v, true, nil
	case src.ResourceFieldRef != nil:
		return "0", true, nil // no resource accounting on the local node
	}
	return "", false, fmt.Errorf("unsupported env source")
}

// fieldValue resolves a downward API field path.
func fieldValue(pod *corev1.Pod, fieldPath, podIP string, node nodeState) (string, error) {
	switch fieldPath {
	case "metadata.name":
		return pod.Name, nil
	case "metadata.namespace":
		return pod.Namespace, nil
	case "metadata.uid":
		return string(pod.UID), nil
	case "spec.nodeName":
		return pod.Spec.NodeName, nil
	case "spec.serviceAccountName":
		return pod.Spec.ServiceAccountName, nil
	case "status.podIP", "status.podIPs":
		return podIP, nil
	case "status.hostIP", "status.hostIPs":
		return node.IP.String(), nil
	}
	for _, p := range []struct {
		prefix string
		m      map[string]string
	}{{"metadata.labels", pod.Labels}, {"metadata.annotations", pod.Annotations}} {
		if strings.HasPrefix(fieldPath, p.prefix+"['") && strings.HasSuffix(fieldPath, "']") {
			return p.m[strings.TrimSuffix(strings.TrimPrefix(fieldPath, p.prefix+"['"), "']")], nil
		}
	}
	return "", fmt.Errorf("unsupported fieldRef %q", fieldPath)
}
