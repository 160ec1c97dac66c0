package topology

import (
	"cmp"
	"slices"
)

// result turns members per domain into the target, the ordered steps and
// the tolerance reports.
func (m *model) result(in Input, counts []int) Result {
	// Members beyond a domain's count leave it; the domain's missing
	// members are slots to fill, in domain order.
	var leavers, slots []int
	placed := 0
	for i, d := range m.domains {
		placed += counts[i]
		leavers = append(leavers, d.members[min(counts[i], len(d.members)):]...)
		for n := len(d.members); n < counts[i]; n++ {
			slots = append(slots, i)
		}
	}
	source := make([]int, len(m.members)) // domain index of each member
	for i, d := range m.domains {
		for _, mem := range d.members {
			source[mem] = i
		}
	}

	// Of the leavers, remove the ones least worth keeping: unhealthy, then
	// in a domain to evacuate, then not the leader, then the highest names.
	slices.SortFunc(leavers, func(a, b int) int {
		ma, mb := m.members[a], m.members[b]
		return cmp.Or(
			compareBool(ma.Healthy, mb.Healthy),
			compareBool(m.domains[source[a]].schedulable(), m.domains[source[b]].schedulable()),
			compareBool(ma.Name == m.leader, mb.Name == m.leader),
			CompareNames(mb.Name, ma.Name),
		)
	})
	removals := max(0, len(m.members)-placed)

	// A step in the making: from is the source domain's index (-1 for an
	// Add), evacuating whether that domain is unschedulable.
	type pending struct {
		Step
		from                int
		healthy, evacuating bool
	}
	var todo []pending
	for n, mem := range leavers {
		p := pending{Step: Step{Action: Move, Member: m.members[mem].Name}, from: source[mem], healthy: m.members[mem].Healthy}
		p.From = m.domains[p.from].Domain
		p.evacuating = !m.domains[p.from].schedulable()
		if n < removals {
			p.Action = Remove
		}
		todo = append(todo, p)
	}
	taken := make(map[string]bool, len(m.members))
	for _, mem := range m.members {
		taken[mem.Name] = true
	}
	for _, name := range newNames(m.prefix, taken, len(slots)-(len(leavers)-removals)) {
		todo = append(todo, pending{Step: Step{Action: Add, Member: name}, from: -1, healthy: true})
	}

	slices.SortFunc(todo, func(a, b pending) int {
		return cmp.Or(
			cmp.Compare(stepGroup(a.Action, a.healthy), stepGroup(b.Action, b.healthy)),
			compareBool(!a.evacuating, !b.evacuating),
			compareBool(a.Member == m.leader, b.Member == m.leader),
			CompareNames(a.Member, b.Member),
		)
	})

	// Walk the steps in order: fill the slots in that order, so that after
	// the first step the rest of the plan fills the remaining slots the
	// same way, and give each step the reason that holds when it runs.
	size := make([]int, len(m.domains))
	for i, d := range m.domains {
		size[i] = len(d.members)
	}
	var steps []Step
	next := 0
	for _, p := range todo {
		s := p.Step
		if s.Action != Add {
			size[p.from]--
		}
		if s.Action != Remove {
			s.To = m.domains[slots[next]].Domain
			size[slots[next]]++
			next++
		}
		switch d := &m.domains[max(p.from, 0)]; {
		case s.Action == Add:
			s.Reason = ScaleUp
		case s.Action == Remove:
			s.Reason = ScaleDown
		case p.evacuating:
			s.Reason = Evacuate
		case d.Capacity > 0 && size[p.from]+1 > d.Capacity:
			s.Reason = Rebalance // the domain was over capacity until this step
		default:
			s.Reason = Spread
		}
		steps = append(steps, s)
	}

	target := applySteps(m.members, steps)
	alive := slices.Clone(target)
	for i := range alive {
		alive[i].Healthy = true
	}
	return Result{
		Target:    target,
		Steps:     steps,
		Tolerance: Evaluate(alive),
		Current:   Evaluate(in.Members),
		Unplaced:  m.replicas - placed,
	}
}

// stepGroup orders steps: clear out unhealthy members first (removals, then
// moves), then grow, then move healthy members, and shrink last.
func stepGroup(a Action, healthy bool) int {
	switch {
	case a == Remove && !healthy:
		return 0
	case a == Move && !healthy:
		return 1
	case a == Add:
		return 2
	case a == Move:
		return 3
	default:
		return 4
	}
}

// applySteps returns the members after the steps, sorted by name. Moved and
// added members are healthy (fresh incarnations).
func applySteps(members []Member, steps []Step) []Member {
	out := slices.Clone(members)
	for _, s := range steps {
		i := slices.IndexFunc(out, func(m Member) bool { return m.Name == s.Member })
		switch s.Action {
		case Add:
			out = append(out, Member{Name: s.Member, Domain: s.To, Healthy: true})
		case Remove:
			out = slices.Delete(out, i, i+1)
		case Move:
			out[i] = Member{Name: s.Member, Domain: s.To, Healthy: true}
		}
	}
	slices.SortFunc(out, func(a, b Member) int { return CompareNames(a.Name, b.Name) })
	return out
}
