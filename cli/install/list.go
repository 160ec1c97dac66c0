package install

import (
	"context"
	"fmt"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdfedv1 "github.com/etcdfed/etcdfed/api/v1alpha1"
	"github.com/etcdfed/etcdfed/hub/registration"
	"github.com/etcdfed/etcdfed/hub/registry"
)

// Cluster is one registered member cluster, as List shows it.
type Cluster struct {
	Name string
	// Server is the apiserver the hub reaches.
	Server string
	// Status is what the hub last wrote on the registration; Reported is
	// false when it never did (no hub running, or an old one).
	Status   registration.Status
	Reported bool
	// Since is when that status began (zero when not reported).
	Since time.Time
	// Expires is when the hub's token expires (zero: the registration
	// holds no token etcdfed can read, e.g. a kubeconfig written by hand).
	Expires time.Time
	// JoinedByEtcdfed: written by `etcdfed cluster join`.
	JoinedByEtcdfed bool
	// SelfRenewing: joined before the spoke sealed the hub's tokens (issue
	// 37), so the hub still renews its own token there, and a stolen one
	// could renew itself until the chain's end: join again to end it.
	SelfRenewing bool
	// Labels are the registration's own labels (clusterSelector).
	Labels map[string]string
	// Members are the ring members the hub has placed there
	// ("namespace/ring/member").
	Members []string
}

// List returns every member cluster registered in the hub, by name.
func List(ctx context.Context, hubCfg *rest.Config) ([]Cluster, error) {
	hub, err := newClient(hubCfg, "hub cluster")
	if err != nil {
		return nil, err
	}
	var secs corev1.SecretList
	if err := hub.List(ctx, &secs, client.InNamespace(Namespace), client.MatchingLabels{registry.KubeconfigSecretLabel: "true"}); err != nil {
		return nil, fmt.Errorf("list the hub's registrations in %s: %w", Namespace, err)
	}
	members := map[string][]string{}
	var rings etcdfedv1.EtcdClusterList
	if err := hub.List(ctx, &rings); err != nil && !isNoMatch(err) {
		return nil, fmt.Errorf("list EtcdClusters: %w", err)
	}
	for _, ec := range rings.Items {
		for _, m := range ec.Status.Members {
			if m.Cluster != "" {
				members[m.Cluster] = append(members[m.Cluster], ec.Namespace+"/"+ec.Name+"/"+m.Name)
			}
		}
	}
	out := make([]Cluster, 0, len(secs.Items))
	for i := range secs.Items {
		sec := &secs.Items[i]
		c := Cluster{Name: sec.Name, JoinedByEtcdfed: sec.Labels[LabelJoinedAs] != "", Labels: map[string]string{}, Members: members[sec.Name]}
		for k, v := range sec.Labels {
			if k != registry.KubeconfigSecretLabel && k != LabelJoinedAs {
				c.Labels[k] = v
			}
		}
		if cfg, err := registry.RESTConfig(sec); err == nil {
			c.Server = cfg.Host
		}
		c.Status, c.Reported = registration.StatusOf(sec.Annotations)
		c.SelfRenewing = sec.Annotations[registration.AnnotationCredential] == registration.CredentialServiceAccountToken
		if t, err := time.Parse(time.RFC3339, sec.Annotations[registration.AnnotationSince]); err == nil {
			c.Since = t
		}
		if cl, err := registration.ParseToken(string(sec.Data[registry.TokenKey])); err == nil {
			c.Expires = cl.Expiry
		}
		slices.Sort(c.Members)
		out = append(out, c)
	}
	slices.SortFunc(out, func(a, b Cluster) int {
		switch {
		case a.Name < b.Name:
			return -1
		case a.Name > b.Name:
			return 1
		}
		return 0
	})
	return out, nil
}
