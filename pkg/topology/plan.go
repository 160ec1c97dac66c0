package topology

import (
	"cmp"
	"fmt"
	"slices"
)

// Plan decides where in.Replicas members should live and the single steps
// that lead there from in.Members. The same input gives the same result,
// whatever the order of its slices. See the package documentation for the
// objective.
func Plan(in Input) (Result, error) {
	m, err := newModel(in)
	if err != nil {
		return Result{}, err
	}
	return m.result(in, m.solve()), nil
}

// model is the input checked, sorted and indexed.
type model struct {
	replicas int
	prefix   string
	leader   string
	prefer   []Place
	members  []Member // sorted by name
	domains  []domain // sorted by cluster, then zone
	zones    []string // sorted
	clusters []string // sorted
}

type domain struct {
	DomainInfo
	zone, cluster int // indexes into model.zones and model.clusters
	// members are indexes into model.members in keep order: the ones kept
	// when the domain shrinks come first.
	members []int
}

func (d *domain) schedulable() bool { return d.Unschedulable == "" }

func newModel(in Input) (*model, error) {
	if in.Replicas < 0 || in.Replicas > MaxMembers {
		return nil, fmt.Errorf("%w: %d is not between 0 and %d", ErrInvalidReplicas, in.Replicas, MaxMembers)
	}
	if len(in.Members) > MaxMembers {
		return nil, fmt.Errorf("%w: %d members, at most %d", ErrInvalidMember, len(in.Members), MaxMembers)
	}
	m := &model{
		replicas: in.Replicas,
		prefix:   in.NamePrefix,
		leader:   in.Leader,
		prefer:   in.Prefer,
		members:  slices.Clone(in.Members),
		domains:  make([]domain, 0, len(in.Domains)+len(in.Members)),
	}
	for _, d := range in.Domains {
		if d.Cluster == "" || d.Zone == "" {
			return nil, fmt.Errorf("%w: %q: cluster and zone must not be empty", ErrInvalidDomain, d.Domain)
		}
		if d.Capacity < 0 {
			return nil, fmt.Errorf("%w: %s: negative capacity %d", ErrInvalidDomain, d.Domain, d.Capacity)
		}
		m.domains = append(m.domains, domain{DomainInfo: d})
	}
	m.sortDomains()
	for i := 1; i < len(m.domains); i++ {
		if m.domains[i].Domain == m.domains[i-1].Domain {
			return nil, fmt.Errorf("%w: %s listed twice", ErrInvalidDomain, m.domains[i].Domain)
		}
	}

	slices.SortFunc(m.members, func(a, b Member) int { return CompareNames(a.Name, b.Name) })
	listed := len(m.domains)
	for i, mem := range m.members {
		switch {
		case mem.Name == "":
			return nil, fmt.Errorf("%w: empty name", ErrInvalidMember)
		case i > 0 && mem.Name == m.members[i-1].Name:
			return nil, fmt.Errorf("%w: %s listed twice", ErrInvalidMember, mem.Name)
		case mem.Domain.Cluster == "" || mem.Domain.Zone == "":
			return nil, fmt.Errorf("%w: %s: cluster and zone must not be empty", ErrInvalidMember, mem.Name)
		}
		_, found := m.find(m.domains[:listed], mem.Domain)
		unlisted := slices.ContainsFunc(m.domains[listed:], func(d domain) bool { return d.Domain == mem.Domain })
		if !found && !unlisted {
			m.domains = append(m.domains, domain{DomainInfo: DomainInfo{Domain: mem.Domain, Unschedulable: Unlisted}})
		}
	}
	if len(m.domains) > listed {
		m.sortDomains()
	}

	for _, d := range m.domains {
		m.zones = append(m.zones, d.Zone)
		m.clusters = append(m.clusters, d.Cluster) // sorted already
	}
	slices.Sort(m.zones)
	m.zones = slices.Compact(m.zones)
	m.clusters = slices.Compact(m.clusters)
	for i := range m.domains {
		d := &m.domains[i]
		d.zone, _ = slices.BinarySearch(m.zones, d.Zone)
		d.cluster, _ = slices.BinarySearch(m.clusters, d.Cluster)
	}
	for i, mem := range m.members {
		j, _ := m.find(m.domains, mem.Domain)
		m.domains[j].members = append(m.domains[j].members, i)
	}
	for i := range m.domains {
		// Keep healthy members first, the leader first among equals, then
		// lower names (members are sorted by name already).
		slices.SortStableFunc(m.domains[i].members, func(a, b int) int {
			return cmp.Or(
				compareBool(!m.members[a].Healthy, !m.members[b].Healthy),
				compareBool(m.members[a].Name != m.leader, m.members[b].Name != m.leader),
			)
		})
	}
	return m, nil
}

func compareDomains(a, b Domain) int {
	return cmp.Or(cmp.Compare(a.Cluster, b.Cluster), cmp.Compare(a.Zone, b.Zone))
}

