package topology

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"testing"
)

// doms parses "c1/a c2/b" into schedulable domains without capacity limit.
func doms(spec string) []DomainInfo {
	var out []DomainInfo
	for _, f := range strings.Fields(spec) {
		out = append(out, DomainInfo{Domain: dom(f)})
	}
	return out
}

func dom(s string) Domain {
	cluster, zone, _ := strings.Cut(s, "/")
	return Domain{Cluster: cluster, Zone: zone}
}

// set returns domains with the named one changed by f.
func set(ds []DomainInfo, name string, f func(*DomainInfo)) []DomainInfo {
	ds = slices.Clone(ds)
	for i := range ds {
		if ds[i].Domain.String() == name {
			f(&ds[i])
		}
	}
	return ds
}

// mems parses "main-0@c1/a main-1@c2/b!" into members; a trailing ! marks
// an unhealthy member.
func mems(spec string) []Member {
	var out []Member
	for _, f := range strings.Fields(spec) {
		healthy := !strings.HasSuffix(f, "!")
		name, where, _ := strings.Cut(strings.TrimSuffix(f, "!"), "@")
		out = append(out, Member{Name: name, Domain: dom(where), Healthy: healthy})
	}
	return out
}

// counts renders per-group counts as "a:2 b:2 c:1".
func counts(cs []Count) string {
	var parts []string
	for _, c := range cs {
		parts = append(parts, fmt.Sprintf("%s:%d", c.Name, c.Members))
	}
	return strings.Join(parts, " ")
}

func stepStrings(steps []Step) []string {
	out := []string{}
	for _, s := range steps {
		out = append(out, s.String())
	}
	return out
}

// plan runs Plan and checks the result's invariants.
func plan(t *testing.T, in Input) Result {
	t.Helper()
	r, err := Plan(in)
	if err != nil {
		t.Fatalf("Plan: %v", err)
	}
	if problem := validate(in, r); problem != "" {
		t.Fatalf("invalid result: %s\nsteps %v", problem, stepStrings(r.Steps))
	}
	return r
}

// TestPlanCanonical places 1, 3, 5, 7 and 9 members over 1 to 5 zones, one
// single-zone cluster per zone.
func TestPlanCanonical(t *testing.T) {
	all := doms("c1/a c2/b c3/c c4/d c5/e")
	cases := []struct {
		replicas, zones int
		counts          string // members per zone, most first
		zoneFailures    int
	}{
		{1, 1, "1", 0}, {1, 3, "1", 0}, {1, 5, "1", 0},
		{3, 1, "3", 0}, {3, 2, "2 1", 0}, {3, 3, "1 1 1", 1}, {3, 4, "1 1 1", 1}, {3, 5, "1 1 1", 1},
		{5, 1, "5", 0}, {5, 2, "3 2", 0}, {5, 3, "2 2 1", 1}, {5, 4, "2 1 1 1", 1}, {5, 5, "1 1 1 1 1", 2},
		{7, 1, "7", 0}, {7, 2, "4 3", 0}, {7, 3, "3 2 2", 1}, {7, 4, "2 2 2 1", 1}, {7, 5, "2 2 1 1 1", 1},
		{9, 1, "9", 0}, {9, 2, "5 4", 0}, {9, 3, "3 3 3", 1}, {9, 4, "3 2 2 2", 1}, {9, 5, "2 2 2 2 1", 2},
	}
	for _, c := range cases {
		t.Run(fmt.Sprintf("%d-members-%d-zones", c.replicas, c.zones), func(t *testing.T) {
			r := plan(t, Input{Replicas: c.replicas, NamePrefix: "main-", Domains: all[:c.zones]})
			var got []string
			perZone := slices.Clone(r.Tolerance.Zones)
			slices.SortStableFunc(perZone, func(a, b Count) int { return b.Members - a.Members })
			for _, z := range perZone {
				got = append(got, fmt.Sprint(z.Members))
			}
			if strings.Join(got, " ") != c.counts || r.Tolerance.ZoneFailures != c.zoneFailures {
				t.Errorf("got zones %v surviving %d, want %s surviving %d", got, r.Tolerance.ZoneFailures, c.counts, c.zoneFailures)
			}
			if (r.Tolerance.ZoneReason == "") != (c.zoneFailures > 0) {
				t.Errorf("zone failures %d with reason %q", r.Tolerance.ZoneFailures, r.Tolerance.ZoneReason)
			}
			// Single-zone clusters: cluster tolerance is zone tolerance.
			if r.Tolerance.ClusterFailures != c.zoneFailures {
				t.Errorf("cluster failures %d, want %d", r.Tolerance.ClusterFailures, c.zoneFailures)
			}
			if len(r.Steps) != c.replicas || r.Steps[0].String() != "Add main-0 to c1/a (ScaleUp)" {
				t.Errorf("steps %v", stepStrings(r.Steps))
			}
			// Planning again from the target changes nothing.
			again := plan(t, Input{Replicas: c.replicas, NamePrefix: "main-", Domains: all[:c.zones], Members: r.Target})
			if len(again.Steps) != 0 {
				t.Errorf("replanning the target gives %v", stepStrings(again.Steps))
			}
		})
	}
}

