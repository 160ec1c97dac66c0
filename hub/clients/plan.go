package clients

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"strings"
	"time"

	etcdfedv1 "github.com/etcdfed/etcdfed/api/v1alpha1"
	"github.com/etcdfed/etcdfed/hub/pki"
)

// Target is where one consumer's Secret goes, with defaults resolved.
type Target struct {
	Name       string
	Cluster    string // "" is the hub cluster
	Namespace  string
	SecretName string
	CommonName string
}

// TargetOf resolves the defaults of one spec.clients[] entry.
func TargetOf(ec *etcdfedv1.EtcdCluster, c etcdfedv1.ClientSpec) Target {
	t := Target{Name: c.Name, Cluster: c.Cluster, Namespace: c.Namespace, SecretName: c.SecretName, CommonName: c.CommonName}
	if t.Namespace == "" && t.Cluster == "" {
		t.Namespace = ec.Namespace
	}
	if t.SecretName == "" {
		t.SecretName = ec.Name + "-" + c.Name + "-etcd-client"
	}
	if t.CommonName == "" {
		t.CommonName = c.Name
	}
	return t
}

// String names the Secret for messages: cluster/namespace/name.
func (t Target) String() string {
	c := t.Cluster
	if c == "" {
		c = "hub"
	}
	return c + "/" + t.Namespace + "/" + t.SecretName
}

// Found is the consumer's Secret as read, nil when absent.
type Found struct {
	// Owner is the value of its cluster-uid label ("" when none).
	Owner string
	Data  map[string][]byte
}

// Action is what a consumer's Secret needs.
type Action string

const (
	// ActNone: the Secret is current.
	ActNone Action = "None"
	// ActIssue: a new certificate (and key) must be issued and written.
	ActIssue Action = "Issue"
	// ActUpdate: the certificate is good; the endpoints or labels are
	// rewritten.
	ActUpdate Action = "Update"
	// ActRefuse: a Secret of that name exists and the hub did not write
	// it; it is never overwritten.
	ActRefuse Action = "Refuse"
)

// Decision is Plan's answer for one consumer.
type Decision struct {
	Action Action
	// Reason says why (for events and logs).
	Reason string
	// NotAfter is the expiry of the certificate the Secret keeps (zero
	// when a new one is issued: the caller knows it then).
	NotAfter time.Time
}

// Plan decides what one consumer's Secret needs: a is the ring's CA
// Secret (its issuing CA, and the bundle to trust), uid the EtcdCluster's
// UID (the owner label the hub writes), cn the certificate's common name,
// endpoints the comma-separated client URLs.
func Plan(a *pki.Authority, uid, cn, endpoints string, found *Found, now time.Time) Decision {
	ca := a.Signer
	if found == nil {
		return Decision{Action: ActIssue, Reason: "no Secret yet"}
	}
	if found.Owner != uid {
		who := "it has no " + etcdfedv1.LabelClusterUID + " label"
		if found.Owner != "" {
			who = fmt.Sprintf("it belongs to the EtcdCluster with UID %s", found.Owner)
		}
		return Decision{Action: ActRefuse, Reason: "a Secret of that name exists and the hub did not write it (" + who + "); delete it or choose another secretName"}
	}
	certPEM := found.Data[etcdfedv1.ClientSecretKeyCert]
	if renew, why := ca.NeedsRenewal(certPEM, nil, now); renew {
		return Decision{Action: ActIssue, Reason: "certificate: " + why}
	}
	if _, err := tls.X509KeyPair(certPEM, found.Data[etcdfedv1.ClientSecretKeyKey]); err != nil {
		return Decision{Action: ActIssue, Reason: "key does not match the certificate"}
	}
	if got := commonName(certPEM); got != cn {
		return Decision{Action: ActIssue, Reason: fmt.Sprintf("common name %q, want %q", got, cn)}
	}
	notAfter := expiry(certPEM)
	if !pki.Equal(found.Data[etcdfedv1.ClientSecretKeyCA], a.Bundle()) {
		// The certificate is good: only the CAs to trust changed (a CA
		// rotation's first and last steps).
		return Decision{Action: ActUpdate, Reason: "CA bundle changed", NotAfter: notAfter}
	}
	if string(found.Data[etcdfedv1.ClientSecretKeyEndpoints]) != endpoints {
		return Decision{Action: ActUpdate, Reason: "endpoints changed", NotAfter: notAfter}
	}
	return Decision{Action: ActNone, NotAfter: notAfter}
}

// RenewAt is when a certificate expiring at notAfter is renewed.
func RenewAt(notAfter time.Time) time.Time { return notAfter.Add(-pki.RenewBefore) }

// CAHash identifies what a consumer's Secret data holds: its CA bundle
// and the CA of that bundle that issued its certificate (pki.TrustHash),
// for status.clients[].caHash.
func CAHash(data map[string][]byte) string {
	bundle := data[etcdfedv1.ClientSecretKeyCA]
	return pki.TrustHash(bundle, pki.IssuerIn(bundle, data[etcdfedv1.ClientSecretKeyCert]))
}

// Data is the content of a consumer's Secret.
func Data(caPEM []byte, leaf *pki.Leaf, endpoints string) map[string][]byte {
	return map[string][]byte{
		etcdfedv1.ClientSecretKeyCA:        bytes.Clone(caPEM),
		etcdfedv1.ClientSecretKeyCert:      bytes.Clone(leaf.CertPEM),
		etcdfedv1.ClientSecretKeyKey:       bytes.Clone(leaf.KeyPEM),
		etcdfedv1.ClientSecretKeyEndpoints: []byte(endpoints),
	}
}

// Endpoints joins status.endpoints as --etcd-servers takes them.
func Endpoints(ec *etcdfedv1.EtcdCluster) string { return strings.Join(ec.Status.Endpoints, ",") }

func commonName(certPEM []byte) string {
	block, _ := pem.Decode(certPEM)
	if block == nil {
		return ""
	}
	c, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		return ""
	}
	return c.Subject.CommonName
}

func expiry(certPEM []byte) time.Time {
	t, _ := pki.NotAfter(certPEM)
	return t
}
