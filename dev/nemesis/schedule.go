package nemesis

import (
	"cmp"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"time"

	"github.com/etcdfed/etcdfed/dev/localenv"
)

// Kind is a kind of fault.
type Kind string

// Kinds of fault.
const (
	// Partition cuts the network into groups of units (the hub, member
	// clusters, zones); each group reaches only its own. Units no group
	// names reach every group.
	Partition Kind = "partition"
	// OneWay cuts: a unit cannot connect to another, which still
	// connects to it.
	OneWay Kind = "one-way"
	// KillCluster stops a member cluster's processes and apiserver
	// (FailZone's kill mode); healed, it starts again with its data.
	KillCluster Kind = "kill-cluster"
	// KillHub SIGKILLs the hub, which is started again at once.
	KillHub Kind = "kill-hub"
	// StopHub stops the hub for the hold, then starts it.
	StopHub Kind = "stop-hub"
	// Distance puts distance (round trips, jitter, loss) between units
	// for the hold (localenv.Env.SetDistance), then none again.
	Distance Kind = "distance"
)

// Kinds lists every kind, in the order summaries show them. A new kind
// goes last: weighted draws walk this order, so that a profile without
// the new kind draws what it drew before.
var Kinds = []Kind{Partition, OneWay, KillCluster, KillHub, StopHub, Distance}

// Topology names the units faults act on.
type Topology struct {
	// Hub is the hub's unit name ("hub").
	Hub string
	// Clusters are the member clusters.
	Clusters []Cluster
}

// Cluster is a member cluster and its zones' unit names.
type Cluster struct {
	Name  string
	Zones []string
}

// units lists every unit: the hub, then each cluster followed by its
// zones.
func (t Topology) units() []string {
	out := []string{t.Hub}
	for _, c := range t.Clusters {
		out = append(out, c.Name)
		out = append(out, c.Zones...)
	}
	return out
}

// family is the member cluster a unit belongs to (itself for a cluster,
// "" for the hub).
func (t Topology) family(unit string) string {
	for _, c := range t.Clusters {
		if c.Name == unit || slices.Contains(c.Zones, unit) {
			return c.Name
		}
	}
	return ""
}

// Profile says how schedules are drawn.
type Profile struct {
	Name string
	// Grace is the ring's member and zone grace: a hold beyond it lets
	// the hub act (declare failures, move members, recover).
	Grace time.Duration
	// MaxFaults per schedule (at least one).
	MaxFaults int
	// Short holds are drawn from Short (within the grace), long ones from
	// Long (beyond the grace plus the hub's detection); LongShare of the
	// holds are long.
	Short, Long [2]time.Duration
	LongShare   float64
	// AutomaticShare of the schedules run with quorumLossRecovery
	// Automatic.
	AutomaticShare float64
	// MaxKilled bounds the member clusters killed at once.
	MaxKilled int
	// Weights of the kinds.
	Weights map[Kind]int
}

var weights = map[Kind]int{Partition: 35, OneWay: 15, KillCluster: 25, KillHub: 10, StopHub: 15}

// wanWeights add distance to weights.
var wanWeights = map[Kind]int{Partition: 30, OneWay: 10, KillCluster: 20, KillHub: 10, StopHub: 10, Distance: 20}

// Profiles: Full for `make nemesis`, CI for the seeded run of .ci/run
// (fewer faults, shorter long holds, still beyond the grace), WAN as Full
// with distance between units among the faults. Full and CI draw no
// distance, so that their seeds give the schedules they gave before
// distance existed.
var (
	Full = Profile{Name: "full", Grace: 30 * time.Second, MaxFaults: 3,
		Short: [2]time.Duration{5 * time.Second, 25 * time.Second}, Long: [2]time.Duration{45 * time.Second, 90 * time.Second}, LongShare: 0.5,
		AutomaticShare: 0.4, MaxKilled: 2, Weights: weights}
	CI = Profile{Name: "ci", Grace: 30 * time.Second, MaxFaults: 2,
		Short: [2]time.Duration{5 * time.Second, 20 * time.Second}, Long: [2]time.Duration{45 * time.Second, 55 * time.Second}, LongShare: 0.5,
		AutomaticShare: 0.4, MaxKilled: 2, Weights: weights}
	WAN = Profile{Name: "wan", Grace: 30 * time.Second, MaxFaults: 3,
		Short: [2]time.Duration{5 * time.Second, 25 * time.Second}, Long: [2]time.Duration{45 * time.Second, 90 * time.Second}, LongShare: 0.5,
		AutomaticShare: 0.4, MaxKilled: 2, Weights: wanWeights}
)

