package main

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"regexp"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	etcdfedv1 "github.com/etcdfed/etcdfed/api/v1alpha1"
	"github.com/etcdfed/etcdfed/hub/etcdops"
	"github.com/etcdfed/etcdfed/hub/pki"
	"github.com/etcdfed/etcdfed/hub/planner"
	"github.com/etcdfed/etcdfed/pkg/etcdversion"
)

// adoptEndpoint is the pattern of spec.adopt.endpoints' CEL rule
// (api/v1alpha1 AdoptSpec.Endpoints): checked here first for a clearer
// error naming the flag.
var adoptEndpoint = regexp.MustCompile(`^https://[^/?#@ ]+(:[0-9]{1,5})?/?$`)

// adoptObjects are what `etcdfed adopt` creates: the CA Secret, the
// client certificate's Secret (nil without one) and the EtcdCluster.
type adoptObjects struct {
	ca, client *corev1.Secret
	ec         *etcdfedv1.EtcdCluster
}

func (o adoptObjects) list() []client.Object {
	objs := []client.Object{o.ca}
	if o.client != nil {
		objs = append(objs, o.client)
	}
	return append(objs, o.ec)
}

// objects checks the flags and the files and builds the objects; every
// error names the flag or file at fault.
func (f adoptFlags) objects(key client.ObjectKey) (adoptObjects, error) {
	errs := f.checkSpec()
	ca, leaf, credErrs := f.readCredentials()
	if err := errors.Join(append(errs, credErrs...)...); err != nil {
		return adoptObjects{}, err
	}
	return f.build(key, ca, leaf), nil
}

// checkSpec checks the flags that become the EtcdCluster's spec.
func (f adoptFlags) checkSpec() []error {
	var errs []error
	if len(f.endpoints) == 0 {
		errs = append(errs, errors.New("--endpoints is required: every original member's client URL, such as https://10.0.0.5:2379"))
	}
	for i, e := range f.endpoints {
		if !adoptEndpoint.MatchString(e) {
			why := "an https:// URL of a member's client port, such as https://10.0.0.5:2379 (no path, no user)"
			if u, err := url.Parse(e); err == nil && u.Scheme == "http" {
				why = "https://: the hub authenticates with a client certificate of the CA, so the originals must serve TLS on their client port"
			}
			errs = append(errs, fmt.Errorf("--endpoints %q: must be %s", e, why))
		}
		if slices.Contains(f.endpoints[:i], e) {
			errs = append(errs, fmt.Errorf("--endpoints %q is given twice", e))
		}
	}
	if len(f.endpoints) > 9 {
		errs = append(errs, fmt.Errorf("--endpoints: %d given, at most 9", len(f.endpoints)))
	}
	if f.replicas < 1 || f.replicas > 9 || f.replicas%2 == 0 {
		errs = append(errs, fmt.Errorf("--replicas %d: must be odd, from 1 to 9", f.replicas))
	}
	switch v, err := etcdversion.Parse(f.version); {
	case f.version == "":
		errs = append(errs, errors.New("--etcd-version is required: the etcd version the originals run (etcdctl endpoint status shows it), or the next minor"))
	case err != nil:
		errs = append(errs, fmt.Errorf("--etcd-version %q: %w", f.version, err))
	default:
		if err := etcdversion.Check(v); err != nil {
			errs = append(errs, fmt.Errorf("--etcd-version %s: %w", f.version, err))
		}
	}
	if f.domain == "" {
		errs = append(errs, errors.New("--domain is required: the DNS domain of the ring's member names, which the originals must resolve"))
	}
	switch etcdfedv1.AuthMode(f.auth) {
	case etcdfedv1.AuthEnabled, etcdfedv1.AuthDisabled:
	case "":
		errs = append(errs, errors.New("--auth is required: Enabled turns etcd authentication on (clients whose certificate's common name is neither root nor a spec.clients user lose access), Disabled turns it off"))
	default:
		errs = append(errs, fmt.Errorf("--auth %q: Enabled or Disabled", f.auth))
	}
	return errs
}

