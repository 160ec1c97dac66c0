package multicluster

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdfedv1 "github.com/etcdfed/etcdfed/api/v1alpha1"
	"github.com/etcdfed/etcdfed/hub/pki"
)

// WaitForClientSecretInput names a consumer's Secret to wait for.
type WaitForClientSecretInput struct {
	Cluster   *Cluster
	Namespace string
	Name      string
	// Until, when set, must hold of the Secret's data.
	Until   func(data map[string][]byte) string
	Timeout time.Duration
}

// WaitForClientSecret waits until the Secret exists with every key a
// consumer needs (and Until, when given, says nothing is missing).
func WaitForClientSecret(ctx context.Context, in WaitForClientSecretInput) (*corev1.Secret, error) {
	sec := &corev1.Secret{}
	err := poll(ctx, orDefault(in.Timeout, 2*time.Minute), fmt.Sprintf("client Secret %s/%s in %s", in.Namespace, in.Name, in.Cluster.Name), func(ctx context.Context) (string, error) {
		if err := in.Cluster.Client.Get(ctx, client.ObjectKey{Namespace: in.Namespace, Name: in.Name}, sec); err != nil {
			if apierrors.IsNotFound(err) {
				return "not found", nil
			}
			return "", err
		}
		for _, k := range []string{etcdfedv1.ClientSecretKeyCA, etcdfedv1.ClientSecretKeyCert, etcdfedv1.ClientSecretKeyKey, etcdfedv1.ClientSecretKeyEndpoints} {
			if len(sec.Data[k]) == 0 {
				return "no key " + k, nil
			}
		}
		if in.Until != nil {
			return in.Until(sec.Data), nil
		}
		return "", nil
	})
	return sec, err
}

// certNotAfter is the expiry of the first certificate in PEM.
func certNotAfter(certPEM []byte) (time.Time, error) {
	block, _ := pem.Decode(certPEM)
	if block == nil {
		return time.Time{}, fmt.Errorf("no PEM certificate")
	}
	c, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		return time.Time{}, err
	}
	return c.NotAfter, nil
}

// issueShortLived signs a client certificate valid for d with the ring's
// CA: what the hub's own certificate looks like d before it expires.
func issueShortLived(ca *pki.CA, cn string, d time.Duration) (*pki.Leaf, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: pkix.Name{CommonName: cn},
		NotBefore: time.Now().Add(-time.Minute), NotAfter: time.Now().Add(d),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.Cert, &key.PublicKey, ca.Key)
	if err != nil {
		return nil, err
	}
	kd, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return nil, err
	}
	return &pki.Leaf{CertPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), KeyPEM: pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kd})}, nil
}

// etcdClientFromSecret is an etcd client configured only from a consumer
// Secret's data (names resolved through the ring's DNS).
func etcdClientFromSecret(data map[string][]byte, dnsServers []string) (EtcdClientConfig, error) {
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(data[etcdfedv1.ClientSecretKeyCA]) {
		return EtcdClientConfig{}, fmt.Errorf("no CA in the Secret")
	}
	pair, err := tls.X509KeyPair(data[etcdfedv1.ClientSecretKeyCert], data[etcdfedv1.ClientSecretKeyKey])
	if err != nil {
		return EtcdClientConfig{}, err
	}
	return EtcdClientConfig{
		Endpoints:  strings.Split(string(data[etcdfedv1.ClientSecretKeyEndpoints]), ","),
		DNSServers: dnsServers,
		TLS:        &tls.Config{RootCAs: pool, Certificates: []tls.Certificate{pair}, MinVersion: tls.VersionTLS12},
	}, nil
}

// ConsumerAPIServer is a kube-apiserver started from a consumer Secret.
type ConsumerAPIServer struct {
	URL    string
	Prefix string
	Client kubernetes.Interface
	cmd    *exec.Cmd
	log    string
}

