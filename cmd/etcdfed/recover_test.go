package main

import (
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	etcdfedv1 "github.com/etcdfed/etcdfed/api/v1alpha1"
)

// A recovery is refused at the CLI, before anything is written, on a ring
// that has quorum, that has not formed, or for a member it does not have.
func TestRecoveryRefusal(t *testing.T) {
	ring := func(status metav1.ConditionStatus, reason string) *etcdfedv1.EtcdCluster {
		ec := &etcdfedv1.EtcdCluster{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "main"}}
		ec.Status.ClusterID = "c1"
		ec.Status.Members = []etcdfedv1.MemberStatus{{Name: "main-0"}, {Name: "main-1"}, {Name: "main-2"}}
		ec.Status.Conditions = []metav1.Condition{{Type: etcdfedv1.ConditionAvailable, Status: status, Reason: reason, Message: "m"}}
		return ec
	}
	for _, tc := range []struct {
		name, from, backup string
		ec                 *etcdfedv1.EtcdCluster
		want               string // "" means allowed
	}{
		{"quorate ring refused", "", "", ring(metav1.ConditionTrue, etcdfedv1.ReasonQuorate), "refusing to recover EtcdCluster team-a/main: it has quorum"},
		{"not formed", "", "", func() *etcdfedv1.EtcdCluster {
			ec := ring(metav1.ConditionFalse, etcdfedv1.ReasonNotBootstrapped)
			ec.Status.ClusterID = ""
			return ec
		}(), "has not formed yet"},
		{"unknown member", "main-7", "", ring(metav1.ConditionFalse, etcdfedv1.ReasonQuorumLost), `has no member "main-7"`},
		{"quorum lost", "", "", ring(metav1.ConditionFalse, etcdfedv1.ReasonQuorumLost), ""},
		{"no quorum, not declared yet: the hub waits for the declaration", "main-1", "", ring(metav1.ConditionFalse, etcdfedv1.ReasonNoQuorum), ""},
		{"from a backup on a quorate ring refused", "", "latest", ring(metav1.ConditionTrue, etcdfedv1.ReasonQuorate), "it has quorum"},
		{"from a backup without spec.backup refused", "", "latest", ring(metav1.ConditionFalse, etcdfedv1.ReasonQuorumLost), "has no spec.backup"},
		{"from a backup", "", "latest", func() *etcdfedv1.EtcdCluster {
			ec := ring(metav1.ConditionFalse, etcdfedv1.ReasonQuorumLost)
			ec.Spec.Backup = &etcdfedv1.BackupSpec{Schedule: "@hourly", Store: etcdfedv1.BackupStore{URL: "file:///b"}}
			return ec
		}(), ""},
		{"both refused", "main-1", "latest", ring(metav1.ConditionFalse, etcdfedv1.ReasonQuorumLost), "not both"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := recoveryRefusal(tc.ec, etcdfedv1.RecoveryRequest{FromMember: tc.from, FromBackup: tc.backup})
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Fatalf("error %v, want %q", err, tc.want)
			}
		})
	}
	r := etcdfedv1.RecoveryRequest{FromMember: "main-1", RequestedAt: time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)}
	back, err := etcdfedv1.ParseRecoveryRequest(r.String())
	if err != nil || back != r {
		t.Fatalf("round trip %q: %+v, %v", r.String(), back, err)
	}
	if _, err := etcdfedv1.ParseRecoveryRequest(`{"fromMember":"main-1"}`); err == nil {
		t.Fatal("a request without requestedAt was accepted")
	}
	b := etcdfedv1.RecoveryRequest{FromBackup: "latest", RequestedAt: r.RequestedAt}
	if back, err := etcdfedv1.ParseRecoveryRequest(b.String()); err != nil || back != b {
		t.Fatalf("round trip %q: %+v, %v", b.String(), back, err)
	}
	if _, err := etcdfedv1.ParseRecoveryRequest(`{"fromMember":"main-1","fromBackup":"latest","requestedAt":"2026-11-23T12:00:00Z"}`); err == nil {
		t.Fatal("a request from a member and a backup was accepted")
	}
}
