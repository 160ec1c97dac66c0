// Package registry lists the member clusters registered with the hub and
// their labels (which EtcdCluster.spec.topology.clusterSelector matches).
// A member cluster is registered the way a user registers it for the
// multicluster-runtime kubeconfig provider: a Secret in the hub, labelled
// sigs.k8s.io/multicluster-runtime-kubeconfig=true, whose name is the
// cluster's name. For local use the hub can instead take kubeconfig files.
//
// `etcdfed cluster join` writes such a Secret with a short-lived token of
// the hub's ServiceAccount in the member cluster under the key "token"
// (TokenKey), beside a kubeconfig that names the server and its CA. The
// token replaces the kubeconfig's own credentials, and a new token (the
// hub renews it, hub/registration) is used from the next request on,
// without reconnecting.
package registry

import (
	"context"
	"fmt"
	"maps"
	"os"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/multicluster-runtime/providers/kubeconfig"
)

// MemberCluster is one registered member cluster.
type MemberCluster struct {
	Name   string
	Labels map[string]string
	// State is how the hub's connection to it stands; nil from a source
	// that does not connect (Secrets or Files listed directly).
	State *ClusterState
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

// Registration format, beside multicluster-runtime's kubeconfig Secret
// (label KubeconfigSecretLabel=true, key KubeconfigSecretKey).
const (
	// KubeconfigSecretLabel marks a registration Secret.
	KubeconfigSecretLabel = kubeconfig.DefaultKubeconfigSecretLabel
	// KubeconfigSecretKey holds the kubeconfig.
	KubeconfigSecretKey = kubeconfig.DefaultKubeconfigSecretKey
	// TokenKey, when present, holds a bearer token that replaces the
	// kubeconfig's credentials: the hub's ServiceAccount token in the
	// member cluster, which hub/registration renews.
	TokenKey = "token"
)

// Registrations implements Source: each Secret's kubeconfig key. A Secret
// without one is listed (the hub reports it) but cannot be reached.
func (s Secrets) Registrations(ctx context.Context) ([]Registration, error) {
	label := s.Label
	if label == "" {
		label = kubeconfig.DefaultKubeconfigSecretLabel
	}
	var list corev1.SecretList
	if err := s.Client.List(ctx, &list, client.InNamespace(s.Namespace), client.MatchingLabels{label: "true"}); err != nil {
		return nil, fmt.Errorf("list kubeconfig Secrets in %s: %w", s.Namespace, err)
	}
	out := make([]Registration, 0, len(list.Items))
	for _, sec := range list.Items {
		if sec.DeletionTimestamp != nil {
			continue
		}
		out = append(out, Registration{
			MemberCluster: MemberCluster{Name: sec.Name, Labels: maps.Clone(sec.Labels)},
			Kubeconfig:    sec.Data[kubeconfig.DefaultKubeconfigSecretKey],
			Secret:        &corev1.ObjectReference{APIVersion: "v1", Kind: "Secret", Namespace: sec.Namespace, Name: sec.Name, UID: sec.UID},
			Token:         sec.Data[TokenKey],
		})
	}
	return out, nil
}

// Files registers member clusters from kubeconfig files (local use), read
// again at every listing so that a rewritten file reconnects.
type Files map[string]string

// Registrations implements Source. A file that cannot be read is listed
// with no kubeconfig: the cluster shows as not engaged, with the reason.
func (f Files) Registrations(context.Context) ([]Registration, error) {
	out := make([]Registration, 0, len(f))
	for name, path := range f {
		data, err := os.ReadFile(path)
		if err != nil {
			data = nil
		}
		out = append(out, Registration{MemberCluster: MemberCluster{Name: name}, Kubeconfig: data})
	}
	return out, nil
}

// RESTConfig is the REST config a registration Secret gives: its
// kubeconfig, with the token of TokenKey, when there is one, as the
// credentials.
func RESTConfig(sec *corev1.Secret) (*rest.Config, error) {
	kc := sec.Data[KubeconfigSecretKey]
	if len(kc) == 0 {
		return nil, fmt.Errorf("registration Secret %s has no %q key", sec.Name, KubeconfigSecretKey)
	}
	cfg, err := clientcmd.RESTConfigFromKubeConfig(kc)
	if err != nil {
		return nil, fmt.Errorf("registration Secret %s: kubeconfig: %w", sec.Name, err)
	}
	if tok := sec.Data[TokenKey]; len(tok) > 0 {
		useToken(cfg, string(tok))
	}
	return cfg, nil
}

// useToken makes token the only credentials of cfg.
func useToken(cfg *rest.Config, token string) {
	cfg.BearerToken, cfg.BearerTokenFile = token, ""
	cfg.Username, cfg.Password = "", ""
	cfg.CertData, cfg.CertFile, cfg.KeyData, cfg.KeyFile = nil, "", nil, ""
	cfg.ExecProvider, cfg.AuthProvider = nil, nil
}
