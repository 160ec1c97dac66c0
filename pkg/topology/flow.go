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

// network is a flow network with reusable scratch space.
type network struct {
	arcs []arc
	// adj lists, per node, residual edges as arc index*2 (forward, the node
	// is arc.from) or arc index*2+1 (backward, the node is arc.to).
	adj [][]int32

	dist    []cost
	reached []bool
	queued  []bool
	prev    []int32
	queue   []int32
}

func newNetwork(nodes int) *network {
	return &network{
		adj:     make([][]int32, nodes),
		dist:    make([]cost, nodes),
		reached: make([]bool, nodes),
		queued:  make([]bool, nodes),
		prev:    make([]int32, nodes),
	}
}

// addArc adds an arc and returns its index. unit, when not nil, must have at
// least capacity entries.
func (g *network) addArc(from, to int, capacity int, unit []cost) int {
	i := int32(len(g.arcs))
	g.arcs = append(g.arcs, arc{from: int32(from), to: int32(to), cap: int32(capacity), unit: unit})
	g.adj[from] = append(g.adj[from], i*2)
	g.adj[to] = append(g.adj[to], i*2+1)
	return int(i)
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
		for _, ref := range g.adj[u] {
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
