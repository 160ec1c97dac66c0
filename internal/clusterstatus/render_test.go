package clusterstatus

import (
	"bytes"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	etcdfedv1 "github.com/etcdfed/etcdfed/api/v1alpha1"
)

func TestRender(t *testing.T) {
	now := time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)
	since := metav1.NewTime(now.Add(-90 * time.Second))
	ec := &etcdfedv1.EtcdCluster{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "main"},
		Spec:       etcdfedv1.EtcdClusterSpec{Replicas: 3, Version: "3.6.16", DNS: etcdfedv1.DNSSpec{Domain: "etcd.example.com"}},
		Status: etcdfedv1.EtcdClusterStatus{
			ClusterID: "abc", MemberSummary: "3/3", ZoneSummary: "3 (1/1/1)", Leader: "main-0",
			Members: []etcdfedv1.MemberStatus{
				{Name: "main-0", ID: "8e9e05c52164694d", Cluster: "c1", Zone: "zone-a", Role: etcdfedv1.RoleLeader, Ready: true, Address: "127.0.10.2", Incarnation: 1, Since: &since, Object: "default-main-0-i1-abcdefgh"},
				{Name: "main-1", Cluster: "c2", Role: etcdfedv1.RoleLearner},
			},
			Conditions: []metav1.Condition{{Type: "Available", Status: "True", Reason: "Quorate", Message: "etcd abc\nhas a leader", LastTransitionTime: since}},
			Operation:  &etcdfedv1.MembershipOperation{Type: "Add", Member: "main-1", Reason: "ScaleUp", Step: "Promote", StartedAt: since},
			Endpoints:  []string{"https://main-0.etcd.example.com:2379"},
		},
	}
	var b bytes.Buffer
	if err := Render(&b, ec, now); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	for _, want := range []string{
		"EtcdCluster default/main: 3 replicas",
		"leader main-0",
		"main-0  c1       zone-a  Leader   true   127.0.10.2  8e9e05c52164694d  1            90s    default-main-0-i1-abcdefgh",
		"main-1  c2       -       Learner  false  -",
		"Available  True    Quorate  90s  etcd abc has a leader",
		"In progress: Add main-1 (ScaleUp), step Promote",
		"Endpoints: https://main-0.etcd.example.com:2379",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
}

func TestRenderBackup(t *testing.T) {
	now := time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)
	ago := func(d time.Duration) metav1.Time { return metav1.NewTime(now.Add(-d)) }
	next := metav1.NewTime(now.Add(time.Hour))
	ec := &etcdfedv1.EtcdCluster{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "main"},
		Spec: etcdfedv1.EtcdClusterSpec{Replicas: 3, Version: "3.6.16", DNS: etcdfedv1.DNSSpec{Domain: "etcd.example.com"},
			Backup: &etcdfedv1.BackupSpec{Schedule: "0 * * * *", Store: etcdfedv1.BackupStore{URL: "s3://b/p"}}},
		Status: etcdfedv1.EtcdClusterStatus{Backup: &etcdfedv1.BackupStatus{
			NextScheduleTime: &next, Retained: 7,
			LastSuccess: &etcdfedv1.BackupSnapshot{Time: ago(20 * time.Minute), Revision: 1234, SizeBytes: 4096, Member: "main-1", Location: "s3://b/p/default/main/abc/x.db"},
			LastFailure: &etcdfedv1.BackupFailure{Time: ago(90 * time.Minute), Reason: etcdfedv1.BackupReasonStoreUnreachable, Message: "dial tcp:\nrefused"},
		}},
	}
	var b bytes.Buffer
	if err := Render(&b, ec, now); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"Backups: 0 * * * * to s3://b/p, next 2026-11-22T13:00:00Z",
		"last snapshot: 20m ago, revision 1234, 4096 bytes, from main-1: s3://b/p/default/main/abc/x.db (7 retained)",
		"last failure: 90m ago, StoreUnreachable: dial tcp: refused",
	} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, b.String())
		}
	}
}

