// Package etcdtest runs real multi-member etcd clusters (bin/etcd) for
// tests, on 127.0.0.1 with free ports, plain or with TLS from a hub/pki CA.
// Every process gets SIGKILL when the test binary dies (parent-death
// signal) and is stopped by its pid when the test ends. Test-only:
// production code never imports it.
package etcdtest

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/etcdfed/etcdfed/dev/testenv"
	"github.com/etcdfed/etcdfed/hub/pki"
)

// Options configure a cluster.
type Options struct {
	// Members is the number of members (default 3).
	Members int
	// CA, when set, turns on client and peer TLS with certificates it
	// issues (SANs localhost and 127.0.0.1, client-cert auth).
	CA *pki.CA
	// Name prefixes member names (default "etcd").
	Name string
	// ExtraArgs are added to every member's command line.
	ExtraArgs []string
	// Proxied puts a Proxy in front of every member's client port and has
	// the member advertise the proxy's URL, so clients that follow the
	// member list (as the hub does) go through it. Plain HTTP only.
	Proxied bool
	// Binary is the etcd of bin/ the members run (default etcd, such as
	// etcd-3.7.3 for another release hack/tools.sh builds).
	Binary string
	// Env is added to every member's environment (such as
	// ETCDFED_DNS_SERVERS, so that members resolve a ring's names).
	Env []string
	// Hosts, when set, give member i its own address Hosts[i] (a loopback
	// address such as a local environment's zone block), on which it
	// listens on etcd's own ports 2379 and 2380. Plain HTTP only.
	Hosts []string
	// Cgroups, when set, start member i's process in the cgroup v2
	// directory Cgroups[i] (created when missing; "" for none), so that
	// rules matched on a cgroup (a local environment's distance or
	// partition) apply to it from its first packet.
	Cgroups []string
}

// Member is one etcd process.
type Member struct {
	Name string
	// ClientURL is where the member listens for clients.
	ClientURL string
	// AdvertisedClientURL is the client URL in the member list: ClientURL,
	// or its proxy's URL.
	AdvertisedClientURL string
	// Proxy in front of the client port (Options.Proxied).
	Proxy   *Proxy
	PeerURL string
	DataDir string
	dir     string
	binary  string
	env     []string
	cgroup  string
	args    []string
	cmd     *exec.Cmd
	done    chan struct{}
}

// Cluster is a running etcd cluster.
type Cluster struct {
	Members []*Member
	// TLS material for clients, when Options.CA was set.
	CA     *pki.CA
	Client *pki.Leaf
	// maxRequestBytes is --max-request-bytes when ExtraArgs raise it.
	maxRequestBytes int
	t               testing.TB
}