// readCredentials reads the CA and the client certificate (nil without
// --client-cert) from their files, and checks the client certificate
// against the CA.
func (f adoptFlags) readCredentials() (*pki.CA, *pki.Leaf, []error) {
	var errs []error
	ca, err := readCA(f.caCert, f.caKey)
	if err != nil {
		errs = append(errs, err)
	}
	var leaf *pki.Leaf
	switch {
	case (f.clientCert == "") != (f.clientKey == ""):
		errs = append(errs, errors.New("--client-cert and --client-key go together"))
	case f.clientCert != "" && ca != nil:
		if leaf, err = readClient(f.clientCert, f.clientKey, ca); err != nil {
			errs = append(errs, err)
		}
	}
	return ca, leaf, errs
}

// build makes the objects of checked flags and credentials.
func (f adoptFlags) build(key client.ObjectKey, ca *pki.CA, leaf *pki.Leaf) adoptObjects {
	caName := orName(f.caSecret, key.Name+"-adopted-ca")
	objs := adoptObjects{ca: tlsSecret(key.Namespace, caName, ca.CertPEM, ca.KeyPEM)}
	ec := &etcdfedv1.EtcdCluster{
		TypeMeta:   metav1.TypeMeta{APIVersion: etcdfedv1.GroupVersion.String(), Kind: "EtcdCluster"},
		ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name},
		Spec: etcdfedv1.EtcdClusterSpec{
			Replicas: f.replicas,
			Version:  f.version,
			DNS:      etcdfedv1.DNSSpec{Domain: f.domain},
			Topology: etcdfedv1.TopologySpec{Clusters: f.clusters},
			TLS:      etcdfedv1.TLSSpec{CASecretName: caName, Auth: etcdfedv1.AuthMode(f.auth), PeerSkipClientSANVerification: f.peerSkipSAN},
			Adopt:    &etcdfedv1.AdoptSpec{Endpoints: f.endpoints, Retire: f.retireNow},
		},
	}
	if leaf != nil {
		name := orName(f.clientSecret, key.Name+"-adopt-client")
		objs.client = tlsSecret(key.Namespace, name, leaf.CertPEM, leaf.KeyPEM)
		ec.Spec.Adopt.ClientSecretName = name
	}
	objs.ec = ec
	return objs
}

func orName(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

func tlsSecret(ns, name string, cert, key []byte) *corev1.Secret {
	return &corev1.Secret{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Secret"},
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Type:       corev1.SecretTypeTLS,
		Data:       map[string][]byte{pki.KeyCert: cert, pki.KeyKey: key},
	}
}

// readPair reads a certificate and its key from files: both readable, PEM,
// the key the certificate's (the first certificate in certFile).
func readPair(what, certFlag, certFile, keyFlag, keyFile string) (cert, key []byte, parsed *x509.Certificate, err error) {
	if certFile == "" || keyFile == "" {
		return nil, nil, nil, fmt.Errorf("--%s and --%s are required: the %s certificate and key", certFlag, keyFlag, what)
	}
	if cert, err = os.ReadFile(certFile); err != nil {
		return nil, nil, nil, fmt.Errorf("--%s: %w", certFlag, err)
	}
	if key, err = os.ReadFile(keyFile); err != nil {
		return nil, nil, nil, fmt.Errorf("--%s: %w", keyFlag, err)
	}
	if b, _ := pem.Decode(cert); b == nil || b.Type != "CERTIFICATE" {
		return nil, nil, nil, fmt.Errorf("--%s %s: no PEM certificate in it", certFlag, certFile)
	}
	if b, _ := pem.Decode(key); b == nil || !strings.Contains(b.Type, "PRIVATE KEY") {
		return nil, nil, nil, fmt.Errorf("--%s %s: no PEM private key in it", keyFlag, keyFile)
	}
	pair, err := tls.X509KeyPair(cert, key)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("--%s %s and --%s %s: not a certificate and its key: %w", certFlag, certFile, keyFlag, keyFile, err)
	}
	if parsed, err = x509.ParseCertificate(pair.Certificate[0]); err != nil {
		return nil, nil, nil, fmt.Errorf("--%s %s: %w", certFlag, certFile, err)
	}
	return cert, key, parsed, nil
}

// readCA reads the CA as the hub loads it from the Secret (pki.LoadCA).
func readCA(certFile, keyFile string) (*pki.CA, error) {
	cert, key, _, err := readPair("existing cluster's CA", "ca-cert", certFile, "ca-key", keyFile)
	if err != nil {
		return nil, err
	}
	ca, err := pki.LoadCA(cert, key)
	if err != nil {
		return nil, fmt.Errorf("--ca-cert %s: %w", certFile, err)
	}
	return ca, nil
}

