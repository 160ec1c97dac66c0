package drill

import (
	"strings"
	"testing"
	"time"

	etcdfedv1 "github.com/etcdfed/etcdfed/api/v1alpha1"
)

var t0 = time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)

func at(s float64) time.Time { return t0.Add(time.Duration(s * float64(time.Second))) }

// ring3 is a 3-member sample: main-0 where given, main-1 and main-2 in
// zones 2 and 3.
func ring3(s float64, cluster, zone string, inc int64, ready, available, tolerant bool) Sample {
	ms := []MemberSample{{Name: "main-0", Cluster: cluster, Zone: zone, Incarnation: inc, Ready: ready},
		{Name: "main-1", Cluster: "member-2", Zone: "zone-2", Incarnation: 1, Ready: true},
		{Name: "main-2", Cluster: "member-3", Zone: "zone-3", Incarnation: 1, Ready: true}}
	n := 2
	if ready {
		n = 3
	}
	return Sample{At: at(s), Available: available, AllReady: ready, Tolerant: tolerant, ReadyMembers: n, Replicas: 3, Members: ms}
}

func with(s Sample, f func(*Sample)) Sample { f(&s); return s }

func op(typ etcdfedv1.OperationType, member, reason string) func(*Sample) {
	return func(s *Sample) {
		s.Operation = &etcdfedv1.MembershipOperation{Type: typ, Member: member, Reason: reason}
	}
}

func degraded(msg string) func(*Sample) { return func(s *Sample) { s.Degraded = msg } }

func secs(t *time.Time) float64 {
	if t == nil {
		return -1
	}
	return t.Sub(t0).Seconds()
}

// A killed zone evacuated and returned: every time of the timeline is
// read from the samples, in order.
func TestAnalyzeKilledZoneEvacuatedAndReturned(t *testing.T) {
	z := Zone{Name: "zone-1"}
	plan := Plan{Members: []string{"main-0"}, Clusters: []string{"member-1"}, Replicas: 3, Tolerant: true}
	samples := []Sample{
		ring3(-1, "member-1", "zone-1", 1, true, true, true),
		ring3(0.5, "member-1", "zone-1", 1, true, true, true),
		with(ring3(1, "member-1", "zone-1", 1, false, true, true), degraded("members not ready: main-0")),
		with(ring3(1.5, "member-1", "zone-1", 1, false, false, true), degraded("members not ready: main-0")),
		with(ring3(3, "member-1", "zone-1", 1, false, true, true), degraded("member cluster member-1 failed: lease stale for 5s; members not ready: main-0")),
		with(ring3(20, "member-1", "zone-1", 1, false, true, true), op(etcdfedv1.OperationMoveLeader, "main-0", "")),
		with(ring3(33, "member-1", "zone-1", 1, false, true, true), op(etcdfedv1.OperationReplace, "main-0", "Evacuate")),
		with(ring3(34, "member-2", "zone-2", 2, false, true, false), op(etcdfedv1.OperationReplace, "main-0", "Evacuate")),
		ring3(50, "member-2", "zone-2", 2, true, true, false),
		ring3(52, "member-2", "zone-2", 2, true, true, false),
		with(ring3(60, "member-2", "zone-2", 2, true, true, false), op(etcdfedv1.OperationReplace, "main-0", "Rebalance")),
		with(ring3(61, "member-1", "zone-1", 3, false, true, true), op(etcdfedv1.OperationReplace, "main-0", "Rebalance")),
		ring3(80, "member-1", "zone-1", 3, true, true, true),
		ring3(81, "member-1", "zone-1", 3, true, true, true),
	}
	tl := Analyze(AnalyzeInput{Samples: samples, Zone: z, Plan: plan, Failed: at(0), Restored: at(51)})
	for _, c := range []struct {
		what      string
		got, want float64
	}{
		{"detected", secs(tl.Detected), 3},
		{"member degraded", secs(tl.MemberDegraded), 1},
		{"first move", secs(tl.FirstMove), 33},
		{"evacuated", secs(tl.Evacuated), 50},
		{"healed", secs(tl.Healed), 80},
		{"unavailable", tl.Unavailable.Seconds(), 1.5},
		{"longest unavailable", tl.LongestUnavailable.Seconds(), 1.5},
	} {
		if c.got != c.want {
			t.Errorf("%s at %v, want %v", c.what, c.got, c.want)
		}
	}
	if !strings.Contains(tl.DetectedBy, "member cluster member-1 failed") {
		t.Errorf("detected by %q", tl.DetectedBy)
	}
	if tl.FirstMoveBy != "Replace main-0 (Evacuate)" {
		t.Errorf("first move by %q (a MoveLeader is not a move)", tl.FirstMoveBy)
	}
	if len(tl.Moves) != 2 || tl.Moves[0].From != "member-1/zone-1" || tl.Moves[0].To != "member-2/zone-2" || tl.Moves[0].Incarnation != 2 ||
		tl.Moves[1].To != "member-1/zone-1" || secs(&tl.Moves[1].At) != 61 {
		t.Errorf("moves %+v", tl.Moves)
	}
}

