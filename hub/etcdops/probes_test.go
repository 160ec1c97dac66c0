package etcdops

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/etcdfed/etcdfed/dev/etcdtest"
	"github.com/etcdfed/etcdfed/hub/planner"
)

// How a member is asked for its status, by what is remembered of it: a
// member that answered, or was never asked and is a started voter in
// sight, is asked by the pass; one that did not answer, or a learner or a
// member out of sight never asked, only in the background, at most every
// FailingProbeEvery (OutOfSightProbeEvery out of sight) and one request
// at a time.
func TestPlanProbe(t *testing.T) {
	t0 := time.Date(2026, 11, 23, 10, 0, 0, 0, time.UTC)
	inPass := probePlan{timeout: StatusTimeout}
	short := probePlan{timeout: FailingStatusTimeout}
	background := probePlan{background: StatusTimeout}
	answered := probe{lastAsked: t0}
	failed := probe{failing: true, lastAsked: t0}
	for _, tc := range []struct {
		name                          string
		p                             probe
		after                         time.Duration
		outOfSight, learner, nomemory bool
		want                          probePlan
	}{
		{name: "never asked", want: inPass},
		{name: "answered", p: answered, after: time.Second, want: inPass},
		{name: "answered, a learner", p: answered, after: time.Second, learner: true, want: inPass},
		{name: "answered, out of sight", p: answered, after: time.Second, outOfSight: true, want: short},
		{name: "never asked, a learner", learner: true, want: background},
		{name: "never asked, out of sight", outOfSight: true, want: background},
		{name: "failed, asked again too soon", p: failed, after: FailingProbeEvery - time.Millisecond, want: probePlan{}},
		{name: "failed, due", p: failed, after: FailingProbeEvery, want: background},
		{name: "failed, out of sight, not yet due", p: failed, after: FailingProbeEvery, outOfSight: true, want: probePlan{}},
		{name: "failed, out of sight, due", p: failed, after: OutOfSightProbeEvery, outOfSight: true, want: background},
		{name: "failed, a request in flight", p: probe{failing: true, lastAsked: t0, inFlight: true}, after: time.Hour, want: probePlan{}},
		{name: "no memory, failed", p: failed, after: time.Second, nomemory: true, want: inPass},
		{name: "no memory, out of sight", nomemory: true, outOfSight: true, want: short},
		{name: "no memory, a learner", nomemory: true, learner: true, want: inPass},
	} {
		if got := planProbe(tc.p, t0.Add(tc.after), tc.outOfSight, tc.learner, !tc.nomemory); got != tc.want {
			t.Errorf("%s: %+v, want %+v", tc.name, got, tc.want)
		}
	}
}

// The memory marks a background request in flight until it is recorded,
// records answers and failures, forgets members no longer listed, and nil
// remembers nothing.
func TestProbeMemory(t *testing.T) {
	t0 := time.Date(2026, 11, 23, 10, 0, 0, 0, time.UTC)
	var m ProbeMemory
	if got := m.plan(1, t0, false, true); got.background == 0 {
		t.Fatalf("a learner never asked: %+v, want a background request", got)
	}
	if got := m.plan(1, t0.Add(time.Hour), false, true); got != (probePlan{}) {
		t.Errorf("request in flight: %+v, want nothing", got)
	}
	m.record(1, true, false, t0.Add(time.Second))
	if got := m.plan(1, t0.Add(2*time.Second), false, true); got.timeout != StatusTimeout {
		t.Errorf("answered in the background: %+v, want the pass to ask it", got)
	}
	m.record(1, false, false, t0.Add(3*time.Second))
	if got := m.plan(1, t0.Add(3*time.Second+FailingProbeEvery), false, false); got.background == 0 {
		t.Errorf("failed in the pass: %+v, want a background request once due", got)
	}
	m.record(2, false, false, t0)
	m.forget(map[uint64]bool{1: true})
	if got := m.plan(2, t0.Add(time.Second), false, false); got.timeout != StatusTimeout {
		t.Errorf("forgotten member: %+v, want the pass to ask it", got)
	}
	var none *ProbeMemory
	none.record(3, false, false, t0)
	if got := none.plan(3, t0, false, true); got.timeout != StatusTimeout {
		t.Errorf("nil memory: %+v", got)
	}
}

