package topology

import (
	"cmp"
	"fmt"
	"slices"
	"strconv"
)

// Evaluate reports how many simultaneous zone failures and cluster failures
// the members survive with quorum. Unhealthy members count as voters (they
// raise the quorum) but not as alive.
func Evaluate(members []Member) Tolerance {
	t := Tolerance{Members: len(members), Quorum: len(members)/2 + 1}
	zones := map[string]*Count{}
	clusters := map[string]*Count{}
	for _, m := range members {
		z := counter(zones, m.Domain.Zone)
		c := counter(clusters, m.Domain.Cluster)
		z.Members++
		c.Members++
		if m.Healthy {
			t.Healthy++
			z.Healthy++
			c.Healthy++
		}
	}
	t.Zones = sortedCounts(zones)
	t.Clusters = sortedCounts(clusters)
	spare := t.Healthy - t.Quorum // healthy members that may be lost
	t.ZoneFailures = survivable(healthy(t.Zones), spare)
	t.ClusterFailures = survivable(healthy(t.Clusters), spare)
	if t.ZoneFailures == 0 {
		t.ZoneReason = explain("zone", t, t.Zones)
	}
	if t.ClusterFailures == 0 {
		t.ClusterReason = explain("cluster", t, t.Clusters)
	}
	return t
}

func counter(m map[string]*Count, name string) *Count {
	c, ok := m[name]
	if !ok {
		c = &Count{Name: name}
		m[name] = c
	}
	return c
}

func sortedCounts(m map[string]*Count) []Count {
	out := make([]Count, 0, len(m))
	for _, c := range m {
		out = append(out, *c)
	}
	slices.SortFunc(out, func(a, b Count) int { return cmp.Compare(a.Name, b.Name) })
	return out
}

// survivable returns the largest k such that losing any k of the groups
// loses at most spare alive members: the k largest groups fit in spare.
// It sorts alive.
func survivable(alive []int, spare int) int {
	slices.SortFunc(alive, func(a, b int) int { return b - a })
	k, lost := 0, 0
	for _, n := range alive {
		if spare < 0 || lost+n > spare {
			break
		}
		lost += n
		k++
	}
	return k
}

// healthy returns the healthy count of each group.
func healthy(groups []Count) []int {
	out := make([]int, len(groups))
	for i, g := range groups {
		out[i] = g.Healthy
	}
	return out
}

// explain says in a sentence why losing one group (kind is "zone" or
// "cluster") loses quorum.
func explain(kind string, t Tolerance, groups []Count) string {
	if t.Members == 0 {
		return "no members"
	}
	if t.Healthy < t.Quorum {
		return fmt.Sprintf("quorum is already lost: %d of %d members healthy, quorum is %d",
			t.Healthy, t.Members, t.Quorum)
	}
	worst := groups[0]
	for _, g := range groups[1:] {
		if g.Healthy > worst.Healthy {
			worst = g
		}
	}
	lost := noun(worst.Healthy, "member")
	if worst.Healthy != worst.Members {
		lost = noun(worst.Healthy, "healthy member")
	}
	lost = strconv.Itoa(worst.Healthy) + " " + lost
	subject := fmt.Sprintf("%s and %s", plural(len(groups), kind), plural(t.Members, "member"))
	if unhealthy := t.Members - t.Healthy; unhealthy > 0 {
		subject += fmt.Sprintf(", %s unhealthy", words(unhealthy))
	}
	return fmt.Sprintf("%s: losing %s %s (%s) loses quorum", subject, kind, worst.Name, lost)
}

var smallNumbers = []string{"no", "one", "two", "three", "four", "five", "six",
	"seven", "eight", "nine", "ten", "eleven", "twelve", "thirteen", "fourteen", "fifteen"}

func words(n int) string {
	if n >= 0 && n < len(smallNumbers) {
		return smallNumbers[n]
	}
	return strconv.Itoa(n)
}

// plural returns "two zones", "one member".
func plural(n int, name string) string {
	return words(n) + " " + noun(n, name)
}

// noun returns name, with an s unless n is 1.
func noun(n int, name string) string {
	if n == 1 {
		return name
	}
	return name + "s"
}
