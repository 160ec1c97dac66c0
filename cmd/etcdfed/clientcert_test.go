package main

import (
	"crypto/x509"
	"encoding/pem"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	etcdfedv1 "github.com/etcdfed/etcdfed/api/v1alpha1"
	"github.com/etcdfed/etcdfed/hub/pki"
)

// TestClientCertLifetime: `etcdfed client-cert`, against a real apiserver
// holding a ring's CA, issues a root certificate valid 24 hours by
// default and --duration when asked, and refuses a --duration beyond 7
// days (or not positive) with a message that says the bound and what to
// use instead, writing nothing. Before, every certificate of etcd's root
// user it issued was valid for a year, with nothing to revoke it.
func TestClientCertLifetime(t *testing.T) {
	r := newRingWithCA(t, "clientcert")
	ns, kubeconfig := r.ns, r.kubeconfig
	run := func(out string, extra ...string) error {
		root.SetArgs(append([]string{"client-cert", "main", "--out", out, "--kubeconfig", kubeconfig, "--namespace", ns}, extra...))
		root.SetOut(&strings.Builder{})
		root.SetErr(&strings.Builder{})
		return root.Execute()
	}
	life := func(dir string) time.Duration {
		t.Helper()
		b, err := os.ReadFile(filepath.Join(dir, pki.FileClientCert))
		if err != nil {
			t.Fatal(err)
		}
		block, _ := pem.Decode(b)
		c, err := x509.ParseCertificate(block.Bytes)
		if err != nil {
			t.Fatal(err)
		}
		if c.Subject.CommonName != etcdfedv1.EtcdRootUser {
			t.Errorf("common name %q", c.Subject.CommonName)
		}
		// Issued backdated by a few minutes.
		return c.NotAfter.Sub(c.NotBefore).Round(time.Hour)
	}
	def := filepath.Join(t.TempDir(), "default")
	if err := run(def); err != nil {
		t.Fatal(err)
	}
	if got := life(def); got != 24*time.Hour {
		t.Errorf("default lifetime %s, want 24h", got)
	}
	two := filepath.Join(t.TempDir(), "two")
	if err := run(two, "--duration", "2h"); err != nil {
		t.Fatal(err)
	}
	if got := life(two); got != 2*time.Hour {
		t.Errorf("--duration 2h gave %s", got)
	}
	for _, tc := range []struct{ d, want string }{
		{"8760h", "--duration 8760h0m0s is beyond the bound of 168h0m0s"},
		{"169h", "declare it in spec.clients"},
		{"0s", "must be positive"},
	} {
		out := filepath.Join(t.TempDir(), "refused")
		err := run(out, "--duration", tc.d)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("--duration %s: %v, want %q", tc.d, err, tc.want)
		}
		if _, err := os.Stat(out); !os.IsNotExist(err) {
			t.Errorf("--duration %s refused but %s written (%v)", tc.d, out, err)
		}
	}
	// Flags keep their values between runs of root in one process.
	if err := run(filepath.Join(t.TempDir(), "reset"), "--duration", pki.DefaultAdminClientValidity.String()); err != nil {
		t.Fatal(err)
	}
}
