package drill

import (
	"errors"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	etcdfedv1 "github.com/etcdfed/etcdfed/api/v1alpha1"
)

func TestPreflightMigrate(t *testing.T) {
	for _, tc := range []struct {
		name   string
		edit   func(*etcdfedv1.EtcdCluster)
		to     []string
		target error
		says   string
	}{
		{name: "to three other clusters", to: []string{"member-4", "member-5", "member-6"}},
		{name: "one member stays", to: []string{"member-1", "member-5", "member-6"}},
		{name: "nothing to move", to: []string{"member-3", "member-2", "member-1"}, target: ErrBadInput, says: "already in"},
		{name: "no cluster", to: nil, target: ErrBadInput, says: "no member cluster"},
		{name: "named twice", to: []string{"member-4", "member-4"}, target: ErrBadInput, says: "named twice"},
		{name: "a list in one name", to: []string{"member-4,member-5"}, target: ErrBadInput, says: "want a member cluster's name"},
		{name: "cordoned target", to: []string{"member-4", "member-5"}, edit: func(ec *etcdfedv1.EtcdCluster) {
			ec.Spec.Topology.CordonedClusters = []string{"member-5"}
		}, target: ErrBadInput, says: "cordoned"},
		{name: "moves paused", to: []string{"member-4"}, edit: func(ec *etcdfedv1.EtcdCluster) { ec.Spec.Topology.PauseMoves = true }, target: ErrNotReady, says: "pauseMoves"},
		{name: "change in flight", to: []string{"member-4"}, edit: func(ec *etcdfedv1.EtcdCluster) {
			ec.Status.Operation = &etcdfedv1.MembershipOperation{Type: etcdfedv1.OperationMove, Member: "main-0", Step: "Promote"}
		}, target: ErrNotReady, says: "in flight"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ec := healthyRing()
			ec.Spec.Topology.Clusters = []string{"member-1", "member-2", "member-3"}
			if tc.edit != nil {
				tc.edit(ec)
			}
			p, err := PreflightMigrate(ec, tc.to)
			if tc.target == nil {
				if err != nil {
					t.Fatal(err)
				}
				if strings.Join(p.From, ",") != "member-1,member-2,member-3" || len(p.Members) != 5 || strings.Join(p.AllowedBefore, ",") != "member-1,member-2,member-3" || !p.Tolerant {
					t.Errorf("plan %+v", p)
				}
				return
			}
			if !errors.Is(err, tc.target) || !strings.Contains(err.Error(), tc.says) {
				t.Errorf("error %v, want %v saying %q", err, tc.target, tc.says)
			}
		})
	}
}

func TestMigratedAndOperations(t *testing.T) {
	t0 := time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)
	ring := func(at time.Duration, op *etcdfedv1.MembershipOperation, clusters ...string) Sample {
		s := Sample{At: t0.Add(at), Available: true, AllReady: true, Tolerant: true, ReadyMembers: len(clusters), Replicas: len(clusters), Operation: op}
		for i, c := range clusters {
			s.Members = append(s.Members, MemberSample{Name: "m-" + string(rune('0'+i)), Cluster: c, Zone: "z", Ready: true})
		}
		return s
	}
	move := func(member string, began time.Duration, from, to string) *etcdfedv1.MembershipOperation {
		return &etcdfedv1.MembershipOperation{Type: etcdfedv1.OperationMove, Member: member, Reason: "Spread", StartedAt: metav1.NewTime(t0.Add(began)),
			From: &etcdfedv1.FailureDomain{Cluster: from}, To: &etcdfedv1.FailureDomain{Cluster: to}}
	}
	to := []string{"d", "e", "f"}
	samples := []Sample{
		ring(-time.Second, nil, "a", "b", "c"),
		ring(time.Second, move("m-0", 500*time.Millisecond, "a", "d"), "a", "b", "c"),
		ring(20*time.Second, move("m-0", 500*time.Millisecond, "a", "d"), "a", "b", "c"),
		ring(25*time.Second, move("m-1", 24*time.Second, "b", "e"), "d", "b", "c"),
		ring(50*time.Second, move("m-2", 49*time.Second, "c", "f"), "d", "e", "c"),
		ring(70*time.Second, nil, "d", "e", "f"),
	}
	for i, s := range samples {
		if got, want := Migrated(s, to), i == len(samples)-1; got != want {
			t.Errorf("sample %d: Migrated %t, want %t", i, got, want)
		}
	}
	notReady := ring(80*time.Second, nil, "d", "e", "f")
	notReady.Members[1].Ready = false
	if Migrated(notReady, to) {
		t.Error("a ring with a member not ready counts as migrated")
	}
	ops := operations(samples, t0)
	if len(ops) != 3 {
		t.Fatalf("operations %+v, want 3", ops)
	}
	if o := ops[0]; o.Member != "m-0" || o.From != "a" || o.To != "d" || o.Began != 0.5 || o.Seconds != 19.5 || o.Type != "Move" || o.Reason != "Spread" {
		t.Errorf("first operation %+v", o)
	}
}

func TestMigrationReportText(t *testing.T) {
	minTol := 1
	r := &Report{Kind: ReportKind, Version: ReportVersion, Cluster: "ns/main", Mode: ModeMigrate, Replicas: 3, WasTolerant: true,
		Times:    Times{Injected: 0.02, FirstMove: ptr(0.4), FirstMoveBy: "Move main-0 (Spread)", Evacuated: ptr(36.1), Healed: ptr(36.1)},
		Workload: WorkloadInfo{Puts: 100, AckedPuts: 99, MaxWriteGap: 0.08},
		Verdicts: Verdicts{Linearizable: Verdict{Pass: true, Detail: "ok"}, LostWrites: LostWrites{Verdict: Verdict{Pass: true}}, Watch: WatchReport{Verdict: Verdict{Pass: true}},
			Evacuated: Verdict{Pass: true, Detail: "moved"}, Healed: Verdict{Pass: true}, Tolerance: &Verdict{Pass: true, Detail: "at least 1"}},
		Pass: true,
		Migration: &MigrationReport{FromClusters: []string{"a", "b", "c"}, ToClusters: []string{"d", "e", "f"}, Members: []string{"main-0", "main-1", "main-2"},
			FailuresToleratedBefore: 1, MinFailuresTolerated: &minTol, ToleranceSamples: 140, MaxVoters: 4,
			Operations: []OperationReport{{Type: "Move", Member: "main-0", Reason: "Spread", From: "a", To: "d", Began: 0.4, Seconds: 11.9}}}}
	var b strings.Builder
	if err := r.Text(&b); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	for _, want := range []string{"Drill migrate of EtcdCluster ns/main: 3 members (main-0, main-1, main-2) moved from a, b, c to d, e, f",
		"1 before, at least 1 over 140 samples, at most 4 voters", "Move main-0 (Spread) a -> d: began at 0.4s, 11.9s", "PASS  failure tolerance kept", "Result: PASS"} {
		if !strings.Contains(out, want) {
			t.Errorf("report lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "zone") {
		t.Errorf("a migration's report speaks of a zone:\n%s", out)
	}
}
