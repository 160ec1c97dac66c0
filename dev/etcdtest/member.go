package etcdtest

import (
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

	"github.com/etcdfed/etcdfed/dev/testenv"
	"github.com/etcdfed/etcdfed/hub/pki"
)

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
	m.done, m.stopped = make(chan struct{}), false
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

// Stop kills one member's process by its pid.
func (m *Member) Stop() {
	if m.cmd == nil {
		return
	}
	m.stopped = true
	_ = m.cmd.Process.Kill()
	<-m.done
}

// Pause freezes the member's process (SIGSTOP) until Resume or the end of
// the test: its ports still accept connections and never answer, as a
// member behind a network partition looks to a client. It returns once
// every thread of the process is stopped: the signal is only queued when
// kill returns, and a thread runs on until it is next scheduled.
func (m *Member) Pause(t testing.TB) {
	t.Helper()
	if m.cmd == nil || m.Stopped() {
		t.Fatalf("etcdtest: %s is not running", m.Name)
	}
	if err := m.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatalf("etcdtest: pause %s: %v", m.Name, err)
	}
	t.Cleanup(m.Resume)
	deadline := time.Now().Add(10 * time.Second)
	for {
		running, err := runningThreads(m.cmd.Process.Pid)
		if err != nil {
			t.Fatalf("etcdtest: pause %s: %v", m.Name, err)
		}
		if running == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("etcdtest: pause %s: %d threads still not stopped after 10s", m.Name, running)
		}
		time.Sleep(time.Millisecond)
	}
}

// runningThreads counts the threads of process pid not in the stopped
// state (T in /proc/PID/task/TID/stat).
func runningThreads(pid int) (int, error) {
	dir := filepath.Join("/proc", strconv.Itoa(pid), "task")
	tasks, err := os.ReadDir(dir)
	if err != nil {
		return 0, err
	}
	n := 0
	for _, task := range tasks {
		b, err := os.ReadFile(filepath.Join(dir, task.Name(), "stat"))
		if err != nil {
			continue // the thread exited
		}
		// pid (comm) state ...: comm may hold spaces and parentheses.
		i := strings.LastIndexByte(string(b), ')')
		if i < 0 || i+2 >= len(b) {
			return 0, fmt.Errorf("%s/%s/stat: %q", dir, task.Name(), b)
		}
		if b[i+2] != 'T' {
			n++
		}
	}
	return n, nil
}

// Resume lets a paused member's process run again.
func (m *Member) Resume() {
	if m.cmd != nil && !m.Stopped() {
		_ = m.cmd.Process.Signal(syscall.SIGCONT)
	}
}

// died is the exit of a member's process that Stop did not cause, with
// the tail of its log, or nil.
func (m *Member) died() error {
	if m.stopped || !m.Stopped() {
		return nil
	}
	b, _ := os.ReadFile(filepath.Join(m.dir, "etcd.log"))
	return fmt.Errorf("%s exited on its own (%s); its log ends:\n%s", m.Name, m.cmd.ProcessState, tail(string(b), 1500))
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
