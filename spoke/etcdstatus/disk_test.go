package etcdstatus_test

import (
	"context"
	"fmt"
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

// histogram parses a metrics text as the spoke does.
func histogram(t *testing.T, text string) etcdstatus.Histogram {
	t.Helper()
	m, err := etcdstatus.ParseMetrics(strings.NewReader(text), "a1")
	if err != nil {
		t.Fatal(err)
	}
	return m.WALFsync
}

// TestDiskReadings: the window's view is the tail of the syncs between its
// oldest reading and the newest, in bucket bounds; a restart of the
// member's etcd (counts down) starts again; readings older than the
// window leave it, and a stall leaves with them.
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
	if v := w.Add(t0, histogram(t, walFsync(flat(100)...))); v != nil {
		t.Fatalf("one reading: %+v, want no view (no window yet)", v)
	}
	check := func(at time.Duration, counts []int, want *etcdfedv1.MemberDiskView) {
		t.Helper()
		got := w.Add(t0.Add(at), histogram(t, walFsync(counts...)))
		switch {
		case want == nil && got != nil, want != nil && got == nil:
			t.Fatalf("at %s: view %+v, want %+v", at, got, want)
		case want != nil && *got != *want:
			t.Fatalf("at %s: view %+v, want %+v", at, *got, *want)
		}
	}
	check(10*time.Second, flat(100), nil) // no sync in the window
	check(20*time.Second, flat(1100), &etcdfedv1.MemberDiskView{P99Millis: 1, MaxMillis: 1, Syncs: 1000, WindowSeconds: 20})
	// 1000 more syncs: 949 within 1 ms, 50 of 8 ms, one stall of 3 s
	// (bucket 4.096 s); the window (2000 syncs) has its p99 at 8 ms.
	stall := flat(2100)
	for i := range stall {
		switch {
		case i < 3: // 1, 2, 4 ms
			stall[i] = 1100 + 949
		case i < 12: // 8 ms to 2.048 s
			stall[i] = 1100 + 999
		}
	}
	check(30*time.Second, stall, &etcdfedv1.MemberDiskView{P99Millis: 8, MaxMillis: 4096, Syncs: 2000, WindowSeconds: 30})
	// Eleven minutes on, with nothing but quick syncs since: the stall has
	// left the window.
	later := flat(2100 + 500)
	for i := range later {
		later[i] += stall[i] - 2100
	}
	check(30*time.Second+11*time.Minute, later, &etcdfedv1.MemberDiskView{P99Millis: 1, MaxMillis: 1, Syncs: 500, WindowSeconds: 660})
	// etcd restarted: its counts start again from zero.
	check(12*time.Minute, flat(40), &etcdfedv1.MemberDiskView{P99Millis: 1, MaxMillis: 1, Syncs: 40, WindowSeconds: 0})
	// A sync slower than the largest bucket.
	beyond := flat(40)
	beyond[14] = 41 // +Inf only
	check(12*time.Minute+time.Second, beyond, &etcdfedv1.MemberDiskView{P99Millis: 16384, MaxMillis: 16384, Syncs: 41, WindowSeconds: 1})
}

// TestDiskViewOfARealMember: a real etcd's metrics give a disk view once
// a second read follows writes.
func TestDiskViewOfARealMember(t *testing.T) {
	c := etcdtest.Start(t, etcdtest.Options{Members: 1, Name: "disk"})
	ctx := context.Background()
	r := &etcdstatus.Reader{Timeout: 2 * time.Second}
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