func TestPlan(t *testing.T) {
	three := doms("c1/a c2/b c3/c")
	four := doms("c1/a c2/b c3/c c4/d")
	// Three clusters in one region, each with the same three zones.
	grid := doms("c1/a c1/b c1/c c2/a c2/b c2/c c3/a c3/b c3/c")
	cordon := func(why Unschedulable) func(*DomainInfo) {
		return func(d *DomainInfo) { d.Unschedulable = why }
	}
	capacity := func(n int) func(*DomainInfo) {
		return func(d *DomainInfo) { d.Capacity = n }
	}

	cases := []struct {
		name string
		in   Input
		// want: steps, zone counts, cluster counts, zone failures, cluster
		// failures; "" for counts means not checked.
		steps            []string
		zones, clusters  string
		zoneF, clusterF  int
		zoneReason       string
		clusterReason    string
		unplaced         int
		currentZoneFails int
	}{
		{
			name:  "already optimal: no steps",
			in:    Input{Replicas: 5, Domains: three, Members: mems("main-0@c1/a main-1@c1/a main-2@c2/b main-3@c2/b main-4@c3/c")},
			steps: []string{}, zones: "a:2 b:2 c:1", zoneF: 1, clusterF: 1, currentZoneFails: 1,
		},
		{
			name:  "tolerant but uneven is left alone",
			in:    Input{Replicas: 7, Domains: three, Members: mems("m-0@c1/a m-1@c1/a m-2@c1/a m-3@c2/b m-4@c2/b m-5@c2/b m-6@c3/c")},
			steps: []string{}, zones: "a:3 b:3 c:1", zoneF: 1, clusterF: 1, currentZoneFails: 1,
		},
		{
			name:  "not tolerant is spread with one move",
			in:    Input{Replicas: 5, Domains: three, Members: mems("main-0@c1/a main-1@c1/a main-2@c1/a main-3@c2/b main-4@c3/c")},
			steps: []string{"Move main-2 from c1/a to c2/b (Spread)"}, zones: "a:2 b:2 c:1", zoneF: 1, clusterF: 1,
		},
		{
			name: "zone cordoned: its member is evacuated even though tolerance drops",
			in: Input{Replicas: 5, Domains: set(three, "c3/c", cordon(ZoneCordoned)),
				Members: mems("main-0@c1/a main-1@c1/a main-2@c2/b main-3@c2/b main-4@c3/c")},
			steps: []string{"Move main-4 from c3/c to c1/a (Evacuate)"}, zones: "a:3 b:2", zoneF: 0, clusterF: 0,
			zoneReason:       "two zones and five members: losing zone a (3 members) loses quorum",
			clusterReason:    "two clusters and five members: losing cluster c1 (3 members) loses quorum",
			currentZoneFails: 1,
		},
		{
			name: "zone cordoned with a spare zone: tolerance kept",
			in: Input{Replicas: 5, Domains: set(four, "c3/c", cordon(ZoneCordoned)),
				Members: mems("main-0@c1/a main-1@c1/a main-2@c2/b main-3@c2/b main-4@c3/c")},
			steps: []string{"Move main-4 from c3/c to c4/d (Evacuate)"}, zones: "a:2 b:2 d:1", zoneF: 1, clusterF: 1, currentZoneFails: 1,
		},
		{
			name: "zone failed: unhealthy members evacuated first, leader last",
			in: Input{Replicas: 5, Domains: set(four, "c2/b", cordon(Unhealthy)), Leader: "main-0",
				Members: mems("main-0@c1/a main-1@c1/a main-2@c2/b! main-3@c2/b! main-4@c3/c")},
			steps: []string{
				"Move main-2 from c2/b to c3/c (Evacuate)",
				"Move main-3 from c2/b to c4/d (Evacuate)",
			},
			zones: "a:2 c:2 d:1", zoneF: 1, clusterF: 1,
		},
		{
			name: "zone failed and nowhere tolerant to go",
			in: Input{Replicas: 5, Domains: set(three, "c2/b", cordon(Unhealthy)),
				Members: mems("main-0@c1/a main-1@c1/a main-2@c2/b! main-3@c2/b! main-4@c3/c")},
			steps: []string{
				"Move main-2 from c2/b to c1/a (Evacuate)",
				"Move main-3 from c2/b to c3/c (Evacuate)",
			},
			zones: "a:3 c:2", zoneF: 0, clusterF: 0,
			zoneReason: "two zones and five members: losing zone a (3 members) loses quorum",
		},
		{
			name:  "failed zone returned: one member moves back",
			in:    Input{Replicas: 5, Domains: three, Members: mems("main-0@c1/a main-1@c1/a main-2@c1/a main-3@c3/c main-4@c3/c")},
			steps: []string{"Move main-2 from c1/a to c2/b (Spread)"}, zones: "a:2 b:1 c:2", zoneF: 1, clusterF: 1,
		},
		{
			name:  "failed zone returned to a tolerant placement: nothing moves",
			in:    Input{Replicas: 5, Domains: four, Members: mems("main-0@c1/a main-1@c1/a main-2@c3/c main-3@c3/c main-4@c4/d")},
			steps: []string{}, zones: "a:2 c:2 d:1", zoneF: 1, clusterF: 1, currentZoneFails: 1,
		},
		{
			name:  "capacity limits a zone",
			in:    Input{Replicas: 7, NamePrefix: "m-", Domains: set(three, "c3/c", capacity(1))},
			zones: "a:3 b:3 c:1", zoneF: 1, clusterF: 1,
			steps: []string{
				"Add m-0 to c1/a (ScaleUp)", "Add m-1 to c1/a (ScaleUp)", "Add m-2 to c1/a (ScaleUp)",
				"Add m-3 to c2/b (ScaleUp)", "Add m-4 to c2/b (ScaleUp)", "Add m-5 to c2/b (ScaleUp)",
				"Add m-6 to c3/c (ScaleUp)",
			},
		},
		{
			name: "capacity leaves replicas unplaced",
			in: Input{Replicas: 5, NamePrefix: "m-", Members: mems("m-0@c1/a"),
				Domains: set(set(set(three, "c1/a", capacity(1)), "c2/b", capacity(1)), "c3/c", capacity(1))},
			steps: []string{"Add m-1 to c2/b (ScaleUp)", "Add m-2 to c3/c (ScaleUp)"},
			zones: "a:1 b:1 c:1", zoneF: 1, clusterF: 1, unplaced: 2,
			clusterReason: "", currentZoneFails: 0,
		},
		{
			name: "capacity lowered: the excess is rebalanced",
			in: Input{Replicas: 5, Domains: set(four, "c1/a", capacity(1)),
				Members: mems("main-0@c1/a main-1@c1/a main-2@c2/b main-3@c2/b main-4@c3/c")},
			steps: []string{"Move main-1 from c1/a to c4/d (Rebalance)"}, zones: "a:1 b:2 c:1 d:1", zoneF: 1, clusterF: 1, currentZoneFails: 1,
		},
		{
			name: "scale up with a leader",
			in: Input{Replicas: 5, NamePrefix: "main-", Domains: three, Leader: "main-1",
				Members: mems("main-0@c1/a main-1@c2/b main-2@c3/c")},
			steps: []string{"Add main-3 to c1/a (ScaleUp)", "Add main-4 to c2/b (ScaleUp)"},
			zones: "a:2 b:2 c:1", zoneF: 1, clusterF: 1, currentZoneFails: 1,
		},
		{
			name: "scale down keeps the leader",
			in: Input{Replicas: 3, Domains: three, Leader: "main-3",
				Members: mems("main-0@c1/a main-1@c1/a main-2@c2/b main-3@c2/b main-4@c3/c")},
			steps: []string{"Remove main-1 from c1/a (ScaleDown)", "Remove main-2 from c2/b (ScaleDown)"},
			zones: "a:1 b:1 c:1", zoneF: 1, clusterF: 1, currentZoneFails: 1,
		},
		{
			name: "scale down to one keeps the leader",
			in: Input{Replicas: 1, Domains: three, Leader: "main-2",
				Members: mems("main-0@c1/a main-1@c2/b main-2@c3/c")},
			steps: []string{"Remove main-0 from c1/a (ScaleDown)", "Remove main-1 from c2/b (ScaleDown)"},
			zones: "c:1", zoneF: 0, clusterF: 0, currentZoneFails: 1,
			zoneReason: "one zone and one member: losing zone c (1 member) loses quorum",
		},
		{
			name: "scale down removes the unhealthy member of a zone first",
			in: Input{Replicas: 3, Domains: three, Leader: "main-0",
				Members: mems("main-0@c1/a main-1@c1/a! main-2@c2/b main-3@c2/b main-4@c3/c")},
			steps: []string{"Remove main-1 from c1/a (ScaleDown)", "Remove main-3 from c2/b (ScaleDown)"},
			zones: "a:1 b:1 c:1", zoneF: 1, clusterF: 1, currentZoneFails: 0,
		},
		{
			name: "scale down prefers members in a cordoned zone",
			in: Input{Replicas: 3, Domains: set(four, "c4/d", cordon(ZoneCordoned)),
				Members: mems("main-0@c1/a main-1@c2/b main-2@c3/c main-3@c4/d main-4@c4/d")},
			steps: []string{"Remove main-3 from c4/d (ScaleDown)", "Remove main-4 from c4/d (ScaleDown)"},
			zones: "a:1 b:1 c:1", zoneF: 1, clusterF: 1, currentZoneFails: 1,
		},
		{
			name:  "member in an unlisted domain is evacuated",
			in:    Input{Replicas: 3, Domains: three, Members: mems("main-0@c1/a main-1@c2/b main-2@gone/c")},
			steps: []string{"Move main-2 from gone/c to c3/c (Evacuate)"},
			zones: "a:1 b:1 c:1", zoneF: 1, clusterF: 1, currentZoneFails: 1,
		},
		{
			name: "nowhere to go: members stay in cordoned domains",
			in: Input{Replicas: 3, Domains: set(set(set(three, "c1/a", cordon(ClusterCordoned)), "c2/b", cordon(ClusterCordoned)), "c3/c", cordon(Unhealthy)),
				Members: mems("main-0@c1/a main-1@c2/b main-2@c3/c")},
			steps: []string{}, zones: "a:1 b:1 c:1", zoneF: 1, clusterF: 1, currentZoneFails: 1,
		},
		{
			name: "new members take the lowest free ordinals",
			in: Input{Replicas: 5, NamePrefix: "main-", Domains: doms("c1/a c2/b c3/c c4/d c5/e"),
				Members: mems("main-0@c1/a main-2@c2/b main-5@c3/c")},
			steps: []string{"Add main-1 to c4/d (ScaleUp)", "Add main-3 to c5/e (ScaleUp)"},
			zones: "a:1 b:1 c:1 d:1 e:1", zoneF: 2, clusterF: 2, currentZoneFails: 1,
		},
		{
			name: "shared zones: a zone name in two clusters is one failure zone",
			in:   Input{Replicas: 3, NamePrefix: "m-", Domains: doms("c1/a c2/a c3/b")},
			// Two zones only: no placement of three survives losing zone a
			// and b both; spreading over clusters is still worth it.
			zones: "a:2 b:1", clusters: "c1:1 c2:1 c3:1", zoneF: 0, clusterF: 1,
			zoneReason: "two zones and three members: losing zone a (2 members) loses quorum",
			steps:      []string{"Add m-0 to c1/a (ScaleUp)", "Add m-1 to c2/a (ScaleUp)", "Add m-2 to c3/b (ScaleUp)"},
		},
		{
			name:  "multi-zone clusters: two clusters over three zones",
			in:    Input{Replicas: 5, NamePrefix: "m-", Domains: doms("c1/a c1/b c1/c c2/a c2/b c2/c")},
			zones: "a:2 b:2 c:1", clusters: "c1:3 c2:2", zoneF: 1, clusterF: 0,
			clusterReason: "two clusters and five members: losing cluster c1 (3 members) loses quorum",
		},
		{
			name:  "multi-zone clusters: nine members over three clusters of three zones, one per domain",
			in:    Input{Replicas: 9, NamePrefix: "m-", Domains: grid},
			zones: "a:3 b:3 c:3", clusters: "c1:3 c2:3 c3:3", zoneF: 1, clusterF: 1,
		},
		{
			name: "multi-zone clusters: cluster cordoned, its member moves to another cluster in the same zone",
			in: Input{Replicas: 3, Domains: set(set(set(grid, "c3/a", cordon(ClusterCordoned)), "c3/b", cordon(ClusterCordoned)), "c3/c", cordon(ClusterCordoned)),
				Members: mems("main-0@c1/a main-1@c2/b main-2@c3/c")},
			steps: []string{"Move main-2 from c3/c to c1/c (Evacuate)"},
			zones: "a:1 b:1 c:1", clusters: "c1:2 c2:1", zoneF: 1, clusterF: 0, currentZoneFails: 1,
			clusterReason: "two clusters and three members: losing cluster c1 (2 members) loses quorum",
		},
		{
			// Found by TestOptimalRandom: raising cluster tolerance dropped
			// the zone tolerance already reached.
			name:  "zone tolerance kept while raising cluster tolerance",
			in:    Input{Replicas: 7, NamePrefix: "m-", Domains: doms("c2/z2 c0/z1 c1/z2 c0/z0")},
			zones: "z0:2 z1:2 z2:3", clusters: "c0:4 c1:2 c2:1", zoneF: 1, clusterF: 0,
		},
		{
			name:  "zero replicas removes everyone, leader last",
			in:    Input{Replicas: 0, Domains: three, Leader: "main-0", Members: mems("main-0@c1/a main-1@c2/b main-2@c3/c!")},
			steps: []string{"Remove main-2 from c3/c (ScaleDown)", "Remove main-1 from c2/b (ScaleDown)", "Remove main-0 from c1/a (ScaleDown)"},
			zones: "", zoneF: 0, clusterF: 0, zoneReason: "no members", clusterReason: "no members",
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := plan(t, c.in)
			if c.steps != nil && !slices.Equal(stepStrings(r.Steps), c.steps) {
				t.Errorf("steps:\n got %q\nwant %q", stepStrings(r.Steps), c.steps)
			}
			if got := counts(r.Tolerance.Zones); got != c.zones {
				t.Errorf("zones: got %q, want %q", got, c.zones)
			}
			if got := counts(r.Tolerance.Clusters); c.clusters != "" && got != c.clusters {
				t.Errorf("clusters: got %q, want %q", got, c.clusters)
			}
			if r.Tolerance.ZoneFailures != c.zoneF || r.Tolerance.ClusterFailures != c.clusterF {
				t.Errorf("survives %d zone and %d cluster failures, want %d and %d",
					r.Tolerance.ZoneFailures, r.Tolerance.ClusterFailures, c.zoneF, c.clusterF)
			}
			if c.zoneReason != "" && r.Tolerance.ZoneReason != c.zoneReason {
				t.Errorf("zone reason: got %q, want %q", r.Tolerance.ZoneReason, c.zoneReason)
			}
			if c.clusterReason != "" && r.Tolerance.ClusterReason != c.clusterReason {
				t.Errorf("cluster reason: got %q, want %q", r.Tolerance.ClusterReason, c.clusterReason)
			}
			if r.Unplaced != c.unplaced {
				t.Errorf("unplaced: got %d, want %d", r.Unplaced, c.unplaced)
			}
			if r.Current.ZoneFailures != c.currentZoneFails {
				t.Errorf("current zone failures: got %d, want %d", r.Current.ZoneFailures, c.currentZoneFails)
			}
			checkOptimal(t, c.in)
		})
	}
}

