// Package dnstest starts real DNS tools for tests: BIND9's named on a
// loopback port with a temporary configuration, and dig. A missing tool
// fails the test with the command that installs it; only -short skips.
package dnstest

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/etcdfed/etcdfed/dev/testenv"
	"github.com/etcdfed/etcdfed/dev/testenv/testproc"
)

// InstallHint tells how to get the Debian packages the DNS tests need.
const InstallHint = "install the DNS test dependencies: run `make system-deps` (Debian: apt-get install -y bind9 bind9-utils dnsutils dnsperf)"

// RequireTool returns the path of a command or fails the test. Under
// -short (make test-unit) the test is skipped instead, saying why: tests
// that run real processes belong to the full run.
func RequireTool(t testing.TB, name string) string {
	t.Helper()
	if testing.Short() {
		t.Skipf("-short: this test runs %s, a real process; run it without -short (make test)", name)
	}
	if p, err := exec.LookPath(name); err == nil {
		return p
	}
	for _, dir := range []string{"/usr/sbin", "/usr/bin", "/sbin"} {
		if p := filepath.Join(dir, name); isExecutable(p) {
			return p
		}
	}
	t.Fatalf("%s not found: %s", name, InstallHint)
	return ""
}

func isExecutable(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && !fi.IsDir() && fi.Mode()&0o111 != 0
}

// Key is a TSIG key for named's configuration.
type Key struct {
	Name      string // absolute
	Algorithm string // "hmac-sha256"
	Secret    string // base64
}

// Zone is one primary zone named serves.
type Zone struct {
	Origin   string // absolute
	ZoneFile string // master file content
	// UpdateKey allows RFC 2136 updates signed with this key name.
	UpdateKey string
	// TransferKey allows AXFR signed with this key name.
	TransferKey string
}

// BIND is a running named.
type BIND struct {
	Addr string // 127.0.0.1:port, UDP and TCP
	Dir  string
}

// StartBIND runs named in the foreground on a free loopback port with the
// given keys and zones, waits until it answers, and stops it when the test
// ends.
func StartBIND(t testing.TB, keys []Key, zones []Zone) *BIND {
	t.Helper()
	named := RequireTool(t, "named")
	dir := t.TempDir()
	port := FreePort(t)
	conf := namedConf(t, dir, port, keys, zones)
	confFile := filepath.Join(dir, "named.conf")
	if err := os.WriteFile(confFile, []byte(conf), 0o644); err != nil {
		t.Fatal(err)
	}
	logFile, err := os.Create(filepath.Join(dir, "named.log"))
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(named, "-g", "-4", "-n", "1", "-c", confFile)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	// It dies with the test binary, even one killed by its timeout.
	if err := testproc.Start(cmd); err != nil {
		t.Fatalf("start named: %v", err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-done
		logFile.Close()
	})
	b := &BIND{Addr: fmt.Sprintf("127.0.0.1:%d", port), Dir: dir}
	b.waitAnswering(t, zones, done)
	return b
}

// waitAnswering waits until named answers for the first zone (bounded,
// not timed); it fails the test when named exits (done closed) or never
// answers.
func (b *BIND) waitAnswering(t testing.TB, zones []Zone, done <-chan struct{}) {
	t.Helper()
	probe := "."
	if len(zones) > 0 {
		probe = zones[0].Origin
	}
	c := &dns.Client{Timeout: 500 * time.Millisecond}
	for i := 0; ; i++ {
		select {
		case <-done:
			log, _ := os.ReadFile(filepath.Join(b.Dir, "named.log"))
			t.Fatalf("named exited:\n%s", log)
		default:
		}
		m := new(dns.Msg).SetQuestion(probe, dns.TypeSOA)
		if r, _, err := c.Exchange(m, b.Addr); err == nil && r.Rcode == dns.RcodeSuccess {
			return
		}
		if i == 200 {
			log, _ := os.ReadFile(filepath.Join(b.Dir, "named.log"))
			t.Fatalf("named did not answer on %s:\n%s", b.Addr, log)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// namedConf is named's configuration: authoritative only, on port of
// 127.0.0.1, with the keys and the zones (their files written into dir).
func namedConf(t testing.TB, dir string, port int, keys []Key, zones []Zone) string {
	t.Helper()
	var conf strings.Builder
	fmt.Fprintf(&conf, `options {
	directory %q;
	pid-file %q;
	listen-on port %d { 127.0.0.1; };
	listen-on-v6 { none; };
	recursion no;
	dnssec-validation no;
	session-keyfile %q;
	managed-keys-directory %q;
	minimal-responses no-auth;
	notify no;
};
controls { };
`, dir, filepath.Join(dir, "named.pid"), port, filepath.Join(dir, "session.key"), dir)
	for _, k := range keys {
		fmt.Fprintf(&conf, "key %q { algorithm %s; secret %q; };\n", k.Name, k.Algorithm, k.Secret)
	}
	for i, z := range zones {
		file := filepath.Join(dir, fmt.Sprintf("db.%d", i))
		if err := os.WriteFile(file, []byte(z.ZoneFile), 0o644); err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(&conf, "zone %q {\n\ttype primary;\n\tfile %q;\n", strings.TrimSuffix(z.Origin, "."), file)
		if z.UpdateKey != "" {
			fmt.Fprintf(&conf, "\tallow-update { key %q; };\n", z.UpdateKey)
		}
		if z.TransferKey != "" {
			fmt.Fprintf(&conf, "\tallow-transfer { key %q; };\n", z.TransferKey)
		} else {
			conf.WriteString("\tallow-transfer { none; };\n")
		}
		conf.WriteString("};\n")
	}
	return conf.String()
}

// FreePort returns a loopback port that was free for both TCP and UDP.
func FreePort(t testing.TB) int {
	t.Helper()
	return testenv.FreePort(t)
}

// Dig runs dig against addr (host:port) with args and returns its output.
// A failing dig fails the test.
func Dig(t testing.TB, addr string, args ...string) string {
	t.Helper()
	dig := RequireTool(t, "dig")
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	full := append([]string{"@" + host, "-p", port, "+time=5", "+tries=2"}, args...)
	cmd := exec.CommandContext(ctx, dig, full...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		t.Fatalf("dig %s: %v\n%s", strings.Join(full, " "), err, out.String())
	}
	return out.String()
}
