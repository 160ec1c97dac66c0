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
	timeout := func(m *ProbeMemory, id uint64, at time.Time, outOfSight bool) time.Duration {
		return m.plan(id, at, outOfSight).timeout
	}
	var m ProbeMemory
	if got := timeout(&m, 1, t0, false); got != StatusTimeout {
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
		if got := timeout(&m, 1, t0.Add(tc.after), false); got != tc.want {
			t.Errorf("failed at t0, asked at +%s: %s, want %s", tc.after, got, tc.want)
		}
	}
	// Short probes that fail do not postpone the next full one.
	m.record(1, false, FailingStatusTimeout, t0.Add(5*time.Second))
	if got := timeout(&m, 1, t0.Add(FullProbeEvery), false); got != StatusTimeout {
		t.Errorf("a short probe moved the next full one: %s", got)
	}
	// An answer restores the full timeout.
	m.record(1, true, FailingStatusTimeout, t0.Add(6*time.Second))
	if got := timeout(&m, 1, t0.Add(7*time.Second), false); got != StatusTimeout {
		t.Errorf("answering member: %s, want %s", got, StatusTimeout)
	}
	m.record(2, false, StatusTimeout, t0)
	m.forget(map[uint64]bool{1: true})
	if got := timeout(&m, 2, t0.Add(time.Second), false); got != StatusTimeout {
		t.Errorf("forgotten member: %s, want %s", got, StatusTimeout)
	}
	var none *ProbeMemory
	none.record(3, false, StatusTimeout, t0)
	if got := timeout(none, 3, t0, false); got != StatusTimeout {
		t.Errorf("nil memory: %s", got)
	}
	// A member out of sight (its zone not seen by the hub) that answered
	// its last request is asked with the short timeout, never the full
	// one: a zone that just died costs a pass FailingStatusTimeout once.
	// Without memory there is no background, so the pass asks briefly.
	for _, tc := range []struct {
		name string
		mem  *ProbeMemory
		at   time.Time
	}{
		{"answered last time", &m, t0.Add(8 * time.Second)},
		{"full probe due", &m, t0.Add(time.Hour)},
		{"nil memory", none, t0},
	} {
		if got := tc.mem.plan(1, tc.at, true); got != (probePlan{timeout: FailingStatusTimeout}) {
			t.Errorf("out of sight, %s: %+v, want the short timeout only", tc.name, got)
		}
	}
}

// A member out of sight that did not answer, or was never asked, is never
// waited for by a pass: a background request with the full timeout goes
// out when none is in flight and the last is OutOfSightProbeEvery old;
// once it answered, the next pass asks it again; in sight again, it is
// asked under the ordinary rule.
func TestProbeOutOfSightInBackground(t *testing.T) {
	t0 := time.Date(2026, 11, 23, 10, 0, 0, 0, time.UTC)
	var o ProbeMemory
	background := probePlan{background: StatusTimeout}
	if got := o.plan(7, t0, true); got != background {
		t.Fatalf("never asked, out of sight: %+v, want a background request only", got)
	}
	// In flight: neither the pass nor a second background request.
	if got := o.plan(7, t0.Add(OutOfSightProbeEvery), true); got != (probePlan{}) {
		t.Errorf("request in flight: %+v, want nothing", got)
	}
	o.record(7, false, StatusTimeout, t0)
	for _, tc := range []struct {
		after      time.Duration
		outOfSight bool
		want       probePlan
	}{
		{time.Second, true, probePlan{}},
		{OutOfSightProbeEvery - time.Millisecond, true, probePlan{}},
		{OutOfSightProbeEvery, true, background},
	} {
		if got := o.plan(7, t0.Add(tc.after), tc.outOfSight); got != tc.want {
			t.Errorf("failed at t0, out of sight, planned at +%s: %+v, want %+v", tc.after, got, tc.want)
		}
	}
	// The background request planned last answers: the pass asks again.
	o.record(7, true, StatusTimeout, t0.Add(OutOfSightProbeEvery))
	if got := o.plan(7, t0.Add(4*time.Second), true); got != (probePlan{timeout: FailingStatusTimeout}) {
		t.Errorf("answered in the background: %+v, want the pass to ask with the short timeout", got)
	}
	// Failing and back in sight: the ordinary rule, in the pass.
	var p ProbeMemory
	p.record(8, false, FailingStatusTimeout, t0)
	if got := p.plan(8, t0.Add(time.Second), false); got != (probePlan{timeout: StatusTimeout}) {
		t.Errorf("failing, in sight, never fully probed: %+v, want the full timeout in the pass", got)
	}
}

// An observation does not wait for a member out of sight that is down:
// with one of three stopped and out of sight, it returns in far less than
// the short timeout, counts the member unhealthy, and the background
// request it started is recorded as failed.
func TestObserveDoesNotWaitForMembersOutOfSight(t *testing.T) {
	c := etcdtest.Start(t, etcdtest.Options{Members: 3, Name: "sight"})
	cl, err := New(Config{Endpoints: c.Endpoints()[:2]})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cl.Close() }()
	cl.Probes = &ProbeMemory{}
	ctx := context.Background()
	first := cl.Observe(ctx)
	if !first.Reachable {
		t.Fatalf("etcd not reachable: %s", first.Error)
	}
	var gone uint64
	for _, m := range first.Members {
		if m.Name == c.Members[2].Name {
			gone = m.ID
		}
	}
	// A partition, not a kill: the member's client port accepts and never
	// answers, as a black-holed zone does.
	c.Members[2].Pause(t)
	opts := ObserveOptions{OutOfSight: map[uint64]bool{gone: true}}
	// The member answered before: the first pass out of sight asks it
	// briefly and finds it silent.
	cl.ObserveWith(ctx, opts)
	if cl.Probes.plan(gone, time.Now(), true).timeout != 0 {
		t.Fatal("a silent member out of sight is still asked by the pass")
	}
	// As if that request were OutOfSightProbeEvery old: it is due again.
	cl.Probes.record(gone, false, FailingStatusTimeout, time.Now().Add(-OutOfSightProbeEvery))
	start := time.Now()
	e := cl.ObserveWith(ctx, opts)
	took := time.Since(start)
	if !e.Reachable {
		t.Fatalf("two of three members up, etcd not reachable: %s", e.Error)
	}
	for _, m := range e.Members {
		if m.ID == gone && m.Healthy {
			t.Errorf("silent member %s out of sight counted healthy", m.Name)
		}
	}
	if took >= FailingStatusTimeout {
		t.Errorf("the observation took %s: it waited for the member out of sight", took)
	}
	t.Logf("observation with a silent member out of sight: %s", took)
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
		if got := cl.Probes.plan(m.ID, now, false).timeout; got != want {
			t.Errorf("%s: next status timeout %s, want %s", m.Name, got, want)
		}
	}
}
