// Package spokerbac embeds the spoke's RBAC manifests: a ServiceAccount, a
// Role in the ring namespace and a ClusterRole reading nodes, with their
// bindings. role.yaml is generated from the +kubebuilder:rbac markers in
// spoke/app/rbac.go; the rest is written by hand. The namespace in the
// files is the default ring namespace, etcdfed-system; kustomize or
// Objects rewrite it.
package spokerbac

//go:generate ../../../bin/controller-gen rbac:roleName=etcdfed-spoke paths=../../../spoke/... output:rbac:artifacts:config=.

import (
	"bytes"
	"embed"
	"fmt"
	"io/fs"
	"sort"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"
)

//go:embed *.yaml
var files embed.FS

// DefaultNamespace is the namespace the manifests name.
const DefaultNamespace = "etcdfed-system"

// Objects returns every object of the manifests (kustomization.yaml aside)
// with the ring namespace set to namespace, ClusterRole and
// ClusterRoleBinding names suffixed with "-"+namespace unless namespace is
// the default (so several rings can share a cluster in tests).
func Objects(namespace string) ([]client.Object, error) {
	names, err := fs.Glob(files, "*.yaml")
	if err != nil {
		return nil, err
	}
	sort.Strings(names)
	var out []client.Object
	for _, n := range names {
		if n == "kustomization.yaml" {
			continue
		}
		data, err := files.ReadFile(n)
		if err != nil {
			return nil, err
		}
		for _, doc := range bytes.Split(data, []byte("\n---")) {
			doc = bytes.TrimSpace(bytes.TrimPrefix(bytes.TrimSpace(doc), []byte("---")))
			if len(doc) == 0 {
				continue
			}
			var meta struct {
				Kind string `json:"kind"`
			}
			if err := yaml.Unmarshal(doc, &meta); err != nil {
				return nil, fmt.Errorf("%s: %w", n, err)
			}
			var obj client.Object
			switch meta.Kind {
			case "ServiceAccount":
				obj = &corev1.ServiceAccount{}
			case "Role":
				obj = &rbacv1.Role{}
			case "RoleBinding":
				obj = &rbacv1.RoleBinding{}
			case "ClusterRole":
				obj = &rbacv1.ClusterRole{}
			case "ClusterRoleBinding":
				obj = &rbacv1.ClusterRoleBinding{}
			default:
				return nil, fmt.Errorf("%s: unexpected kind %q", n, meta.Kind)
			}
			if err := yaml.UnmarshalStrict(doc, obj); err != nil {
				return nil, fmt.Errorf("%s: %w", n, err)
			}
			relocate(obj, namespace)
			out = append(out, obj)
		}
	}
	return out, nil
}

func relocate(obj client.Object, ns string) {
	suffix := ""
	if ns != DefaultNamespace {
		suffix = "-" + ns
	}
	switch o := obj.(type) {
	case *corev1.ServiceAccount, *rbacv1.Role:
		o.SetNamespace(ns)
	case *rbacv1.RoleBinding:
		o.SetNamespace(ns)
		for i := range o.Subjects {
			o.Subjects[i].Namespace = ns
		}
	case *rbacv1.ClusterRole:
		o.Name += suffix
	case *rbacv1.ClusterRoleBinding:
		o.Name += suffix
		o.RoleRef.Name += suffix
		for i := range o.Subjects {
			o.Subjects[i].Namespace = ns
		}
	}
}
