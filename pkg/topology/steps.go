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
			compareNames(mb.Name, ma.Name),
		)
	})
	removals := max(0, len(m.members)-placed)

	var steps []Step
	for n, mem := range leavers {
		action := Move
		if n < removals {
			action = Remove
		}
		steps = append(steps, Step{Action: action, Member: m.members[mem].Name, From: m.domains[source[mem]].Domain})
	}
	taken := make(map[string]bool, len(m.members))
	health := make(map[string]bool, len(m.members))
	for _, mem := range m.members {
		taken[mem.Name] = true
		health[mem.Name] = mem.Healthy
	}
	for _, name := range newNames(m.prefix, taken, len(slots)-(len(leavers)-removals)) {
		steps = append(steps, Step{Action: Add, Reason: ScaleUp, Member: name})
	}

	evacuating := func(s Step) bool {
		i, _ := m.find(m.domains, s.From)
		return s.Action != Add && !m.domains[i].schedulable()
	}
	slices.SortFunc(steps, func(a, b Step) int {
		return cmp.Or(
			cmp.Compare(stepGroup(a, health), stepGroup(b, health)),
			compareBool(!evacuating(a), !evacuating(b)),
			compareBool(a.Member == m.leader, b.Member == m.leader),
			compareNames(a.Member, b.Member),
		)
	})

	// Walk the steps in order: fill the slots in that order, so that after
	// the first step the rest of the plan fills the remaining slots the
	// same way, and give each step the reason that holds when it runs.
	size := make([]int, len(m.domains))
	for i, d := range m.domains {
		size[i] = len(d.members)
	}
	next := 0
	for i := range steps {
		s := &steps[i]
		from, _ := m.find(m.domains, s.From)
		if s.Action != Add {
			size[from]--
		}
		if s.Action == Remove {
			s.Reason = ScaleDown
			continue
		}
		s.To = m.domains[slots[next]].Domain
		size[slots[next]]++
		next++
		if s.Action == Move {
			d := &m.domains[from]
			switch {
			case !d.schedulable():
				s.Reason = Evacuate
			case d.Capacity > 0 && size[from]+1 > d.Capacity:
				s.Reason = Rebalance
			default:
				s.Reason = Spread
			}
		}
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
func stepGroup(s Step, healthy map[string]bool) int {
	switch {
	case s.Action == Remove && !healthy[s.Member]:
		return 0
	case s.Action == Move && !healthy[s.Member]:
		return 1
	case s.Action == Add:
		return 2
	case s.Action == Move:
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
	slices.SortFunc(out, func(a, b Member) int { return compareNames(a.Name, b.Name) })
	return out
}
