package pod_test

import (
	"bufio"
	"crypto/tls"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	etcdfedv1 "github.com/etcdfed/etcdfed/api/v1alpha1"
	"github.com/etcdfed/etcdfed/hub/pki"
	"github.com/etcdfed/etcdfed/internal/etcdtest"
	"github.com/etcdfed/etcdfed/internal/testenv"
	"github.com/etcdfed/etcdfed/spoke/component/pod"
	"github.com/etcdfed/etcdfed/spoke/internal/spec"
)

// TestPeerPortRefusesClientCertificates runs real etcd (3.6, 3.5 and 3.7
// when its binary is built), three members with the flags the spoke
// renders and the certificates the hub issues, which form a cluster
// through peer ports that require the peer name, and presents
// certificates of the ring's CA to a member's peer port: a member's is
// served (/version, 200); a consumer's client certificate (as
// spec.clients Secrets hold) and the hub's are refused, while the client
// port serves them. Before, the peer port answered any certificate of the CA with 200
// on /members, /version and /raft/probing.
func TestPeerPortRefusesClientCertificates(t *testing.T) {
	testenv.SkipIfShort(t, "etcd processes")
	bin, err := testenv.BinDir()
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range []struct{ binary, version string }{
		{"etcd", "3.6.16"}, {"etcd-3.5.35", "3.5.35"}, {"etcd-3.7", "3.7.1"},
	} {
		t.Run(v.version, func(t *testing.T) {
			path := filepath.Join(bin, v.binary)
			if _, err := os.Stat(path); err != nil {
				t.Skipf("bin/%s is not built here (%v): the flag is checked in etcd %s's source (client/pkg/transport/listener.go, AllowedHostnames)", v.binary, err, v.version)
			}
			peerPortRefusesClients(t, path, v.version)
		})
	}
}

