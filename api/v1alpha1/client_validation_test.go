package v1alpha1_test

import (
	"context"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	etcdfedv1 "github.com/etcdfed/etcdfed/api/v1alpha1"
	"github.com/etcdfed/etcdfed/dev/testenv"
)

// TestClientsValidation: spec.clients entries a user may write are
// accepted; a member-cluster entry without a namespace, a bad name, a
// duplicate name, an unknown caReload, the hub's own etcd users, one etcd
// user for two consumers, an unknown role, a prefix on a Root consumer
// and a lifetime out of bounds are refused at admission, saying why.
func TestClientsValidation(t *testing.T) {
	apiserver := testenv.Shared(t, "crd-validation")
	ns := testenv.NamespaceT(t, apiserver, "clients")
	ctx := context.Background()
	ok := validCluster(ns)
	ok.Spec.Clients = []etcdfedv1.ClientSpec{
		{Name: "kube-apiserver", Cluster: "member-1", Namespace: "kube-system", SecretName: "etcd-client", CommonName: "kube-apiserver", CAReload: etcdfedv1.CAReloadAtStart},
		{Name: "app", CAReload: etcdfedv1.CAReloadOnChange},
		{Name: "capi", Namespace: "capi-system", Role: etcdfedv1.ClientRoleRoot, CertificateLifetime: &metav1.Duration{Duration: 24 * time.Hour}},
		{Name: "audit", Role: etcdfedv1.ClientRoleReadOnly, KeyPrefix: "/registry/"},
		{Name: "svc", CommonName: "system:svc@team-a"},
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
		{"the root user", []etcdfedv1.ClientSpec{{Name: "root"}}, "must not be root or etcdfed-hub"},
		{"the hub's user", []etcdfedv1.ClientSpec{{Name: "a", CommonName: "etcdfed-hub"}}, "must not be root or etcdfed-hub"},
		{"one etcd user for two consumers", []etcdfedv1.ClientSpec{{Name: "a", CommonName: "b"}, {Name: "b"}}, "commonName (default name) must be unique"},
		{"unknown role", []etcdfedv1.ClientSpec{{Name: "a", Role: "Admin"}}, `spec.clients[0].role: Unsupported value: "Admin"`},
		{"prefix on a Root consumer", []etcdfedv1.ClientSpec{{Name: "a", Role: etcdfedv1.ClientRoleRoot, KeyPrefix: "/x/"}}, "keyPrefix limits ReadWrite and ReadOnly"},
		{"lifetime too short", []etcdfedv1.ClientSpec{{Name: "a", CertificateLifetime: &metav1.Duration{Duration: time.Minute}}}, "certificateLifetime must be between 1h and 8760h"},
		{"lifetime too long", []etcdfedv1.ClientSpec{{Name: "a", CertificateLifetime: &metav1.Duration{Duration: 2 * 8760 * time.Hour}}}, "certificateLifetime must be between 1h and 8760h"},
		{"common name with a space", []etcdfedv1.ClientSpec{{Name: "a", CommonName: "kube apiserver"}}, "spec.clients[0].commonName"},
	} {
		c := validCluster(ns)
		c.Spec.Clients = tc.clients
		err := apiserver.Client.Create(ctx, c)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: want an error containing %q, got %v", tc.name, tc.want, err)
		}
	}
}