// TestPlanFailedZoneCycle walks a zone failure and return one step at a
// time, as the hub does: evacuate, then move back only what raises
// tolerance.
func TestPlanFailedZoneCycle(t *testing.T) {
	healthy := doms("c1/a c2/b c3/c")
	failed := set(healthy, "c3/c", func(d *DomainInfo) { d.Unschedulable = Unhealthy })
	in := Input{Replicas: 5, NamePrefix: "main-", Domains: healthy}
	members := converge(t, in)
	if got := counts(Evaluate(members).Zones); got != "a:2 b:2 c:1" {
		t.Fatalf("bootstrap: %s", got)
	}

	// Zone c fails: its member goes down and is evacuated.
	for i := range members {
		if members[i].Domain.Zone == "c" {
			members[i].Healthy = false
		}
	}
	in.Domains, in.Members = failed, members
	r := plan(t, in)
	if got := stepStrings(r.Steps); !slices.Equal(got, []string{"Move main-4 from c3/c to c1/a (Evacuate)"}) {
		t.Fatalf("after failure: %q", got)
	}
	if r.Current.ZoneFailures != 0 || r.Tolerance.ZoneFailures != 0 {
		t.Fatalf("after failure: tolerance %d now, %d after", r.Current.ZoneFailures, r.Tolerance.ZoneFailures)
	}
	members = converge(t, in)

	// Zone c returns: one member moves back, which makes the placement
	// tolerant again.
	in.Domains, in.Members = healthy, members
	r = plan(t, in)
	if got := stepStrings(r.Steps); len(got) != 1 || r.Steps[0].Reason != Spread || r.Steps[0].To != dom("c3/c") {
		t.Fatalf("after return: %q", got)
	}
	members = converge(t, in)
	if got := Evaluate(members); got.ZoneFailures != 1 {
		t.Fatalf("after return: %+v", got)
	}
}

