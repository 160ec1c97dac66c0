package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/spf13/pflag"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	mcmanager "sigs.k8s.io/multicluster-runtime/pkg/manager"

	etcdfedv1 "github.com/etcdfed/etcdfed/api/v1alpha1"
	"github.com/etcdfed/etcdfed/dev/etcdtest"
	"github.com/etcdfed/etcdfed/dev/testenv"
	"github.com/etcdfed/etcdfed/hub/etcdcluster"
	"github.com/etcdfed/etcdfed/hub/pki"
	"github.com/etcdfed/etcdfed/hub/registry"
)

// adoptFiles writes PEM files for the adopt tests: the CA's, a root
// client certificate of it, and the same of another CA.
type adoptFiles struct {
	caCert, caKey, otherCACert, otherCAKey, rootCert, rootKey, otherClientCert, otherClientKey, leafAsCA, garbage, missing string
	rsaCACert, rsaCAKey, rsaRootCert, rsaRootKey                                                                           string
	ca                                                                                                                     *pki.CA
}

func writeAdoptFiles(t *testing.T) adoptFiles {
	t.Helper()
	dir := t.TempDir()
	now := time.Now()
	ca, err := pki.NewCA("existing etcd CA", now)
	if err != nil {
		t.Fatal(err)
	}
	other, err := pki.NewCA("another CA", now)
	if err != nil {
		t.Fatal(err)
	}
	rootLeaf, err := ca.IssueClient("root", now)
	if err != nil {
		t.Fatal(err)
	}
	otherLeaf, err := other.IssueClient("root", now)
	if err != nil {
		t.Fatal(err)
	}
	// kubeadm's etcd CA: RSA 2048, its key in PKCS #1 ("RSA PRIVATE KEY").
	rsaKey, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(7), Subject: pkix.Name{CommonName: "etcd-ca"}, NotBefore: now.Add(-time.Hour), NotAfter: now.Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &rsaKey.PublicKey, rsaKey)
	if err != nil {
		t.Fatal(err)
	}
	rsaCA, err := pki.LoadCA(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(rsaKey)}))
	if err != nil {
		t.Fatal(err)
	}
	rsaRoot, err := rsaCA.IssueClient("root", now)
	if err != nil {
		t.Fatal(err)
	}
	write := func(name string, b []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, b, 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	return adoptFiles{
		ca:     ca,
		caCert: write("ca.crt", ca.CertPEM), caKey: write("ca.key", ca.KeyPEM),
		otherCACert: write("other-ca.crt", other.CertPEM), otherCAKey: write("other-ca.key", other.KeyPEM),
		rootCert: write("root.crt", rootLeaf.CertPEM), rootKey: write("root.key", rootLeaf.KeyPEM),
		otherClientCert: write("other-root.crt", otherLeaf.CertPEM), otherClientKey: write("other-root.key", otherLeaf.KeyPEM),
		leafAsCA:  write("leaf-as-ca.key", rootLeaf.KeyPEM),
		garbage:   write("garbage", []byte("not PEM at all\n")),
		missing:   filepath.Join(dir, "no-such-file"),
		rsaCACert: write("rsa-ca.crt", rsaCA.CertPEM), rsaCAKey: write("rsa-ca.key", rsaCA.KeyPEM),
		rsaRootCert: write("rsa-root.crt", rsaRoot.CertPEM), rsaRootKey: write("rsa-root.key", rsaRoot.KeyPEM),
	}
}