// ProfileNamed returns the profile of that name ("" is Full).
func ProfileNamed(name string) (Profile, error) {
	switch name {
	case "", Full.Name:
		return Full, nil
	case CI.Name:
		return CI, nil
	case WAN.Name:
		return WAN, nil
	}
	return Profile{}, fmt.Errorf("nemesis: no profile %q (full, ci or wan)", name)
}

// Fault is one fault of a schedule.
type Fault struct {
	Kind Kind
	// At is when it is injected, from the schedule's start; Hold how long
	// it lasts until healed (0 for KillHub, healed by itself).
	At, Hold time.Duration
	// Cut is the partition of Partition and OneWay.
	Cut localenv.Partition
	// Cluster is the member cluster of KillCluster.
	Cluster string
	// Distance is the distance of Distance.
	Distance localenv.Distance
}

// End is when the fault is healed.
func (f Fault) End() time.Duration { return f.At + f.Hold }

// window is the time the fault occupies (a kill of the hub: a second).
func (f Fault) window() (time.Duration, time.Duration) {
	if f.Kind == KillHub {
		return f.At, f.At + time.Second
	}
	return f.At, f.End()
}

// What names the fault without its times: "partition groups
// hub,member-3|member-1,member-2", "one-way zone-1>zone-2",
// "kill-cluster member-2", "kill-hub".
func (f Fault) What() string {
	switch f.Kind {
	case Partition:
		return string(f.Kind) + " " + f.Cut.String()
	case OneWay:
		return f.Cut.String() // "one-way a>b; one-way c>d"
	case KillCluster:
		return string(f.Kind) + " " + f.Cluster
	case Distance:
		return string(f.Kind) + " " + f.Distance.String()
	}
	return string(f.Kind)
}

// Schedule is one schedule of faults.
type Schedule struct {
	Seed    uint64
	Index   int
	Profile Profile
	// Automatic: the ring runs with quorumLossRecovery Automatic.
	Automatic bool
	// Faults in order of injection.
	Faults []Fault
}

// Event is one step of a schedule: a fault injected, or healed.
type Event struct {
	At    time.Duration
	Fault int
	Heal  bool
}

// Events are the schedule's injections and heals in time order (a heal
// before an injection at the same time). Every fault but KillHub has its
// heal.
func (s Schedule) Events() []Event {
	var out []Event
	for i, f := range s.Faults {
		out = append(out, Event{At: f.At, Fault: i})
		if f.Kind != KillHub {
			out = append(out, Event{At: f.End(), Fault: i, Heal: true})
		}
	}
	slices.SortStableFunc(out, func(a, b Event) int {
		if a.At != b.At {
			return cmp.Compare(a.At, b.At)
		}
		switch {
		case a.Heal && !b.Heal:
			return -1
		case b.Heal && !a.Heal:
			return 1
		}
		return 0
	})
	return out
}

// Duration is when the last fault is healed.
func (s Schedule) Duration() time.Duration {
	var d time.Duration
	for _, f := range s.Faults {
		_, end := f.window()
		d = max(d, end)
	}
	return d
}

