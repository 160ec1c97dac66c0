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
	// Lifetime of the certificates issued.
	Lifetime time.Duration
}

// TargetOf resolves the defaults of one spec.clients[] entry.
func TargetOf(ec *etcdfedv1.EtcdCluster, c etcdfedv1.ClientSpec) Target {
	t := Target{Name: c.Name, Cluster: c.Cluster, Namespace: c.Namespace, SecretName: c.SecretName, CommonName: c.CommonName,
		Lifetime: etcdfedv1.DefaultClientCertificateLifetime}
	if t.Namespace == "" && t.Cluster == "" {
		t.Namespace = ec.Namespace
	}
	if t.SecretName == "" {
		t.SecretName = defaultSecretName(ec, c.Name)
	}
	if t.CommonName == "" {
		t.CommonName = c.Name
	}
	if c.CertificateLifetime != nil && c.CertificateLifetime.Duration > 0 {
		t.Lifetime = c.CertificateLifetime.Duration
	}
	return t
}

func defaultSecretName(ec *etcdfedv1.EtcdCluster, client string) string {
	return ec.Name + "-" + client + "-etcd-client"
}

// Policy is what the hub's operator lets EtcdCluster authors do beyond
// their own namespace (cmd/hub flags).
type Policy struct {
	// OtherNamespaces lets spec.clients[].namespace name a namespace
	// other than the EtcdCluster's own, in the hub or a member cluster.
	OtherNamespaces bool
	// RingNamespace is the namespace of the hub's own objects in member
	// clusters (member certificates, EtcdMembers, the gossip key): no
	// consumer's Secret goes there.
	RingNamespace string
}

// reservedSuffixes end the names of Secrets the hub keeps for every ring,
// in the hub cluster (<ring>-ca, <ring>-hub-client, <ring>-snapshot-key,
// <ring>-<client>-etcd-client) and next to members (<member>-tls,
// <member>-store-credentials). A consumer's secretName may end in one
// only when it is the entry's own default name: a spec must not take the
// name of a Secret another ring will use (its CA's, say) before that ring
// does.
var reservedSuffixes = []string{"-ca", "-hub-client", "-snapshot-key", "-etcd-client", "-tls", "-store-credentials"}

// Refusal says why a consumer's Secret may not go where its entry says,
// "" when it may: another namespace than the EtcdCluster's unless the
// policy allows it, the ring namespace of a member cluster, a common name
// that is a member's (IsMemberName: that etcd user is root), or a name
// the hub keeps for its own Secrets.
func Refusal(ec *etcdfedv1.EtcdCluster, c etcdfedv1.ClientSpec, t Target, p Policy) string {
	if t.Namespace != ec.Namespace && !p.OtherNamespaces {
		where := "the hub cluster"
		if t.Cluster != "" {
			where = "member cluster " + t.Cluster
		}
		return fmt.Sprintf("namespace %s in %s is not the EtcdCluster's own (%s): a spec writes Secrets only in its own namespace unless the hub runs with --allow-client-secrets-in-other-namespaces", t.Namespace, where, ec.Namespace)
	}
	if t.Cluster != "" && p.RingNamespace != "" && t.Namespace == p.RingNamespace {
		return fmt.Sprintf("namespace %s of member cluster %s is the ring namespace, which holds the hub's own objects: choose another", t.Namespace, t.Cluster)
	}
	if IsMemberName(ec, t.CommonName) {
		return fmt.Sprintf("commonName %s is, or may become, a member's name (%s-<ordinal>): a member's certificate is an etcd user with the root role (its preStop hook moves leadership), and a consumer of that name would share it; set another commonName", t.CommonName, ec.Name)
	}
	if t.SecretName != defaultSecretName(ec, c.Name) {
		for _, suf := range reservedSuffixes {
			if strings.HasSuffix(t.SecretName, suf) {
				return fmt.Sprintf("secretName %s ends in %s, as the hub's own Secrets do (a ring's CA, its certificates, its consumers' defaults): choose another name, or leave secretName empty for %s", t.SecretName, suf, defaultSecretName(ec, c.Name))
			}
		}
	}
	return ""
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
	// ActUpdate: the certificate is good; the CA bundle (a CA rotation)
	// or the endpoints are rewritten.
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
// UID (the owner label the hub writes), t the consumer (the certificate's
// common name and lifetime), endpoints the comma-separated client URLs.
func Plan(a *pki.Authority, uid string, t Target, endpoints string, found *Found, now time.Time) Decision {
	cn := t.CommonName
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
	if got := pki.CommonName(certPEM); got != cn {
		return Decision{Action: ActIssue, Reason: fmt.Sprintf("common name %q, want %q", got, cn)}
	}
	notBefore, notAfter := validity(certPEM)
	if t.Lifetime > 0 && notAfter.Sub(notBefore) > t.Lifetime+time.Hour {
		// A shorter lifetime applies at once: the certificate of a
		// removed consumer must not outlive it by a year.
		return Decision{Action: ActIssue, Reason: fmt.Sprintf("valid %s, longer than the lifetime %s", notAfter.Sub(notBefore).Round(time.Hour), t.Lifetime)}
	}
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

// RenewAt is when the certificate in certPEM is renewed (pki.RenewalTime).
func RenewAt(certPEM []byte) time.Time {
	nb, na := validity(certPEM)
	return pki.RenewalTime(nb, na)
}

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

func expiry(certPEM []byte) time.Time {
	_, na := validity(certPEM)
	return na
}

func validity(certPEM []byte) (notBefore, notAfter time.Time) {
	block, _ := pem.Decode(certPEM)
	if block == nil {
		return time.Time{}, time.Time{}
	}
	c, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		return time.Time{}, time.Time{}
	}
	return c.NotBefore, c.NotAfter
}
