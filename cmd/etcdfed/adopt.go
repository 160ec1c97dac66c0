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

	"github.com/spf13/cobra"
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

// adoptFlags are the flags of `etcdfed adopt NAME` that create the
// adoption (all but --retire, --wait and the hub's).
type adoptFlags struct {
	endpoints              []string
	caCert, caKey          string
	clientCert, clientKey  string
	replicas               int32
	version, domain        string
	clusters               []string
	auth                   string
	peerSkipSAN, retireNow bool
	caSecret, clientSecret string
}

// adoptCreateFlags name the flags that only creation takes, for the
// refusal of --retire beside them.
var adoptCreateFlags = []string{"endpoints", "ca-cert", "ca-key", "client-cert", "client-key", "replicas", "etcd-version", "domain",
	"clusters", "auth", "peer-skip-client-san-verification", "retire-when-joined", "ca-secret", "client-secret", "dry-run", "check-etcd"}

func init() {
	var hub hubFlags
	var f adoptFlags
	var retire, wait, dryRun, checkEtcd bool
	var timeout time.Duration
	cmd := &cobra.Command{
		Use:   "adopt NAME --endpoints URL,... --ca-cert FILE --ca-key FILE --etcd-version V --domain D --auth Enabled|Disabled",
		Short: "Take an etcd cluster etcdfed did not create into a ring it manages (spec.adopt), and later retire its original members",
		Long: `adopt creates the EtcdCluster NAME with spec.adopt, and the Secrets it
names, for an etcd cluster that runs outside etcdfed (kubeadm's static pods,
a StatefulSet, plain processes). The hub then joins spec.replicas members of
its own to the running cluster, one at a time (a learner, caught up,
promoted), keeping its data and cluster ID (docs/adoption.md).

  --ca-cert, --ca-key          the existing cluster's CA (kubeadm:
                               /etc/kubernetes/pki/etcd/ca.crt and ca.key); it
                               becomes the ring's CA (Secret NAME-adopted-ca,
                               spec.tls.caSecretName), so that the original
                               members trust the new ones.
  --client-cert, --client-key  a client certificate of that CA whose common
                               name is an etcd user with the root role (Secret
                               NAME-adopt-client, spec.adopt.clientSecretName).
                               Needed only when the existing cluster has etcd
                               authentication on: otherwise the hub issues its
                               own from the CA (user etcdfed-hub), which etcd
                               does not know yet.
  --auth                       Enabled turns etcd authentication on (or keeps
                               it on): clients of the old endpoints whose
                               certificate's common name is neither root nor a
                               spec.clients user lose access. Disabled turns
                               it off. There is no default: choose.
  --etcd-version               the version the originals run (or the next
                               minor): the hub checks it against what they
                               report before anything joins.

--check-etcd also dials the endpoints from where the command runs, as the
hub will, and refuses an adoption the hub would stall on: the cluster does
not answer, has authentication on while no root client certificate is
given, or runs a version spec.version cannot join (the hub's own check,
docs/adoption.md). Without it nothing is dialled: the hub, not this
machine, must reach the endpoints.

Everything is checked before anything is written: the files are read and
parsed, each key must match its certificate, the CA must be a CA, the client
certificate must be issued by it for client use, every endpoint must be an
https:// URL, and neither the EtcdCluster nor a Secret of the same name may
exist; then the apiserver validates every object in a dry run. Nothing is
written when a check fails. --dry-run runs every check and prints the
objects as YAML (the CA's private key included, as kubectl does) instead of
creating them.

Follow the adoption with 'etcdfed status NAME' (or --wait). Once it is
Joined (every etcdfed member a voter beside the originals) and your clients
have the ring's endpoints (status.endpoints), retire the originals, one at a
time, the leader last:

  etcdfed adopt NAME --retire

which sets spec.adopt.retire (--retire-when-joined sets it at creation).`,
		Example: `  etcdfed adopt main -n etcd --endpoints https://10.0.0.5:2379,https://10.0.0.6:2379,https://10.0.0.7:2379 \
      --ca-cert ca.crt --ca-key ca.key --etcd-version 3.6.16 --domain main.etcd.example.com \
      --replicas 5 --clusters member-1,member-2,member-3 --auth Disabled --wait
  # authentication already on in the existing cluster: give the hub root's certificate
  etcdfed adopt main -n etcd --endpoints https://10.0.0.5:2379 --ca-cert ca.crt --ca-key ca.key \
      --client-cert root.crt --client-key root.key --etcd-version 3.6.16 --domain main.etcd.example.com --auth Enabled
  # once Joined and the clients have the ring's endpoints:
  etcdfed adopt main -n etcd --retire --wait`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			out := cmd.OutOrStdout()
			if retire {
				var set []string
				for _, n := range adoptCreateFlags {
					if cmd.Flags().Changed(n) {
						set = append(set, "--"+n)
					}
				}
				if len(set) > 0 {
					return fmt.Errorf("--retire changes an adoption under way and takes no %s: those create one", strings.Join(set, ", "))
				}
			}
			c, ns, err := hub.client()
			if err != nil {
				return err
			}
			key := client.ObjectKey{Namespace: ns, Name: args[0]}
			until := etcdfedv1.AdoptionJoined
			if retire {
				if err := retireAdoption(cmd.Context(), c, key, out); err != nil {
					return err
				}
				until = etcdfedv1.AdoptionComplete
			} else {
				objs, err := f.objects(key)
				if err != nil {
					return err
				}
				if checkEtcd {
					if err := objs.checkEtcd(cmd.Context(), out); err != nil {
						return err
					}
				}
				if err := objs.create(cmd.Context(), c, dryRun, out); err != nil || dryRun {
					return err
				}
				if f.retireNow {
					until = etcdfedv1.AdoptionComplete
				}
			}
			if !wait {
				return nil
			}
			ctx, cancel := context.WithTimeout(cmd.Context(), timeout)
			defer cancel()
			return waitAdoptionPhase(ctx, c, key, until, time.Second, out)
		},
	}
	fs := cmd.Flags()
	hub.bind(fs)
	fs.StringSliceVar(&f.endpoints, "endpoints", nil, "Client URLs of every original member as the hub reaches them, https:// (spec.adopt.endpoints).")
	fs.StringVar(&f.caCert, "ca-cert", "", "File with the existing cluster's CA certificate (PEM).")
	fs.StringVar(&f.caKey, "ca-key", "", "File with the existing cluster's CA key (PEM).")
	fs.StringVar(&f.clientCert, "client-cert", "", "File with a client certificate of the CA for an etcd user with the root role (PEM); when the existing cluster has authentication on.")
	fs.StringVar(&f.clientKey, "client-key", "", "File with the key of --client-cert (PEM).")
	fs.Int32Var(&f.replicas, "replicas", 3, "etcdfed members the ring has once adopted (odd, 1 to 9; spec.replicas).")
	fs.StringVar(&f.version, "etcd-version", "", "etcd version of the ring (spec.version): the one the originals run, or the next minor.")
	fs.StringVar(&f.domain, "domain", "", "DNS domain of the ring's member names (spec.dns.domain); the originals must resolve it.")
	fs.StringSliceVar(&f.clusters, "clusters", nil, "Member clusters that may host the ring's members (spec.topology.clusters; default: every registered one).")
	fs.StringVar(&f.auth, "auth", "", "etcd authentication once adopted: Enabled or Disabled (spec.tls.auth; required).")
	fs.BoolVar(&f.peerSkipSAN, "peer-skip-client-san-verification", false, "Peer connections pass NAT or a load balancer (spec.tls.peerSkipClientSANVerification); start the originals with it too.")
	fs.BoolVar(&f.retireNow, "retire-when-joined", false, "Retire the originals as soon as every etcdfed member is a voter (spec.adopt.retire at creation).")
	fs.StringVar(&f.caSecret, "ca-secret", "", "Name of the CA Secret to create (default NAME-adopted-ca).")
	fs.StringVar(&f.clientSecret, "client-secret", "", "Name of the client certificate's Secret to create (default NAME-adopt-client).")
	fs.BoolVar(&checkEtcd, "check-etcd", false, "Before writing anything, dial the endpoints from here as the hub will (the client certificate, or one issued now from the CA for etcdfed-hub) and refuse what the hub would stall on: no answer, authentication on without a root client certificate, originals on a version spec.version cannot join.")
	fs.BoolVar(&dryRun, "dry-run", false, "Check everything, the apiserver's validation included, and print the objects instead of creating them.")
	fs.BoolVar(&retire, "retire", false, "Retire the originals of the adoption NAME under way (sets spec.adopt.retire).")
	fs.BoolVar(&wait, "wait", false, "Follow the adoption until it is Joined (with --retire or --retire-when-joined: Complete).")
	fs.DurationVar(&timeout, "timeout", 30*time.Minute, "With --wait: give up waiting after this long.")
	root.AddCommand(cmd)
}

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
	if err := errors.Join(errs...); err != nil {
		return adoptObjects{}, err
	}

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
	return objs, nil
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

