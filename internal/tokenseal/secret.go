package tokenseal

import (
	"context"
	"crypto/hpke"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// EnsureKey returns the public key of the hub's sealing key in namespace
// of the hub cluster, creating the Secret KeySecret when there is none
// (never replacing one: every member cluster holds its public key). In a
// dry run it creates nothing and returns a placeholder when there is none.
func EnsureKey(ctx context.Context, c client.Client, namespace string, labels map[string]string, dry bool) (string, error) {
	sec := &corev1.Secret{}
	err := c.Get(ctx, client.ObjectKey{Namespace: namespace, Name: KeySecret}, sec)
	switch {
	case err == nil:
		k, err := PrivateKey(sec.Data[PrivateKeyKey])
		if err != nil {
			return "", fmt.Errorf("the hub's Secret %s/%s: %w: fix it, or delete it and join every member cluster again", namespace, KeySecret, err)
		}
		return PublicOf(k), nil
	case !apierrors.IsNotFound(err):
		return "", fmt.Errorf("read the hub's sealing key (Secret %s/%s): %w", namespace, KeySecret, err)
	case dry:
		return "<the hub's public sealing key, from its Secret " + namespace + "/" + KeySecret + ">", nil
	}
	priv, pub, err := GenerateKey()
	if err != nil {
		return "", err
	}
	sec = &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: KeySecret, Namespace: namespace, Labels: labels},
		Type:       corev1.SecretTypeOpaque,
		Data:       map[string][]byte{PrivateKeyKey: priv, PublicKeyKey: []byte(pub)},
	}
	if err := c.Create(ctx, sec); err != nil {
		if apierrors.IsAlreadyExists(err) { // created meanwhile: use that one
			return EnsureKey(ctx, c, namespace, labels, dry)
		}
		return "", fmt.Errorf("create the hub's sealing key (Secret %s/%s): %w", namespace, KeySecret, err)
	}
	return pub, nil
}

// ReadKey reads the hub's private sealing key from namespace.
func ReadKey(ctx context.Context, r client.Reader, namespace string) (hpke.PrivateKey, error) {
	sec := &corev1.Secret{}
	if err := r.Get(ctx, client.ObjectKey{Namespace: namespace, Name: KeySecret}, sec); err != nil {
		return nil, fmt.Errorf("read the hub's sealing key (Secret %s/%s; `etcdfed hub install`, the hub itself or `cluster join` creates it): %w", namespace, KeySecret, err)
	}
	k, err := PrivateKey(sec.Data[PrivateKeyKey])
	if err != nil {
		return nil, fmt.Errorf("the Secret %s/%s: %w", namespace, KeySecret, err)
	}
	return k, nil
}
