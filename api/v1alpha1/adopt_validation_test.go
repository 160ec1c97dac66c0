package v1alpha1_test

import (
	"context"
	"testing"

	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdfedv1 "github.com/etcdfed/etcdfed/api/v1alpha1"
	"github.com/etcdfed/etcdfed/dev/testenv"
)

func adoptingCluster(ns string) *etcdfedv1.EtcdCluster {
	ec := validCluster(ns)
	ec.Spec.TLS.CASecretName = "old-ca"
	ec.Spec.TLS.Auth = etcdfedv1.AuthDisabled
	ec.Spec.Adopt = &etcdfedv1.AdoptSpec{Endpoints: []string{"https://10.0.0.5:2379", "https://etcd-1.example.com:2379/"}}
	return ec
}

// spec.adopt: the rules a user meets, against a real apiserver.
func TestAdoptValidation(t *testing.T) {
	apiserver := testenv.Shared(t, "crd-validation")
	ctx := context.Background()
	ns := testenv.NamespaceT(t, apiserver, "adopt")
	c := apiserver.Client

	ok := adoptingCluster(ns)
	ok.Spec.Adopt.ClientSecretName = "old-client"
	ok.Spec.Adopt.Retire = true
	if err := c.Create(ctx, ok); err != nil {
		t.Fatalf("a valid spec.adopt rejected: %v", err)
	}

	for _, tc := range []struct {
		name string
		edit func(*etcdfedv1.EtcdCluster)
		want string
	}{
		{"no endpoint", func(ec *etcdfedv1.EtcdCluster) { ec.Spec.Adopt.Endpoints = nil },
			"spec.adopt.endpoints: Required value"},
		{"plain http", func(ec *etcdfedv1.EtcdCluster) { ec.Spec.Adopt.Endpoints = []string{"http://10.0.0.5:2379"} },
			"every adopt endpoint must be an https:// URL"},
		{"a path", func(ec *etcdfedv1.EtcdCluster) { ec.Spec.Adopt.Endpoints = []string{"https://10.0.0.5:2379/v3"} },
			"every adopt endpoint must be an https:// URL"},
		{"no scheme", func(ec *etcdfedv1.EtcdCluster) { ec.Spec.Adopt.Endpoints = []string{"10.0.0.5:2379"} },
			"every adopt endpoint must be an https:// URL"},
		{"twice the same", func(ec *etcdfedv1.EtcdCluster) {
			ec.Spec.Adopt.Endpoints = []string{"https://10.0.0.5:2379", "https://10.0.0.5:2379"}
		}, "Duplicate value"},
		{"too many", func(ec *etcdfedv1.EtcdCluster) {
			for i := range 10 {
				ec.Spec.Adopt.Endpoints = append(ec.Spec.Adopt.Endpoints, "https://10.0.1."+string(rune('0'+i))+":2379")
			}
		}, "must have at most 9 items"},
		{"no CA", func(ec *etcdfedv1.EtcdCluster) { ec.Spec.TLS.CASecretName = "" },
			"spec.adopt needs spec.tls.caSecretName"},
		{"TLS off", func(ec *etcdfedv1.EtcdCluster) { ec.Spec.TLS.Mode = etcdfedv1.TLSDisabled },
			"spec.adopt needs spec.tls.caSecretName"},
		{"auth left to the default", func(ec *etcdfedv1.EtcdCluster) { ec.Spec.TLS.Auth = "" },
			"spec.adopt needs spec.tls.auth set explicitly"},
		{"with a snapshot", func(ec *etcdfedv1.EtcdCluster) {
			ec.Spec.Bootstrap = fromSnapshot("latest", "team-a/main")
		}, "spec.adopt and spec.bootstrap exclude each other"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ec := adoptingCluster(ns)
			tc.edit(ec)
			wantInvalid(t, c.Create(ctx, ec), tc.want)
		})
	}

	// Fixed at creation: neither added to a founded ring nor dropped from
	// an adopted one; retire and the endpoints may change.
	got := &etcdfedv1.EtcdCluster{}
	if err := c.Get(ctx, client.ObjectKeyFromObject(ok), got); err != nil {
		t.Fatal(err)
	}
	got.Spec.Adopt.Retire = false
	got.Spec.Adopt.Endpoints = append(got.Spec.Adopt.Endpoints, "https://10.0.0.7:2379")
	if err := c.Update(ctx, got); err != nil {
		t.Fatalf("changing retire and the endpoints rejected: %v", err)
	}
	got.Spec.Adopt = nil
	wantInvalid(t, c.Update(ctx, got), "spec.adopt cannot be added or removed after creation")

	founded := validCluster(ns)
	founded.Spec.TLS.CASecretName = "ca"
	founded.Spec.TLS.Auth = etcdfedv1.AuthDisabled
	if err := c.Create(ctx, founded); err != nil {
		t.Fatal(err)
	}
	founded.Spec.Adopt = &etcdfedv1.AdoptSpec{Endpoints: []string{"https://10.0.0.5:2379"}}
	wantInvalid(t, c.Update(ctx, founded), "spec.adopt cannot be added or removed after creation")
}
