package pod_test

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	etcdfedv1 "github.com/etcdfed/etcdfed/api/v1alpha1"
	"github.com/etcdfed/etcdfed/dev/etcdtest"
	"github.com/etcdfed/etcdfed/dev/testenv"
	"github.com/etcdfed/etcdfed/hub/pki"
	"github.com/etcdfed/etcdfed/pkg/etcdversion"
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
	v37 := etcdversion.NewestLine().Newest.String()
	for _, v := range []struct{ binary, version string }{
		{"etcd", "3.6.16"}, {"etcd-3.5.35", "3.5.35"}, {"etcd-" + v37, v37},
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
		args := renderArgs(t, m, p.peer, p.client, p.dir)
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
			err := etcdtest.GetAs(ca, hubLeaf, p.client, "/health")
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
	if err := etcdtest.GetAs(ca, memberLeaf, peer, "/version"); err != nil {
		t.Fatalf("a member's certificate is not served on the peer port: %v", err)
	}
	for _, c := range []struct {
		name string
		leaf *pki.Leaf
	}{{"a consumer's", consumer}, {"the hub's", hubLeaf}} {
		if err := etcdtest.GetAs(ca, c.leaf, client, "/version"); err != nil {
			t.Errorf("the client port refuses %s client certificate: %v", c.name, err)
		}
		for _, p := range []string{"/members", "/version", "/raft/probing"} {
			err := etcdtest.GetAs(ca, c.leaf, peer, p)
			if err == nil {
				t.Errorf("the peer port serves %s %s to %s client certificate", p, "(200)", c.name)
				continue
			}
			t.Logf("peer port, %s client certificate, %s: refused: %v", c.name, p, err)
		}
	}
}

func startEtcd(t *testing.T, binary, dir string, args []string) (*exec.Cmd, chan struct{}) {
	t.Helper()
	logf, err := os.OpenFile(filepath.Join(dir, "etcd.log"), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(binary, append(args, "--log-level=warn")...)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); _ = logf.Close(); close(done) }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-done
		if t.Failed() {
			b, _ := os.ReadFile(filepath.Join(dir, "etcd.log"))
			t.Logf("etcd log %s:\n%s", dir, b)
		}
	})
	return cmd, done
}

func port(hostport string) string {
	_, p, _ := net.SplitHostPort(hostport)
	return p
}

func atoi(s string) int {
	n, _ := strconv.Atoi(s)
	return n
}

