package topology

// A small min-cost flow solver with lexicographic costs, used by Plan to pick
// the number of members per domain. Flows are tiny (at most MaxMembers units),
// so it pushes one unit at a time along a shortest path found with a queue
// based Bellman-Ford (SPFA). Arc costs may be convex: the cost of the n-th
// unit on an arc is arc.unit[n], nondecreasing in n, which is what makes
// "spread evenly" and "keep the members you have" expressible as flow costs.

// Cost levels, most significant first. The objective is lexicographic: any
// gain at one level outweighs every loss at the levels below it.
const (
	costFallback      = iota // a member left where it should not be, for want of room
	costMove                 // a member placed anew (a Move or an Add)
	costUnhealthy            // an unhealthy member kept (rather than removed)
	costZoneSpread           // convex in members per zone: spread over zones
	costClusterSpread        // convex in members per cluster
	costDomainSpread         // convex in members per domain
	costLeader               // a non-leader kept: keeps the leader when all else ties
	costPrefer               // a member outside the leader's preferred places (Input.Prefer)
	costOrder                // prefer domains that sort first: a stable tie-break
	costLevels
)

// cost is a vector compared lexicographically.
type cost [costLevels]int32

func (c cost) add(o cost) cost {
	for i := range c {
		c[i] += o[i]
	}
	return c
}

func (c cost) sub(o cost) cost {
	for i := range c {
		c[i] -= o[i]
	}
	return c
}

func (c cost) less(o cost) bool {
	for i := range c {
		if c[i] != o[i] {
			return c[i] < o[i]
		}
	}
	return false
}

type arc struct {
	from, to  int32
	cap, flow int32
	// unit[n] is the cost of the (n+1)-th unit; nil means free.
	unit []cost
}

func (a *arc) unitCost(n int32) cost {
	if a.unit == nil {
		return cost{}
	}
	return a.unit[n]
}

// network is a flow network with reusable scratch space. Add every arc,
// then call finish before run.
type network struct {
	nodes int
	arcs  []arc
	// adj[start[u]:start[u+1]] lists node u's residual edges as arc index*2
	// (forward, u is arc.from) or arc index*2+1 (backward, u is arc.to).
	start []int32
	adj   []int32

	dist    []cost
	reached []bool
	queued  []bool
	prev    []int32
	queue   []int32
}

func newNetwork(nodes, arcs int) *network {
	return &network{nodes: nodes, arcs: make([]arc, 0, arcs)}
}

// addArc adds an arc and returns its index. unit, when not nil, must have at
// least capacity entries.
func (g *network) addArc(from, to int, capacity int, unit []cost) int {
	g.arcs = append(g.arcs, arc{from: int32(from), to: int32(to), cap: int32(capacity), unit: unit})
	return len(g.arcs) - 1
}

// finish builds the adjacency lists and the scratch space.
func (g *network) finish() {
	g.start = make([]int32, g.nodes+1)
	for _, a := range g.arcs {
		g.start[a.from+1]++
		g.start[a.to+1]++
	}
	for u := range g.nodes {
		g.start[u+1] += g.start[u]
	}
	g.adj = make([]int32, 2*len(g.arcs))
	fill := make([]int32, g.nodes)
	copy(fill, g.start)
	for i, a := range g.arcs {
		g.adj[fill[a.from]] = int32(2 * i)
		fill[a.from]++
		g.adj[fill[a.to]] = int32(2*i + 1)
		fill[a.to]++
	}
	g.dist = make([]cost, g.nodes)
	g.reached = make([]bool, g.nodes)
	g.queued = make([]bool, g.nodes)
	g.prev = make([]int32, g.nodes)
	g.queue = make([]int32, 0, 4*g.nodes)
}

// run computes a minimum cost flow of at most limit units from s to t,
// starting from zero flow: the largest flow possible, and among those the
// cheapest. It returns the flow value and its cost; arcs keep their flows.
func (g *network) run(s, t, limit int) (int, cost) {
	for i := range g.arcs {
		g.arcs[i].flow = 0
	}
	var total cost
	flow := 0
	for flow < limit && g.shortestPath(s, t) {
		for v := int32(t); v != int32(s); {
			ref := g.prev[v]
			a := &g.arcs[ref>>1]
			if ref&1 == 0 {
				total = total.add(a.unitCost(a.flow))
				a.flow++
				v = a.from
			} else {
				a.flow--
				total = total.sub(a.unitCost(a.flow))
				v = a.to
			}
		}
		flow++
	}
	return flow, total
}

// shortestPath finds a cheapest residual path from s to t and records it in
// prev. Successive shortest paths never create a negative cycle, so the
// search ends.
func (g *network) shortestPath(s, t int) bool {
	for i := range g.reached {
		g.reached[i] = false
	}
	g.dist[s] = cost{}
	g.reached[s] = true
	g.queue = append(g.queue[:0], int32(s))
	g.queued[s] = true
	for head := 0; head < len(g.queue); head++ {
		u := g.queue[head]
		g.queued[u] = false
		for _, ref := range g.adj[g.start[u]:g.start[u+1]] {
			a := &g.arcs[ref>>1]
			var v int32
			var d cost
			if ref&1 == 0 {
				if a.flow >= a.cap {
					continue
				}
				v, d = a.to, g.dist[u].add(a.unitCost(a.flow))
			} else {
				if a.flow <= 0 {
					continue
				}
				v, d = a.from, g.dist[u].sub(a.unitCost(a.flow-1))
			}
			if g.reached[v] && !d.less(g.dist[v]) {
				continue
			}
			g.dist[v], g.reached[v], g.prev[v] = d, true, ref
			if !g.queued[v] {
				g.queued[v] = true
				g.queue = append(g.queue, v)
			}
		}
	}
	return g.reached[t]
}
