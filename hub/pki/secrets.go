package pki

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdfedv1 "github.com/etcdfed/etcdfed/api/v1alpha1"
)

// Where the certificates of an EtcdCluster are kept. The hub writes these
// Secrets; the CLI and tests read the CA from the first.

// CASecretName is the Secret holding an EtcdCluster's CA in the hub, in the
// EtcdCluster's namespace: spec.tls.caSecretName, or <name>-ca.
func CASecretName(ec *etcdfedv1.EtcdCluster) string {
	if ec.Spec.TLS.CASecretName != "" {
		return ec.Spec.TLS.CASecretName
	}
	return ec.Name + "-ca"
}

// HubClientSecretName is the Secret holding the hub's etcd client
// certificate in the hub, in the EtcdCluster's namespace.
func HubClientSecretName(ec *etcdfedv1.EtcdCluster) string { return ec.Name + "-hub-client" }

// MemberSecretName is the Secret of a member's certificate, next to its
// EtcdMember in the member cluster's ring namespace, named after that
// EtcdMember (etcdfedv1.MemberObjectName, or the member's name for an
// object written before that scheme).
func MemberSecretName(objectName string) string { return objectName + "-tls" }

// ReadCA reads an EtcdCluster's CA from the hub, for tools that issue
// client certificates (etcdfed client-cert, etcdfed dev, tests). It never
// creates one: that is the hub's job.
func ReadCA(ctx context.Context, c client.Reader, ec *etcdfedv1.EtcdCluster) (*CA, error) {
	sec := &corev1.Secret{}
	key := client.ObjectKey{Namespace: ec.Namespace, Name: CASecretName(ec)}
	if err := c.Get(ctx, key, sec); err != nil {
		return nil, fmt.Errorf("read the CA Secret %s of EtcdCluster %s/%s: %w", key, ec.Namespace, ec.Name, err)
	}
	ca, err := LoadCA(sec.Data[KeyCert], sec.Data[KeyKey])
	if err != nil {
		return nil, fmt.Errorf("CA Secret %s: %w", key, err)
	}
	return ca, nil
}

// ReadAuthority reads an EtcdCluster's CA Secret with the CA trusted
// beside the issuing one during a rotation, for tools that need the bundle
// (etcdfed client-cert, tests).
func ReadAuthority(ctx context.Context, c client.Reader, ec *etcdfedv1.EtcdCluster) (*Authority, error) {
	sec := &corev1.Secret{}
	key := client.ObjectKey{Namespace: ec.Namespace, Name: CASecretName(ec)}
	if err := c.Get(ctx, key, sec); err != nil {
		return nil, fmt.Errorf("read the CA Secret %s of EtcdCluster %s/%s: %w", key, ec.Namespace, ec.Name, err)
	}
	a, err := LoadAuthority(sec.Data)
	if err != nil {
		return nil, fmt.Errorf("CA Secret %s: %w", key, err)
	}
	return a, nil
}
