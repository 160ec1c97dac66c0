package topology

import (
	"fmt"
	"math/rand/v2"
	"strconv"
	"testing"
)

// restrictedGrowth returns every labelling of n items into groups up to
// renaming: [0 0 1], [0 1 0], ... (restricted growth strings).
func restrictedGrowth(n int) [][]int {
	var out [][]int
	cur := make([]int, n)
	var walk func(i, groups int)
	walk = func(i, groups int) {
		if i == n {
			out = append(out, append([]int(nil), cur...))
			return
		}
		for g := 0; g <= groups && g < n; g++ {
			cur[i] = g
			walk(i+1, max(groups, g+1))
		}
	}
	walk(0, 0)
	return out
}

// layouts returns every way to give n domains zones and clusters, up to
// renaming, with no two domains on the same (cluster, zone) pair.
func layouts(n int) [][]Domain {
	var out [][]Domain
	for _, zones := range restrictedGrowth(n) {
		for _, clusters := range restrictedGrowth(n) {
			seen := map[Domain]bool{}
			var ds []Domain
			for i := range n {
				d := Domain{Cluster: "c" + strconv.Itoa(clusters[i]), Zone: "z" + strconv.Itoa(zones[i])}
				if seen[d] {
					break
				}
				seen[d] = true
				ds = append(ds, d)
			}
			if len(ds) == n {
				out = append(out, ds)
			}
		}
	}
	return out
}

func checkOptimal(t *testing.T, in Input) {
	t.Helper()
	r, err := Plan(in)
	if err != nil {
		t.Fatalf("Plan(%+v): %v", in, err)
	}
	if problem := validate(in, r); problem != "" {
		t.Fatalf("Plan(%+v): %s\nsteps %v", in, problem, r.Steps)
	}
	got, want := scoreTarget(in, r.Target), bruteBest(in)
	if got != want {
		t.Fatalf("Plan(%+v):\n got %v\nwant %v\nsteps %v", in, got, want, r.Steps)
	}
	if r.Tolerance.ZoneFailures != got.zoneTol || r.Tolerance.ClusterFailures != got.clusterTol {
		t.Fatalf("Plan(%+v): reported tolerance %d zones %d clusters, brute force %d and %d",
			in, r.Tolerance.ZoneFailures, r.Tolerance.ClusterFailures, got.zoneTol, got.clusterTol)
	}
}

// TestOptimalBootstrap places 1 to 9 members on every layout of 1 to 5
// domains and compares zone tolerance, cluster tolerance and the rest of the
// score with a brute-force search over all placements.
func TestOptimalBootstrap(t *testing.T) {
	cases := 0
	for n := 1; n <= 5; n++ {
		for _, layout := range layouts(n) {
			domains := make([]DomainInfo, len(layout))
			for i, d := range layout {
				domains[i] = DomainInfo{Domain: d}
			}
			for replicas := 1; replicas <= 9; replicas++ {
				checkOptimal(t, Input{Replicas: replicas, NamePrefix: "m-", Domains: domains})
				cases++
			}
		}
	}
	t.Logf("%d cases", cases)
}

// TestOptimalFromEveryState starts from every placement of up to 5 members
// on every layout of up to 3 domains, each domain free, of capacity 1, or
// unschedulable, with and without an unhealthy member and a leader, and
// plans 1 to 5 replicas.
func TestOptimalFromEveryState(t *testing.T) {
	cases := 0
	for n := 1; n <= 3; n++ {
		for _, layout := range layouts(n) {
			states := 1
			for range n {
				states *= 3
			}
			for state := range states {
				domains := make([]DomainInfo, n)
				s := state
				for i, d := range layout {
					domains[i] = DomainInfo{Domain: d}
					switch s % 3 {
					case 1:
						domains[i].Capacity = 1
					case 2:
						domains[i].Unschedulable = Unhealthy
					}
					s /= 3
				}
				forEachPlacement(n, 5, func(where []int) {
					for variant := range 3 {
						members := make([]Member, len(where))
						for i, d := range where {
							members[i] = Member{Name: "m-" + strconv.Itoa(i), Domain: layout[d], Healthy: true}
						}
						in := Input{NamePrefix: "m-", Domains: domains, Members: members}
						switch {
						case variant == 1 && len(members) > 0:
							members[0].Healthy = false
						case variant == 2 && len(members) > 1:
							in.Leader = members[1].Name
						}
						for replicas := 1; replicas <= 5; replicas++ {
							in.Replicas = replicas
							checkOptimal(t, in)
							cases++
						}
					}
				})
			}
		}
	}
	t.Logf("%d cases", cases)
}

// forEachPlacement calls f with the domain of each member, for every
// multiset of up to most members over n domains.
func forEachPlacement(n, most int, f func(where []int)) {
	var where []int
	var walk func(from int)
	walk = func(from int) {
		f(where)
		if len(where) == most {
			return
		}
		for d := from; d < n; d++ {
			where = append(where, d)
			walk(d)
			where = where[:len(where)-1]
		}
	}
	walk(0)
}

// TestOptimalRandom checks random inputs of up to 5 domains and 9 members,
// with health, leaders, capacities, cordons and unlisted domains, against
// brute force. The seed is fixed so that a failure reproduces.
func TestOptimalRandom(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 5))
	for range 20000 {
		checkOptimal(t, randomInput(rng, 5, 9))
	}
}

// randomInput returns an input of up to maxDomains listed domains and up to
// maxMembers members and replicas.
func randomInput(rng *rand.Rand, maxDomains, maxMembers int) Input {
	clusters := 1 + rng.IntN(3)
	zones := 1 + rng.IntN(3)
	in := Input{Replicas: rng.IntN(maxMembers + 1), NamePrefix: "m-"}
	seen := map[Domain]bool{}
	for range 1 + rng.IntN(maxDomains) {
		d := DomainInfo{Domain: Domain{Cluster: fmt.Sprint("c", rng.IntN(clusters)), Zone: fmt.Sprint("z", rng.IntN(zones))}}
		if seen[d.Domain] {
			continue
		}
		seen[d.Domain] = true
		switch rng.IntN(6) {
		case 0:
			d.Unschedulable = Unhealthy
		case 1:
			d.Unschedulable = ZoneCordoned
		case 2:
			d.Capacity = 1 + rng.IntN(3)
		}
		in.Domains = append(in.Domains, d)
	}
	for i := range rng.IntN(maxMembers + 1) {
		m := Member{Name: fmt.Sprint("m-", i*(1+rng.IntN(2))), Healthy: rng.IntN(4) != 0}
		if rng.IntN(8) == 0 && len(seen) < maxDomains {
			m.Domain = Domain{Cluster: "gone", Zone: fmt.Sprint("z", rng.IntN(zones))} // unlisted
		} else {
			m.Domain = in.Domains[rng.IntN(len(in.Domains))].Domain
		}
		if slicesContainName(in.Members, m.Name) {
			continue
		}
		in.Members = append(in.Members, m)
	}
	if len(in.Members) > 0 && rng.IntN(2) == 0 {
		in.Leader = in.Members[rng.IntN(len(in.Members))].Name
	}
	return in
}

func slicesContainName(ms []Member, name string) bool {
	for _, m := range ms {
		if m.Name == name {
			return true
		}
	}
	return false
}