// TestPeerNameMigrationKeepsQuorum runs the hub's two rolls on three real
// etcd members (3.6) that ran before peer names existed, with writes
// going on: every member restarted on a certificate with the peer name,
// then every member restarted requiring it, one at a time, each waited
// for before the next. The ring answers throughout and at the end refuses
// a consumer's certificate on its peer ports. Why the name comes first: a
// member that requires it refuses a peer whose certificate lacks it.
func TestPeerNameMigrationKeepsQuorum(t *testing.T) {
	testenv.SkipIfShort(t, "etcd processes")
	bin, err := testenv.BinDir()
	if err != nil {
		t.Fatal(err)
	}
	r := newTestRing(t, filepath.Join(bin, "etcd"), "3.6.16")
	for _, p := range r.procs {
		r.start(p, false, false)
	}
	r.waitHealthy(r.procs...)
	cli := etcdClient(t, r)
	var acked, failed atomic.Int64
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			case <-time.After(20 * time.Millisecond):
			}
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			_, err := cli.Put(ctx, fmt.Sprintf("k/%d", i), "v")
			cancel()
			if err != nil {
				failed.Add(1)
			} else {
				acked.Add(1)
			}
		}
	}()
	progress := func(step string) {
		t.Helper()
		before := acked.Load()
		deadline := time.Now().Add(time.Minute)
		for acked.Load() < before+5 {
			if time.Now().After(deadline) {
				t.Fatalf("%s: no write acknowledged for a minute", step)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	progress("before")

	// Why the order: a member requiring the name refuses a peer whose
	// certificate lacks it (the others' still do here).
	oldPeer, err := r.ca.IssueMember(pki.MemberRequest{Member: "main-1", DNSNames: []string{"localhost"}}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	for phase, require := range []bool{false, true} {
		for _, p := range r.procs {
			r.stopProc(p)
			r.start(p, true, require)
			r.waitHealthy(r.procs...)
			progress(fmt.Sprintf("phase %d, %s restarted", phase+1, p.name))
			if require && p == r.procs[0] {
				if err := etcdtest.GetAs(r.ca, oldPeer, p.peer, "/version"); err == nil {
					t.Error("a member requiring the peer name serves a peer certificate without it")
				}
			}
		}
	}
	consumer, err := r.ca.IssueClient("kube-apiserver", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range r.procs {
		if err := etcdtest.GetAs(r.ca, consumer, p.peer, "/version"); err == nil {
			t.Errorf("%s: the peer port serves a consumer's certificate after the migration", p.name)
		}
	}
	close(stop)
	<-done
	t.Logf("two rolls of three members under writes: %d writes acknowledged, %d failed (a member's restart)", acked.Load(), failed.Load())
}

// testRing is three etcd members run with the flags the spoke renders.
type testRing struct {
	t               *testing.T
	binary, version string
	ca              *pki.CA
	domain          string
	initial         string
	procs           []*etcdProc
}

type etcdProc struct {
	name, dir, peer, client string
	cmd                     *exec.Cmd
	done                    chan struct{}
}

func newTestRing(t *testing.T, binary, version string) *testRing {
	ca, err := pki.NewCA("ring", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	r := &testRing{t: t, binary: binary, version: version, ca: ca, domain: "main.etcd.test"}
	var initial []string
	for i := range 3 {
		p := &etcdProc{name: fmt.Sprintf("main-%d", i), dir: t.TempDir(),
			peer: fmt.Sprintf("127.0.0.1:%d", etcdtest.FreePort(t)), client: fmt.Sprintf("127.0.0.1:%d", etcdtest.FreePort(t))}
		r.procs = append(r.procs, p)
		initial = append(initial, fmt.Sprintf("%s=https://localhost:%s", p.name, port(p.peer)))
	}
	r.initial = strings.Join(initial, ",")
	return r
}

// start runs p with a certificate carrying the peer name or not, and the
// requirement or not, as the hub's object of that step says.
func (r *testRing) start(p *etcdProc, named, require bool) {
	t := r.t
	t.Helper()
	m := member(func(m *etcdfedv1.EtcdMember) {
		m.Spec.MemberName, m.Spec.Version, m.Spec.DNSName = p.name, r.version, "localhost"
		m.Spec.Bootstrap = &etcdfedv1.BootstrapSpec{InitialCluster: r.initial, InitialClusterState: etcdfedv1.InitialClusterNew, Token: "t"}
		m.Spec.TLS = etcdfedv1.MemberTLS{SecretName: p.name + "-tls", PeerSkipClientSANVerification: true}
		if named {
			m.Spec.TLS.PeerName = pki.PeerName(r.domain)
		}
		m.Spec.TLS.RequirePeerName = require
	})
	names := []string{"localhost"}
	if named {
		names = append(names, pki.PeerName(r.domain))
	}
	leaf, err := r.ca.IssueMember(pki.MemberRequest{Member: p.name, DNSNames: names}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	for name, data := range map[string][]byte{"ca.crt": r.ca.CertPEM, "tls.crt": leaf.CertPEM, "tls.key": leaf.KeyPEM} {
		if err := os.WriteFile(filepath.Join(p.dir, name), data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	p.cmd, p.done = startEtcd(t, r.binary, p.dir, renderArgs(t, m, p.peer, p.client, p.dir))
}

func (r *testRing) stopProc(p *etcdProc) {
	_ = p.cmd.Process.Kill()
	<-p.done
}

func (r *testRing) waitHealthy(ps ...*etcdProc) {
	r.t.Helper()
	hub, err := r.ca.IssueClient(etcdfedv1.EtcdHubUser, time.Now())
	if err != nil {
		r.t.Fatal(err)
	}
	deadline := time.Now().Add(90 * time.Second)
	for _, p := range ps {
		for {
			err := etcdtest.GetAs(r.ca, hub, p.client, "/health")
			if err == nil {
				break
			}
			if time.Now().After(deadline) {
				r.t.Fatalf("%s not healthy: %v", p.name, err)
			}
			time.Sleep(300 * time.Millisecond)
		}
	}
}

func etcdClient(t *testing.T, r *testRing) *clientv3.Client {
	t.Helper()
	leaf, err := r.ca.IssueClient("root", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	pair, err := tls.X509KeyPair(leaf.CertPEM, leaf.KeyPEM)
	if err != nil {
		t.Fatal(err)
	}
	var eps []string
	for _, p := range r.procs {
		eps = append(eps, "https://localhost:"+port(p.client))
	}
	c, err := clientv3.New(clientv3.Config{Endpoints: eps, DialTimeout: 5 * time.Second, Logger: zap.NewNop(),
		TLS: &tls.Config{RootCAs: r.ca.Pool(), ServerName: "localhost", Certificates: []tls.Certificate{pair}, MinVersion: tls.VersionTLS12}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// renderArgs is the spoke's etcd command line for m, on the given
// addresses and directory instead of the pod's.
func renderArgs(t *testing.T, m *etcdfedv1.EtcdMember, peer, client, dir string) []string {
	var args []string
	for _, a := range pod.EtcdArgs(m, spec.Ports{Peer: int32(atoi(port(peer))), Client: int32(atoi(port(client)))}) {
		switch {
		case strings.HasPrefix(a, "--listen-peer-urls="):
			a = "--listen-peer-urls=https://" + peer
		case strings.HasPrefix(a, "--listen-client-urls="):
			a = "--listen-client-urls=https://" + client
		case strings.HasPrefix(a, "--listen-metrics-urls="):
			a = fmt.Sprintf("--listen-metrics-urls=http://127.0.0.1:%d", etcdtest.FreePort(t))
		}
		a = strings.ReplaceAll(a, pod.TLSMountPath, dir)
		a = strings.ReplaceAll(a, pod.DataDir, filepath.Join(dir, "data"))
		args = append(args, a)
	}
	return args
}
