package v1alpha1_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	etcdfedv1 "github.com/etcdfed/etcdfed/api/v1alpha1"
	"github.com/etcdfed/etcdfed/dev/testenv"
)

// TestRevokedCertificatesValidation: spec.tls.revokedCertificates takes
// serial numbers as `etcdfed client-cert` prints them (lowercase hex
// without leading zeros) and refuses at admission, saying why: upper
// case, openssl's colons, a leading zero, a serial longer than 20 bytes,
// a duplicate, more than 512, and any serial on a ring without TLS. A
// serial added to and removed from a running ring's spec is accepted.
func TestRevokedCertificatesValidation(t *testing.T) {
	apiserver := testenv.Shared(t, "crd-validation")
	ns := testenv.NamespaceT(t, apiserver, "revoked")
	ctx := context.Background()
	ok := validCluster(ns)
	ok.Spec.TLS.RevokedCertificates = []string{"5c1f2a9e0b7d4c3e8f6a1b2c3d4e5f60", "1", strings.Repeat("f", 40)}
	if err := apiserver.Client.Create(ctx, ok); err != nil {
		t.Fatalf("valid serials rejected: %v", err)
	}
	ok.Spec.TLS.RevokedCertificates = append(ok.Spec.TLS.RevokedCertificates, "abc")
	if err := apiserver.Client.Update(ctx, ok); err != nil {
		t.Fatalf("a serial added to a ring's spec rejected: %v", err)
	}
	ok.Spec.TLS.RevokedCertificates = nil
	if err := apiserver.Client.Update(ctx, ok); err != nil {
		t.Fatalf("serials removed from a ring's spec rejected: %v", err)
	}
	many := make([]string, 513)
	for i := range many {
		many[i] = fmt.Sprintf("%x", i+1)
	}
	for _, tc := range []struct {
		name    string
		serials []string
		tls     etcdfedv1.TLSMode
		want    string
	}{
		{"upper case", []string{"5C1F"}, "", "spec.tls.revokedCertificates[0]: Invalid value"},
		{"openssl's colons", []string{"5c:1f"}, "", "spec.tls.revokedCertificates[0]: Invalid value"},
		{"leading zero", []string{"05c1f"}, "", "spec.tls.revokedCertificates[0]: Invalid value"},
		{"zero", []string{"0"}, "", "spec.tls.revokedCertificates[0]: Invalid value"},
		{"empty", []string{""}, "", "spec.tls.revokedCertificates[0]: Invalid value"},
		{"longer than 20 bytes", []string{strings.Repeat("f", 41)}, "", "spec.tls.revokedCertificates[0]: Too long"},
		{"duplicate", []string{"abc", "abc"}, "", "spec.tls.revokedCertificates[1]: Duplicate value"},
		{"too many", many, "", "spec.tls.revokedCertificates: Too many: 513: must have at most 512 items"},
		{"without TLS", []string{"abc"}, etcdfedv1.TLSDisabled, "tls.revokedCertificates needs TLS"},
	} {
		c := validCluster(ns)
		c.Spec.TLS.RevokedCertificates = tc.serials
		c.Spec.TLS.Mode = tc.tls
		err := apiserver.Client.Create(ctx, c)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: want an error containing %q, got %v", tc.name, tc.want, err)
		}
	}
}
