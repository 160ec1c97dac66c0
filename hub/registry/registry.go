// Package registry lists the member clusters registered with the hub and
// their labels (which EtcdCluster.spec.topology.clusterSelector matches).
// A member cluster is registered the way a user registers it for the
// multicluster-runtime kubeconfig provider: a Secret in the hub, labelled
// sigs.k8s.io/multicluster-runtime-kubeconfig=true, whose name is the
// cluster's name. For local use the hub can instead take kubeconfig files.
package registry

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/multicluster-runtime/providers/kubeconfig"
)

// MemberCluster is one registered member cluster.
type MemberCluster struct {
	Name   string
	Labels map[string]string
}

// Registry lists member clusters, sorted by name.
type Registry interface {
	List(ctx context.Context) ([]MemberCluster, error)
}

// Secrets lists kubeconfig Secrets.
type Secrets struct {
	Client    client.Reader
	Namespace string
	// Label marks kubeconfig Secrets; default kubeconfig.DefaultKubeconfigSecretLabel.
	Label string
}

// List implements Registry.
func (s Secrets) List(ctx context.Context) ([]MemberCluster, error) {
	label := s.Label
	if label == "" {
		label = kubeconfig.DefaultKubeconfigSecretLabel
	}
	var list corev1.SecretList
	if err := s.Client.List(ctx, &list, client.InNamespace(s.Namespace), client.MatchingLabels{label: "true"}); err != nil {
		return nil, fmt.Errorf("list kubeconfig Secrets in %s: %w", s.Namespace, err)
	}
	out := make([]MemberCluster, 0, len(list.Items))
	for _, sec := range list.Items {
		if sec.DeletionTimestamp != nil {
			continue
		}
		out = append(out, MemberCluster{Name: sec.Name, Labels: maps.Clone(sec.Labels)})
	}
	slices.SortFunc(out, func(a, b MemberCluster) int { return strings.Compare(a.Name, b.Name) })
	return out, nil
}

// Static is a fixed list (kubeconfig files given on the command line).
type Static []MemberCluster

// List implements Registry.
func (s Static) List(context.Context) ([]MemberCluster, error) {
	out := slices.Clone(s)
	slices.SortFunc(out, func(a, b MemberCluster) int { return strings.Compare(a.Name, b.Name) })
	return out, nil
}
