package main

import (
	"context"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdfedv1 "github.com/etcdfed/etcdfed/api/v1alpha1"
	"github.com/etcdfed/etcdfed/hub/pki"
)

// TestClientCertRevoke: `etcdfed client-cert` prints the serial of the
// certificate it wrote; `etcdfed client-cert revoke` adds it to
// spec.tls.revokedCertificates of the ring (against a real apiserver),
// taken as printed, in openssl's colon form or from the certificate file,
// once only; bad input is refused before anything is read.
func TestClientCertRevoke(t *testing.T) {
	r := newRingWithCA(t, "revoke")
	api, ns, kubeconfig, ec := r.api, r.ns, r.kubeconfig, r.ec
	ctx := context.Background()
	run := func(args ...string) (string, error) {
		var out strings.Builder
		root.SetArgs(append(args, "--kubeconfig", kubeconfig, "--namespace", ns))
		root.SetOut(&out)
		root.SetErr(&strings.Builder{})
		err := root.Execute()
		return out.String(), err
	}
	issue := func() (dir, serial string) {
		t.Helper()
		dir = filepath.Join(t.TempDir(), "cert")
		out, err := run("client-cert", "main", "--out", dir)
		if err != nil {
			t.Fatal(err)
		}
		m := regexp.MustCompile(`(?m)^# serial ([0-9a-f]+) `).FindStringSubmatch(out)
		if m == nil {
			t.Fatalf("client-cert printed no serial:\n%s", out)
		}
		b, err := os.ReadFile(filepath.Join(dir, pki.FileClientCert))
		if err != nil {
			t.Fatal(err)
		}
		if s, _ := pki.Serial(b); pki.FormatSerial(s) != m[1] {
			t.Fatalf("client-cert printed serial %s; the certificate's is %s", m[1], pki.FormatSerial(s))
		}
		return dir, m[1]
	}
	revoked := func() []string {
		t.Helper()
		got := &etcdfedv1.EtcdCluster{}
		if err := api.Client.Get(ctx, client.ObjectKeyFromObject(ec), got); err != nil {
			t.Fatal(err)
		}
		return got.Spec.TLS.RevokedCertificates
	}
	_, first := issue()
	if _, err := run("client-cert", "revoke", "main", "--serial", first); err != nil {
		t.Fatal(err)
	}
	if got := revoked(); !slices.Equal(got, []string{first}) {
		t.Fatalf("spec.tls.revokedCertificates %v, want [%s]", got, first)
	}
	out, err := run("client-cert", "revoke", "main", "--serial", strings.ToUpper(first))
	if err != nil || !strings.Contains(out, "already") || len(revoked()) != 1 {
		t.Errorf("the same serial in upper case again: %v, %q, %v; want it listed once", err, out, revoked())
	}
	dir, second := issue()
	if _, err := run("client-cert", "revoke", "main", "--cert", filepath.Join(dir, pki.FileClientCert)); err != nil {
		t.Fatal(err)
	}
	if got := revoked(); !slices.Equal(got, []string{first, second}) {
		t.Fatalf("spec.tls.revokedCertificates %v, want [%s %s]", got, first, second)
	}
	colons := "0a:bc"
	if _, err := run("client-cert", "revoke", "main", "--serial", colons); err != nil {
		t.Fatal(err)
	}
	if got := revoked(); !slices.Contains(got, "abc") {
		t.Errorf("openssl's %s not listed as abc: %v", colons, got)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--serial", "xyz"}, "not a hex digit"},
		{[]string{"--serial", "0"}, "positive"},
		{[]string{"--cert", filepath.Join(dir, pki.FileClientKey)}, "no PEM certificate"},
		{nil, "--serial S or --cert FILE"},
	} {
		_, err := run(append([]string{"client-cert", "revoke", "main"}, tc.args...)...)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("revoke %v: %v, want %q", tc.args, err, tc.want)
		}
	}
}
