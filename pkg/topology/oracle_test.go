package topology

import (
	"fmt"
	"slices"
	"strings"
)

// This file holds an independent, brute-force view of the problem used by the
// tests: it knows nothing of the flow network.

// score ranks a target placement by the criteria above the move count, as
// documented in doc.go: more placed, fewer left behind, more zone failures,
// more cluster failures, fewer moves.
type score struct {
	placed, fallback, zoneTol, clusterTol, moves int
}

func (s score) String() string {
	return fmt.Sprintf("placed=%d fallback=%d zoneTol=%d clusterTol=%d moves=%d",
		s.placed, s.fallback, s.zoneTol, s.clusterTol, s.moves)
}

func (s score) better(o score) bool {
	switch {
	case s.placed != o.placed:
		return s.placed > o.placed
	case s.fallback != o.fallback:
		return s.fallback < o.fallback
	case s.zoneTol != o.zoneTol:
		return s.zoneTol > o.zoneTol
	case s.clusterTol != o.clusterTol:
		return s.clusterTol > o.clusterTol
	default:
		return s.moves < o.moves
	}
}

// oracleDomain is a domain as the oracle sees it.
type oracleDomain struct {
	Domain
	schedulable   bool
	capacity      int // 0: no limit
	current       int // members there now
	zone, cluster int // indexes of its zone and cluster
}

type oracle struct {
	domains            []oracleDomain
	zones, clusters    int
	replicas, existing int
}

// newOracle lists the input's domains plus unlisted ones holding members.
func newOracle(in Input) *oracle {
	o := &oracle{replicas: in.Replicas, existing: len(in.Members)}
	index := map[Domain]int{}
	zones, clusters := map[string]int{}, map[string]int{}
	add := func(d oracleDomain) int {
		if _, ok := zones[d.Zone]; !ok {
			zones[d.Zone] = len(zones)
		}
		if _, ok := clusters[d.Cluster]; !ok {
			clusters[d.Cluster] = len(clusters)
		}
		d.zone, d.cluster = zones[d.Zone], clusters[d.Cluster]
		index[d.Domain] = len(o.domains)
		o.domains = append(o.domains, d)
		return len(o.domains) - 1
	}
	for _, d := range in.Domains {
		add(oracleDomain{Domain: d.Domain, schedulable: d.Unschedulable == "", capacity: d.Capacity})
	}
	for _, m := range in.Members {
		i, ok := index[m.Domain]
		if !ok {
			i = add(oracleDomain{Domain: m.Domain})
		}
		o.domains[i].current++
	}
	o.zones, o.clusters = len(zones), len(clusters)
	return o
}

// normal is how many members a domain holds without anyone being left
// behind; beyond it, members count as fallback.
func (d oracleDomain) normal(replicas int) int {
	switch {
	case !d.schedulable:
		return 0
	case d.capacity == 0:
		return replicas
	default:
		return d.capacity
	}
}

// score scores members per domain (parallel to o.domains).
func (o *oracle) score(counts []int) score {
	var s score
	zones := make([]int, o.zones)
	clusters := make([]int, o.clusters)
	deficit := 0
	for i, d := range o.domains {
		n := counts[i]
		s.placed += n
		s.fallback += max(0, n-d.normal(o.replicas))
		deficit += max(0, n-d.current)
		zones[d.zone] += n
		clusters[d.cluster] += n
	}
	s.zoneTol = bruteTolerance(zones, s.placed)
	s.clusterTol = bruteTolerance(clusters, s.placed)
	s.moves = deficit - max(0, s.placed-o.existing)
	return s
}

// bruteTolerance returns the largest k such that every set of k groups can
// be lost with a quorum of the members left, by trying every subset.
func bruteTolerance(counts []int, members int) int {
	quorum := members/2 + 1
	var worst [16]int // most members lost with k groups
	for set := 0; set < 1<<len(counts); set++ {
		k, lost := 0, 0
		for i, n := range counts {
			if set&(1<<i) != 0 {
				k++
				lost += n
			}
		}
		worst[k] = max(worst[k], lost)
	}
	tol := 0
	for k := 1; k <= len(counts); k++ {
		if members-worst[k] < quorum {
			break
		}
		tol = k
	}
	return tol
}

