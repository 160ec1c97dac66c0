// Package spokerbac embeds the spoke's RBAC manifests: a ServiceAccount, a
// Role in the ring namespace and a ClusterRole reading nodes, with their
// bindings. role.yaml is generated from the +kubebuilder:rbac markers in
// spoke/app/rbac.go; the rest is written by hand. The namespace in the
// files is the default ring namespace, etcdfed-system; kustomize or
// Objects rewrite it.
package spokerbac

//go:generate ../../../bin/controller-gen rbac:roleName=etcdfed-spoke paths=../../../spoke/... output:rbac:artifacts:config=.

import (
	"embed"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/etcdfed/etcdfed/config/rbac/manifest"
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
	return manifest.Load(files, DefaultNamespace, namespace)
}
