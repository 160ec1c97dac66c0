package etcdcluster

import (
	"context"
	"crypto/tls"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdfedv1 "github.com/etcdfed/etcdfed/api/v1alpha1"
	"github.com/etcdfed/etcdfed/hub/pki"
)

// tlsMaterial is an EtcdCluster's CA and the hub's client certificate.
type tlsMaterial struct {
	ca     *pki.CA
	client *pki.Leaf
}

func (t *tlsMaterial) config() (*tls.Config, error) {
	return pki.ClientTLS(t.ca.CertPEM, t.client)
}

// CASecretName is the Secret holding an EtcdCluster's CA in the hub.
func CASecretName(ec *etcdfedv1.EtcdCluster) string {
	if ec.Spec.TLS.CASecretName != "" {
		return ec.Spec.TLS.CASecretName
	}
	return ec.Name + "-ca"
}

// ReadCA reads an EtcdCluster's CA from the hub, for tools that issue
// client certificates (etcdfed client-cert, etcdfed dev, tests). It never
// creates one: that is the hub's job.
func ReadCA(ctx context.Context, c client.Reader, ec *etcdfedv1.EtcdCluster) (*pki.CA, error) {
	sec := &corev1.Secret{}
	key := client.ObjectKey{Namespace: ec.Namespace, Name: CASecretName(ec)}
	if err := c.Get(ctx, key, sec); err != nil {
		return nil, fmt.Errorf("read the CA Secret %s of EtcdCluster %s/%s: %w", key, ec.Namespace, ec.Name, err)
	}
	ca, err := pki.LoadCA(sec.Data[pki.KeyCert], sec.Data[pki.KeyKey])
	if err != nil {
		return nil, fmt.Errorf("CA Secret %s: %w", key, err)
	}
	return ca, nil
}

// HubClientSecretName is the Secret holding the hub's etcd client
// certificate in the hub.
func HubClientSecretName(ec *etcdfedv1.EtcdCluster) string { return ec.Name + "-hub-client" }

// MemberSecretName is the Secret of a member's certificate in its cluster.
func MemberSecretName(member string) string { return member + "-tls" }

func tlsEnabled(ec *etcdfedv1.EtcdCluster) bool { return ec.Spec.TLS.Mode != etcdfedv1.TLSDisabled }

// ensurePKI loads or creates the CA and the hub's client certificate.
func (r *Reconciler) ensurePKI(ctx context.Context, ec *etcdfedv1.EtcdCluster) (*tlsMaterial, error) {
	c := r.hub()
	now := r.now()
	sec := &corev1.Secret{}
	key := client.ObjectKey{Namespace: ec.Namespace, Name: CASecretName(ec)}
	var ca *pki.CA
	switch err := r.hubReader().Get(ctx, key, sec); {
	case apierrors.IsNotFound(err) && ec.Spec.TLS.CASecretName != "":
		return nil, fmt.Errorf("CA Secret %s named in spec.tls.caSecretName does not exist", key)
	case apierrors.IsNotFound(err):
		if ca, err = pki.NewCA(fmt.Sprintf("etcdfed %s/%s CA", ec.Namespace, ec.Name), now); err != nil {
			return nil, err
		}
		sec = &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Namespace: ec.Namespace, Name: key.Name, Labels: ownerLabels(ec)},
			Type:       corev1.SecretTypeTLS,
			Data:       map[string][]byte{pki.KeyCert: ca.CertPEM, pki.KeyKey: ca.KeyPEM},
		}
		if err := c.Create(ctx, sec); err != nil {
			return nil, fmt.Errorf("create CA Secret %s: %w", key, err)
		}
	case err != nil:
		return nil, fmt.Errorf("get CA Secret %s: %w", key, err)
	default:
		if ca, err = pki.LoadCA(sec.Data[pki.KeyCert], sec.Data[pki.KeyKey]); err != nil {
			return nil, fmt.Errorf("CA Secret %s: %w", key, err)
		}
	}

	leaf, err := r.ensureLeafSecret(ctx, r.hubReader(), c, ca, client.ObjectKey{Namespace: ec.Namespace, Name: HubClientSecretName(ec)}, ownerLabels(ec), nil,
		func() (*pki.Leaf, error) { return ca.IssueClient("etcdfed-hub", now) })
	if err != nil {
		return nil, err
	}
	return &tlsMaterial{ca: ca, client: leaf}, nil
}

// ensureLeafSecret keeps a Secret with ca.crt, tls.crt and tls.key valid:
// issued by ca, not near expiry, with the wanted DNS names.
func (r *Reconciler) ensureLeafSecret(ctx context.Context, read client.Reader, c client.Client, ca *pki.CA, key client.ObjectKey, labels map[string]string, wantDNS []string, issue func() (*pki.Leaf, error)) (*pki.Leaf, error) {
	sec := &corev1.Secret{}
	err := read.Get(ctx, key, sec)
	if err != nil && !apierrors.IsNotFound(err) {
		return nil, fmt.Errorf("get Secret %s: %w", key, err)
	}
	exists := err == nil
	if exists {
		renew, _ := ca.NeedsRenewal(sec.Data[pki.KeyCert], wantDNS, r.now())
		if !renew && pki.Equal(sec.Data[pki.KeyCA], ca.CertPEM) {
			return &pki.Leaf{CertPEM: sec.Data[pki.KeyCert], KeyPEM: sec.Data[pki.KeyKey]}, nil
		}
	}
	leaf, err := issue()
	if err != nil {
		return nil, err
	}
	data := map[string][]byte{pki.KeyCA: ca.CertPEM, pki.KeyCert: leaf.CertPEM, pki.KeyKey: leaf.KeyPEM}
	if exists {
		sec.Data = data
		if err := c.Update(ctx, sec); err != nil {
			return nil, fmt.Errorf("update Secret %s: %w", key, err)
		}
		return leaf, nil
	}
	sec = &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name, Labels: labels},
		Type:       corev1.SecretTypeOpaque,
		Data:       data,
	}
	if err := c.Create(ctx, sec); err != nil {
		return nil, fmt.Errorf("create Secret %s: %w", key, err)
	}
	return leaf, nil
}

// ownerLabels are set on every object the hub writes for ec.
func ownerLabels(ec *etcdfedv1.EtcdCluster) map[string]string {
	return map[string]string{
		etcdfedv1.LabelClusterName:      ec.Name,
		etcdfedv1.LabelClusterNamespace: ec.Namespace,
		etcdfedv1.LabelClusterUID:       string(ec.UID),
		etcdfedv1.LabelManagedBy:        etcdfedv1.ManagedByValue,
	}
}