func (s Schedule) String() string {
	rec := "Manual"
	if s.Automatic {
		rec = "Automatic"
	}
	var b strings.Builder
	fmt.Fprintf(&b, "schedule %d of seed %d (profile %s, quorumLossRecovery %s, graces %s), %s of faults:", s.Index, s.Seed, s.Profile.Name, rec, s.Profile.Grace, s.Duration())
	for _, f := range s.Faults {
		fmt.Fprintf(&b, "\n  +%-4s %s", f.At.Round(time.Second), f.What())
		if f.Kind != KillHub {
			beyond := "within the grace"
			if f.Hold > s.Profile.Grace {
				beyond = "beyond the grace"
			}
			fmt.Fprintf(&b, " for %s (%s)", f.Hold.Round(time.Second), beyond)
		}
	}
	return b.String()
}

// Generate draws schedule index of seed: the same seed, index, topology
// and profile give the same schedule.
func Generate(seed uint64, index int, topo Topology, p Profile) Schedule {
	rng := rand.New(rand.NewPCG(seed, uint64(index)))
	s := Schedule{Seed: seed, Index: index, Profile: p, Automatic: rng.Float64() < p.AutomaticShare}
	n := 1 + rng.IntN(max(p.MaxFaults, 1))
	at := between(rng, 0, 5*time.Second)
	for range n {
		f := s.draw(rng, topo, at)
		s.Faults = append(s.Faults, f)
		// The next one may come while this one holds, or after it.
		_, end := f.window()
		at = f.At + between(rng, 0, end-f.At+10*time.Second)
	}
	slices.SortStableFunc(s.Faults, func(a, b Fault) int { return cmp.Compare(a.At, b.At) })
	return s
}

// draw draws a fault injected at at, or later: where it would overlap a
// fault it cannot run beside (two partitions, two hub faults, the same
// cluster killed twice, more clusters killed than MaxKilled), it comes
// after the last of them has healed.
func (s Schedule) draw(rng *rand.Rand, topo Topology, at time.Duration) Fault {
	p := s.Profile
	f := Fault{Kind: weighted(rng, p.Weights), At: at}
	if f.Kind != KillHub {
		if rng.Float64() < p.LongShare {
			f.Hold = between(rng, p.Long[0], p.Long[1])
		} else {
			f.Hold = between(rng, p.Short[0], p.Short[1])
		}
	}
	switch f.Kind {
	case Partition:
		f.Cut = drawGroups(rng, topo)
	case OneWay:
		f.Cut = drawOneWay(rng, topo)
	case KillCluster:
		f.Cluster = topo.Clusters[rng.IntN(len(topo.Clusters))].Name
	case Distance:
		f.Distance = drawDistance(rng, topo)
	}
	for {
		var after time.Duration
		clash := false
		for _, g := range s.Faults {
			if overlaps(f, g) && conflicts(f, g, s.Faults, p.MaxKilled) {
				clash = true
				_, end := g.window()
				after = max(after, end)
			}
		}
		if !clash {
			return f
		}
		f.At = after + 2*time.Second
	}
}

func overlaps(f, g Fault) bool {
	fa, fb := f.window()
	ga, gb := g.window()
	return fa < gb && ga < fb
}

// conflicts reports whether f cannot run while g runs (they overlap).
func conflicts(f, g Fault, all []Fault, maxKilled int) bool {
	cut := func(k Kind) bool { return k == Partition || k == OneWay }
	hub := func(k Kind) bool { return k == KillHub || k == StopHub }
	switch {
	case cut(f.Kind) && cut(g.Kind), hub(f.Kind) && hub(g.Kind), f.Kind == Distance && g.Kind == Distance:
		return true
	case f.Kind == KillCluster && g.Kind == KillCluster:
		if f.Cluster == g.Cluster {
			return true
		}
		killed := 0
		for _, h := range all {
			if h.Kind == KillCluster && overlaps(f, h) {
				killed++
			}
		}
		return killed >= maxKilled
	}
	return false
}

func between(rng *rand.Rand, lo, hi time.Duration) time.Duration {
	if hi <= lo {
		return lo
	}
	// Whole seconds: schedules read and replay alike.
	return lo + time.Duration(rng.Int64N(int64((hi-lo)/time.Second)+1))*time.Second
}

