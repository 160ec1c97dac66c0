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
			wantRefusal(t, recoveryRefusal(tc.ec, etcdfedv1.RecoveryRequest{FromMember: tc.from, FromBackup: tc.backup}), tc.want)
		})
	}
	r := etcdfedv1.RecoveryRequest{FromMember: "main-1", RequestedAt: time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC), UID: "u1"}
	back, err := etcdfedv1.ParseRecoveryRequest(r.String())
	if err != nil || back != r {
		t.Fatalf("round trip %q: %+v, %v", r.String(), back, err)
	}
	if _, err := etcdfedv1.ParseRecoveryRequest(`{"fromMember":"main-1"}`); err == nil {
		t.Fatal("a request without requestedAt was accepted")
	}
	if _, err := etcdfedv1.ParseRecoveryRequest(`{"fromMember":"main-1","requestedAt":"2026-11-23T12:00:00Z"}`); err == nil || !strings.Contains(err.Error(), "uid is missing") {
		t.Fatalf("a request without a uid: %v", err)
	}
	b := etcdfedv1.RecoveryRequest{FromBackup: "latest", RequestedAt: r.RequestedAt, UID: "u2"}
	if back, err := etcdfedv1.ParseRecoveryRequest(b.String()); err != nil || back != b {
		t.Fatalf("round trip %q: %+v, %v", b.String(), back, err)
	}
	if _, err := etcdfedv1.ParseRecoveryRequest(`{"fromMember":"main-1","fromBackup":"latest","requestedAt":"2026-11-23T12:00:00Z"}`); err == nil {
		t.Fatal("a request from a member and a backup was accepted")
	}
}

// Before a recovery every member the hub lists as to be fenced must be
// named in --confirm-fenced; the command shows them, with why, and how to
// confirm. A survivor or an unknown name is refused; the confirmation
// records each member's ID.
func TestFencingConfirmation(t *testing.T) {
	now := time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)
	ec := &etcdfedv1.EtcdCluster{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "main"}}
	ec.Status.Members = []etcdfedv1.MemberStatus{{Name: "main-0", ID: "a0"}, {Name: "main-1", ID: "a1"}, {Name: "main-2", ID: "a2"}}
	ec.Status.QuorumLoss = &etcdfedv1.QuorumLossStatus{
		Survivors: []etcdfedv1.QuorumMember{{Name: "main-0", ID: "a0", Cluster: "member-1", RaftIndex: 9}},
		MustFence: []etcdfedv1.QuorumMember{
			{Name: "main-1", ID: "a1", Cluster: "member-2", Why: "cluster member-2 not visible: it may be alive and serving"},
			{Name: "main-2", ID: "a2", Cluster: "member-3", Why: "cluster member-3 not visible: it may be alive and serving"},
		},
	}
	_, err := fencingConfirmation(ec, nil, now)
	for _, want := range []string{"must be fenced", "main-1 [a1] in member-2: cluster member-2 not visible", "main-2 [a2] in member-3", "--confirm-fenced main-1,main-2"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("no confirmation: %v, want %q", err, want)
		}
	}
	if _, err := fencingConfirmation(ec, []string{"main-1"}, now); err == nil || !strings.Contains(err.Error(), "main-2 [a2]") {
		t.Errorf("one of two confirmed: %v", err)
	}
	if _, err := fencingConfirmation(ec, []string{"main-1", "main-2", "main-0"}, now); err == nil || !strings.Contains(err.Error(), "survivor") {
		t.Errorf("a survivor confirmed fenced: %v", err)
	}
	if _, err := fencingConfirmation(ec, []string{"main-1", "main-2", "main-9"}, now); err == nil || !strings.Contains(err.Error(), `no member "main-9"`) {
		t.Errorf("an unknown member confirmed fenced: %v", err)
	}
	f, err := fencingConfirmation(ec, []string{"main-1", "main-2"}, now)
	if err != nil || f == nil || len(f.Members) != 2 || f.Members[0] != (etcdfedv1.FencedMember{Name: "main-1", ID: "a1"}) || !f.ConfirmedAt.Equal(now) {
		t.Fatalf("confirmation %+v, %v", f, err)
	}
	back, err := etcdfedv1.ParseFencingConfirmation(f.String())
	if err != nil || back.String() != f.String() {
		t.Errorf("round trip %q: %+v %v", f.String(), back, err)
	}
	// Nothing to fence (every lost voter's data is lost): no flag needed.
	ec.Status.QuorumLoss.MustFence = nil
	if f, err := fencingConfirmation(ec, nil, now); err != nil || f != nil {
		t.Errorf("nothing to fence: %+v %v", f, err)
	}
	if _, err := splitNames("main-1,main-1"); err == nil {
		t.Error("a name given twice was accepted")
	}
}