// Stop kills the apiserver and waits for it.
func (a *ConsumerAPIServer) Stop() {
	if a.cmd != nil && a.cmd.Process != nil {
		_ = a.cmd.Process.Kill()
		_ = a.cmd.Wait()
	}
}

// StartConsumerAPIServerInput configures StartConsumerAPIServer.
type StartConsumerAPIServerInput struct {
	T testing.TB
	// Binary is kube-apiserver.
	Binary string
	// Data is the consumer Secret's data: the apiserver's etcd flags come
	// from it and nothing else.
	Data map[string][]byte
	// DNSServers resolve the endpoints' names for the hosts file.
	DNSServers []string
	// Prefix is --etcd-prefix.
	Prefix string
}

// StartConsumerAPIServer starts bin/kube-apiserver with its etcd flags
// taken from a consumer Secret, as a control plane would mount it:
// --etcd-servers from endpoints, --etcd-cafile ca.crt, --etcd-certfile
// tls.crt, --etcd-keyfile tls.key. Its resolver cannot be pointed at the
// ring's DNS servers (a real cluster's CoreDNS forwards the ring's domain,
// docs/architecture.md departure 6), so it runs in a private mount
// namespace whose /etc/hosts holds the members' names as the ring's DNS
// servers answer them now. Needs root (unshare, mount); skips otherwise.
func StartConsumerAPIServer(ctx context.Context, in StartConsumerAPIServerInput) *ConsumerAPIServer {
	t := in.T
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("a kube-apiserver of a consumer needs root: it runs in its own mount namespace whose /etc/hosts names the ring's members")
	}
	dir := t.TempDir()
	files := map[string]string{}
	for _, k := range []string{etcdfedv1.ClientSecretKeyCA, etcdfedv1.ClientSecretKeyCert, etcdfedv1.ClientSecretKeyKey} {
		files[k] = filepath.Join(dir, k)
		if err := os.WriteFile(files[k], in.Data[k], 0o600); err != nil {
			t.Fatal(err)
		}
	}
	endpoints := string(in.Data[etcdfedv1.ClientSecretKeyEndpoints])
	hosts := "127.0.0.1 localhost\n"
	for _, ep := range strings.Split(endpoints, ",") {
		u, err := url.Parse(ep)
		if err != nil {
			t.Fatalf("endpoint %q in the Secret: %v", ep, err)
		}
		addrs, err := lookup(ctx, in.DNSServers[0], dns.Fqdn(u.Hostname()), dns.TypeA)
		if err != nil || len(addrs) == 0 {
			t.Fatalf("resolve %s through the ring's DNS: %v %v", u.Hostname(), addrs, err)
		}
		hosts += addrs[0].String() + " " + u.Hostname() + "\n"
	}
	hostsFile := filepath.Join(dir, "hosts")
	tokens := filepath.Join(dir, "tokens.csv")
	saKey := filepath.Join(dir, "sa.key")
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	kd, _ := x509.MarshalECPrivateKey(key)
	const token = "consumer-admin-token"
	for p, data := range map[string][]byte{
		hostsFile: []byte(hosts),
		tokens:    []byte(token + ",consumer-admin,1,system:masters\n"),
		saKey:     pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kd}),
	} {
		if err := os.WriteFile(p, data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	_ = l.Close()
	args := []string{
		"--etcd-servers=" + endpoints,
		"--etcd-cafile=" + files[etcdfedv1.ClientSecretKeyCA],
		"--etcd-certfile=" + files[etcdfedv1.ClientSecretKeyCert],
		"--etcd-keyfile=" + files[etcdfedv1.ClientSecretKeyKey],
		"--etcd-prefix=" + in.Prefix,
		"--bind-address=127.0.0.1", fmt.Sprintf("--secure-port=%d", port),
		"--cert-dir=" + filepath.Join(dir, "serving"),
		"--token-auth-file=" + tokens,
		"--authorization-mode=RBAC",
		"--service-account-issuer=https://consumer.invalid",
		"--service-account-key-file=" + saKey, "--service-account-signing-key-file=" + saKey,
		"--service-cluster-ip-range=10.0.0.0/24",
		"--disable-admission-plugins=ServiceAccount",
		"--profiling=false", "--v=0",
	}
	logPath := filepath.Join(ArtifactsDir(dir), "consumer-apiserver.log")
	logf, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = logf.Close() })
	script := `mount --bind "$0" /etc/hosts && exec "$@"`
	cmd := exec.Command("unshare", append([]string{"--mount", "--propagation", "private", "sh", "-c", script, hostsFile, in.Binary}, args...)...)
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	a := &ConsumerAPIServer{URL: fmt.Sprintf("https://127.0.0.1:%d", port), Prefix: in.Prefix, cmd: cmd, log: logPath}
	t.Cleanup(a.Stop)
	rc := &rest.Config{Host: a.URL, BearerToken: token, TLSClientConfig: rest.TLSClientConfig{Insecure: true}, Timeout: 5 * time.Second}
	cs, err := kubernetes.NewForConfig(rc)
	if err != nil {
		t.Fatal(err)
	}
	a.Client = cs
	hc := &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}} //nolint:gosec // the consumer apiserver's self-signed serving cert
	defer hc.CloseIdleConnections()
	start := time.Now()
	err = poll(ctx, 2*time.Minute, "consumer kube-apiserver ready", func(ctx context.Context) (string, error) {
		if cmd.ProcessState != nil {
			return "", fmt.Errorf("exited")
		}
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, a.URL+"/readyz", nil)
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := hc.Do(req)
		if err != nil {
			return err.Error(), nil
		}
		_ = resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return resp.Status, nil
		}
		return "", nil
	})
	if err != nil {
		data, _ := os.ReadFile(logPath)
		t.Fatalf("%v\nlog (last 3000 bytes):\n%s", err, tailBytes(data, 3000))
	}
	t.Logf("consumer kube-apiserver ready on %s %.1fs after start (etcd from the Secret: %s)", a.URL, time.Since(start).Seconds(), endpoints)
	return a
}

