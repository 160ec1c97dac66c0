package multicluster

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net/http"
	"net/netip"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/miekg/dns"
	clientv3 "go.etcd.io/etcd/client/v3"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdfedv1 "github.com/etcdfed/etcdfed/api/v1alpha1"
	"github.com/etcdfed/etcdfed/dev/testenv"
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

// issueAged signs a client certificate with the ring's CA valid from
// now-age to now+left: a certificate the hub issued age ago that has left
// to live.
func issueAged(ca *pki.CA, cn string, age, left time.Duration) (*pki.Leaf, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: pkix.Name{CommonName: cn},
		NotBefore: time.Now().Add(-age), NotAfter: time.Now().Add(left),
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

// consumerClient is an etcd client built from a consumer Secret's data
// alone, closed when the test ends.
func consumerClient(t testing.TB, data map[string][]byte, dnsServers []string) *clientv3.Client {
	t.Helper()
	cfg, err := etcdClientFromSecret(data, dnsServers)
	if err != nil {
		t.Fatal(err)
	}
	cli, err := EtcdClient(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cli.Close() })
	return cli
}

// ConsumerAPIServer is a kube-apiserver started from a consumer Secret.
type ConsumerAPIServer struct {
	URL    string
	Prefix string
	Client kubernetes.Interface

	t         testing.TB
	binary    string
	args      []string
	hostsFile string
	logf      *os.File
	log       string
	token     string

	mu     sync.Mutex
	cmd    *exec.Cmd
	exited chan struct{}
}

