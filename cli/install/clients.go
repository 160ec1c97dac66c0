package install

import (
	"context"
	"crypto/rand"
	"fmt"
	"os"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/etcdfed/etcdfed/internal/scheme"
)

// newClient is an uncached client of one cluster.
func newClient(cfg *rest.Config, what string) (client.Client, error) {
	c, err := client.New(cfg, client.Options{Scheme: scheme.New()})
	if err != nil {
		return nil, fmt.Errorf("%s (apiserver %s): %w", what, cfg.Host, err)
	}
	return c, nil
}

// hubAndMember are the clients of the hub and of member cluster name.
func hubAndMember(hubCfg, memberCfg *rest.Config, name string) (hub, member client.Client, err error) {
	if hub, err = newClient(hubCfg, "hub cluster"); err != nil {
		return nil, nil, err
	}
	if member, err = newClient(memberCfg, "member cluster "+name); err != nil {
		return nil, nil, err
	}
	return hub, member, nil
}

// toUnstructured converts a typed object, with its kind set.
func toUnstructured(obj client.Object) (*unstructured.Unstructured, error) {
	gvks, _, err := scheme.New().ObjectKinds(obj)
	if err != nil {
		return nil, err
	}
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		return nil, err
	}
	u := &unstructured.Unstructured{Object: m}
	u.SetGroupVersionKind(gvks[0])
	unstructured.RemoveNestedField(u.Object, "metadata", "creationTimestamp")
	unstructured.RemoveNestedField(u.Object, "status")
	return u, nil
}

// waitCRDs waits until every CustomResourceDefinition among objs is
// established.
func waitCRDs(ctx context.Context, c client.Client, objs []*unstructured.Unstructured) error {
	for _, o := range objs {
		if o.GetKind() != "CustomResourceDefinition" {
			continue
		}
		err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
			cur := &unstructured.Unstructured{}
			cur.SetGroupVersionKind(o.GroupVersionKind())
			if err := c.Get(ctx, client.ObjectKeyFromObject(o), cur); err != nil {
				return false, nil //nolint:nilerr // retried until the deadline
			}
			conds, _, _ := unstructured.NestedSlice(cur.Object, "status", "conditions")
			for _, cond := range conds {
				m, _ := cond.(map[string]any)
				if m["type"] == "Established" && m["status"] == "True" {
					return true, nil
				}
			}
			return false, nil
		})
		if err != nil {
			return fmt.Errorf("CRD %s not established: %w", o.GetName(), err)
		}
	}
	return nil
}

// gossipKey returns the ring's gossip key from the hub's namespace,
// creating it (32 random bytes, labelled with label) when there is none.
// Every member cluster gets a copy (Join): one key for the whole ring.
func gossipKey(ctx context.Context, hub client.Client, label map[string]string, dryRun bool) ([]byte, error) {
	sec := &corev1.Secret{}
	err := hub.Get(ctx, client.ObjectKey{Namespace: Namespace, Name: GossipSecret}, sec)
	switch {
	case err == nil:
		if k := sec.Data[GossipKeyKey]; len(k) == 16 || len(k) == 24 || len(k) == 32 {
			return k, nil
		}
		return nil, fmt.Errorf("the hub's Secret %s/%s has no gossip key of 16, 24 or 32 bytes under %q: fix or delete it", Namespace, GossipSecret, GossipKeyKey)
	case !apierrors.IsNotFound(err):
		return nil, fmt.Errorf("read the ring's gossip key in the hub: %w", err)
	}
	key := make([]byte, 32)
	if _, err := rand.Read(key); err != nil {
		return nil, err
	}
	if dryRun {
		return key, nil
	}
	sec = &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: GossipSecret, Namespace: Namespace, Labels: label},
		Type:       corev1.SecretTypeOpaque,
		Data:       map[string][]byte{GossipKeyKey: key},
	}
	if err := hub.Create(ctx, sec); err != nil {
		if apierrors.IsAlreadyExists(err) { // created meanwhile: use that one
			return gossipKey(ctx, hub, label, dryRun)
		}
		return nil, fmt.Errorf("create the ring's gossip key in the hub: %w", err)
	}
	return key, nil
}

// caData is the CA a REST config trusts, as PEM.
func caData(cfg *rest.Config) ([]byte, error) {
	if len(cfg.CAData) > 0 {
		return cfg.CAData, nil
	}
	if cfg.CAFile != "" {
		data, err := os.ReadFile(cfg.CAFile)
		if err != nil {
			return nil, fmt.Errorf("read the member cluster's CA: %w", err)
		}
		return data, nil
	}
	return nil, nil
}
