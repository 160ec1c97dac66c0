package multicluster

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	etcdfedv1 "github.com/etcdfed/etcdfed/api/v1alpha1"
	"github.com/etcdfed/etcdfed/pkg/timing"
)

func TestParseWANDistances(t *testing.T) {
	got, err := ParseWANDistances("0, 10,20ms,40")
	if err != nil || !slices.Equal(got, []time.Duration{0, 10 * time.Millisecond, 20 * time.Millisecond, 40 * time.Millisecond}) {
		t.Errorf("got %v, %v", got, err)
	}
	for _, bad := range []string{"", "10,10", "-1", "2000", "10s", "a"} {
		if _, err := ParseWANDistances(bad); err == nil {
			t.Errorf("%q: no error", bad)
		}
	}
}

func TestParseWANTimings(t *testing.T) {
	got, err := ParseWANTimings("100/1000, 30/300")
	if err != nil || !slices.Equal(got, []WANTiming{{100, 1000}, {30, 300}}) {
		t.Errorf("got %v, %v", got, err)
	}
	if got, err := ParseWANTimings("none"); err != nil || got != nil {
		t.Errorf("none: %v %v", got, err)
	}
	for _, bad := range []string{"100", "100/400", "0/0", "100/60000", "x/y"} {
		if _, err := ParseWANTimings(bad); err == nil {
			t.Errorf("%q: no error", bad)
		}
	}
}

func TestPercentile(t *testing.T) {
	var d []time.Duration
	for i := 1; i <= 200; i++ {
		d = append(d, time.Duration(i)*time.Millisecond)
	}
	for _, tc := range []struct {
		p    float64
		want time.Duration
	}{{50, 100 * time.Millisecond}, {99, 198 * time.Millisecond}, {100, 200 * time.Millisecond}, {0.1, time.Millisecond}} {
		if got := Percentile(d, tc.p); got != tc.want {
			t.Errorf("p%v = %v, want %v", tc.p, got, tc.want)
		}
	}
	if Percentile(nil, 50) != 0 {
		t.Error("no samples: want 0")
	}
	if got := Percentile([]time.Duration{7}, 99); got != 7 {
		t.Errorf("one sample: %v", got)
	}
}

func TestLongestGap(t *testing.T) {
	t0 := time.Date(2026, 11, 28, 20, 0, 0, 0, time.UTC)
	at := func(msec int) time.Time { return t0.Add(time.Duration(msec) * time.Millisecond) }
	acks := []time.Time{at(300), at(100), at(200), at(1500), at(1600), at(5000)}
	gap, from := LongestGap(acks, at(0), at(2000))
	if gap != 1200*time.Millisecond || !from.Equal(at(300)) {
		t.Errorf("gap %v from %v, want 1.2s from +300ms", gap, from.Sub(t0))
	}
	// No acknowledgement at all: the whole window.
	if gap, _ := LongestGap(nil, at(0), at(800)); gap != 800*time.Millisecond {
		t.Errorf("empty: %v", gap)
	}
	// The window's end counts: writes that stopped before it.
	if gap, from := LongestGap([]time.Time{at(10)}, at(0), at(900)); gap != 890*time.Millisecond || !from.Equal(at(10)) {
		t.Errorf("trailing gap %v from %v", gap, from.Sub(t0))
	}
}

func TestWANTable(t *testing.T) {
	got := WANTable([]string{"A", "B"}, []WANRow{
		{Distance: 20 * time.Millisecond, Zone: "zone-3a", Note: "preferred", Cells: []WANCell{{P50: 41500 * time.Microsecond, P99: 120 * time.Millisecond, Writes: 200}, {P50: time.Millisecond, P99: 2 * time.Millisecond, Writes: 200, Errors: 1}}},
		{Distance: 0, Zone: "zone-1a", Cells: []WANCell{{}}},
	}, []WANLeaders{{Distance: 20 * time.Millisecond, Where: []string{"zone-3a 30/300"}}})
	want := `| distance | client zone | A p50 / p99 ms | B p50 / p99 ms |
| --- | --- | --- | --- |
| 20.0 | zone-3a (preferred) | 41.5 / 120 | 1.0 / 2.0 (1 err) |
| 0.0 | zone-1a | - | - |

| distance | A: leader, timing | B: leader, timing |
| --- | --- | --- |
| 20.0 | zone-3a 30/300 | - |
`
	if got != want {
		t.Errorf("got\n%s\nwant\n%s", got, want)
	}
	if !strings.HasSuffix(got, "\n") {
		t.Error("no final newline")
	}
}

// TestSoakTally: the stability run sampled every member once a second and
// counted every change of the leader between two members' answers, so a
// member behind (still naming the old leader at the old term) counted one
// election two or three times. Only a new term's leader counts.
func TestSoakTally(t *testing.T) {
	type answer struct{ term, leader uint64 }
	for _, tc := range []struct {
		name                     string
		answers                  []answer
		wantChanges, wantLeaders int
		wantIncrements           uint64
	}{
		{"steady", []answer{{3, 1}, {3, 1}, {3, 1}}, 0, 1, 0},
		{"one election, a member behind", []answer{{3, 1}, {3, 1}, {4, 2}, {3, 1}, {4, 2}, {3, 1}, {4, 2}}, 1, 2, 1},
		{"re-elected itself", []answer{{3, 1}, {4, 0}, {4, 1}, {4, 1}}, 0, 1, 1},
		{"no leader yet at the new term", []answer{{3, 1}, {5, 0}, {5, 0}, {5, 2}}, 1, 2, 2},
		{"away and back (an election, then a transfer)", []answer{{3, 1}, {4, 2}, {3, 1}, {5, 1}, {4, 2}}, 2, 2, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var tl SoakTally
			for _, a := range tc.answers {
				tl.Observe(a.term, a.leader)
			}
			if tl.Changes != tc.wantChanges || len(tl.Leaders) != tc.wantLeaders || tl.Term-tl.Term0 != tc.wantIncrements {
				t.Errorf("changes %d, leaders %d, term increments %d; want %d, %d, %d", tl.Changes, len(tl.Leaders), tl.Term-tl.Term0, tc.wantChanges, tc.wantLeaders, tc.wantIncrements)
			}
		})
	}
	var tl SoakTally
	tl.Observe(3, 1)
	tl.Observe(6, 1)
	if got := tl.Elections(2); got != 1 {
		t.Errorf("3 term increments with 2 transfers: %d elections, want 1", got)
	}
}