func peerPortRefusesClients(t *testing.T, binary, version string) {
	now := time.Now()
	ca, err := pki.NewCA("ring", now)
	if err != nil {
		t.Fatal(err)
	}
	const domain = "main.etcd.test"
	// Three members, as the hub renders them and the spoke runs them, all
	// under the name localhost (etcd resolves its advertised URLs at its
	// first start), each on ports of its own: they must form a cluster
	// while every peer port requires the peer name.
	type proc struct{ name, dir, peer, client string }
	var procs []proc
	var initial []string
	for i := range 3 {
		p := proc{name: fmt.Sprintf("main-%d", i), dir: t.TempDir(),
			peer: fmt.Sprintf("127.0.0.1:%d", etcdtest.FreePort(t)), client: fmt.Sprintf("127.0.0.1:%d", etcdtest.FreePort(t))}
		procs = append(procs, p)
		initial = append(initial, fmt.Sprintf("%s=https://localhost:%s", p.name, port(p.peer)))
	}
	consumer, err := ca.IssueClientFor("kube-apiserver", etcdfedv1.DefaultClientCertificateLifetime, now)
	if err != nil {
		t.Fatal(err)
	}
	hubLeaf, err := ca.IssueClient(etcdfedv1.EtcdHubUser, now)
	if err != nil {
		t.Fatal(err)
	}
	var memberLeaf *pki.Leaf
	for _, p := range procs {
		m := member(func(m *etcdfedv1.EtcdMember) {
			m.Spec.MemberName = p.name
			m.Spec.Version = version
			m.Spec.DNSName = "localhost"
			m.Spec.Bootstrap = &etcdfedv1.BootstrapSpec{InitialCluster: strings.Join(initial, ","), InitialClusterState: etcdfedv1.InitialClusterNew, Token: "t"}
			m.Spec.TLS = etcdfedv1.MemberTLS{SecretName: p.name + "-tls", PeerSkipClientSANVerification: true,
				PeerName: pki.PeerName(domain), RequirePeerName: true}
		})
		leaf, err := ca.IssueMember(pki.MemberRequest{Member: p.name, DNSNames: []string{"localhost", pki.PeerName(domain)}}, now)
		if err != nil {
			t.Fatal(err)
		}
		memberLeaf = leaf
		for name, data := range map[string][]byte{"ca.crt": ca.CertPEM, "tls.crt": leaf.CertPEM, "tls.key": leaf.KeyPEM} {
			if err := os.WriteFile(filepath.Join(p.dir, name), data, 0o600); err != nil {
				t.Fatal(err)
			}
		}
		var args []string
		for _, a := range pod.EtcdArgs(m, spec.Ports{Peer: int32(atoi(port(p.peer))), Client: int32(atoi(port(p.client)))}) {
			switch {
			case strings.HasPrefix(a, "--listen-peer-urls="):
				a = "--listen-peer-urls=https://" + p.peer
			case strings.HasPrefix(a, "--listen-client-urls="):
				a = "--listen-client-urls=https://" + p.client
			case strings.HasPrefix(a, "--listen-metrics-urls="):
				a = fmt.Sprintf("--listen-metrics-urls=http://127.0.0.1:%d", etcdtest.FreePort(t))
			}
			a = strings.ReplaceAll(a, pod.TLSMountPath, p.dir)
			a = strings.ReplaceAll(a, pod.DataDir, filepath.Join(p.dir, "data"))
			args = append(args, a)
		}
		if !strings.Contains(strings.Join(args, " "), "--peer-cert-allowed-hostname="+pki.PeerName(domain)) {
			t.Errorf("the spoke renders no --peer-cert-allowed-hostname: %v", args)
		}
		startEtcd(t, binary, p.dir, args)
	}
	// Formed: every member answers /health on its client port (a quorum
	// of peers connected through the restricted peer ports).
	deadline := time.Now().Add(90 * time.Second)
	for _, p := range procs {
		for {
			err := get(ca, hubLeaf, p.client, "/health")
			if err == nil {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: the members did not form a cluster with the peer name required: %v", p.name, err)
			}
			time.Sleep(300 * time.Millisecond)
		}
	}
	peer, client := procs[0].peer, procs[0].client
	if err := get(ca, memberLeaf, peer, "/version"); err != nil {
		t.Fatalf("a member's certificate is not served on the peer port: %v", err)
	}
	for _, c := range []struct {
		name string
		leaf *pki.Leaf
	}{{"a consumer's", consumer}, {"the hub's", hubLeaf}} {
		if err := get(ca, c.leaf, client, "/version"); err != nil {
			t.Errorf("the client port refuses %s client certificate: %v", c.name, err)
		}
		for _, p := range []string{"/members", "/version", "/raft/probing"} {
			err := get(ca, c.leaf, peer, p)
			if err == nil {
				t.Errorf("the peer port serves %s %s to %s client certificate", p, "(200)", c.name)
				continue
			}
			t.Logf("peer port, %s client certificate, %s: refused: %v", c.name, p, err)
		}
	}
}

func startEtcd(t *testing.T, binary, dir string, args []string) {
	t.Helper()
	logf, err := os.Create(filepath.Join(dir, "etcd.log"))
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(binary, append(args, "--log-level=warn")...)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		if t.Failed() {
			b, _ := os.ReadFile(filepath.Join(dir, "etcd.log"))
			t.Logf("etcd log %s:\n%s", dir, b)
		}
	})
}

func port(hostport string) string {
	_, p, _ := net.SplitHostPort(hostport)
	return p
}

func atoi(s string) int {
	n, _ := strconv.Atoi(s)
	return n
}

// get asks for path over TLS presenting leaf, trusting ca: nil when served
// with 200. With TLS 1.3 a server refuses a client certificate after the
// handshake, so the refusal shows on the first read.
func get(ca *pki.CA, leaf *pki.Leaf, addr, path string) error {
	pair, err := tls.X509KeyPair(leaf.CertPEM, leaf.KeyPEM)
	if err != nil {
		return err
	}
	cfg := &tls.Config{RootCAs: ca.Pool(), ServerName: "localhost", MinVersion: tls.VersionTLS12,
		GetClientCertificate: func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return &pair, nil }}
	conn, err := tls.DialWithDialer(&net.Dialer{Timeout: 3 * time.Second}, "tcp", addr, cfg)
	if err != nil {
		return fmt.Errorf("handshake: %w", err)
	}
	defer func() { _ = conn.Close() }()
	_ = conn.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := fmt.Fprintf(conn, "GET %s HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n", path); err != nil {
		return fmt.Errorf("write: %w", err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		return fmt.Errorf("read: %w", err)
	}
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("HTTP %d", resp.StatusCode)
	}
	return nil
}