func tailBytes(b []byte, n int) []byte {
	if len(b) > n {
		return b[len(b)-n:]
	}
	return b
}

// clientsStatus is the ClientsReady condition and status.clients, for
// messages.
func clientsStatus(ec *etcdfedv1.EtcdCluster) string {
	c := meta.FindStatusCondition(ec.Status.Conditions, etcdfedv1.ConditionClientsReady)
	s := "ClientsReady unset"
	if c != nil {
		s = fmt.Sprintf("ClientsReady=%s %s: %s", c.Status, c.Reason, c.Message)
	}
	return fmt.Sprintf("%s; clients %+v", s, ec.Status.Clients)
}

// pokeEtcdCluster changes an annotation of the EtcdCluster, which wakes
// the hub's controllers as any user edit would.
func pokeEtcdCluster(ctx context.Context, hub *Cluster, m *ManagedEtcd) error {
	ec, err := m.Get(ctx, hub)
	if err != nil {
		return err
	}
	before := ec.DeepCopy()
	if ec.Annotations == nil {
		ec.Annotations = map[string]string{}
	}
	ec.Annotations["test.etcdfed.dev/poke"] = time.Now().UTC().Format(time.RFC3339Nano)
	return hub.Client.Patch(ctx, ec, client.MergeFrom(before))
}

// setClients replaces spec.clients.
func setClients(ctx context.Context, hub *Cluster, m *ManagedEtcd, clients []etcdfedv1.ClientSpec) error {
	ec, err := m.Get(ctx, hub)
	if err != nil {
		return err
	}
	before := ec.DeepCopy()
	ec.Spec.Clients = clients
	return hub.Client.Patch(ctx, ec, client.MergeFrom(before))
}