// Stop kills the apiserver and waits for it.
func (a *ConsumerAPIServer) Stop() {
	a.mu.Lock()
	cmd, exited := a.cmd, a.exited
	a.cmd, a.exited = nil, nil
	a.mu.Unlock()
	if cmd != nil && cmd.Process != nil {
		_ = cmd.Process.Kill()
		<-exited
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
	// Mount, when set, is the Secret itself: its files are kept as the
	// kubelet keeps a Secret volume (re-read every 500 ms, swapped at once
	// through a ..data symlink), so the apiserver sees each change as a
	// mounted Secret's consumer would. Data is then its first content.
	Mount *ConsumerSecret
	// DNSServers resolve the endpoints' names for the hosts file.
	DNSServers []string
	// Prefix is --etcd-prefix.
	Prefix string
}

// StartConsumerAPIServer starts bin/kube-apiserver with its etcd flags
// taken from a consumer Secret, as a control plane would mount it:
// --etcd-servers from endpoints, --etcd-cafile ca.crt, --etcd-certfile
// tls.crt, --etcd-keyfile tls.key. kube-apiserver reads the CA file once,
// at start, and the certificate and key at each new connection (etcd's
// transport.TLSInfo). Its resolver cannot be pointed at the ring's DNS
// servers (a real cluster's CoreDNS forwards the ring's domain,
// docs/architecture.md, "DNS and names"), so it runs in a private mount
// namespace whose /etc/hosts holds the members' names as the ring's DNS
// servers answer them, rewritten in place when an answer changes. Needs
// root (unshare, mount); skips otherwise.
func StartConsumerAPIServer(ctx context.Context, in StartConsumerAPIServerInput) *ConsumerAPIServer {
	t := in.T
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("a kube-apiserver of a consumer needs root: it runs in its own mount namespace whose /etc/hosts names the ring's members")
	}
	dir := t.TempDir()
	vol := &secretVolume{dir: filepath.Join(dir, "etcd")}
	if err := vol.write(in.Data); err != nil {
		t.Fatal(err)
	}
	endpoints := string(in.Data[etcdfedv1.ClientSecretKeyEndpoints])
	hostsFile := filepath.Join(dir, "hosts")
	hosts, err := consumerHosts(ctx, in.DNSServers, endpoints)
	if err != nil {
		t.Fatal(err)
	}
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
	port := testenv.FreePort(t)
	args := []string{
		"--etcd-servers=" + endpoints,
		"--etcd-cafile=" + vol.file(etcdfedv1.ClientSecretKeyCA),
		"--etcd-certfile=" + vol.file(etcdfedv1.ClientSecretKeyCert),
		"--etcd-keyfile=" + vol.file(etcdfedv1.ClientSecretKeyKey),
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
	a := &ConsumerAPIServer{URL: fmt.Sprintf("https://127.0.0.1:%d", port), Prefix: in.Prefix, t: t, binary: in.Binary, args: args,
		hostsFile: hostsFile, logf: logf, log: logPath, token: token}
	t.Cleanup(a.Stop)
	rc := &rest.Config{Host: a.URL, BearerToken: token, TLSClientConfig: rest.TLSClientConfig{Insecure: true}, Timeout: 5 * time.Second}
	cs, err := kubernetes.NewForConfig(rc)
	if err != nil {
		t.Fatal(err)
	}
	a.Client = cs
	if in.Mount != nil {
		sctx, cancel := context.WithCancel(ctx)
		done := make(chan struct{})
		t.Cleanup(func() { cancel(); <-done })
		go func() {
			defer close(done)
			a.keepMounted(sctx, in.Mount, vol, in.DNSServers, endpoints, hosts)
		}()
	}
	start := time.Now()
	if err := a.start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Logf("consumer kube-apiserver ready on %s %.1fs after start (etcd from the Secret: %s)", a.URL, time.Since(start).Seconds(), endpoints)
	return a
}

// start runs the apiserver with its flags and waits until it is ready.
func (a *ConsumerAPIServer) start(ctx context.Context) error {
	script := `mount --bind "$0" /etc/hosts && exec "$@"`
	cmd := exec.Command("unshare", append([]string{"--mount", "--propagation", "private", "sh", "-c", script, a.hostsFile, a.binary}, a.args...)...)
	cmd.Stdout, cmd.Stderr = a.logf, a.logf
	if err := cmd.Start(); err != nil {
		return err
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	a.mu.Lock()
	a.cmd, a.exited = cmd, exited
	a.mu.Unlock()
	if err := a.WaitForReady(ctx, exited, 2*time.Minute); err != nil {
		data, _ := os.ReadFile(a.log)
		return fmt.Errorf("%w\nlog (last 3000 bytes):\n%s", err, tailBytes(data, 3000))
	}
	return nil
}

// WaitForReady waits until the apiserver answers /readyz with 200, or
// fails once exited is closed (timeout: 2 minutes when zero).
func (a *ConsumerAPIServer) WaitForReady(ctx context.Context, exited <-chan struct{}, timeout time.Duration) error {
	hc := &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}} //nolint:gosec // the consumer apiserver's self-signed serving cert
	defer hc.CloseIdleConnections()
	return poll(ctx, orDefault(timeout, 2*time.Minute), "consumer kube-apiserver ready", func(ctx context.Context) (string, error) {
		select {
		case <-exited:
			return "", fmt.Errorf("exited")
		default:
		}
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, a.URL+"/readyz", nil)
		req.Header.Set("Authorization", "Bearer "+a.token)
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
}

// Restart stops the apiserver and starts it again on the files as they
// are now (what a control plane's rollout does), waiting until it is
// ready; it returns when it stopped and when it was ready again.
func (a *ConsumerAPIServer) Restart(ctx context.Context) (stopped, ready time.Time, err error) {
	a.Stop()
	stopped = time.Now()
	err = a.start(ctx)
	return stopped, time.Now(), err
}

// WriteRead creates or updates a ConfigMap through the apiserver and reads
// it back: one request that needs the ring for a write and a read.
func (a *ConsumerAPIServer) WriteRead(ctx context.Context, name, value string) error {
	cms := a.Client.CoreV1().ConfigMaps("default")
	cm, err := cms.Get(ctx, name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		cm = &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"}, Data: map[string]string{"value": value}}
		if _, err := cms.Create(ctx, cm, metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("create ConfigMap %s: %w", name, err)
		}
	case err != nil:
		return fmt.Errorf("get ConfigMap %s: %w", name, err)
	default:
		cm.Data = map[string]string{"value": value}
		if _, err := cms.Update(ctx, cm, metav1.UpdateOptions{}); err != nil {
			return fmt.Errorf("update ConfigMap %s: %w", name, err)
		}
	}
	got, err := cms.Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return fmt.Errorf("read ConfigMap %s back: %w", name, err)
	}
	if got.Data["value"] != value {
		return fmt.Errorf("ConfigMap %s read back holds %q, wrote %q", name, got.Data["value"], value)
	}
	return nil
}

// keepMounted keeps vol as the kubelet keeps a Secret volume, and the
// hosts file as the ring's DNS answers, until ctx ends.
func (a *ConsumerAPIServer) keepMounted(ctx context.Context, src *ConsumerSecret, vol *secretVolume, dnsServers []string, endpoints, hosts string) {
	for ctx.Err() == nil {
		select {
		case <-ctx.Done():
			return
		case <-time.After(500 * time.Millisecond):
		}
		sec := &corev1.Secret{}
		if err := src.Cluster.Client.Get(ctx, src.Key, sec); err == nil {
			if changed, err := vol.update(sec.Data); err != nil {
				a.t.Logf("consumer Secret volume: %v", err)
			} else if changed {
				a.t.Logf("%s: consumer Secret volume updated from %s in %s", time.Now().Format("15:04:05.000"), src.Key, src.Cluster.Name)
			}
		}
		if h, err := consumerHosts(ctx, dnsServers, endpoints); err == nil && h != hosts {
			// In place: the bind mount holds the file's inode.
			if err := os.WriteFile(a.hostsFile, []byte(h), 0o600); err == nil {
				hosts = h
			}
		}
	}
}