func (m *model) sortDomains() {
	slices.SortFunc(m.domains, func(a, b domain) int { return compareDomains(a.Domain, b.Domain) })
}

// find returns the index of d in the sorted domains.
func (m *model) find(domains []domain, d Domain) (int, bool) {
	return slices.BinarySearchFunc(domains, d, func(e domain, d Domain) int { return compareDomains(e.Domain, d) })
}

// compareBool orders false before true.
func compareBool(a, b bool) int {
	switch {
	case a == b:
		return 0
	case !a:
		return -1
	default:
		return 1
	}
}

// limit is a failure-tolerance constraint on a placement: losing any k
// groups (zones or clusters) loses at most f members, where f is how many
// members the placement can lose and keep quorum. The k largest groups sum
// to at most f exactly when, for some threshold t,
//
//	k*t + sum over groups of max(0, members-t) <= f
//
// (the sum of the k largest numbers is the minimum over t of that left-hand
// side). In the network every group takes up to t members directly and the
// rest from a shared overflow of f-k*t. k == 0 is no constraint.
type limit struct{ k, t int }

// room returns how many members the constraint lets groups hold in all.
func (l limit) room(groups, f, r int) int {
	if l.k == 0 {
		return r
	}
	return groups*l.t + f - l.k*l.t
}

// limits returns the constraints whose union is "survives k failures".
func limits(k, f int) []limit {
	if k == 1 {
		return []limit{{1, f}} // t = f subsumes every other threshold
	}
	ls := make([]limit, 0, f/k)
	for t := 1; t <= f/k; t++ {
		ls = append(ls, limit{k, t})
	}
	return ls
}

// flowNet is the placement network:
//
//	source -> zone (up to t, or via zone overflow) -> zone spread cost ->
//	domain arc (zone to cluster) -> cluster spread cost ->
//	cluster (up to t, or via cluster overflow) -> sink
//
// A domain is the arc from its zone to its cluster; the flow on it is the
// number of members the target places there.
type flowNet struct {
	*network
	source, sink         int
	zoneIn, zoneOver     []int // arcs source->zone, and the overflow arc source->overflow
	clusterOut, clusOver []int // arcs cluster->sink, and the overflow arc overflow->sink
	domainArc            []int
}

const (
	nodeSource = iota
	nodeSink
	nodeZoneOverflow
	nodeClusterOverflow
	nodeFirstGroup
)

func (m *model) network() *flowNet {
	r := m.replicas
	nz, nc := len(m.zones), len(m.clusters)
	zoneNode := func(j int) int { return nodeFirstGroup + 2*j } // and +1: after the spread arc
	clusterNode := func(i int) int { return nodeFirstGroup + 2*nz + 2*i }
	g := &flowNet{
		network:    newNetwork(nodeFirstGroup+2*nz+2*nc, 2+3*nz+len(m.domains)+3*nc),
		source:     nodeSource,
		sink:       nodeSink,
		zoneIn:     make([]int, 0, nz),
		clusterOut: make([]int, 0, nc),
		domainArc:  make([]int, 0, len(m.domains)),
	}

	// All unit costs share one array: the spread arcs' r units each, then
	// every domain arc's.
	units := 2 * r
	for i := range m.domains {
		units += m.domainSize(i)
	}
	pool := make([]cost, units)
	take := func(n int) []cost {
		unit := pool[:n:n]
		pool = pool[n:]
		return unit
	}
	spread := func(level int) []cost {
		unit := take(r)
		for n := range unit {
			unit[n][level] = int32(n)
		}
		return unit
	}
	zoneSpread, clusterSpread := spread(costZoneSpread), spread(costClusterSpread)

	g.zoneOver = []int{g.addArc(nodeSource, nodeZoneOverflow, 0, nil)}
	for j := range m.zones {
		g.zoneIn = append(g.zoneIn, g.addArc(nodeSource, zoneNode(j), 0, nil))
		g.addArc(nodeZoneOverflow, zoneNode(j), r, nil)
		g.addArc(zoneNode(j), zoneNode(j)+1, r, zoneSpread)
	}
	for i := range m.domains {
		d := &m.domains[i]
		unit := m.domainCosts(i, take(m.domainSize(i)))
		g.domainArc = append(g.domainArc, g.addArc(zoneNode(d.zone)+1, clusterNode(d.cluster), len(unit), unit))
	}
	for i := range m.clusters {
		g.addArc(clusterNode(i), clusterNode(i)+1, r, clusterSpread)
		g.clusterOut = append(g.clusterOut, g.addArc(clusterNode(i)+1, nodeSink, 0, nil))
		g.addArc(clusterNode(i)+1, nodeClusterOverflow, r, nil)
	}
	g.clusOver = []int{g.addArc(nodeClusterOverflow, nodeSink, 0, nil)}
	g.finish()
	return g
}

// domainSize is the capacity of domain i's arc: room for members to come
// when it is schedulable, and its current members in any case (they may
// stay, at a cost).
func (m *model) domainSize(i int) int {
	d := &m.domains[i]
	size := 0
	if d.schedulable() {
		size = min(m.replicas, cmp.Or(d.Capacity, m.replicas))
	}
	return max(size, len(d.members))
}