// bruteBest returns the best score over every possible number of members
// per domain.
func bruteBest(in Input) score {
	o := newOracle(in)
	ds := o.domains
	counts := make([]int, len(ds))
	var best score
	found := false
	var walk func(i, left int)
	walk = func(i, left int) {
		if i == len(ds) {
			s := o.score(counts)
			if !found || s.better(best) {
				best, found = s, true
			}
			return
		}
		most := min(left, max(ds[i].current, ds[i].normal(in.Replicas)))
		for n := 0; n <= most; n++ {
			counts[i] = n
			walk(i+1, left-n)
		}
		counts[i] = 0
	}
	walk(0, in.Replicas)
	return best
}

// scoreTarget scores a result's target against the input.
func scoreTarget(in Input, target []Member) score {
	o := newOracle(in)
	counts := make([]int, len(o.domains))
	for _, m := range target {
		i := slices.IndexFunc(o.domains, func(d oracleDomain) bool { return d.Domain == m.Domain })
		if i < 0 {
			panic(fmt.Sprintf("target member %s in unknown domain %s", m.Name, m.Domain))
		}
		counts[i]++
	}
	return o.score(counts)
}

// applyStep applies one step to members, as the hub would.
func applyStep(members []Member, s Step) []Member {
	return applySteps(members, []Step{s})
}

// validate returns what is wrong with a result, or "".
func validate(in Input, r Result) string {
	var problems []string
	bad := func(format string, args ...any) { problems = append(problems, fmt.Sprintf(format, args...)) }

	if got, want := len(r.Target), in.Replicas-r.Unplaced; got != want {
		bad("target has %d members, want replicas %d - unplaced %d", got, in.Replicas, r.Unplaced)
	}
	if r.Unplaced < 0 {
		bad("negative unplaced %d", r.Unplaced)
	}
	if got := applySteps(in.Members, r.Steps); !slices.Equal(got, r.Target) {
		bad("applying the steps gives %v, not the target %v", got, r.Target)
	}
	if r.Tolerance.Members != len(r.Target) {
		bad("tolerance counts %d members, target has %d", r.Tolerance.Members, len(r.Target))
	}

	// Each member appears in at most one step; adds are new names; moves
	// change domain; every step starts where the member is.
	where := map[string]Domain{}
	healthy := map[string]bool{}
	for _, m := range in.Members {
		where[m.Name] = m.Domain
		healthy[m.Name] = m.Healthy
	}
	seen := map[string]bool{}
	for _, s := range r.Steps {
		if seen[s.Member] {
			bad("member %s in two steps", s.Member)
		}
		seen[s.Member] = true
		from, exists := where[s.Member]
		switch s.Action {
		case Add:
			if exists || s.Reason != ScaleUp || !strings.HasPrefix(s.Member, in.NamePrefix) {
				bad("bad add %v", s)
			}
		case Remove:
			if !exists || from != s.From || s.Reason != ScaleDown {
				bad("bad remove %v", s)
			}
		case Move:
			if !exists || from != s.From || s.From == s.To || !slices.Contains([]Reason{Evacuate, Rebalance, Spread}, s.Reason) {
				bad("bad move %v", s)
			}
		}
	}
	// Unhealthy members' steps come before healthy members' moves; adds
	// before healthy removals (see stepGroup).
	last := -1
	for _, s := range r.Steps {
		g := stepGroup(s.Action, s.Action == Add || healthy[s.Member])
		if g < last {
			bad("step %v out of order", s)
		}
		last = g
	}

	// Capacities hold and nobody stays in an unschedulable domain, unless
	// no schedulable domain has room; then only members already there stay.
	ds := newOracle(in).domains
	room := false
	excess := false
	for _, d := range ds {
		n := 0
		for _, m := range r.Target {
			if m.Domain == d.Domain {
				n++
			}
		}
		if n > d.normal(in.Replicas) {
			excess = true
			if n > d.current {
				bad("domain %s: %d members, more than allowed %d and than before %d", d.Domain, n, d.normal(in.Replicas), d.current)
			}
		}
		if d.schedulable && (d.capacity == 0 || n < d.capacity) {
			room = true
		}
	}
	if excess && room {
		bad("members left in unschedulable or full domains while a schedulable domain has room")
	}
	if r.Unplaced > 0 && room {
		bad("%d replicas unplaced while a schedulable domain has room", r.Unplaced)
	}
	return strings.Join(problems, "; ")
}
