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
		{"a take-over held for the CA's key", ring(func(ec *etcdfedv1.EtcdCluster) {
			ec.Status.ClusterID = ""
			ec.Status.TakeOver = &etcdfedv1.TakeOverStatus{Phase: etcdfedv1.TakeOverHeld}
		}), ""},
		{"a take-over under way", ring(func(ec *etcdfedv1.EtcdCluster) {
			ec.Status.ClusterID = ""
			ec.Status.TakeOver = &etcdfedv1.TakeOverStatus{Phase: etcdfedv1.TakeOverTakingOver}
		}), "has not formed"},
		{"already rotating", ring(func(ec *etcdfedv1.EtcdCluster) {
			ec.Status.CARotation = &etcdfedv1.CARotationStatus{Phase: etcdfedv1.CARotationReissuing, MembersDone: 1, MembersTotal: 3}
		}), "already rotating its CA (phase Reissuing, 1 of 3"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			wantRefusal(t, caRotationRefusal(tc.ec), tc.want)
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

// `etcdfed rotate-ca --continue` answers only a hold under way, naming it
// by its heldSince, and keeps the rotation's request (its time and its
// hold) as it was.
func TestCAContinueRequest(t *testing.T) {
	requested := time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC)
	held := metav1.NewTime(requested.Add(3 * time.Minute))
	ring := func(mut func(*etcdfedv1.EtcdCluster)) *etcdfedv1.EtcdCluster {
		ec := &etcdfedv1.EtcdCluster{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "main"}}
		ec.Annotations = map[string]string{etcdfedv1.AnnotationRotateCA: etcdfedv1.CARotationRequest{RequestedAt: requested, HoldAfterTrusting: true}.String()}
		ec.Status.CARotation = &etcdfedv1.CARotationStatus{Phase: etcdfedv1.CARotationTrusting, RequestedAt: &metav1.Time{Time: requested}, HeldSince: &held,
			MembersDone: 3, MembersTotal: 3, HoldAfterTrusting: true, Message: "CA rotation held after Trusting: ..."}
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
		{"held", ring(nil), ""},
		{"no rotation", ring(func(ec *etcdfedv1.EtcdCluster) { ec.Status.CARotation = nil }), "not rotating its CA"},
		{"completed", ring(func(ec *etcdfedv1.EtcdCluster) { ec.Status.CARotation.Phase = etcdfedv1.CARotationCompleted }), "not rotating its CA"},
		{"not held yet", ring(func(ec *etcdfedv1.EtcdCluster) {
			ec.Status.CARotation.HeldSince, ec.Status.CARotation.MembersDone = nil, 1
			ec.Status.CARotation.Message = "restarting main-2"
		}), "does not hold yet (phase Trusting, 1 of 3 members done: restarting main-2); restart the consumers"},
		{"already answered", ring(func(ec *etcdfedv1.EtcdCluster) {
			ec.Status.CARotation.Phase, ec.Status.CARotation.ContinuedAt = etcdfedv1.CARotationReissuing, &held
		}), "past its hold (phase Reissuing)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req, err := caContinueRequest(tc.ec)
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Fatalf("error %v, want %q", err, tc.want)
			case tc.want != "":
				return
			}
			if !req.RequestedAt.Equal(requested) || !req.HoldAfterTrusting || req.ContinueHold == nil || !req.ContinueHold.Equal(held.Time) {
				t.Errorf("request %+v; want the rotation's request time, its hold, and continueHold %s", req, held.Time)
			}
			back, err := etcdfedv1.ParseCARotationRequest(req.String())
			if err != nil || back.ContinueHold == nil || !back.ContinueHold.Equal(held.Time) {
				t.Errorf("round trip %q: %+v, %v", req.String(), back, err)
			}
		})
	}
}