// converge applies the plan one step at a time, planning again after each
// step, and returns the final members. It fails when a replan is longer than
// what was left of the previous plan.
func converge(t *testing.T, in Input) []Member {
	t.Helper()
	r := plan(t, in)
	for len(r.Steps) > 0 {
		left := len(r.Steps) - 1
		in.Members = applyStep(in.Members, r.Steps[0])
		r = plan(t, in)
		if len(r.Steps) > left {
			t.Fatalf("replan after a step has %d steps, %d were left", len(r.Steps), left)
		}
	}
	return in.Members
}

// TestPlanStable walks random plans one step at a time, planning again
// after each step.
func TestPlanStable(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 11))
	exact, steps := 0, 0
	for range 3000 {
		in := randomInput(rng, 6, 9)
		e, s := walkPlan(t, in, plan(t, in))
		exact += e
		steps += s
	}
	t.Logf("%d of %d replans gave exactly the rest of the plan", exact, steps)
}

// walkPlan executes r's steps one at a time, planning again after each: the
// new plan must be the rest of the previous one or an equivalent plan (as
// many steps to a target scoring the same), and none at the end. It returns
// how many replans gave exactly the rest, and how many steps were taken.
func walkPlan(t testing.TB, in Input, r Result) (exact, steps int) {
	t.Helper()
	want := scoreTarget(in, r.Target)
	for len(r.Steps) > 0 {
		rest := r.Steps[1:]
		in.Members = applyStep(in.Members, r.Steps[0])
		var err error
		if r, err = Plan(in); err != nil {
			t.Fatalf("Plan(%+v): %v", in, err)
		}
		steps++
		if slices.Equal(r.Steps, rest) {
			exact++
			continue
		}
		// Scores are relative to the current members: compare the target's
		// tolerance and placement, and the number of steps left.
		got := scoreTarget(in, r.Target)
		if len(r.Steps) != len(rest) || got.placed != want.placed || got.fallback != want.fallback ||
			got.zoneTol != want.zoneTol || got.clusterTol != want.clusterTol {
			t.Fatalf("after a step, Plan(%+v):\n got %q (%v)\nwant %q (%v)", in, stepStrings(r.Steps), got, stepStrings(rest), want)
		}
	}
	return exact, steps
}

