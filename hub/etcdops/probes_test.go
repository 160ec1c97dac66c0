package etcdops

import (
	"context"
	"testing"
	"time"

	"github.com/etcdfed/etcdfed/internal/etcdtest"
)

// A member that did not answer is asked with the short timeout, except
// every FullProbeEvery, when it gets the full one again; one that answers is
// back to the full timeout at once. Members gone from the list are
// forgotten.
func TestProbeMemory(t *testing.T) {
	t0 := time.Date(2026, 11, 23, 10, 0, 0, 0, time.UTC)
	var m ProbeMemory
	if got := m.timeout(1, t0, false); got != StatusTimeout {
		t.Fatalf("unknown member: %s, want %s", got, StatusTimeout)
	}
	m.record(1, false, StatusTimeout, t0)
	for _, tc := range []struct {
		after time.Duration
		want  time.Duration
	}{
		{time.Second, FailingStatusTimeout},
		{FullProbeEvery - time.Millisecond, FailingStatusTimeout},
		{FullProbeEvery, StatusTimeout},
	} {
		if got := m.timeout(1, t0.Add(tc.after), false); got != tc.want {
			t.Errorf("failed at t0, asked at +%s: %s, want %s", tc.after, got, tc.want)
		}
	}
	// Short probes that fail do not postpone the next full one.
	m.record(1, false, FailingStatusTimeout, t0.Add(5*time.Second))
	if got := m.timeout(1, t0.Add(FullProbeEvery), false); got != StatusTimeout {
		t.Errorf("a short probe moved the next full one: %s", got)
	}
	// An answer restores the full timeout.
	m.record(1, true, FailingStatusTimeout, t0.Add(6*time.Second))
	if got := m.timeout(1, t0.Add(7*time.Second), false); got != StatusTimeout {
		t.Errorf("answering member: %s, want %s", got, StatusTimeout)
	}
	m.record(2, false, StatusTimeout, t0)
	m.forget(map[uint64]bool{1: true})
	if got := m.timeout(2, t0.Add(time.Second), false); got != StatusTimeout {
		t.Errorf("forgotten member: %s, want %s", got, StatusTimeout)
	}
	var none *ProbeMemory
	none.record(3, false, StatusTimeout, t0)
	if got := none.timeout(3, t0, false); got != StatusTimeout {
		t.Errorf("nil memory: %s", got)
	}
	// A member out of sight (its zone not seen by the hub) gets the short
	// timeout from its first request on, and never the full one: a zone
	// that just died costs a pass FailingStatusTimeout, not StatusTimeout.
	for _, tc := range []struct {
		name string
		mem  *ProbeMemory
		at   time.Time
	}{
		{"never asked", &ProbeMemory{}, t0},
		{"answered last time", &m, t0.Add(8 * time.Second)},
		{"full probe due", &m, t0.Add(time.Hour)},
		{"nil memory", none, t0},
	} {
		if got := tc.mem.timeout(1, tc.at, true); got != FailingStatusTimeout {
			t.Errorf("out of sight, %s: %s, want %s", tc.name, got, FailingStatusTimeout)
		}
	}
	// Out of sight and failing: not asked again (0) until its last request
	// is OutOfSightProbeEvery old; in sight again, asked at once under the
	// ordinary rule (never fully probed, so with the full timeout).
	var o ProbeMemory
	o.record(7, false, FailingStatusTimeout, t0)
	for _, tc := range []struct {
		after      time.Duration
		outOfSight bool
		want       time.Duration
	}{
		{time.Second, true, 0},
		{OutOfSightProbeEvery - time.Millisecond, true, 0},
		{OutOfSightProbeEvery, true, FailingStatusTimeout},
		{time.Second, false, StatusTimeout},
	} {
		if got := o.timeout(7, t0.Add(tc.after), tc.outOfSight); got != tc.want {
			t.Errorf("failed at t0, out of sight %v, asked at +%s: %s, want %s", tc.outOfSight, tc.after, got, tc.want)
		}
	}
}

// Observe records which members answered: with one of three stopped, only
// its ID is asked with the short timeout next, and it counts unhealthy.
func TestObserveRemembersSilentMembers(t *testing.T) {
	c := etcdtest.Start(t, etcdtest.Options{Members: 3, Name: "probe"})
	cl, err := New(Config{Endpoints: c.Endpoints()})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cl.Close() }()
	cl.Probes = &ProbeMemory{}
	c.Members[2].Stop()
	ctx := context.Background()
	e := cl.Observe(ctx)
	if !e.Reachable {
		t.Fatalf("two of three members up, etcd not reachable: %s", e.Error)
	}
	now := time.Now()
	for _, m := range e.Members {
		want := StatusTimeout
		if m.Name == c.Members[2].Name {
			want = FailingStatusTimeout
			if m.Healthy {
				t.Errorf("stopped member %s reported healthy", m.Name)
			}
		} else if !m.Healthy {
			t.Errorf("member %s reported unhealthy", m.Name)
		}
		if got := cl.Probes.timeout(m.ID, now, false); got != want {
			t.Errorf("%s: next status timeout %s, want %s", m.Name, got, want)
		}
	}
}