// Every check of `etcdfed adopt`'s inputs, before anything is written:
// each bad input is refused with an error naming the flag or file and
// what to do; good inputs build the Secrets and the EtcdCluster the hub
// reads.
func TestAdoptFlags(t *testing.T) {
	files := writeAdoptFiles(t)
	good := func() adoptFlags {
		return adoptFlags{endpoints: []string{"https://10.0.0.5:2379", "https://etcd-1.example.com:2379/"}, caCert: files.caCert, caKey: files.caKey,
			replicas: 5, version: "3.6.16", domain: "main.etcd.example.com", auth: "Disabled"}
	}
	for _, tc := range []struct {
		name string
		mut  func(*adoptFlags)
		want []string // every one in the error; none: accepted
	}{
		{"good", nil, nil},
		{"good, with a root client certificate", func(f *adoptFlags) { f.clientCert, f.clientKey = files.rootCert, files.rootKey }, nil},
		{"good, kubeadm's RSA CA (PKCS #1 key) and a root certificate of it", func(f *adoptFlags) {
			f.caCert, f.caKey, f.clientCert, f.clientKey = files.rsaCACert, files.rsaCAKey, files.rsaRootCert, files.rsaRootKey
		}, nil},
		{"no endpoint", func(f *adoptFlags) { f.endpoints = nil }, []string{"--endpoints is required"}},
		{"plain http", func(f *adoptFlags) { f.endpoints = []string{"http://10.0.0.5:2379"} }, []string{`--endpoints "http://10.0.0.5:2379": must be https://`, "serve TLS"}},
		{"a path", func(f *adoptFlags) { f.endpoints = []string{"https://10.0.0.5:2379/v3"} }, []string{`--endpoints "https://10.0.0.5:2379/v3": must be an https:// URL`}},
		{"no scheme", func(f *adoptFlags) { f.endpoints = []string{"10.0.0.5:2379"} }, []string{`--endpoints "10.0.0.5:2379": must be an https:// URL`}},
		{"twice", func(f *adoptFlags) { f.endpoints = append(f.endpoints, f.endpoints[0]) }, []string{"given twice"}},
		{"ten endpoints", func(f *adoptFlags) {
			f.endpoints = nil
			for i := range 10 {
				f.endpoints = append(f.endpoints, "https://10.0.1."+strconv.Itoa(i)+":2379")
			}
		}, []string{"10 given, at most 9"}},
		{"even replicas", func(f *adoptFlags) { f.replicas = 4 }, []string{"--replicas 4: must be odd"}},
		{"no version", func(f *adoptFlags) { f.version = "" }, []string{"--etcd-version is required"}},
		{"not a version", func(f *adoptFlags) { f.version = "v3.6" }, []string{`--etcd-version "v3.6"`}},
		{"a version etcdfed refuses", func(f *adoptFlags) { f.version = "3.5.10" }, []string{"--etcd-version 3.5.10", "use 3.5.35"}},
		{"too old", func(f *adoptFlags) { f.version = "3.4.30" }, []string{"--etcd-version 3.4.30", "before 3.5 are not supported"}},
		{"no domain", func(f *adoptFlags) { f.domain = "" }, []string{"--domain is required"}},
		{"no auth", func(f *adoptFlags) { f.auth = "" }, []string{"--auth is required"}},
		{"auth misspelt", func(f *adoptFlags) { f.auth = "on" }, []string{`--auth "on": Enabled or Disabled`}},
		{"no CA", func(f *adoptFlags) { f.caCert, f.caKey = "", "" }, []string{"--ca-cert and --ca-key are required"}},
		{"CA file missing", func(f *adoptFlags) { f.caCert = files.missing }, []string{"--ca-cert: open " + files.missing}},
		{"CA key unreadable", func(f *adoptFlags) { f.caKey = t.TempDir() }, []string{"--ca-key: read "}},
		{"CA file not PEM", func(f *adoptFlags) { f.caCert = files.garbage }, []string{"--ca-cert " + files.garbage + ": no PEM certificate"}},
		{"CA key not PEM", func(f *adoptFlags) { f.caKey = files.garbage }, []string{"--ca-key " + files.garbage + ": no PEM private key"}},
		{"CA key of another CA", func(f *adoptFlags) { f.caKey = files.otherCAKey },
			[]string{"--ca-cert " + files.caCert + " and --ca-key " + files.otherCAKey + ": not a certificate and its key"}},
		{"a client certificate as the CA", func(f *adoptFlags) { f.caCert, f.caKey = files.rootCert, files.rootKey }, []string{"is not a CA"}},
		{"client key without its certificate", func(f *adoptFlags) { f.clientKey = files.rootKey }, []string{"--client-cert and --client-key go together"}},
		{"client certificate of another CA", func(f *adoptFlags) { f.clientCert, f.clientKey = files.otherClientCert, files.otherClientKey },
			[]string{"--client-cert " + files.otherClientCert, "not a client certificate of the CA in --ca-cert", "unknown authority"}},
		{"client key not its certificate's", func(f *adoptFlags) { f.clientCert, f.clientKey = files.rootCert, files.otherClientKey },
			[]string{"--client-cert " + files.rootCert + " and --client-key " + files.otherClientKey + ": not a certificate and its key"}},
		{"client file missing", func(f *adoptFlags) { f.clientCert, f.clientKey = files.missing, files.rootKey }, []string{"--client-cert: open "}},
		{"several at once", func(f *adoptFlags) { f.domain, f.auth, f.replicas = "", "", 2 }, []string{"--domain is required", "--auth is required", "--replicas 2"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := good()
			if tc.mut != nil {
				tc.mut(&f)
			}
			objs, err := f.objects(client.ObjectKey{Namespace: "etcd", Name: "main"})
			if len(tc.want) == 0 {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("accepted: %+v", objs.ec.Spec)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q lacks %q", err, w)
				}
			}
		})
	}

	// The objects: the CA as the hub loads it, the ring's spec as the CEL
	// rules on spec.adopt want it.
	f := good()
	f.clientCert, f.clientKey, f.clusters, f.retireNow = files.rootCert, files.rootKey, []string{"a", "b"}, true
	objs, err := f.objects(client.ObjectKey{Namespace: "etcd", Name: "main"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := pki.LoadAuthority(objs.ca.Data); err != nil || objs.ca.Name != "main-adopted-ca" || objs.ca.Type != corev1.SecretTypeTLS {
		t.Errorf("CA Secret %s (%s): %v", objs.ca.Name, objs.ca.Type, err)
	}
	s := objs.ec.Spec
	if s.TLS.CASecretName != "main-adopted-ca" || s.TLS.Auth != etcdfedv1.AuthDisabled || s.Adopt.ClientSecretName != "main-adopt-client" || objs.client.Name != "main-adopt-client" ||
		!s.Adopt.Retire || s.Replicas != 5 || s.Version != "3.6.16" || s.DNS.Domain != "main.etcd.example.com" || len(s.Topology.Clusters) != 2 || len(s.Adopt.Endpoints) != 2 {
		t.Errorf("spec: %+v, adopt %+v", s, s.Adopt)
	}
}

// cliAPIServer starts a real apiserver for a command's test, with a
// namespace (its name prefixed) and a kubeconfig file for --kubeconfig.
func cliAPIServer(t *testing.T, name, nsPrefix string) (api *testenv.Cluster, ns, kubeconfig string) {
	t.Helper()
	api = testenv.StartT(t, name)[0]
	ns, err := api.CreateNamespace(context.Background(), nsPrefix)
	if err != nil {
		t.Fatal(err)
	}
	kc, err := api.Kubeconfig()
	if err != nil {
		t.Fatal(err)
	}
	kubeconfig = filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(kubeconfig, kc, 0o600); err != nil {
		t.Fatal(err)
	}
	return api, ns, kubeconfig
}

// noMemberClusters is a hub with no member cluster registered.
type noMemberClusters struct{}

func (noMemberClusters) List(context.Context) ([]registry.MemberCluster, error) { return nil, nil }

// TestAdoptCommand, against a real apiserver, a real etcd and the hub's
// EtcdCluster controller: `etcdfed adopt` on an etcd with its own CA and
// authentication on (a root client certificate given) writes the Secrets
// and the EtcdCluster, which the apiserver accepts and the hub reads: it
// reaches the running cluster through the endpoints with the CA and the
// client certificate, finds its cluster ID and records its member as the
// original. A refused check writes nothing (no Secret, no EtcdCluster);
// --dry-run prints the objects and writes nothing; --retire sets
// spec.adopt.retire, and is refused where there is nothing to retire.
func TestAdoptCommand(t *testing.T) {
	api, ns, kubeconfig := cliAPIServer(t, "cli-adopt", "adopt")
	ctx := context.Background()
	files := writeAdoptFiles(t)
	e := etcdtest.Start(t, etcdtest.Options{Members: 1, Name: "orig", CA: files.ca})
	rootLeaf, err := e.EnableAuth(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(files.rootCert, rootLeaf.CertPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(files.rootKey, rootLeaf.KeyPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	st, err := e.NewClient().Status(ctx, e.Members[0].ClientURL)
	if err != nil {
		t.Fatal(err)
	}

	run := func(args ...string) (string, error) {
		var out bytes.Buffer
		root.SetOut(&out)
		root.SetErr(&out)
		root.SetArgs(append(args, "-n", ns, "--kubeconfig", kubeconfig))
		err := root.ExecuteContext(ctx)
		// Cobra keeps flag values between runs in one process: reset the
		// adopt command's.
		if cmd, _, ferr := root.Find([]string{"adopt"}); ferr == nil {
			cmd.Flags().VisitAll(func(f *pflag.Flag) {
				if sv, ok := f.Value.(pflag.SliceValue); ok {
					_ = sv.Replace(nil)
				} else {
					_ = f.Value.Set(f.DefValue)
				}
				f.Changed = false
			})
		}
		return out.String(), err
	}
	nothingWritten := func(t *testing.T, why string) {
		t.Helper()
		var secrets corev1.SecretList
		if err := api.Client.List(ctx, &secrets, client.InNamespace(ns)); err != nil {
			t.Fatal(err)
		}
		var ecs etcdfedv1.EtcdClusterList
		if err := api.Client.List(ctx, &ecs, client.InNamespace(ns)); err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, s := range secrets.Items {
			if s.Type == corev1.SecretTypeTLS {
				names = append(names, "Secret "+s.Name)
			}
		}
		for _, ec := range ecs.Items {
			names = append(names, "EtcdCluster "+ec.Name)
		}
		if len(names) > 0 {
			t.Fatalf("%s: written %v", why, names)
		}
	}
	base := []string{"adopt", "ring", "--endpoints", strings.Join(e.Endpoints(), ","), "--ca-cert", files.caCert, "--ca-key", files.caKey,
		"--client-cert", files.rootCert, "--client-key", files.rootKey, "--etcd-version", "3.6.16", "--domain", "ring.etcd.test", "--auth", "Enabled", "--replicas", "3"}
	with := func(extra ...string) []string { return append(append([]string{}, base...), extra...) }
	replace := func(flagValues ...string) []string {
		if len(flagValues)%2 != 0 {
			t.Fatalf("replace %v: flags and values in pairs", flagValues)
		}
		args := with()
		for j := 0; j < len(flagValues); j += 2 {
			for i := range args {
				if args[i] == flagValues[j] {
					args[i+1] = flagValues[j+1]
				}
			}
		}
		return args
	}

	// Refused by etcdfed's checks, then by the apiserver's (a domain the
	// CEL rule refuses, seen only in its dry run): nothing written either
	// time, not even the Secrets that were checked first.
	if out, err := run(replace("--client-cert", files.otherClientCert, "--client-key", files.otherClientKey)...); err == nil || !strings.Contains(err.Error(), "not a client certificate of the CA") {
		t.Fatalf("a client certificate of another CA: %v\n%s", err, out)
	}
	nothingWritten(t, "a client certificate of another CA")
	if out, err := run(replace("--domain", "Ring_Etcd")...); err == nil || !strings.Contains(err.Error(), "nothing written: the apiserver refuses") || !strings.Contains(err.Error(), "domain must be a lowercase DNS name") {
		t.Fatalf("a domain the apiserver refuses: %v\n%s", err, out)
	}
	nothingWritten(t, "a domain the apiserver refuses")

	// --check-etcd, as the hub will dial: authentication on and no client
	// certificate given; a version the hub would hold. Nothing written.
	noClient := withoutFlags(base, "--client-cert", "--client-key")
	if out, err := run(append(noClient, "--check-etcd")...); err == nil ||
		!strings.Contains(err.Error(), "nothing written: --check-etcd: the existing cluster has authentication on, and the hub's own certificate (user etcdfed-hub) is no user there: give --client-cert") {
		t.Fatalf("--check-etcd without a client certificate on a cluster with authentication on: %v\n%s", err, out)
	}
	nothingWritten(t, "--check-etcd, authentication on")
	if out, err := run(append(replace("--etcd-version", "3.5.35"), "--check-etcd")...); err == nil ||
		!strings.Contains(err.Error(), "nothing written: --check-etcd: adopting held: etcdfed's members on spec.version 3.5.35 cannot join") {
		t.Fatalf("--check-etcd with a version the originals do not take: %v\n%s", err, out)
	}
	nothingWritten(t, "--check-etcd, version")

	// The certificate --check-etcd dials with when no client certificate
	// is given is seen by the server it dials: the hub's user, and it
	// expires with the check (the hub's revocation record never hears of
	// it), not a year later.
	presented := tlsListenerRecordingClients(t, files.ca)
	checkStart := time.Now()
	probe := withoutFlags(append(replace("--endpoints", "https://"+presented.addr), "--check-etcd"), "--client-cert", "--client-key")
	if out, err := run(probe...); err == nil || !strings.Contains(err.Error(), "nothing written: --check-etcd: the existing cluster does not answer") {
		t.Fatalf("--check-etcd against a TLS server that is no etcd: %v\n%s", err, out)
	}
	nothingWritten(t, "--check-etcd, no etcd")
	certs := presented.certs()
	if len(certs) == 0 {
		t.Fatal("--check-etcd presented no client certificate")
	}
	for _, c := range slices.CompactFunc(certs, func(a, b *x509.Certificate) bool { return a.SerialNumber.Cmp(b.SerialNumber) == 0 }) {
		if c.Subject.CommonName != etcdfedv1.EtcdHubUser {
			t.Errorf("--check-etcd presented a certificate for %q, want the hub's user %q", c.Subject.CommonName, etcdfedv1.EtcdHubUser)
		}
		if c.NotAfter.After(checkStart.Add(checkCertLifetime + time.Minute)) {
			t.Errorf("--check-etcd's certificate (serial %s) is valid until %s, %s after the check began; want at most %s",
				pki.FormatSerial(c.SerialNumber), c.NotAfter.Format(time.RFC3339), c.NotAfter.Sub(checkStart).Round(time.Minute), checkCertLifetime)
		}
	}

	// --dry-run: the objects printed, nothing written.
	out, err := run(with("--dry-run")...)
	if err != nil {
		t.Fatalf("--dry-run: %v\n%s", err, out)
	}
	for _, want := range []string{"kind: Secret", "name: ring-adopted-ca", "name: ring-adopt-client", "kind: EtcdCluster", "clientSecretName: ring-adopt-client", "caSecretName: ring-adopted-ca", "auth: Enabled"} {
		if !strings.Contains(out, want) {
			t.Errorf("--dry-run output lacks %q:\n%s", want, out)
		}
	}
	nothingWritten(t, "--dry-run")

	// --retire of a ring that does not exist yet.
	if out, err := run("adopt", "ring", "--retire"); err == nil || !strings.Contains(err.Error(), "not found") {
		t.Fatalf("--retire of no ring: %v\n%s", err, out)
	}

	// The adoption, checked from here first, read by the hub.
	out, err = run(with("--check-etcd")...)
	if err != nil {
		t.Fatalf("adopt: %v\n%s", err, out)
	}
	for _, want := range []string{"Reached etcd cluster " + strconv.FormatUint(st.Header.ClusterId, 16) + " as etcd user root: 1 member(s), orig-0 runs 3.6.16",
		"Authentication is on in the existing cluster; root holds the root role", "Created Secret " + ns + "/ring-adopted-ca", "etcd user root", "Created EtcdCluster " + ns + "/ring adopting " + e.Endpoints()[0], "--retire"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	t.Logf("etcdfed adopt:\n%s", out)
	mgr, err := mcmanager.New(api.Config, nil, manager.Options{Scheme: testenv.Scheme(), Metrics: metricsserver.Options{BindAddress: "0"}, HealthProbeBindAddress: "0"})
	if err != nil {
		t.Fatal(err)
	}
	if err := (&etcdcluster.Reconciler{Manager: mgr, Registry: noMemberClusters{}, AllowLoopbackAddresses: true}).SetupWithManager(mgr); err != nil {
		t.Fatal(err)
	}
	mctx, stop := context.WithCancel(ctx)
	t.Cleanup(stop)
	go func() { _ = mgr.Start(mctx) }()
	key := client.ObjectKey{Namespace: ns, Name: "ring"}
	wantID := strconv.FormatUint(st.Header.ClusterId, 16)
	found := waitStatus(t, api.Client, key, "the cluster "+wantID+" found", func(ec *etcdfedv1.EtcdCluster) bool {
		a := ec.Status.Adoption
		return ec.Status.ClusterID == wantID && a != nil && len(a.Originals) == 1 && a.Originals[0].Name == "orig-0"
	})
	t.Logf("the hub found cluster %s: adoption %s (%s)", found.Status.ClusterID, found.Status.Adoption.Summary, found.Status.Adoption.Message)

	// The originals run 3.6.16; a ring on 3.5.35 cannot join them: held
	// in Connecting, saying who runs what and what to set, until
	// spec.version is set so.
	heldArgs := replace("--etcd-version", "3.5.35", "--domain", "held.etcd.test")
	heldArgs[1] = "held"
	if out, err := run(heldArgs...); err != nil {
		t.Fatalf("adopt held: %v\n%s", err, out)
	}
	heldKey := client.ObjectKey{Namespace: ns, Name: "held"}
	waitStatus(t, api.Client, heldKey, "held in Connecting", func(ec *etcdfedv1.EtcdCluster) bool {
		a, deg := ec.Status.Adoption, meta.FindStatusCondition(ec.Status.Conditions, etcdfedv1.ConditionDegraded)
		return a != nil && a.Phase == etcdfedv1.AdoptionConnecting && ec.Status.ClusterID == "" &&
			strings.Contains(a.Message, "adopting held: etcdfed's members on spec.version 3.5.35 cannot join the running cluster: orig-0 [") &&
			strings.Contains(a.Message, "runs 3.6.16") && strings.Contains(a.Message, "set spec.version to 3.6.16") &&
			deg != nil && deg.Status == metav1.ConditionTrue && strings.Contains(deg.Message, "adopting held")
	})
	held := &etcdfedv1.EtcdCluster{}
	if err := api.Client.Get(ctx, heldKey, held); err != nil {
		t.Fatal(err)
	}
	t.Logf("held: %s", held.Status.Adoption.Message)
	before := held.DeepCopy()
	held.Spec.Version = "3.6.16"
	if err := api.Client.Patch(ctx, held, client.MergeFrom(before)); err != nil {
		t.Fatal(err)
	}
	waitStatus(t, api.Client, heldKey, "found once spec.version fits", func(ec *etcdfedv1.EtcdCluster) bool {
		return ec.Status.ClusterID == wantID && ec.Status.Adoption != nil && ec.Status.Adoption.Phase != etcdfedv1.AdoptionConnecting
	})

	// Again: the EtcdCluster exists; the Secrets of other names are not
	// written either.
	if out, err := run(with("--ca-secret", "other-ca", "--client-secret", "other-client")...); err == nil || !strings.Contains(err.Error(), "EtcdCluster "+ns+"/ring already exists") {
		t.Fatalf("adopt again: %v\n%s", err, out)
	}
	for _, name := range []string{"other-ca", "other-client"} {
		if err := api.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &corev1.Secret{}); err == nil {
			t.Errorf("Secret %s written by a refused adopt", name)
		}
	}

	// --retire: set, then refused as set; refused beside creation flags.
	if out, err := run("adopt", "ring", "--retire", "--replicas", "5"); err == nil || !strings.Contains(err.Error(), "takes no --replicas") {
		t.Fatalf("--retire with --replicas: %v\n%s", err, out)
	}
	if out, err := run("adopt", "ring", "--retire"); err != nil || !strings.Contains(out, "Set spec.adopt.retire of EtcdCluster "+ns+"/ring") {
		t.Fatalf("--retire: %v\n%s", err, out)
	}
	ec := &etcdfedv1.EtcdCluster{}
	if err := api.Client.Get(ctx, key, ec); err != nil || !ec.Spec.Adopt.Retire {
		t.Fatalf("spec.adopt after --retire: %+v, %v", ec.Spec.Adopt, err)
	}
	if out, err := run("adopt", "ring", "--retire"); err == nil || !strings.Contains(err.Error(), "already retires its originals") {
		t.Fatalf("--retire twice: %v\n%s", err, out)
	}
	// --wait follows the phases and gives up after --timeout, saying where
	// the adoption stands (no member cluster here: it never completes).
	if out, err := run("adopt", "held", "--retire", "--wait", "--timeout", "3s"); err == nil || !strings.Contains(err.Error(), "adoption of "+ns+"/held not finished after") ||
		!strings.Contains(out, "0/1 retired, 0/3 joined") {
		t.Fatalf("--retire --wait: %v\n%s", err, out)
	}
}

// waitStatus polls the EtcdCluster key for a minute until ok.
func waitStatus(t *testing.T, c client.Client, key client.ObjectKey, what string, ok func(*etcdfedv1.EtcdCluster) bool) *etcdfedv1.EtcdCluster {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		ec := &etcdfedv1.EtcdCluster{}
		if err := c.Get(context.Background(), key, ec); err != nil {
			t.Fatal(err)
		}
		if ok(ec) {
			return ec
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not after a minute: status %+v", what, ec.Status)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// --retire is refused where there is nothing to retire.
func TestRetireRefusal(t *testing.T) {
	ring := func(mut func(*etcdfedv1.EtcdCluster)) *etcdfedv1.EtcdCluster {
		ec := &etcdfedv1.EtcdCluster{ObjectMeta: metav1.ObjectMeta{Namespace: "etcd", Name: "main"}}
		ec.Spec.Adopt = &etcdfedv1.AdoptSpec{Endpoints: []string{"https://10.0.0.5:2379"}}
		ec.Status.Adoption = &etcdfedv1.AdoptionStatus{Phase: etcdfedv1.AdoptionJoined, Summary: "Joined: 0/3 retired, 5/5 joined"}
		if mut != nil {
			mut(ec)
		}
		return ec
	}
	for _, tc := range []struct {
		name string
		ec   *etcdfedv1.EtcdCluster
		want string
	}{
		{"joined", ring(nil), ""},
		{"still joining", ring(func(ec *etcdfedv1.EtcdCluster) { ec.Status.Adoption.Phase = etcdfedv1.AdoptionJoining }), ""},
		{"not found yet", ring(func(ec *etcdfedv1.EtcdCluster) { ec.Status.Adoption = nil }), ""},
		{"no adoption", ring(func(ec *etcdfedv1.EtcdCluster) { ec.Spec.Adopt = nil }), "adopts nothing"},
		{"complete", ring(func(ec *etcdfedv1.EtcdCluster) { ec.Status.Adoption.Phase = etcdfedv1.AdoptionComplete }), "complete"},
		{"already retiring", ring(func(ec *etcdfedv1.EtcdCluster) { ec.Spec.Adopt.Retire = true }), "already retires its originals (spec.adopt.retire is true; adoption Joined: 0/3 retired"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			wantRefusal(t, retireRefusal(tc.ec), tc.want)
		})
	}
}

// recordingListener is a TLS server that takes any client certificate and
// records each one presented, and answers nothing.
type recordingListener struct {
	addr string
	mu   sync.Mutex
	seen []*x509.Certificate
}

func (l *recordingListener) certs() []*x509.Certificate {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.seen)
}

// tlsListenerRecordingClients serves TLS on a loopback port with a
// certificate of ca, asking every client for its certificate.
func tlsListenerRecordingClients(t *testing.T, ca *pki.CA) *recordingListener {
	t.Helper()
	leaf, err := ca.IssueMember(pki.MemberRequest{Member: "recorder", DNSNames: []string{"localhost"}, IPs: []net.IP{net.IPv4(127, 0, 0, 1)}}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	cert, err := tls.X509KeyPair(leaf.CertPEM, leaf.KeyPEM)
	if err != nil {
		t.Fatal(err)
	}
	l := &recordingListener{}
	ln, err := tls.Listen("tcp", "127.0.0.1:0", &tls.Config{
		Certificates: []tls.Certificate{cert},
		ClientAuth:   tls.RequireAnyClientCert,
		NextProtos:   []string{"h2"},
		VerifyPeerCertificate: func(raw [][]byte, _ [][]*x509.Certificate) error {
			if len(raw) > 0 {
				if c, err := x509.ParseCertificate(raw[0]); err == nil {
					l.mu.Lock()
					l.seen = append(l.seen, c)
					l.mu.Unlock()
				}
			}
			return nil
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ln.Close() })
	l.addr = ln.Addr().String()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				_ = c.(*tls.Conn).Handshake()
				_ = c.Close()
			}()
		}
	}()
	return l
}

// withoutFlags is args without the given flags and their values.
func withoutFlags(args []string, flags ...string) []string {
	var out []string
	for i := 0; i < len(args); i++ {
		if slices.Contains(flags, args[i]) {
			i++
			continue
		}
		out = append(out, args[i])
	}
	return out
}