// TestPlanDeterministic shuffles the input's slices: the result must not
// change.
func TestPlanDeterministic(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for range 2000 {
		in := randomInput(rng, 6, 9)
		want := plan(t, in)
		for range 3 {
			shuffled := in
			shuffled.Domains = slices.Clone(in.Domains)
			shuffled.Members = slices.Clone(in.Members)
			rng.Shuffle(len(shuffled.Domains), func(i, j int) {
				shuffled.Domains[i], shuffled.Domains[j] = shuffled.Domains[j], shuffled.Domains[i]
			})
			rng.Shuffle(len(shuffled.Members), func(i, j int) {
				shuffled.Members[i], shuffled.Members[j] = shuffled.Members[j], shuffled.Members[i]
			})
			if got := plan(t, shuffled); !reflect.DeepEqual(got, want) {
				t.Fatalf("shuffled input %+v:\n got %+v\nwant %+v", shuffled, got, want)
			}
		}
	}
}

func TestPlanErrors(t *testing.T) {
	ok := doms("c1/a")
	cases := []struct {
		name string
		in   Input
		want error
	}{
		{"negative replicas", Input{Replicas: -1, Domains: ok}, ErrInvalidReplicas},
		{"too many replicas", Input{Replicas: MaxMembers + 1, Domains: ok}, ErrInvalidReplicas},
		{"empty zone", Input{Replicas: 1, Domains: doms("c1/")}, ErrInvalidDomain},
		{"empty cluster", Input{Replicas: 1, Domains: doms("/a")}, ErrInvalidDomain},
		{"negative capacity", Input{Replicas: 1, Domains: set(ok, "c1/a", func(d *DomainInfo) { d.Capacity = -1 })}, ErrInvalidDomain},
		{"duplicate domain", Input{Replicas: 1, Domains: doms("c1/a c2/b c1/a")}, ErrInvalidDomain},
		{"duplicate member", Input{Replicas: 1, Domains: ok, Members: mems("m-0@c1/a m-0@c1/a")}, ErrInvalidMember},
		{"empty member name", Input{Replicas: 1, Domains: ok, Members: mems("@c1/a")}, ErrInvalidMember},
		{"member without domain", Input{Replicas: 1, Domains: ok, Members: mems("m-0@")}, ErrInvalidMember},
		{"too many members", Input{Replicas: 1, Domains: ok, Members: func() []Member {
			var ms []Member
			for i := range MaxMembers + 1 {
				ms = append(ms, Member{Name: fmt.Sprint("m-", i), Domain: dom("c1/a")})
			}
			return ms
		}()}, ErrInvalidMember},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if _, err := Plan(c.in); !errors.Is(err, c.want) {
				t.Errorf("got %v, want %v", err, c.want)
			}
		})
	}
}