func weighted(rng *rand.Rand, w map[Kind]int) Kind {
	total := 0
	for _, k := range Kinds {
		total += w[k]
	}
	r := rng.IntN(max(total, 1))
	for _, k := range Kinds {
		if r < w[k] {
			return k
		}
		r -= w[k]
	}
	return Partition
}

// drawGroups draws a partition into two or three groups: the hub in one
// of them (most of the time), each member cluster whole, or only one of
// its zones (its apiserver and spoke then reach every group), or not at
// all (it reaches every group).
func drawGroups(rng *rand.Rand, topo Topology) localenv.Partition {
	for {
		var units []string
		if rng.Float64() < 0.75 {
			units = append(units, topo.Hub)
		}
		for _, c := range topo.Clusters {
			switch r := rng.Float64(); {
			case r < 0.55:
				units = append(units, c.Name)
			case r < 0.8 && len(c.Zones) > 0:
				units = append(units, c.Zones[rng.IntN(len(c.Zones))])
			}
		}
		if len(units) < 2 {
			continue
		}
		k := 2
		if len(units) >= 3 && rng.Float64() < 0.3 {
			k = 3
		}
		rng.Shuffle(len(units), func(i, j int) { units[i], units[j] = units[j], units[i] })
		groups := make([][]string, k)
		for i, u := range units {
			g := i
			if i >= k {
				g = rng.IntN(k)
			}
			groups[g] = append(groups[g], u)
		}
		return localenv.Partition{Groups: canonical(topo, groups)}
	}
}

// drawOneWay draws one or two one-way cuts between units that do not
// contain each other.
func drawOneWay(rng *rand.Rand, topo Topology) localenv.Partition {
	units := topo.units()
	var cuts []localenv.Cut
	for n := 1 + rng.IntN(2); len(cuts) < n; {
		from, to := units[rng.IntN(len(units))], units[rng.IntN(len(units))]
		if from == to || (topo.family(from) != "" && topo.family(from) == topo.family(to)) {
			continue
		}
		c := localenv.Cut{From: from, To: to}
		if !slices.Contains(cuts, c) {
			cuts = append(cuts, c)
		}
	}
	return localenv.Partition{OneWay: cuts}
}

// canonical orders each group's units and the groups as topo lists
// units, so that a partition reads the same however it was drawn.
func canonical(topo Topology, groups [][]string) [][]string {
	order := map[string]int{}
	for i, u := range topo.units() {
		order[u] = i
	}
	for _, g := range groups {
		slices.SortFunc(g, func(a, b string) int { return order[a] - order[b] })
	}
	slices.SortFunc(groups, func(a, b []string) int { return order[a[0]] - order[b[0]] })
	return groups
}

// drawDistance draws a distance: a preset (a third of the time), or one
// or two links between member clusters or the hub and a member cluster,
// of 5 to 150ms round trip, a tenth of it as jitter, and a loss of 0 to
// 1% half the time.
func drawDistance(rng *rand.Rand, topo Topology) localenv.Distance {
	if rng.Float64() < 1.0/3 {
		return localenv.Distance{Preset: []string{localenv.PresetOneRegion, localenv.PresetThreeRegions}[rng.IntN(2)]}
	}
	units := []string{topo.Hub}
	for _, c := range topo.Clusters {
		units = append(units, c.Name)
	}
	var d localenv.Distance
	for n := 1 + rng.IntN(2); len(d.Links) < n; {
		a, b := units[rng.IntN(len(units))], units[rng.IntN(len(units))]
		if a == b || slices.ContainsFunc(d.Links, func(l localenv.PairLink) bool {
			return (l.A == a && l.B == b) || (l.A == b && l.B == a)
		}) {
			continue
		}
		rtt := time.Duration(5+rng.IntN(146)) * time.Millisecond
		l := localenv.PairLink{A: a, B: b, Link: localenv.Link{RTT: rtt, Jitter: rtt / 10}}
		if rng.Float64() < 0.5 {
			l.Loss = float64(rng.IntN(11)) / 1000
		}
		d.Links = append(d.Links, l)
	}
	return d
}
