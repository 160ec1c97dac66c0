package main

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	etcdfedv1 "github.com/etcdfed/etcdfed/api/v1alpha1"
	"github.com/etcdfed/etcdfed/dev/testenv"
	"github.com/etcdfed/etcdfed/hub/pki"
)

// ringWithCA is a ring "main" in a new namespace of the shared apiserver
// cli-client-cert, with its CA Secret as the hub keeps it, and a
// kubeconfig file for the CLI.
type ringWithCA struct {
	api        *testenv.Cluster
	ns         string
	kubeconfig string
	ec         *etcdfedv1.EtcdCluster
	ca         *pki.CA
}

func newRingWithCA(t *testing.T, prefix string) ringWithCA {
	t.Helper()
	api := testenv.Shared(t, "cli-client-cert")
	ns := testenv.NamespaceT(t, api, prefix)
	kc, err := api.Kubeconfig()
	if err != nil {
		t.Fatal(err)
	}
	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(kubeconfig, kc, 0o600); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	ec := &etcdfedv1.EtcdCluster{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "main"}}
	ec.Spec = etcdfedv1.EtcdClusterSpec{Replicas: 3, Version: "3.6.16", DNS: etcdfedv1.DNSSpec{Domain: "main.etcd.test"}}
	if err := api.Client.Create(ctx, ec); err != nil {
		t.Fatal(err)
	}
	ca, err := pki.NewCA("test", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if err := api.Client.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: pki.CASecretName(ec)}, Type: corev1.SecretTypeTLS,
		Data: map[string][]byte{pki.KeyCert: ca.CertPEM, pki.KeyKey: ca.KeyPEM}}); err != nil {
		t.Fatal(err)
	}
	return ringWithCA{api: api, ns: ns, kubeconfig: kubeconfig, ec: ec, ca: ca}
}