// What must not count: a Degraded naming another zone or cluster whose
// name starts the same, a healthy ring before the restore as healed, an
// evacuation after the restore, a healthy ring that is no longer
// failure tolerant as healed.
func TestAnalyzeDoesNotMiscount(t *testing.T) {
	plan := Plan{Members: []string{"main-0"}, Clusters: []string{"member-1"}, Replicas: 3, Tolerant: true}
	for _, tc := range []struct {
		name     string
		samples  []Sample
		restored float64
		check    func(t *testing.T, tl Timeline)
	}{
		{"names of other zones and clusters", []Sample{
			with(ring3(1, "member-1", "zone-1", 1, true, true, true), degraded("member cluster member-10 unknown; zone-1a lost; zone-10 lost; main-01 not ready")),
		}, 5, func(t *testing.T, tl Timeline) {
			if tl.Detected != nil || tl.MemberDegraded != nil {
				t.Errorf("detected at %v, member degraded at %v", secs(tl.Detected), secs(tl.MemberDegraded))
			}
		}},
		{"zone named in a cluster/zone pair", []Sample{
			with(ring3(2, "member-1", "zone-1", 1, true, true, true), degraded("domain member-7/zone-1 failed")),
		}, 5, func(t *testing.T, tl Timeline) {
			if secs(tl.Detected) != 2 {
				t.Errorf("detected at %v", secs(tl.Detected))
			}
		}},
		{"healthy before the restore is not healed", []Sample{
			ring3(1, "member-1", "zone-1", 1, true, true, true),
			ring3(4, "member-1", "zone-1", 1, true, true, true),
		}, 5, func(t *testing.T, tl Timeline) {
			if tl.Healed != nil {
				t.Errorf("healed at %v", secs(tl.Healed))
			}
		}},
		{"not tolerant is not healed when it was", []Sample{
			ring3(6, "member-2", "zone-2", 2, true, true, false),
		}, 5, func(t *testing.T, tl Timeline) {
			if tl.Healed != nil {
				t.Errorf("healed at %v", secs(tl.Healed))
			}
		}},
		{"still Degraded about the zone is not healed", []Sample{
			with(ring3(6, "member-1", "zone-1", 1, true, true, true), degraded("member cluster member-1 unknown: spoke Lease last renewed 23s ago")),
			with(ring3(7, "member-1", "zone-1", 1, true, true, true), degraded("member cluster member-3 unknown: spoke Lease last renewed 1s ago")),
		}, 5, func(t *testing.T, tl Timeline) {
			if secs(tl.Healed) != 7 {
				t.Errorf("healed at %v, want 7 (Degraded about another cluster is not the drill's)", secs(tl.Healed))
			}
		}},
		{"evacuated after the restore does not count", []Sample{
			ring3(6, "member-2", "zone-2", 2, true, true, false),
		}, 5, func(t *testing.T, tl Timeline) {
			if tl.Evacuated != nil {
				t.Errorf("evacuated at %v", secs(tl.Evacuated))
			}
		}},
		{"still unavailable at the end", []Sample{
			ring3(1, "member-1", "zone-1", 1, true, false, true),
			ring3(3, "member-1", "zone-1", 1, true, false, true),
		}, 5, func(t *testing.T, tl Timeline) {
			if tl.Unavailable != 2*time.Second || tl.LongestUnavailable != 2*time.Second {
				t.Errorf("unavailable %s, longest %s", tl.Unavailable, tl.LongestUnavailable)
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.check(t, Analyze(AnalyzeInput{Samples: tc.samples, Zone: Zone{Name: "zone-1"}, Plan: plan, Failed: at(0), Restored: at(tc.restored)}))
		})
	}
}