// checkEtcd dials the endpoints as the hub will (the client certificate
// given, else one issued now from the CA for the hub's user), reads
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
	} else if leaf, err = ca.IssueClient(etcdfedv1.EtcdHubUser, time.Now()); err != nil {
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

// retireAdoption sets spec.adopt.retire of the adoption key, unless it is
// no adoption or already set.
func retireAdoption(ctx context.Context, c client.Client, key client.ObjectKey, out io.Writer) error {
	ec := &etcdfedv1.EtcdCluster{}
	if err := c.Get(ctx, key, ec); err != nil {
		return fmt.Errorf("get EtcdCluster %s: %w", key, err)
	}
	if err := retireRefusal(ec); err != nil {
		return err
	}
	before := ec.DeepCopy()
	ec.Spec.Adopt.Retire = true
	if err := c.Patch(ctx, ec, client.MergeFromWithOptions(before, client.MergeFromWithOptimisticLock{})); err != nil {
		return fmt.Errorf("set spec.adopt.retire of EtcdCluster %s: %w", key, err)
	}
	phase := "not found yet"
	if a := ec.Status.Adoption; a != nil && a.Summary != "" {
		phase = a.Summary
	}
	fmt.Fprintf(out, "Set spec.adopt.retire of EtcdCluster %s (adoption %s): the originals are removed one at a time, the leader last, once every etcdfed member is a ready voter; each old endpoint stops with its member.\n", key, phase)
	return nil
}

// retireRefusal says why the originals of ec cannot be retired through
// `--retire`, nil when they can.
func retireRefusal(ec *etcdfedv1.EtcdCluster) error {
	name := ec.Namespace + "/" + ec.Name
	a := ec.Status.Adoption
	switch {
	case ec.Spec.Adopt == nil:
		return fmt.Errorf("EtcdCluster %s adopts nothing (no spec.adopt): it has no original members to retire", name)
	case a != nil && a.Phase == etcdfedv1.AdoptionComplete:
		return fmt.Errorf("EtcdCluster %s's adoption is complete: every original member is retired already", name)
	case ec.Spec.Adopt.Retire:
		return fmt.Errorf("EtcdCluster %s already retires its originals (spec.adopt.retire is true; adoption %s)", name, adoptionSummary(a))
	}
	return nil
}

func adoptionSummary(a *etcdfedv1.AdoptionStatus) string {
	if a == nil || a.Summary == "" {
		return "not started"
	}
	return a.Summary
}

// waitAdoptionPhase follows the adoption until it reaches phase (Complete
// is reached from any phase; Joined also counts as reached by Retiring
// and Complete) with no operation in flight.
func waitAdoptionPhase(ctx context.Context, c client.Client, key client.ObjectKey, phase etcdfedv1.AdoptionPhase, every time.Duration, out io.Writer) error {
	order := []etcdfedv1.AdoptionPhase{etcdfedv1.AdoptionConnecting, etcdfedv1.AdoptionJoining, etcdfedv1.AdoptionJoined, etcdfedv1.AdoptionRetiring, etcdfedv1.AdoptionComplete}
	return follow(ctx, c, key, every, out, "adoption", func(ec *etcdfedv1.EtcdCluster) (string, bool, error) {
		a := ec.Status.Adoption
		if a == nil {
			return "waiting for the hub to take the EtcdCluster", false, nil
		}
		state := a.Summary
		if a.Message != "" {
			state += " (" + a.Message + ")"
		}
		done := slices.Index(order, a.Phase) >= slices.Index(order, phase) && ec.Status.Operation == nil
		return state, done, nil
	})
}
