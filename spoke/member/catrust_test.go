package member

import (
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	etcdfedv1 "github.com/etcdfed/etcdfed/api/v1alpha1"
	"github.com/etcdfed/etcdfed/hub/pki"
	"github.com/etcdfed/etcdfed/pkg/catrust"
)

// During a CA rotation the pod waits for the Secret that holds the trust
// the member's spec names: the spoke's cache of Secrets can lag behind its
// cache of members, and a pod started on the old trust would refuse the
// new CA's certificates for as long as etcd runs (it reads its trusted
// CAs only at start). Seen in the fleet benchmark's CA rotation: a member
// restarted to trust both CAs refused the hub's certificate of the new
// CA, and its ring's rotation stalled.
func TestPodWaitsForTheCATrustItsSpecNames(t *testing.T) {
	now := time.Now()
	oldCA, err := pki.NewCA("old", now)
	if err != nil {
		t.Fatal(err)
	}
	newCA, err := pki.NewCA("new", now)
	if err != nil {
		t.Fatal(err)
	}
	const dns = "main-0.main.etcd.test"
	leaf, err := oldCA.IssueMember(pki.MemberRequest{Member: "main-0", DNSNames: []string{dns}}, now)
	if err != nil {
		t.Fatal(err)
	}
	both := append(append([]byte{}, oldCA.CertPEM...), newCA.CertPEM...)
	m := &etcdfedv1.EtcdMember{}
	m.Spec.DNSName = dns
	m.Spec.TLS = etcdfedv1.MemberTLS{Mode: etcdfedv1.TLSEnabled, SecretName: "main-0-tls", CAHash: catrust.Hash(both, oldCA.Cert)}
	secret := func(bundle []byte) *corev1.Secret {
		return &corev1.Secret{Data: map[string][]byte{"ca.crt": bundle, "tls.crt": leaf.CertPEM, "tls.key": leaf.KeyPEM}}
	}

	b := tlsBlocker(m, secret(oldCA.CertPEM))
	if b == nil || b.Reason != ReasonTLSSecretNotCurrent || !strings.Contains(b.Message, "reads its trusted CAs only when it starts") {
		t.Fatalf("the Secret still holds the old CA alone, the spec names both: blocker %+v, want %s", b, ReasonTLSSecretNotCurrent)
	}
	if b := tlsBlocker(m, secret(both)); b != nil {
		t.Fatalf("the Secret holds the trust the spec names: blocker %+v, want none", b)
	}
	m.Spec.TLS.CAHash = "" // outside a rotation: no check
	if b := tlsBlocker(m, secret(oldCA.CertPEM)); b != nil {
		t.Fatalf("no caHash: blocker %+v, want none", b)
	}
}