// readClient reads the client certificate and checks that ca issued it
// for client use, and that it is valid now.
func readClient(certFile, keyFile string, ca *pki.CA) (*pki.Leaf, error) {
	cert, key, parsed, err := readPair("client", "client-cert", certFile, "client-key", keyFile)
	if err != nil {
		return nil, err
	}
	if _, err := parsed.Verify(x509.VerifyOptions{Roots: ca.Pool(), KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}); err != nil {
		return nil, fmt.Errorf("--client-cert %s (%q): not a client certificate of the CA in --ca-cert (%q): %w", certFile, parsed.Subject.CommonName, ca.Cert.Subject.CommonName, err)
	}
	if parsed.Subject.CommonName == "" {
		return nil, fmt.Errorf("--client-cert %s has no common name: etcd takes the user from it", certFile)
	}
	return &pki.Leaf{CertPEM: cert, KeyPEM: key}, nil
}

// create writes the objects, or with dryRun prints them; in both cases
// only after every check passed: none of them exists yet, and the
// apiserver accepts each in a dry run. A write that fails half way
// removes what it wrote.
func (o adoptObjects) create(ctx context.Context, c client.Client, dryRun bool, out io.Writer) error {
	objs := o.list()
	var kinds []string // "Secret ns/name", before Create clears the type
	for _, obj := range objs {
		kinds = append(kinds, obj.GetObjectKind().GroupVersionKind().Kind+" "+client.ObjectKeyFromObject(obj).String())
	}
	var errs []error
	for _, obj := range objs {
		kind := obj.GetObjectKind().GroupVersionKind().Kind
		got := obj.DeepCopyObject().(client.Object)
		switch err := c.Get(ctx, client.ObjectKeyFromObject(obj), got); {
		case err == nil:
			why := "choose another name with --ca-secret or --client-secret"
			if kind == "EtcdCluster" {
				why = "adopt into a new EtcdCluster (spec.adopt is set at creation only), or delete that one first"
			}
			errs = append(errs, fmt.Errorf("%s %s already exists: %s", kind, client.ObjectKeyFromObject(obj), why))
		case !apierrors.IsNotFound(err):
			errs = append(errs, fmt.Errorf("get %s %s: %w", kind, client.ObjectKeyFromObject(obj), err))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("nothing written: %w", err)
	}
	for i, obj := range objs {
		if err := c.Create(ctx, obj.DeepCopyObject().(client.Object), client.DryRunAll); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", kinds[i], err))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("nothing written: the apiserver refuses: %w", err)
	}
	if dryRun {
		return printObjects(out, objs)
	}
	var done []string
	for i, obj := range objs {
		if err := c.Create(ctx, obj); err != nil {
			for j := i - 1; j >= 0; j-- {
				if derr := c.Delete(ctx, objs[j]); derr != nil && !apierrors.IsNotFound(derr) {
					err = errors.Join(err, fmt.Errorf("and removing %s again: %w", done[j], derr))
				}
			}
			return fmt.Errorf("create %s: %w", kinds[i], err)
		}
		done = append(done, kinds[i])
	}
	fmt.Fprintf(out, "Created Secret %s with the existing cluster's CA (%s).\n", client.ObjectKeyFromObject(o.ca), pki.CommonName(o.ca.Data[pki.KeyCert]))
	if o.client != nil {
		fmt.Fprintf(out, "Created Secret %s with the client certificate the hub uses on the existing cluster (etcd user %s).\n",
			client.ObjectKeyFromObject(o.client), pki.CommonName(o.client.Data[pki.KeyCert]))
	} else {
		fmt.Fprintf(out, "No client certificate given: the hub issues its own from the CA (etcd user %s); if the existing cluster has authentication on, it cannot get in (give --client-cert of a root user).\n", etcdfedv1.EtcdHubUser)
	}
	fmt.Fprintf(out, "Created EtcdCluster %s adopting %s: %d etcdfed members join one at a time.\n", client.ObjectKeyFromObject(o.ec), strings.Join(o.ec.Spec.Adopt.Endpoints, ", "), o.ec.Spec.Replicas)
	if !o.ec.Spec.Adopt.Retire {
		fmt.Fprintf(out, "Follow it with `etcdfed status %s -n %s`; once Joined and your clients have the ring's endpoints, `etcdfed adopt %s -n %s --retire`.\n",
			o.ec.Name, o.ec.Namespace, o.ec.Name, o.ec.Namespace)
	}
	return nil
}

// checkCertLifetime is the life of the certificate --check-etcd issues
// for the hub's user when no client certificate is given: it is used for
// one check from this machine, stored nowhere, and the hub's revocation
// record does not know it (the hub records its own certificates when it
// first passes over the ring), so it must not outlive the check by much.
const checkCertLifetime = 10 * time.Minute

// checkEtcd dials the endpoints as the hub will (the client certificate
// given, else one issued now from the CA for the hub's user, valid
// checkCertLifetime), reads
// etcd's member list and versions (the hub's own observation) and whether
// authentication is on, and says why the hub would stall, nil when it
// would not.
func (o adoptObjects) checkEtcd(ctx context.Context, out io.Writer) error {
	ca, err := pki.LoadCA(o.ca.Data[pki.KeyCert], o.ca.Data[pki.KeyKey])
	if err != nil {
		return err
	}
	leaf, given := (*pki.Leaf)(nil), o.client != nil
	if given {
		leaf = &pki.Leaf{CertPEM: o.client.Data[pki.KeyCert], KeyPEM: o.client.Data[pki.KeyKey]}
	} else if leaf, err = ca.IssueClientFor(etcdfedv1.EtcdHubUser, checkCertLifetime, time.Now()); err != nil {
		return err
	}
	user := pki.CommonName(leaf.CertPEM)
	tlsCfg, err := pki.ClientTLS(ca.CertPEM, leaf)
	if err != nil {
		return err
	}
	c, err := etcdops.New(etcdops.Config{Endpoints: o.ec.Spec.Adopt.Endpoints, TLS: tlsCfg})
	if err != nil {
		return err
	}
	defer func() { _ = c.Close() }()
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	e := c.Observe(ctx)
	if !e.Reachable {
		return fmt.Errorf("nothing written: --check-etcd: the existing cluster does not answer at %s as etcd user %s: %s", strings.Join(o.ec.Spec.Adopt.Endpoints, ", "), user, e.Error)
	}
	var versions []string
	for _, m := range e.Members {
		versions = append(versions, fmt.Sprintf("%s runs %s", m.Name, orName(m.Version, "(no answer)")))
	}
	fmt.Fprintf(out, "Reached etcd cluster %x as etcd user %s: %d member(s), %s.\n", e.ClusterID, user, len(e.Members), strings.Join(versions, ", "))
	auth, err := c.ReadAuth(ctx)
	switch {
	case err != nil && (strings.Contains(err.Error(), "user name not found") || strings.Contains(err.Error(), "permission denied")):
		if !given {
			return fmt.Errorf("nothing written: --check-etcd: the existing cluster has authentication on, and the hub's own certificate (user %s) is no user there: give --client-cert and --client-key of a user with the root role, such as root", user)
		}
		return fmt.Errorf("nothing written: --check-etcd: the existing cluster has authentication on, and --client-cert's user %s may not read its users (%w): give the certificate of a user with the root role, such as root", user, err)
	case err != nil:
		return fmt.Errorf("nothing written: --check-etcd: read the cluster's authentication as etcd user %s: %w", user, err)
	case auth.Enabled && o.ec.Spec.TLS.Auth == etcdfedv1.AuthDisabled:
		fmt.Fprintf(out, "Authentication is on in the existing cluster; --auth Disabled turns it off once the hub reaches it.\n")
	case auth.Enabled:
		fmt.Fprintf(out, "Authentication is on in the existing cluster; %s holds the root role.\n", user)
	}
	if why, halted := planner.AdoptionVersions(o.ec.Spec.Version, e); why != "" && halted {
		return fmt.Errorf("nothing written: --check-etcd: %s", why)
	}
	return nil
}

// printObjects prints objs as one YAML stream.
func printObjects(out io.Writer, objs []client.Object) error {
	var buf bytes.Buffer
	for i, obj := range objs {
		if i > 0 {
			buf.WriteString("---\n")
		}
		b, err := yaml.Marshal(obj)
		if err != nil {
			return err
		}
		buf.Write(b)
	}
	_, err := out.Write(buf.Bytes())
	return err
}