// domainCosts fills unit with the cost of each unit of flow on domain i's
// arc. The first units keep the domain's members (in keep order), the next
// ones bring members in.
func (m *model) domainCosts(i int, unit []cost) []cost {
	d := &m.domains[i]
	for n := range unit {
		u := &unit[n]
		if n < len(d.members) {
			mem := m.members[d.members[n]]
			if !mem.Healthy {
				u[costUnhealthy] = 1
			}
			if mem.Name != m.leader {
				u[costLeader] = 1
			}
		} else {
			u[costMove] = 1
		}
		if !d.schedulable() || (d.Capacity > 0 && n >= d.Capacity) {
			u[costFallback] = 1
		}
		u[costDomainSpread] = int32(n)
		u[costPrefer] = m.preferRank(d.Domain)
		u[costOrder] = int32(i)
	}
	return unit
}

// preferRank is the index of the first of the leader's preferred places
// that holds d, len(prefer) when none does.
func (m *model) preferRank(d Domain) int32 {
	for i, p := range m.prefer {
		if p.Matches(d) {
			return int32(i)
		}
	}
	return int32(len(m.prefer))
}

// setLimits sets the capacities that express the zone and cluster
// constraints for a placement that may lose f members.
func (g *flowNet) setLimits(zone, cluster limit, f, r int) {
	set := func(direct, over []int, l limit) {
		t, o := r, 0
		if l.k > 0 {
			t, o = l.t, f-l.k*l.t
		}
		for _, a := range direct {
			g.arcs[a].cap = int32(t)
		}
		g.arcs[over[0]].cap = int32(o)
	}
	set(g.zoneIn, g.zoneOver, zone)
	set(g.clusterOut, g.clusOver, cluster)
}

type solution struct {
	placed int
	cost   cost
	counts []int // members per domain
}

func (g *flowNet) solve(zone, cluster limit, f, r int) solution {
	g.setLimits(zone, cluster, f, r)
	placed, c := g.run(g.source, g.sink, r)
	counts := make([]int, len(g.domainArc))
	for i, a := range g.domainArc {
		counts[i] = int(g.arcs[a].flow)
	}
	return solution{placed: placed, cost: c, counts: counts}
}

// solve returns the number of members per domain of the best target: the
// most members placed; then the fewest left in domains they should leave;
// then the most zone failures survived; then the most cluster failures; then
// the cost levels below costFallback (fewest moves, and so on).
func (m *model) solve() []int {
	g := m.network()
	r := m.replicas
	free := limit{}
	base := g.solve(free, free, r, r)
	f := (base.placed - 1) / 2 // members the target can lose and keep quorum
	if f <= 0 {
		return base.counts // nothing to survive: base is optimal
	}
	// A constrained solution is as good as base at the levels above
	// tolerance when it places as many members and leaves as few behind.
	best := func(zls, cls []limit) (solution, bool) {
		var out solution
		found := false
		for _, zl := range zls {
			for _, cl := range cls {
				if zl.room(len(m.zones), f, r) < base.placed || cl.room(len(m.clusters), f, r) < base.placed {
					continue // the constraint alone leaves too little room
				}
				s := g.solve(zl, cl, f, r)
				if s.placed != base.placed || s.cost[costFallback] != base.cost[costFallback] {
					continue
				}
				if !found || s.cost.less(out.cost) {
					out, found = s, true
				}
			}
		}
		return out, found
	}

	// Raise zone tolerance as far as it goes, then cluster tolerance. A
	// solution found at a level is the cheapest at that level; its own
	// tolerance is a lower bound for the next search.
	atLeast := func(k int) []limit {
		if k == 0 {
			return []limit{free}
		}
		return limits(k, f)
	}
	cur := base
	zoneTol, _ := m.tolerances(base.counts)
	for k := min(f, len(m.zones)-1); k > zoneTol; k-- {
		if s, ok := best(limits(k, f), []limit{free}); ok {
			cur, zoneTol = s, k
			break
		}
	}
	zls := atLeast(zoneTol) // keep the zone tolerance while raising the cluster one
	_, clusterTol := m.tolerances(cur.counts)
	for l := min(f, len(m.clusters)-1); l > clusterTol; l-- {
		if s, ok := best(zls, limits(l, f)); ok {
			return s.counts
		}
	}
	return cur.counts
}

// tolerances returns the zone and cluster failures survived by a placement
// given as members per domain, every member healthy.
func (m *model) tolerances(counts []int) (zone, cluster int) {
	perZone := make([]int, len(m.zones))
	perCluster := make([]int, len(m.clusters))
	total := 0
	for i, n := range counts {
		perZone[m.domains[i].zone] += n
		perCluster[m.domains[i].cluster] += n
		total += n
	}
	spare := total - (total/2 + 1)
	return survivable(perZone, spare), survivable(perCluster, spare)
}