func TestWALFsyncsOver(t *testing.T) {
	page := `# HELP etcd_disk_wal_fsync_duration_seconds The latency distributions of fsync called by WAL.
# TYPE etcd_disk_wal_fsync_duration_seconds histogram
etcd_disk_wal_fsync_duration_seconds_bucket{le="0.512"} 9990
etcd_disk_wal_fsync_duration_seconds_bucket{le="1.024"} 9997
etcd_disk_wal_fsync_duration_seconds_bucket{le="2.048"} 9999
etcd_disk_wal_fsync_duration_seconds_bucket{le="+Inf"} 10000
etcd_disk_wal_fsync_duration_seconds_sum 42.5
etcd_disk_wal_fsync_duration_seconds_count 10000
etcd_disk_backend_commit_duration_seconds_count 77
`
	over, total, err := WALFsyncsOver(page, "1.024")
	if err != nil || over != 3 || total != 10000 {
		t.Errorf("WALFsyncsOver: %d of %d, %v; want 3 of 10000", over, total, err)
	}
	if _, _, err := WALFsyncsOver("etcd_disk_backend_commit_duration_seconds_count 77\n", "1.024"); err == nil {
		t.Error("a page without the histogram: no error")
	}
}

// The bench's settle waits for a timing change held back, and only for
// one: the messages are those timing.Choose writes.
func TestTimingHeld(t *testing.T) {
	t0 := time.Date(2026, 12, 2, 7, 0, 0, 0, time.UTC)
	voters := []string{"member-1", "member-2", "member-3"}
	// Every two voter clusters at rttMs (median 0.9 of it), recorded at.
	matrix := func(rttMs float64, at time.Time) []etcdfedv1.RoundTrip {
		var out []etcdfedv1.RoundTrip
		for _, a := range voters {
			for _, b := range voters {
				if a != b {
					out = append(out, etcdfedv1.RoundTrip{From: a, To: b, MedianMicros: int64(rttMs * 900), P99Micros: int64(rttMs * 1000), ObservedAt: &metav1.Time{Time: at}})
				}
			}
		}
		return out
	}
	running := func(hb, el int32, lateAt *time.Time) *etcdfedv1.TimingStatus {
		p := &etcdfedv1.TimingStatus{HeartbeatIntervalMillis: hb, ElectionTimeoutMillis: el, Source: etcdfedv1.TimingSourceAuto}
		if lateAt != nil {
			p.LateHeartbeatsAt = &metav1.Time{Time: *lateAt}
		}
		return p
	}
	disks := func(window int32, n int) []timing.Disk {
		var out []timing.Disk
		for i := range n {
			out = append(out, timing.Disk{Member: fmt.Sprintf("ring-%d", i), View: &etcdfedv1.MemberDiskView{P99Millis: 4, MaxMillis: 16, Syncs: 5000, WindowSeconds: window}})
		}
		return out
	}
	disk := etcdfedv1.EtcdConfig{TimingFloor: etcdfedv1.TimingFloorDisk}
	late := t0.Add(-20 * time.Minute)
	for _, tc := range []struct {
		name string
		in   timing.Input
		held bool
	}{
		{"a change held until the round trips settle", timing.Input{Voters: voters, Matrix: matrix(200, t0.Add(-time.Minute)), Previous: running(100, 1000, nil), Running: true, Now: t0}, true},
		{"a change held until every disk window is full", timing.Input{Etcd: disk, Voters: voters, Matrix: matrix(20, t0.Add(-time.Hour)), Previous: running(100, 1000, nil), Running: true, Now: t0, Disks: disks(60, 3)}, true},
		{"the late heartbeats' hold beside a change too small to roll", timing.Input{Etcd: disk, Voters: voters, Matrix: matrix(20, t0.Add(-time.Hour)), Previous: running(110, 1100, &late), Running: true, Now: t0, Disks: disks(etcdfedv1.DiskWindowSeconds, 3)}, false},
		{"nothing to change", timing.Input{Voters: voters, Matrix: matrix(20, t0.Add(-time.Hour)), Previous: running(100, 1000, nil), Running: true, Now: t0}, false},
	} {
		msg := timing.Choose(tc.in).Message
		if tc.name == "the late heartbeats' hold beside a change too small to roll" && (!strings.Contains(msg, "keeping") || !strings.Contains(msg, " until ")) {
			t.Fatalf("%s: the message no longer says both 'keeping' and ' until ', the case the settle once mistook: %s", tc.name, msg)
		}
		if got := timingHeld.MatchString(msg); got != tc.held {
			t.Errorf("%s: held %t, want %t: %s", tc.name, got, tc.held, msg)
		}
	}
}
