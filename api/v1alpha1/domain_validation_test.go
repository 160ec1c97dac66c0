package v1alpha1_test

import (
	"context"
	"testing"

	"github.com/etcdfed/etcdfed/dev/testenv"
)

// TestSingleLabelDomainRefused: a ring's domain has at least two labels.
// Before, spec.dns.domain: com (or local, or the company's one-label
// internal suffix) was accepted, and the first ring to claim it kept every
// later ring under it from serving (domain squatting).
func TestSingleLabelDomainRefused(t *testing.T) {
	apiserver := testenv.Shared(t, "crd-validation")
	ns := testenv.NamespaceT(t, apiserver, "domain")
	for _, d := range []string{"com", "local", "etcd"} {
		ec := validCluster(ns)
		ec.Spec.DNS.Domain = d
		wantInvalid(t, apiserver.Client.Create(context.Background(), ec), "domain must have at least two labels")
	}
	ec := validCluster(ns)
	ec.Spec.DNS.Domain = "etcd.internal"
	if err := apiserver.Client.Create(context.Background(), ec); err != nil {
		t.Fatalf("two labels refused: %v", err)
	}
}
