package v1alpha1_test

import (
	"context"
	"strings"
	"testing"

	etcdfedv1 "github.com/etcdfed/etcdfed/api/v1alpha1"
	"github.com/etcdfed/etcdfed/internal/testenv"
)

// TestClientsValidation: spec.clients entries a user may write are
// accepted; a member-cluster entry without a namespace, a bad name, a
// duplicate name and an unknown caReload are refused at admission, saying
// why.
func TestClientsValidation(t *testing.T) {
	apiserver := testenv.Shared(t, "crd-validation")
	ns := testenv.NamespaceT(t, apiserver, "clients")
	ctx := context.Background()
	ok := validCluster(ns)
	ok.Spec.Clients = []etcdfedv1.ClientSpec{
		{Name: "kube-apiserver", Cluster: "member-1", Namespace: "kube-system", SecretName: "etcd-client", CommonName: "kube-apiserver", CAReload: etcdfedv1.CAReloadAtStart},
		{Name: "app", CAReload: etcdfedv1.CAReloadOnChange},
		{Name: "capi", Namespace: "capi-system"},
	}
	if err := apiserver.Client.Create(ctx, ok); err != nil {
		t.Fatalf("valid clients rejected: %v", err)
	}
	for _, tc := range []struct {
		name    string
		clients []etcdfedv1.ClientSpec
		want    string
	}{
		{"member cluster without namespace", []etcdfedv1.ClientSpec{{Name: "a", Cluster: "member-1"}}, "namespace is required when cluster names a member cluster"},
		{"upper-case name", []etcdfedv1.ClientSpec{{Name: "App"}}, "spec.clients[0].name"},
		{"duplicate name", []etcdfedv1.ClientSpec{{Name: "a"}, {Name: "a"}}, "Duplicate value"},
		{"bad secret name", []etcdfedv1.ClientSpec{{Name: "a", SecretName: "Etcd_Client"}}, "spec.clients[0].secretName"},
		{"unknown caReload", []etcdfedv1.ClientSpec{{Name: "a", CAReload: "Sometimes"}}, `spec.clients[0].caReload: Unsupported value: "Sometimes": supported values: "OnChange", "AtStart"`},
	} {
		c := validCluster(ns)
		c.Spec.Clients = tc.clients
		err := apiserver.Client.Create(ctx, c)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: want an error containing %q, got %v", tc.name, tc.want, err)
		}
	}
}