// Start starts a cluster, waits until every member is healthy and stops it
// when the test ends.
func Start(t testing.TB, o Options) *Cluster {
	t.Helper()
	testenv.SkipIfShort(t, "etcd processes")
	if o.Members == 0 {
		o.Members = 3
	}
	if o.Name == "" {
		o.Name = "etcd"
	}
	if (len(o.Hosts) > 0 && len(o.Hosts) != o.Members) || (len(o.Cgroups) > 0 && len(o.Cgroups) != o.Members) {
		t.Fatalf("etcdtest: %d members, %d hosts, %d cgroups: give one per member or none", o.Members, len(o.Hosts), len(o.Cgroups))
	}
	if len(o.Hosts) > 0 && o.CA != nil {
		t.Fatal("etcdtest: Hosts works with plain HTTP only")
	}
	scheme := "http"
	if o.CA != nil {
		scheme = "https"
	}
	c := &Cluster{CA: o.CA, t: t}
	for _, a := range o.ExtraArgs {
		if v, ok := strings.CutPrefix(a, "--max-request-bytes="); ok {
			n, err := strconv.Atoi(v)
			if err != nil {
				t.Fatalf("etcdtest: %s: %v", a, err)
			}
			c.maxRequestBytes = n
		}
	}
	var initial []string
	for i := range o.Members {
		m := &Member{Name: fmt.Sprintf("%s-%d", o.Name, i), dir: t.TempDir(), binary: o.Binary, env: o.Env}
		if len(o.Hosts) > 0 {
			m.PeerURL = fmt.Sprintf("%s://%s:2380", scheme, o.Hosts[i])
			m.ClientURL = fmt.Sprintf("%s://%s:2379", scheme, o.Hosts[i])
		} else {
			m.PeerURL = fmt.Sprintf("%s://127.0.0.1:%d", scheme, freePort(t))
			m.ClientURL = fmt.Sprintf("%s://127.0.0.1:%d", scheme, freePort(t))
		}
		if len(o.Cgroups) > 0 {
			m.cgroup = o.Cgroups[i]
		}
		m.DataDir = filepath.Join(m.dir, "data")
		initial = append(initial, m.Name+"="+m.PeerURL)
		c.Members = append(c.Members, m)
	}
	if o.CA != nil {
		leaf, err := o.CA.IssueClient("etcdtest-client", time.Now())
		if err != nil {
			t.Fatal(err)
		}
		c.Client = leaf
	}
	if o.Proxied && o.CA != nil {
		t.Fatal("etcdtest: Proxied works with plain HTTP only")
	}
	for _, m := range c.Members {
		m.AdvertisedClientURL = m.ClientURL
		if o.Proxied {
			m.Proxy = StartProxy(t, strings.TrimPrefix(m.ClientURL, "http://"))
			m.AdvertisedClientURL = "http://" + m.Proxy.Addr
		}
		m.args = append([]string{
			"--name=" + m.Name, "--data-dir=" + m.DataDir,
			"--listen-peer-urls=" + m.PeerURL, "--initial-advertise-peer-urls=" + m.PeerURL,
			"--listen-client-urls=" + m.ClientURL, "--advertise-client-urls=" + m.AdvertisedClientURL,
			"--initial-cluster=" + strings.Join(initial, ","), "--initial-cluster-state=new",
			"--initial-cluster-token=etcdtest-" + strconv.Itoa(os.Getpid()),
			"--log-level=error",
		}, o.ExtraArgs...)
		if o.CA != nil {
			m.args = append(m.args, c.tlsArgs(t, m)...)
		}
		c.startMember(m)
	}
	if err := c.WaitHealthy(context.Background(), time.Minute); err != nil {
		t.Fatal(err)
	}
	return c
}

