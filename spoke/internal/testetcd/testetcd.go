// Package testetcd runs a real single-member etcd (bin/etcd) for tests, on
// its own loopback address like a member pod of the local environment, with
// the member's TLS certificate.
package testetcd

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/etcdfed/etcdfed/dev/localenv/addr"
	"github.com/etcdfed/etcdfed/dev/testenv"
	"github.com/etcdfed/etcdfed/spoke/internal/testcerts"
)

// Etcd is a running etcd.
type Etcd struct {
	// IP is the loopback address it listens on (ports 2379, 2380, 2381).
	IP string
	// Name is the member name.
	Name string
	cmd  *exec.Cmd
	done chan struct{}
}

// FreeLoopbackIP returns a loopback address no one else uses: it holds a
// slot of the local environment's address plan (127.<slot>.0.0/16, see
// dev/localenv/addr) until the test ends, so it never collides with a
// running environment or another test. Linux routes all of 127/8 to lo.
func FreeLoopbackIP(t testing.TB) string {
	t.Helper()
	slot, err := addr.Acquire(0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(slot.Release)
	return slot.Node(1, 1, 0).String()
}

// Start runs a one-member etcd named name on ip with TLS from pair (nil:
// plain HTTP), advertising ip itself on :2380 and :2379: there is no DNS
// for dnsName, which Start does not use (the caller's client checks the
// certificate against it as its TLS server name). It waits for /readyz
// and stops the process when the test ends.
func Start(t testing.TB, ip, name, dnsName string, pair *testcerts.Pair) *Etcd {
	t.Helper()
	testenv.SkipIfShort(t, "etcd")
	bin, err := testenv.BinDir()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	scheme := "http"
	var tlsArgs []string
	if pair != nil {
		scheme = "https"
		for f, data := range map[string][]byte{"ca.crt": pair.CA, "tls.crt": pair.Cert, "tls.key": pair.Key} {
			if err := os.WriteFile(filepath.Join(dir, f), data, 0o600); err != nil {
				t.Fatal(err)
			}
		}
		tlsArgs = []string{
			"--cert-file=" + filepath.Join(dir, "tls.crt"), "--key-file=" + filepath.Join(dir, "tls.key"),
			"--trusted-ca-file=" + filepath.Join(dir, "ca.crt"), "--client-cert-auth=true",
			"--peer-cert-file=" + filepath.Join(dir, "tls.crt"), "--peer-key-file=" + filepath.Join(dir, "tls.key"),
			"--peer-trusted-ca-file=" + filepath.Join(dir, "ca.crt"), "--peer-client-cert-auth=true",
		}
	}
	// Advertise the IP: the test has no DNS for dnsName; the client checks
	// the certificate against dnsName through its TLS ServerName.
	args := append([]string{
		"--name=" + name,
		"--data-dir=" + filepath.Join(dir, "data"),
		fmt.Sprintf("--listen-peer-urls=%s://%s:2380", scheme, ip),
		fmt.Sprintf("--listen-client-urls=%s://%s:2379", scheme, ip),
		fmt.Sprintf("--listen-metrics-urls=http://%s:2381", ip),
		fmt.Sprintf("--initial-advertise-peer-urls=%s://%s:2380", scheme, ip),
		fmt.Sprintf("--advertise-client-urls=%s://%s:2379", scheme, ip),
		fmt.Sprintf("--initial-cluster=%s=%s://%s:2380", name, scheme, ip),
		"--initial-cluster-state=new",
		"--initial-cluster-token=test",
	}, tlsArgs...)
	cmd := exec.Command(filepath.Join(bin, "etcd"), args...)
	logf, err := os.Create(filepath.Join(dir, "etcd.log"))
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := testenv.StartProcess(cmd); err != nil {
		t.Fatal(err)
	}
	e := &Etcd{IP: ip, Name: name, cmd: cmd, done: make(chan struct{})}
	go func() { _ = cmd.Wait(); close(e.done) }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-e.done
		_ = logf.Close()
	})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for {
		resp, err := http.Get(fmt.Sprintf("http://%s:2381/readyz", ip))
		if err == nil {
			_ = resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return e
			}
		}
		select {
		case <-e.done:
			log, _ := os.ReadFile(filepath.Join(dir, "etcd.log"))
			t.Fatalf("etcd exited: %s", tail(string(log), 2000))
		case <-ctx.Done():
			t.Fatal("etcd did not become ready in a minute")
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// Stop kills the process.
func (e *Etcd) Stop() {
	_ = e.cmd.Process.Kill()
	<-e.done
}

func tail(s string, n int) string {
	s = strings.TrimSpace(s)
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}
