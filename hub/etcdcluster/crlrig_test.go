package etcdcluster

import (
	"path/filepath"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	etcdfedv1 "github.com/etcdfed/etcdfed/api/v1alpha1"
	"github.com/etcdfed/etcdfed/dev/etcdtest"
	"github.com/etcdfed/etcdfed/dev/testenv"
	"github.com/etcdfed/etcdfed/hub/pki"
)

// The preamble of the tests that show a list the hub signs refusing a
// certificate on a real etcd: the file etcd reads its list from, and a
// reconciler on a real hub apiserver over a ring with TLS.

// crlFile is where a real etcd reads its revocation list
// (--client-crl-file, --peer-crl-file), holding first, and a function
// that replaces it as a kubelet updates a mounted Secret.
func crlFile(t *testing.T, first []byte) (string, func([]byte)) {
	t.Helper()
	path := filepath.Join(t.TempDir(), etcdfedv1.RevocationListKey)
	write := func(der []byte) { t.Helper(); etcdtest.ReplaceFile(t, path, der) }
	write(first)
	return path, write
}

// tlsRing is a reconciler on a real hub apiserver, its clock at start,
// and the test ring with TLS on, observed at start.
func tlsRing(t *testing.T, start time.Time) (*testenv.Cluster, *Reconciler, *snapshot) {
	t.Helper()
	api := testenv.StartT(t, "hub")[0]
	r := &Reconciler{Manager: startHubManager(t, api), Now: func() time.Time { return start }}
	s := ring()
	s.now = start
	s.ec.Spec.TLS.Mode = etcdfedv1.TLSEnabled
	return api, r, s
}

// ringCAWithList is a ring CA made a month before start, and the file of
// its empty revocation list that a real etcd reads (crlFile).
func ringCAWithList(t *testing.T, start time.Time) (*pki.CA, string, func([]byte)) {
	t.Helper()
	ca, err := pki.NewCA("ring", start.Add(-30*24*time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	crl, writeCRL := crlFile(t, emptyList(t, ca))
	return ca, crl, writeCRL
}

// caSecretOf is the ring's CA Secret as the hub keeps it, holding ca and
// its key.
func caSecretOf(s *snapshot, ca *pki.CA) *corev1.Secret {
	return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: s.ec.Namespace, Name: pki.CASecretName(s.ec), Labels: ownerLabels(s.ec)},
		Type: corev1.SecretTypeTLS, Data: map[string][]byte{pki.KeyCert: ca.CertPEM, pki.KeyKey: ca.KeyPEM}}
}