func (c *Cluster) tlsArgs(t testing.TB, m *Member) []string {
	leaf, err := c.CA.IssueMember(pki.MemberRequest{Member: m.Name, DNSNames: []string{"localhost"}, IPs: []net.IP{net.ParseIP("127.0.0.1")}}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	files := map[string][]byte{"ca.crt": c.CA.CertPEM, "tls.crt": leaf.CertPEM, "tls.key": leaf.KeyPEM}
	for f, data := range files {
		if err := os.WriteFile(filepath.Join(m.dir, f), data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	p := func(f string) string { return filepath.Join(m.dir, f) }
	return []string{
		"--cert-file=" + p("tls.crt"), "--key-file=" + p("tls.key"), "--trusted-ca-file=" + p("ca.crt"), "--client-cert-auth=true",
		"--peer-cert-file=" + p("tls.crt"), "--peer-key-file=" + p("tls.key"), "--peer-trusted-ca-file=" + p("ca.crt"), "--peer-client-cert-auth=true",
	}
}

func (c *Cluster) startMember(m *Member) {
	t := c.t
	t.Helper()
	bin, err := testenv.BinDir()
	if err != nil {
		t.Fatal(err)
	}
	logf, err := os.OpenFile(filepath.Join(m.dir, "etcd.log"), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	binary := m.binary
	if binary == "" {
		binary = "etcd"
	}
	m.cmd = exec.Command(filepath.Join(bin, binary), m.args...)
	m.cmd.Stdout, m.cmd.Stderr = logf, logf
	if len(m.env) > 0 {
		m.cmd.Env = append(os.Environ(), m.env...)
	}
	m.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if m.cgroup != "" {
		if err := os.MkdirAll(m.cgroup, 0o755); err != nil {
			t.Fatalf("etcdtest: cgroup of %s: %v", m.Name, err)
		}
		fd, err := syscall.Open(m.cgroup, syscall.O_DIRECTORY|syscall.O_RDONLY, 0)
		if err != nil {
			t.Fatalf("etcdtest: cgroup of %s: %v", m.Name, err)
		}
		defer func() { _ = syscall.Close(fd) }()
		m.cmd.SysProcAttr.UseCgroupFD, m.cmd.SysProcAttr.CgroupFD = true, fd
	}
	if err := m.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	m.done = make(chan struct{})
	cmd, done := m.cmd, m.done
	go func() { _ = cmd.Wait(); _ = logf.Close(); close(done) }()
	cgroup := m.cgroup
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-done
		if cgroup != "" {
			_ = os.Remove(cgroup) // empty now; a cgroup with processes stays
		}
		if t.Failed() {
			b, _ := os.ReadFile(filepath.Join(m.dir, "etcd.log"))
			t.Logf("%s log (tail):\n%s", m.Name, tail(string(b), 3000))
		}
	})
}

// StartMember runs a single member from an existing data directory (for
// example one restored from a snapshot) with the given name and URLs and
// waits until it answers.
func StartMember(t testing.TB, name, dataDir, peerURL, clientURL string) *Cluster {
	t.Helper()
	return StartMemberOn(t, "", name, dataDir, peerURL, clientURL)
}

// StartMemberOn is StartMember with the etcd binary of bin/ to run
// (Options.Binary).
func StartMemberOn(t testing.TB, binary, name, dataDir, peerURL, clientURL string) *Cluster {
	t.Helper()
	c := &Cluster{t: t}
	m := &Member{Name: name, DataDir: dataDir, PeerURL: peerURL, ClientURL: clientURL, AdvertisedClientURL: clientURL, dir: t.TempDir(), binary: binary}
	m.args = []string{
		"--name=" + name, "--data-dir=" + dataDir,
		"--listen-peer-urls=" + peerURL, "--initial-advertise-peer-urls=" + peerURL,
		"--listen-client-urls=" + clientURL, "--advertise-client-urls=" + clientURL,
		"--log-level=error",
	}
	c.Members = []*Member{m}
	c.startMember(m)
	if err := c.WaitHealthy(context.Background(), time.Minute); err != nil {
		t.Fatal(err)
	}
	return c
}

// StartMemberAs is StartMember with client and peer TLS from ca (URLs
// https://), and a client certificate of commonName for NewClient: the
// etcd user a data directory restored from a ring with authentication on
// needs (root).
func StartMemberAs(t testing.TB, name, dataDir, peerURL, clientURL string, ca *pki.CA, commonName string) *Cluster {
	t.Helper()
	leaf, err := ca.IssueClient(commonName, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	c := &Cluster{t: t, CA: ca, Client: leaf}
	m := &Member{Name: name, DataDir: dataDir, PeerURL: peerURL, ClientURL: clientURL, AdvertisedClientURL: clientURL, dir: t.TempDir()}
	m.args = append([]string{
		"--name=" + name, "--data-dir=" + dataDir,
		"--listen-peer-urls=" + peerURL, "--initial-advertise-peer-urls=" + peerURL,
		"--listen-client-urls=" + clientURL, "--advertise-client-urls=" + clientURL,
		"--log-level=error",
	}, c.tlsArgs(t, m)...)
	c.Members = []*Member{m}
	c.startMember(m)
	if err := c.WaitHealthy(context.Background(), time.Minute); err != nil {
		t.Fatal(err)
	}
	return c
}

// FreeURL is http://127.0.0.1:<free port>.
func FreeURL(t testing.TB) string { return fmt.Sprintf("http://127.0.0.1:%d", freePort(t)) }

// FreePort is a TCP port on 127.0.0.1 that nothing listens on now.
func FreePort(t testing.TB) int { return freePort(t) }

// Endpoints are the client URLs of all members.
func (c *Cluster) Endpoints() []string {
	var out []string
	for _, m := range c.Members {
		out = append(out, m.ClientURL)
	}
	return out
}

// NewClient returns a client of the given endpoints (all members when
// none), closed when the test ends.
func (c *Cluster) NewClient(endpoints ...string) *clientv3.Client {
	c.t.Helper()
	if len(endpoints) == 0 {
		endpoints = c.Endpoints()
	}
	cfg := clientv3.Config{Endpoints: endpoints, DialTimeout: 2 * time.Second, Logger: zap.NewNop()}
	if c.maxRequestBytes > 0 {
		// clientv3 refuses to send more than 2 MiB by default, whatever the
		// server takes; etcd itself accepts max-request-bytes plus 512 KiB
		// of gRPC overhead.
		cfg.MaxCallSendMsgSize = c.maxRequestBytes + 512*1024
	}
	if c.CA != nil {
		tlsCfg, err := pki.ClientTLS(c.CA.CertPEM, c.Client)
		if err != nil {
			c.t.Fatal(err)
		}
		cfg.TLS = tlsCfg
	}
	cl, err := clientv3.New(cfg)
	if err != nil {
		c.t.Fatal(err)
	}
	c.t.Cleanup(func() { _ = cl.Close() })
	return cl
}

// WaitHealthy waits until every running member answers a status call with
// a leader.
func (c *Cluster) WaitHealthy(ctx context.Context, timeout time.Duration) error {
	cl := c.NewClient()
	deadline := time.Now().Add(timeout)
	for {
		var errs []error
		for _, m := range c.Members {
			if m.Stopped() {
				continue
			}
			sctx, cancel := context.WithTimeout(ctx, 2*time.Second)
			st, err := cl.Status(sctx, m.ClientURL)
			cancel()
			switch {
			case err != nil:
				errs = append(errs, fmt.Errorf("%s: %w", m.Name, err))
			case st.Leader == 0:
				errs = append(errs, fmt.Errorf("%s: no leader", m.Name))
			}
		}
		if len(errs) == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("etcd not healthy after %s: %w", timeout, errors.Join(errs...))
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// Leader is the member that leads, by asking each one.
func (c *Cluster) Leader(ctx context.Context) (*Member, error) {
	cl := c.NewClient()
	for _, m := range c.Members {
		if m.Stopped() {
			continue
		}
		sctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		st, err := cl.Status(sctx, m.ClientURL)
		cancel()
		if err == nil && st.Leader == st.Header.MemberId {
			return m, nil
		}
	}
	return nil, errors.New("no member says it leads")
}

// MakeFollower waits for a leader and, when m leads, hands leadership to
// another running member, so that stopping or freezing m next costs the
// ring no election (the first election, under load, can go to any member).
func (c *Cluster) MakeFollower(ctx context.Context, m *Member) error {
	if err := c.WaitHealthy(ctx, 30*time.Second); err != nil {
		return err
	}
	leader, err := c.Leader(ctx)
	if err != nil || leader != m {
		return err
	}
	cl := c.NewClient(m.ClientURL)
	for _, o := range c.Members {
		if o == m || o.Stopped() {
			continue
		}
		sctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		st, err := cl.Status(sctx, o.ClientURL)
		if err == nil {
			_, err = cl.MoveLeader(sctx, st.Header.MemberId)
		}
		cancel()
		if err != nil {
			return fmt.Errorf("etcdtest: move leadership from %s to %s: %w", m.Name, o.Name, err)
		}
		return c.WaitHealthy(ctx, 30*time.Second)
	}
	return fmt.Errorf("etcdtest: %s leads and no other member runs", m.Name)
}

// Stop kills one member's process by its pid.
func (m *Member) Stop() {
	if m.cmd == nil {
		return
	}
	_ = m.cmd.Process.Kill()
	<-m.done
}

// Pause freezes the member's process (SIGSTOP) until Resume or the end of
// the test: its ports still accept connections and never answer, as a
// member behind a network partition looks to a client.
func (m *Member) Pause(t testing.TB) {
	t.Helper()
	if m.cmd == nil || m.Stopped() {
		t.Fatalf("etcdtest: %s is not running", m.Name)
	}
	if err := m.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatalf("etcdtest: pause %s: %v", m.Name, err)
	}
	t.Cleanup(m.Resume)
}

// Resume lets a paused member's process run again.
func (m *Member) Resume() {
	if m.cmd != nil && !m.Stopped() {
		_ = m.cmd.Process.Signal(syscall.SIGCONT)
	}
}

// Stopped reports whether the member's process has exited.
func (m *Member) Stopped() bool {
	select {
	case <-m.done:
		return true
	default:
		return false
	}
}

// Restart starts a stopped member again on its data.
func (c *Cluster) Restart(m *Member) {
	c.t.Helper()
	m.Stop()
	c.startMember(m)
}

// RestartWith starts a stopped member again on its data with extra flags
// (for example --force-new-cluster) for this start only.
func (c *Cluster) RestartWith(m *Member, extra ...string) {
	c.t.Helper()
	m.Stop()
	args := m.args
	m.args = append(slices.Clone(args), extra...)
	c.startMember(m)
	m.args = args
}

func freePort(t testing.TB) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = l.Close() }()
	return l.Addr().(*net.TCPAddr).Port
}

func tail(s string, n int) string {
	s = strings.TrimSpace(s)
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}

// WriteTLS replaces a member's CA bundle and certificate files (a TLS
// cluster's): etcd re-reads the certificate on each handshake and the CA
// bundle only when it starts (Restart).
func (c *Cluster) WriteTLS(m *Member, caPEM []byte, leaf *pki.Leaf) {
	c.t.Helper()
	for f, data := range map[string][]byte{"ca.crt": caPEM, "tls.crt": leaf.CertPEM, "tls.key": leaf.KeyPEM} {
		if err := os.WriteFile(filepath.Join(m.dir, f), data, 0o600); err != nil {
			c.t.Fatal(err)
		}
	}
}

// EnableAuth turns etcd authentication on in a TLS cluster as an
// administrator does: user root (no password: a client certificate's
// common name names the user) with the root role, then auth enable. From
// then on c.Client, and so NewClient, is root's client certificate, which
// it returns; the certificate it replaces (etcdtest-client, a user etcd
// does not know) reads and writes nothing.
func (c *Cluster) EnableAuth(ctx context.Context) (*pki.Leaf, error) {
	if c.CA == nil {
		return nil, errors.New("etcdtest: authentication needs TLS (Options.CA)")
	}
	cl := c.NewClient()
	if _, err := cl.UserAddWithOptions(ctx, "root", "", &clientv3.UserAddOptions{NoPassword: true}); err != nil {
		return nil, fmt.Errorf("etcdtest: add user root: %w", err)
	}
	if _, err := cl.UserGrantRole(ctx, "root", "root"); err != nil {
		return nil, fmt.Errorf("etcdtest: grant root the root role: %w", err)
	}
	if _, err := cl.AuthEnable(ctx); err != nil {
		return nil, fmt.Errorf("etcdtest: auth enable: %w", err)
	}
	leaf, err := c.CA.IssueClient("root", time.Now())
	if err != nil {
		return nil, err
	}
	c.Client = leaf
	return leaf, nil
}