// consumerHosts is a hosts file naming every endpoint's host as the ring's
// DNS answers it now.
func consumerHosts(ctx context.Context, dnsServers []string, endpoints string) (string, error) {
	hosts := "127.0.0.1 localhost\n"
	for _, ep := range strings.Split(endpoints, ",") {
		u, err := url.Parse(ep)
		if err != nil {
			return "", fmt.Errorf("endpoint %q in the Secret: %w", ep, err)
		}
		var addrs []netip.Addr
		err = errRefused
		for _, srv := range dnsServers {
			// The first server that serves the ring's zone.
			if addrs, err = lookup(ctx, srv, dns.Fqdn(u.Hostname()), dns.TypeA); !errors.Is(err, errRefused) {
				break
			}
		}
		if err != nil {
			return "", fmt.Errorf("resolve %s through the ring's DNS: %w", u.Hostname(), err)
		}
		if len(addrs) == 0 {
			return "", fmt.Errorf("resolve %s through the ring's DNS: no address", u.Hostname())
		}
		hosts += addrs[0].String() + " " + u.Hostname() + "\n"
	}
	return hosts, nil
}

// secretVolume lays out a Secret's certificate keys as the kubelet does:
// each file a symlink through ..data to a timestamped directory, ..data
// swapped by one rename, so a reader sees the old set or the new one,
// never half of each.
type secretVolume struct {
	dir  string
	n    int
	last map[string][]byte
}

var secretVolumeKeys = []string{etcdfedv1.ClientSecretKeyCA, etcdfedv1.ClientSecretKeyCert, etcdfedv1.ClientSecretKeyKey}

func (v *secretVolume) file(key string) string { return filepath.Join(v.dir, key) }

func (v *secretVolume) write(data map[string][]byte) error {
	_, err := v.update(data)
	return err
}

func (v *secretVolume) update(data map[string][]byte) (bool, error) {
	same := v.last != nil
	for _, k := range secretVolumeKeys {
		if same && !bytes.Equal(v.last[k], data[k]) {
			same = false
		}
	}
	if same {
		return false, nil
	}
	if err := os.MkdirAll(v.dir, 0o700); err != nil {
		return false, err
	}
	v.n++
	ts := fmt.Sprintf("..data_%d", v.n)
	if err := os.Mkdir(filepath.Join(v.dir, ts), 0o700); err != nil {
		return false, err
	}
	for _, k := range secretVolumeKeys {
		if err := os.WriteFile(filepath.Join(v.dir, ts, k), data[k], 0o600); err != nil {
			return false, err
		}
	}
	tmp := filepath.Join(v.dir, "..data_tmp")
	_ = os.Remove(tmp)
	if err := os.Symlink(ts, tmp); err != nil {
		return false, err
	}
	if err := os.Rename(tmp, filepath.Join(v.dir, "..data")); err != nil {
		return false, err
	}
	for _, k := range secretVolumeKeys {
		if _, err := os.Lstat(v.file(k)); os.IsNotExist(err) {
			if err := os.Symlink(filepath.Join("..data", k), v.file(k)); err != nil {
				return false, err
			}
		}
	}
	if v.n > 1 {
		_ = os.RemoveAll(filepath.Join(v.dir, fmt.Sprintf("..data_%d", v.n-1)))
	}
	v.last = map[string][]byte{}
	for _, k := range secretVolumeKeys {
		v.last[k] = bytes.Clone(data[k])
	}
	return true, nil
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

// WaitForUserRefused waits until a read of key through cfg (whose
// credentials, for the message) is refused because the etcd user is gone
// or has no permission (timeout: a minute when zero).
func WaitForUserRefused(ctx context.Context, cfg EtcdClientConfig, whose, key string, timeout time.Duration) error {
	return poll(ctx, orDefault(timeout, time.Minute), whose+" etcd user deleted", func(ctx context.Context) (string, error) {
		cli, err := EtcdClient(cfg)
		if err != nil {
			return "", err
		}
		defer cli.Close()
		rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		_, err = cli.Get(rctx, key, clientv3.WithCountOnly())
		if err != nil && (strings.Contains(err.Error(), "permission denied") || strings.Contains(err.Error(), "user name not found")) {
			return "", nil
		}
		return fmt.Sprintf("still served (%v)", err), nil
	})
}
