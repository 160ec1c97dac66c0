package main

import (
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	etcdfedv1 "github.com/etcdfed/etcdfed/api/v1alpha1"
)

// A CA rotation is refused at the CLI, before anything is written, for a
// ring without TLS, with a CA the user provides, not formed, or already
// rotating.
func TestCARotationRefusal(t *testing.T) {
	ring := func(mut func(*etcdfedv1.EtcdCluster)) *etcdfedv1.EtcdCluster {
		ec := &etcdfedv1.EtcdCluster{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "main"}}
		ec.Status.ClusterID = "c1"
		if mut != nil {
			mut(ec)
		}
		return ec
	}
	for _, tc := range []struct {
		name string
		ec   *etcdfedv1.EtcdCluster
		want string // "" means allowed
	}{
		{"a formed TLS ring", ring(nil), ""},
		{"after a completed rotation", ring(func(ec *etcdfedv1.EtcdCluster) {
			ec.Status.CARotation = &etcdfedv1.CARotationStatus{Phase: etcdfedv1.CARotationCompleted}
		}), ""},
		{"no TLS", ring(func(ec *etcdfedv1.EtcdCluster) { ec.Spec.TLS.Mode = etcdfedv1.TLSDisabled }), "without TLS"},
		{"a CA the user provides", ring(func(ec *etcdfedv1.EtcdCluster) { ec.Spec.TLS.CASecretName = "mine" }), "Secret mine"},
		{"not formed", ring(func(ec *etcdfedv1.EtcdCluster) { ec.Status.ClusterID = "" }), "has not formed"},
		{"already rotating", ring(func(ec *etcdfedv1.EtcdCluster) {
			ec.Status.CARotation = &etcdfedv1.CARotationStatus{Phase: etcdfedv1.CARotationReissuing, MembersDone: 1, MembersTotal: 3}
		}), "already rotating its CA (phase Reissuing, 1 of 3"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := caRotationRefusal(tc.ec)
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Fatalf("error %v, want %q", err, tc.want)
			}
		})
	}
	r := etcdfedv1.CARotationRequest{RequestedAt: time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)}
	back, err := etcdfedv1.ParseCARotationRequest(r.String())
	if err != nil || !back.RequestedAt.Equal(r.RequestedAt) {
		t.Fatalf("round trip %q: %+v, %v", r.String(), back, err)
	}
	if _, err := etcdfedv1.ParseCARotationRequest(`{}`); err == nil {
		t.Fatal("a request without requestedAt was accepted")
	}
}
