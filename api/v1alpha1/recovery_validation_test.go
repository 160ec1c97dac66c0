package v1alpha1_test

import (
	"context"
	"strings"
	"testing"

	etcdfedv1 "github.com/etcdfed/etcdfed/api/v1alpha1"
	"github.com/etcdfed/etcdfed/dev/testenv"
)

// failurePolicy.quorumLossRecovery takes Manual or Automatic, and
// EtcdMember's spec.forceNewCluster is bounded; against a real apiserver.
func TestRecoveryFieldsValidation(t *testing.T) {
	apiserver := testenv.Shared(t, "crd-validation")
	ctx := context.Background()
	ns := testenv.NamespaceT(t, apiserver, "recovery")
	for _, v := range []etcdfedv1.QuorumLossRecovery{etcdfedv1.QuorumLossRecoveryManual, etcdfedv1.QuorumLossRecoveryAutomatic} {
		ec := validCluster(ns)
		ec.Spec.FailurePolicy.QuorumLossRecovery = v
		if err := apiserver.Client.Create(ctx, ec); err != nil {
			t.Fatalf("quorumLossRecovery %s rejected: %v", v, err)
		}
	}
	ec := validCluster(ns)
	ec.Spec.FailurePolicy.QuorumLossRecovery = "Sometimes"
	wantInvalid(t, apiserver.Client.Create(ctx, ec), `spec.failurePolicy.quorumLossRecovery: Unsupported value: "Sometimes"`)

	m := validMember(ns)
	m.Spec.ForceNewCluster = "recover-20261123T120000Z"
	if err := apiserver.Client.Create(ctx, m); err != nil {
		t.Fatalf("forceNewCluster rejected: %v", err)
	}
	m = validMember(ns)
	m.Spec.ForceNewCluster = strings.Repeat("x", 65)
	wantInvalid(t, apiserver.Client.Create(ctx, m), "spec.forceNewCluster: Too long")
}