func TestEvaluate(t *testing.T) {
	cases := []struct {
		name                 string
		members              string
		zoneF, clusterF      int
		zoneReason, clReason string
	}{
		{"issue example", "m-0@c1/a m-1@c1/a m-2@c2/b", 0, 0,
			"two zones and three members: losing zone a (2 members) loses quorum",
			"two clusters and three members: losing cluster c1 (2 members) loses quorum"},
		{"three zones", "m-0@c1/a m-1@c2/b m-2@c3/c", 1, 1, "", ""},
		{"five over five zones", "m-0@c1/a m-1@c2/b m-2@c3/c m-3@c4/d m-4@c5/e", 2, 2, "", ""},
		{"unhealthy member lowers tolerance", "m-0@c1/a m-1@c1/a m-2@c2/b m-3@c2/b m-4@c3/c!", 0, 0,
			"three zones and five members, one unhealthy: losing zone a (2 members) loses quorum", ""},
		{"unhealthy member in the lost zone", "m-0@c1/a m-1@c1/a! m-2@c2/b m-3@c2/b m-4@c3/c", 0, 0,
			"three zones and five members, one unhealthy: losing zone b (2 members) loses quorum", ""},
		{"worst zone holds unhealthy members", "m-0@c1/a m-1@c1/a! m-2@c1/a! m-3@c2/b m-4@c2/b m-5@c3/c m-6@c4/d", 0, 0,
			"four zones and seven members, two unhealthy: losing zone b (2 members) loses quorum", ""},
		{"quorum already lost", "m-0@c1/a m-1@c2/b! m-2@c3/c!", 0, 0,
			"quorum is already lost: 1 of 3 members healthy, quorum is 2", ""},
		{"shared zone across clusters", "m-0@c1/a m-1@c2/a m-2@c3/b", 0, 1,
			"two zones and three members: losing zone a (2 members) loses quorum", ""},
		{"one member", "m-0@c1/a", 0, 0, "one zone and one member: losing zone a (1 member) loses quorum", ""},
		{"no members", "", 0, 0, "no members", "no members"},
		{"healthy count shown when the zone has unhealthy members", "m-0@c1/a m-1@c1/a! m-2@c1/a m-3@c2/b m-4@c3/c", 0, 0,
			"three zones and five members, one unhealthy: losing zone a (2 healthy members) loses quorum", ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := Evaluate(mems(c.members))
			if got.ZoneFailures != c.zoneF || got.ClusterFailures != c.clusterF {
				t.Errorf("survives %d zones and %d clusters, want %d and %d", got.ZoneFailures, got.ClusterFailures, c.zoneF, c.clusterF)
			}
			if got.ZoneReason != c.zoneReason {
				t.Errorf("zone reason:\n got %q\nwant %q", got.ZoneReason, c.zoneReason)
			}
			if c.clReason != "" && got.ClusterReason != c.clReason {
				t.Errorf("cluster reason:\n got %q\nwant %q", got.ClusterReason, c.clReason)
			}
		})
	}
}

func TestCompareNames(t *testing.T) {
	names := []string{"main-10", "main-2", "b", "main-1", "a-3", "main-01", "main-0", "main-"}
	slices.SortFunc(names, CompareNames)
	want := []string{"a-3", "b", "main-", "main-0", "main-01", "main-1", "main-2", "main-10"}
	if !slices.Equal(names, want) {
		t.Errorf("got %q, want %q", names, want)
	}
}
