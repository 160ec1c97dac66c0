package multicluster

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/watch"

	etcdfedv1 "github.com/etcdfed/etcdfed/api/v1alpha1"
)

// TestMemberReportsCountOnlyDiskNewsInTheWindow: AtRestSpec excuses a
// status report from the refresh limit only when the WAL sync view moved
// in a way a spoke writes at once, and only for updates seen in the window
// (not the watch's first listing, not before begin).
func TestMemberReportsCountOnlyDiskNewsInTheWindow(t *testing.T) {
	full := int32(etcdfedv1.DiskWindowSeconds)
	disk := func(maxMs, late int64, window int32) *etcdfedv1.MemberDiskView {
		return &etcdfedv1.MemberDiskView{P99Millis: 4, MaxMillis: maxMs, Syncs: 100, WindowSeconds: window, LateHeartbeats: late}
	}
	for _, c := range []struct {
		name     string
		old, cur *etcdfedv1.MemberDiskView
		want     string
	}{
		{"counters only", disk(8, 0, 120), &etcdfedv1.MemberDiskView{P99Millis: 8, MaxMillis: 8, Syncs: 900, WindowSeconds: 180}, ""},
		{"a quick disk's max moved", disk(8, 0, 120), disk(32, 0, 130), ""},
		{"a stall", disk(8, 0, 120), disk(256, 0, 130), "slowest WAL sync 8 ms -> 256 ms"},
		{"a stall left the window", disk(256, 0, full), disk(16, 0, full), "slowest WAL sync 256 ms -> 16 ms"},
		{"late heartbeats came", disk(8, 0, 120), disk(8, 2, 130), "late heartbeats 0 -> 2"},
		{"more late heartbeats", disk(8, 2, 120), disk(8, 5, 130), ""},
		{"window full", disk(8, 0, full-1), disk(8, 0, full), "window 599 s -> 600 s"},
		{"view appeared", nil, disk(8, 0, 1), "the disk view appeared or went"},
		{"no view", nil, nil, ""},
	} {
		if got := diskNewsOf(c.old, c.cur); got != c.want {
			t.Errorf("%s: diskNewsOf = %q, want %q", c.name, got, c.want)
		}
	}

	member := func(d *etcdfedv1.MemberDiskView) *etcdfedv1.EtcdMember {
		m := &etcdfedv1.EtcdMember{}
		m.Namespace, m.Name = "ns", "m-0"
		m.Status.Etcd = &etcdfedv1.MemberEtcdView{WALFsync: d}
		return m
	}
	r := &memberReports{t: t, cancel: func() {}, done: make(chan struct{}), last: map[string]*etcdfedv1.MemberDiskView{}, lastStatus: map[string]map[string]any{}}
	close(r.done)
	r.observe("c/ns/m-0", watch.Added, member(disk(8, 0, 60)))
	r.observe("c/ns/m-0", watch.Modified, member(disk(300, 0, 70))) // before the window
	r.begin()
	r.observe("c/ns/m-1", watch.Added, member(disk(8, 0, 60)))
	r.observe("c/ns/m-1", watch.Modified, member(disk(8, 0, 70)))   // counters only
	r.observe("c/ns/m-0", watch.Modified, member(disk(300, 0, 80))) // the same stall, no news
	r.observe("c/ns/m-0", watch.Modified, member(disk(512, 0, 90))) // a longer stall
	r.observe("c/ns/m-1", watch.Modified, member(disk(8, 1, 80)))   // late heartbeats
	got, other := r.end()
	want := []string{"c/ns/m-0: slowest WAL sync 300 ms -> 512 ms", "c/ns/m-1: late heartbeats 0 -> 1"}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("disk news in the window:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	// The other reports say what they changed.
	want = []string{"c/ns/m-1: status.etcd.walFsync.windowSeconds 60 -> 70", "c/ns/m-0: status.etcd.walFsync.windowSeconds 70 -> 80"}
	if strings.Join(other, "\n") != strings.Join(want, "\n") {
		t.Errorf("other reports in the window:\n%s\nwant:\n%s", strings.Join(other, "\n"), strings.Join(want, "\n"))
	}
}

// TestRestWindowForgivesOnlyWhatTheHubDidNotDo: a window is watched again
// when the timing changed or etcd elected a leader on its own, never when
// the hub moved the leader or nothing changed.
func TestRestWindowForgivesOnlyWhatTheHubDidNotDo(t *testing.T) {
	at := func(timing, leader string, moves int64) restState {
		return restState{timing: timing, leader: leader, moves: moves}
	}
	for _, c := range []struct {
		name       string
		start, end restState
		again      string // a word the reason holds; "" for none
	}{
		{"nothing changed", at("100/1000 Auto", "a", 0), at("100/1000 Auto", "a", 0), ""},
		{"timing raised", at("100/1000 Auto", "a", 0), at("150/1500 Auto", "a", 0), "timing changed"},
		{"etcd elected another", at("100/1000 Auto", "a", 2), at("100/1000 Auto", "b", 2), "elected b in place of a"},
		{"the hub moved the leader", at("100/1000 Auto", "a", 2), at("100/1000 Auto", "b", 3), ""},
		{"leader lost", at("100/1000 Auto", "a", 0), at("100/1000 Auto", "", 0), "elected (none)"},
	} {
		got := c.start.notAtRest(c.end)
		if (c.again == "") != (got == "") || !strings.Contains(got, c.again) {
			t.Errorf("%s: notAtRest = %q, want one holding %q", c.name, got, c.again)
		}
	}
}