// A member answering without a leader is leaderless since its first such
// answer, until it names a leader or does not answer (issue 35: the hub
// judges a member cut off from its peers from when it answers so, not
// from when it went unready).
func TestProbeMemoryLeaderlessSince(t *testing.T) {
	t0 := time.Date(2026, 11, 28, 10, 0, 0, 0, time.UTC)
	var m ProbeMemory
	for i, step := range []struct {
		ok, leaderless bool
		want           time.Time
	}{
		{true, false, time.Time{}},
		{true, true, t0.Add(time.Second)},
		{true, true, t0.Add(time.Second)},
		{false, false, time.Time{}},
		{true, true, t0.Add(4 * time.Second)},
		{true, false, time.Time{}},
	} {
		m.record(1, step.ok, step.leaderless, t0.Add(time.Duration(i)*time.Second))
		if got := m.leaderlessSince(1); !got.Equal(step.want) {
			t.Errorf("step %d (answered %t, leaderless %t): leaderless since %v, want %v", i, step.ok, step.leaderless, got, step.want)
		}
	}
}

// An observation waits for a silent member at most once: with one of
// three frozen (its port accepts and never answers, as behind a
// partition), in sight or out of sight, the first observation asks it and
// finds it silent; every later one returns in far less than the short
// timeout, counts it unhealthy, and leaves the asking to the background.
func TestObserveWaitsForSilentMembersOnce(t *testing.T) {
	for _, outOfSight := range []bool{false, true} {
		t.Run(fmt.Sprintf("out of sight %t", outOfSight), func(t *testing.T) {
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
			// A follower freezes: a frozen leader would leave the others
			// without one for an election.
			if err := c.MakeFollower(ctx, c.Members[2]); err != nil {
				t.Fatal(err)
			}
			c.Members[2].Pause(t)
			opts := ObserveOptions{OutOfSight: map[uint64]bool{gone: outOfSight}}
			// It answered before: the first observation asks it.
			asked := observeListed(t, cl, opts)
			for _, m := range asked.Members {
				if m.ID == gone && m.Healthy {
					t.Fatalf("the paused member %s answered", m.Name)
				}
			}
			if cl.Probes.plan(gone, time.Now(), outOfSight, false).timeout != 0 {
				t.Fatal("a silent member is still asked by the pass")
			}
			// As if that request were old enough for the next to be due.
			cl.Probes.record(gone, false, false, time.Now().Add(-OutOfSightProbeEvery))
			start := time.Now()
			e := cl.ObserveWith(ctx, opts)
			took := time.Since(start)
			if !e.Reachable {
				t.Fatalf("two of three members up, etcd not reachable: %s", e.Error)
			}
			for _, m := range e.Members {
				if m.ID == gone && m.Healthy {
					t.Errorf("silent member %s counted healthy", m.Name)
				}
			}
			if took >= FailingStatusTimeout {
				t.Errorf("the observation took %s: it waited for the silent member", took)
			}
			t.Logf("observation with a silent member: %s", took)
		})
	}
}

// observeListed is ObserveWith until etcd answers the member list (for up
// to ten seconds): an observation without one asks no member, and a
// member list can fail for a moment after a leader transfer. A test that
// counts what an observation asked needs one that listed.
func observeListed(t *testing.T, cl *Client, opts ObserveOptions) planner.Etcd {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		e := cl.ObserveWith(context.Background(), opts)
		if e.Reachable {
			return e
		}
		if time.Now().After(deadline) {
			t.Fatalf("etcd did not list its members for 10s: %s", e.Error)
		}
		t.Logf("member list failed, observing again: %s", e.Error)
		time.Sleep(100 * time.Millisecond)
	}
}

// Observe records which members answered: with one of three stopped, the
// stopped member counts unhealthy and is asked next only in the
// background; the others are asked by the pass.
func TestObserveRemembersSilentMembers(t *testing.T) {
	c := etcdtest.Start(t, etcdtest.Options{Members: 3, Name: "probe"})
	cl, err := New(Config{Endpoints: c.Endpoints()})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cl.Close() }()
	cl.Probes = &ProbeMemory{}
	ctx := context.Background()
	// A follower stops: the leader's loss would leave the two others
	// without a leader for an election, and unhealthy for that long (the
	// first election, under load, can go to any member).
	stopped := c.Members[2]
	if err := c.MakeFollower(ctx, stopped); err != nil {
		t.Fatal(err)
	}
	stopped.Stop()
	e := cl.Observe(ctx)
	if !e.Reachable {
		t.Fatalf("two of three members up, etcd not reachable: %s", e.Error)
	}
	later := time.Now().Add(FailingProbeEvery)
	for _, m := range e.Members {
		want := probePlan{timeout: StatusTimeout}
		if m.Name == stopped.Name {
			want = probePlan{background: StatusTimeout}
			if m.Healthy {
				t.Errorf("stopped member %s reported healthy", m.Name)
			}
		} else if !m.Healthy {
			t.Errorf("member %s reported unhealthy", m.Name)
		}
		if got := cl.Probes.plan(m.ID, later, false, false); got != want {
			t.Errorf("%s: next status request %+v, want %+v", m.Name, got, want)
		}
	}
}
