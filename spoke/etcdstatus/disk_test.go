package etcdstatus_test

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	etcdfedv1 "github.com/etcdfed/etcdfed/api/v1alpha1"
	"github.com/etcdfed/etcdfed/dev/etcdtest"
	"github.com/etcdfed/etcdfed/spoke/etcdstatus"
)

// walFsync renders etcd's WAL sync histogram (its buckets: 1 ms doubling
// to 8.192 s, then +Inf) with cumulative counts per bucket.
func walFsync(counts ...int) string {
	var b strings.Builder
	b.WriteString("# TYPE etcd_disk_wal_fsync_duration_seconds histogram\n")
	bound := 0.001
	for i, c := range counts {
		le := fmt.Sprint(bound)
		if i == len(counts)-1 {
			le = "+Inf"
		}
		fmt.Fprintf(&b, "etcd_disk_wal_fsync_duration_seconds_bucket{le=%q} %d\n", le, c)
		bound *= 2
	}
	fmt.Fprintf(&b, "etcd_disk_wal_fsync_duration_seconds_sum 1.5\netcd_disk_wal_fsync_duration_seconds_count %d\n", counts[len(counts)-1])
	return b.String()
}

// metrics parses a metrics text as the spoke does.
func metrics(t *testing.T, text string) etcdstatus.Metrics {
	t.Helper()
	m, err := etcdstatus.ParseMetrics(strings.NewReader(text), "a1")
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// lateHeartbeats renders etcd's counter of heartbeats sent late.
func lateHeartbeats(n int) string {
	return fmt.Sprintf("# TYPE etcd_server_heartbeat_send_failures_total counter\netcd_server_heartbeat_send_failures_total %d\n", n)
}

// TestDiskReadings: the window's view is the tail of the syncs between its
// oldest reading and the newest, in bucket bounds; the first minute after
// the first reading or a restart of the member's etcd (counts down) is
// left out; readings older than the window leave it, and a stall leaves
// with them; a window without a sync reads zero.
func TestDiskReadings(t *testing.T) {
	t0 := time.Date(2026, 11, 30, 22, 0, 0, 0, time.UTC)
	// 15 buckets: 1, 2, 4, ... 8192 ms, +Inf.
	flat := func(n int) []int { // n syncs, all within 1 ms
		c := make([]int, 15)
		for i := range c {
			c[i] = n
		}
		return c
	}
	var w etcdstatus.DiskReadings
	late := 0 // the member's late heartbeat counter
	check := func(at time.Duration, counts []int, want *etcdfedv1.MemberDiskView) {
		t.Helper()
		got := w.Add(t0.Add(at), metrics(t, walFsync(counts...)+lateHeartbeats(late)))
		switch {
		case want == nil && got != nil, want != nil && got == nil:
			t.Fatalf("at %s: view %+v, want %+v", at, got, want)
		case want != nil && *got != *want:
			t.Fatalf("at %s: view %+v, want %+v", at, *got, *want)
		}
	}
	// A starting etcd's slow syncs (up to 256 ms) within the warmup are
	// left out.
	// plus adds n syncs of bucket b (and of every bucket above: the
	// counts are cumulative) to c.
	plus := func(c []int, n, b int) []int {
		out := slices.Clone(c)
		for i := b; i < len(out); i++ {
			out[i] += n
		}
		return out
	}
	start := plus(plus(flat(0), 90, 0), 10, 8) // 90 quick, 10 of 128 to 256 ms
	check(0, flat(10), nil)
	check(30*time.Second, start, nil)
	check(61*time.Second, start, &etcdfedv1.MemberDiskView{WindowSeconds: 31}) // no sync since the warmup's last reading
	check(70*time.Second, plus(start, 1000, 0), &etcdfedv1.MemberDiskView{P99Millis: 1, MaxMillis: 1, Syncs: 1000, WindowSeconds: 40})
	// 1000 more syncs: 949 within 1 ms, 50 of 8 ms, one stall of 3 s
	// (bucket 4.096 s); the window (2000 syncs) has its p99 at 8 ms.
	stall := plus(plus(plus(plus(start, 1000, 0), 949, 0), 50, 3), 1, 12)
	// The stall held 8 of the leader's heartbeats (two to each of four
	// peers) past twice the interval.
	late = 8
	check(80*time.Second, stall, &etcdfedv1.MemberDiskView{P99Millis: 8, MaxMillis: 4096, Syncs: 2000, WindowSeconds: 50, LateHeartbeats: 8})
	// Eleven minutes on, with nothing but quick syncs since: the stall
	// and its late heartbeats have left the window.
	check(80*time.Second+11*time.Minute, plus(stall, 500, 0), &etcdfedv1.MemberDiskView{P99Millis: 1, MaxMillis: 1, Syncs: 500, WindowSeconds: 660})
	// etcd restarted (its counts start again): a new warmup, whose slow
	// syncs are left out too.
	late = 0
	check(13*time.Minute, flat(40), nil)
	check(13*time.Minute+30*time.Second, start, nil)
	check(14*time.Minute+time.Second, plus(start, 1, 0), &etcdfedv1.MemberDiskView{P99Millis: 1, MaxMillis: 1, Syncs: 1, WindowSeconds: 31})
	// A sync slower than the largest bucket (+Inf only).
	check(14*time.Minute+2*time.Second, plus(plus(start, 1, 0), 1, 14), &etcdfedv1.MemberDiskView{P99Millis: 16384, MaxMillis: 16384, Syncs: 2, WindowSeconds: 32})
}

// TestDiskViewOfARealMember: a real etcd's metrics give a disk view once
// a second read follows writes (the warmup shortened to a millisecond).
func TestDiskViewOfARealMember(t *testing.T) {
	c := etcdtest.Start(t, etcdtest.Options{Members: 1, Name: "disk"})
	ctx := context.Background()
	r := &etcdstatus.Reader{Timeout: 2 * time.Second, DiskWarmup: time.Millisecond}
	defer r.Close()
	target := etcdstatus.Target{Endpoint: c.Members[0].ClientURL}
	if _, err := r.Read(ctx, "ns/disk", target); err != nil {
		t.Fatal(err)
	}
	cli := c.NewClient()
	for i := range 20 {
		if _, err := cli.Put(ctx, fmt.Sprintf("k%d", i), "v"); err != nil {
			t.Fatal(err)
		}
	}
	v, err := r.Read(ctx, "ns/disk", target)
	if err != nil {
		t.Fatal(err)
	}
	d := v.WALFsync
	if d == nil || d.Syncs < 20 || d.P99Millis < 1 || d.MaxMillis < d.P99Millis {
		t.Fatalf("disk view after 20 puts: %+v, want at least 20 syncs with a p99 and a max of at least 1 ms", d)
	}
	t.Logf("disk view of a real member after 20 puts: %+v", *d)
}

// TestLateHeartbeatsOfAStalledLeader: a leader whose process stalls (the
// SIGSTOP of a starved or frozen machine, shorter than the election
// timeout) sends its next heartbeats late, and the disk view of it counts
// what etcd counted (etcd_server_heartbeat_send_failures_total, read
// beside it). The election timeout is long enough (5 s) that a stall of
// half a second keeps the leader.
//
// etcd judges a heartbeat late against the last one to the same peer and
// forgets them all when the leader changes, so a stall that begins before
// a new leader's first heartbeat is not counted: the leader of a cluster
// just formed sends a few first (under two busy processes on two cores, a
// stall at once went uncounted in 6 of 20 runs, a second later in none of
// 20, on 2 Dec).
func TestLateHeartbeatsOfAStalledLeader(t *testing.T) {
	c := etcdtest.Start(t, etcdtest.Options{Members: 3, Name: "late", ExtraArgs: []string{"--heartbeat-interval=100", "--election-timeout=5000"}})
	ctx := context.Background()
	time.Sleep(time.Second) // the leader's first heartbeats (Start waited for a healthy cluster)
	leader, err := c.Leader(ctx)
	if err != nil {
		t.Fatal(err)
	}
	r := &etcdstatus.Reader{Timeout: 2 * time.Second, DiskWarmup: time.Millisecond}
	defer r.Close()
	target := etcdstatus.Target{Endpoint: leader.ClientURL}
	etcdCount := func() float64 {
		t.Helper()
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, leader.ClientURL+"/metrics", nil)
		if err != nil {
			t.Fatal(err)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		m, err := etcdstatus.ParseMetrics(resp.Body, "")
		if err != nil {
			t.Fatal(err)
		}
		return m.LateHeartbeats
	}
	if _, err := r.Read(ctx, "ns/late", target); err != nil {
		t.Fatal(err)
	}
	base := etcdCount()
	time.Sleep(10 * time.Millisecond) // past the warmup
	v, err := r.Read(ctx, "ns/late", target)
	if err != nil {
		t.Fatal(err)
	}
	if v.WALFsync == nil || v.WALFsync.LateHeartbeats != int64(etcdCount()-base) {
		t.Fatalf("disk view of a leader at rest: %+v, want the late heartbeats etcd counted (%v)", v.WALFsync, etcdCount()-base)
	}
	if v.LeaderID != v.ID {
		// Only a leader sends heartbeats: stalling another member would
		// show nothing.
		t.Fatalf("%s is no longer the leader (leader %s) before the stall", leader.Name, v.LeaderID)
	}
	leader.Pause(t)
	time.Sleep(500 * time.Millisecond)
	leader.Resume()
	time.Sleep(300 * time.Millisecond) // a few heartbeats after it
	counted := etcdCount() - base
	v, err = r.Read(ctx, "ns/late", target)
	if err != nil {
		t.Fatal(err)
	}
	if v.LeaderID != v.ID {
		t.Fatalf("the leader lost its term to a stall of half a second (election timeout 5 s): leader now %s", v.LeaderID)
	}
	if counted == 0 {
		t.Fatal("etcd counted no late heartbeat after a stall of its leader of 500 ms (five heartbeats)")
	}
	if v.WALFsync == nil || v.WALFsync.LateHeartbeats != int64(counted) {
		t.Fatalf("after the stall: disk view %+v, want the %v late heartbeats etcd counted", v.WALFsync, counted)
	}
	t.Logf("disk view of the leader after a stall of 500 ms: %+v", *v.WALFsync)
}
