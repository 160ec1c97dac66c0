// Package manifest loads the RBAC manifests embedded by config/rbac/hub,
// config/rbac/hub-member and config/rbac/spoke into typed objects, moved to
// another namespace, so tests install exactly the files users apply.
package manifest

import (
	"bytes"
	"fmt"
	"io/fs"
	"sort"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"
)

// Load decodes every *.yaml file of files but kustomization.yaml, in name
// order. Namespaced objects in defaultNS (or in none), and ServiceAccount
// subjects in defaultNS, are moved to namespace. Roles and RoleBindings
// the files put in another namespace (the hub's in kube-node-lease) stay
// there. Unless namespace is defaultNS, cluster-scoped objects, objects
// left in another namespace, and references to them get the suffix
// "-"+namespace, so several copies can share one apiserver in tests.
func Load(files fs.FS, defaultNS, namespace string) ([]client.Object, error) {
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
		data, err := fs.ReadFile(files, n)
		if err != nil {
			return nil, err
		}
		objs, err := Decode(data)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", n, err)
		}
		for _, o := range objs {
			relocate(o, defaultNS, namespace)
		}
		out = append(out, objs...)
	}
	return out, nil
}

// Decode decodes a multi-document YAML file of ServiceAccounts, Secrets,
// Roles, ClusterRoles, ValidatingAdmissionPolicies and their bindings, strictly: an unknown field is an
// error.
func Decode(data []byte) ([]client.Object, error) {
	var out []client.Object
	for _, doc := range bytes.Split(data, []byte("\n---")) {
		doc = bytes.TrimSpace(bytes.TrimPrefix(bytes.TrimSpace(doc), []byte("---")))
		if len(bytes.TrimSpace(stripComments(doc))) == 0 {
			continue
		}
		var meta struct {
			Kind string `json:"kind"`
		}
		if err := yaml.Unmarshal(doc, &meta); err != nil {
			return nil, err
		}
		var obj client.Object
		switch meta.Kind {
		case "ServiceAccount":
			obj = &corev1.ServiceAccount{}
		case "Secret":
			obj = &corev1.Secret{}
		case "Role":
			obj = &rbacv1.Role{}
		case "RoleBinding":
			obj = &rbacv1.RoleBinding{}
		case "ClusterRole":
			obj = &rbacv1.ClusterRole{}
		case "ClusterRoleBinding":
			obj = &rbacv1.ClusterRoleBinding{}
		case "ValidatingAdmissionPolicy":
			obj = &admissionregistrationv1.ValidatingAdmissionPolicy{}
		case "ValidatingAdmissionPolicyBinding":
			obj = &admissionregistrationv1.ValidatingAdmissionPolicyBinding{}
		default:
			return nil, fmt.Errorf("unexpected kind %q", meta.Kind)
		}
		if err := yaml.UnmarshalStrict(doc, obj); err != nil {
			return nil, err
		}
		out = append(out, obj)
	}
	return out, nil
}

func stripComments(doc []byte) []byte {
	var b bytes.Buffer
	for _, l := range bytes.Split(doc, []byte("\n")) {
		if t := bytes.TrimSpace(l); len(t) > 0 && t[0] != '#' {
			b.Write(l)
			b.WriteByte('\n')
		}
	}
	return b.Bytes()
}

func relocate(obj client.Object, defaultNS, ns string) {
	suffix := ""
	if ns != defaultNS {
		suffix = "-" + ns
	}
	subjects := func(s []rbacv1.Subject) {
		for i := range s {
			if s[i].Kind == rbacv1.ServiceAccountKind && s[i].Namespace == defaultNS {
				s[i].Namespace = ns
			}
		}
	}
	// foreign: a Role or RoleBinding the files put in a namespace of its
	// own; it stays there.
	foreign := obj.GetNamespace() != "" && obj.GetNamespace() != defaultNS
	switch o := obj.(type) {
	case *corev1.ServiceAccount, *corev1.Secret:
		o.SetNamespace(ns)
	case *rbacv1.Role:
		if foreign {
			o.Name += suffix
		} else {
			o.SetNamespace(ns)
		}
	case *rbacv1.RoleBinding:
		if foreign {
			o.Name += suffix
		} else {
			o.SetNamespace(ns)
		}
		subjects(o.Subjects)
		if o.RoleRef.Kind == "ClusterRole" || foreign {
			o.RoleRef.Name += suffix
		}
	case *rbacv1.ClusterRole:
		o.Name += suffix
	case *rbacv1.ClusterRoleBinding:
		o.Name += suffix
		o.RoleRef.Name += suffix
		subjects(o.Subjects)
	case *admissionregistrationv1.ValidatingAdmissionPolicy:
		o.Name += suffix
	case *admissionregistrationv1.ValidatingAdmissionPolicyBinding:
		o.Name += suffix
		o.Spec.PolicyName += suffix
	}
}