// A CA rotation held after Trusting says so with the command that answers
// it; a completed one is not printed.
func TestRenderCARotation(t *testing.T) {
	now := time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)
	ago := func(d time.Duration) *metav1.Time { t := metav1.NewTime(now.Add(-d)); return &t }
	ec := &etcdfedv1.EtcdCluster{
		ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "main"},
		Spec:       etcdfedv1.EtcdClusterSpec{Replicas: 3, Version: "3.6.16", DNS: etcdfedv1.DNSSpec{Domain: "etcd.example.com"}},
		Status: etcdfedv1.EtcdClusterStatus{CARotation: &etcdfedv1.CARotationStatus{
			Phase: etcdfedv1.CARotationTrusting, MembersDone: 3, MembersTotal: 3, PhaseStartedAt: ago(3 * time.Minute),
			HoldAfterTrusting: true, HeldSince: ago(2 * time.Minute), Message: "CA rotation held after Trusting:\nrestart remote (caReload: AtStart)",
		}},
	}
	var b bytes.Buffer
	if err := Render(&b, ec, now); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"CA rotation: Trusting, 3 of 3 members, phase for 3m",
		"held for 2m: restart the consumers that read their CA only at start, then: etcdfed rotate-ca main -n team-a --continue",
		"CA rotation held after Trusting: restart remote (caReload: AtStart)",
	} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, b.String())
		}
	}
	ec.Status.CARotation.Phase, ec.Status.CARotation.HeldSince = etcdfedv1.CARotationCompleted, nil
	b.Reset()
	if err := Render(&b, ec, now); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(b.String(), "CA rotation") {
		t.Errorf("a completed rotation printed:\n%s", b.String())
	}
}

// A migration under way: the Move in flight, the moves left, whether they
// are paused, and the failure tolerance etcd's member list gives now.
func TestRenderMigration(t *testing.T) {
	now := time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)
	since := metav1.NewTime(now.Add(-40 * time.Second))
	one := int32(1)
	ec := &etcdfedv1.EtcdCluster{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "main"},
		Spec:       etcdfedv1.EtcdClusterSpec{Replicas: 3, Version: "3.6.16", DNS: etcdfedv1.DNSSpec{Domain: "etcd.example.com"}},
		Status: etcdfedv1.EtcdClusterStatus{
			Operation: &etcdfedv1.MembershipOperation{Type: etcdfedv1.OperationMove, Member: "main-1", Reason: "Spread", Step: "Promote", StartedAt: since,
				From: &etcdfedv1.FailureDomain{Cluster: "c1"}, To: &etcdfedv1.FailureDomain{Cluster: "c4"}},
			FailuresTolerated: &one, PendingMoves: 3,
		},
	}
	render := func() string {
		var b bytes.Buffer
		if err := Render(&b, ec, now); err != nil {
			t.Fatal(err)
		}
		return b.String()
	}
	for _, want := range []string{
		"In progress: Move main-1 (Spread), step Promote, for 40s",
		"Failure tolerance: 1 voting member(s) can fail and etcd keeps its quorum",
		"Moves: 3 member(s) still to move, one at a time, make before break",
	} {
		if out := render(); !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	ec.Spec.Topology.PauseMoves = true
	if out := render(); !strings.Contains(out, "Moves: 3 member(s) still to move, paused (spec.topology.pauseMoves)") {
		t.Errorf("paused moves not said:\n%s", out)
	}
}

func TestRenderAdoption(t *testing.T) {
	now := time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)
	retired := metav1.NewTime(now.Add(-30 * time.Second))
	ec := &etcdfedv1.EtcdCluster{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "main"},
		Spec: etcdfedv1.EtcdClusterSpec{Replicas: 3, Version: "3.6.16", DNS: etcdfedv1.DNSSpec{Domain: "etcd.example.com"},
			Adopt: &etcdfedv1.AdoptSpec{Endpoints: []string{"https://10.0.0.1:2379"}}},
		Status: etcdfedv1.EtcdClusterStatus{Adoption: &etcdfedv1.AdoptionStatus{
			Phase: etcdfedv1.AdoptionJoined, Summary: "Joined: 1/2 retired, 3/3 joined", Message: "adopted: set spec.adopt.retire",
			Originals: []etcdfedv1.AdoptedMember{
				{Name: "node-a", ID: "10", ClientURLs: []string{"https://10.0.0.1:2379"}, Retired: &retired},
				{Name: "node-b", ID: "11", ClientURLs: []string{"https://10.0.0.2:2379"}},
			},
		}},
	}
	var b bytes.Buffer
	if err := Render(&b, ec, now); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	for _, want := range []string{
		"Adoption: Joined: 1/2 retired, 3/3 joined",
		"  adopted: set spec.adopt.retire",
		"original node-a [10] https://10.0.0.1:2379: retired 30s ago",
		"original node-b [11] https://10.0.0.2:2379: serving, old endpoint works until it is retired",
		`etcdfed adopt main -n default --retire (or kubectl patch etcdcluster main -n default --type merge -p '{"spec":{"adopt":{"retire":true}}}')`,
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
}
