package topology

import (
	"fmt"
	"reflect"
	"slices"
	"testing"
)

// bytesReader hands out bytes, then zeros.
type bytesReader []byte

func (r *bytesReader) next() int {
	if len(*r) == 0 {
		return 0
	}
	b := (*r)[0]
	*r = (*r)[1:]
	return int(b)
}

// fuzzInput decodes any bytes into a valid input: up to 6 clusters and 4
// zones (shared between clusters or not), up to 12 domains with states and
// capacities, up to 11 members (some in unlisted domains), a leader.
func fuzzInput(data []byte) Input {
	r := bytesReader(data)
	in := Input{Replicas: r.next() % 12, NamePrefix: "main-"}
	clusters, zones := 1+r.next()%6, 1+r.next()%4
	shared := r.next()%2 == 0
	zoneName := func(c, z int) string {
		if shared {
			return fmt.Sprintf("z%d", z)
		}
		return fmt.Sprintf("c%d-z%d", c, z)
	}
	seen := map[Domain]bool{}
	for range 1 + r.next()%12 {
		c, z, state := r.next()%clusters, r.next()%zones, r.next()
		d := DomainInfo{Domain: Domain{Cluster: fmt.Sprint("c", c), Zone: zoneName(c, z)}, Capacity: (state / 8) % 4}
		d.Unschedulable = []Unschedulable{"", "", "", "", Unhealthy, ZoneCordoned, ClusterCordoned, ""}[state%8]
		if !seen[d.Domain] {
			seen[d.Domain] = true
			in.Domains = append(in.Domains, d)
		}
	}
	names := map[string]bool{}
	for range r.next() % 12 {
		ordinal, where, health := r.next()%16, r.next(), r.next()
		m := Member{Name: fmt.Sprint("main-", ordinal), Healthy: health%4 != 0}
		if where%8 == 7 {
			m.Domain = Domain{Cluster: "gone", Zone: zoneName(where/8%clusters, where/64%zones)}
		} else {
			m.Domain = in.Domains[where%len(in.Domains)].Domain
		}
		if !names[m.Name] {
			names[m.Name] = true
			in.Members = append(in.Members, m)
		}
	}
	if len(in.Members) > 0 {
		if l := r.next(); l%4 != 0 {
			in.Leader = in.Members[l%len(in.Members)].Name
		}
	}
	return in
}

// FuzzPlan checks, for any input: the result is valid (counts match,
// capacities hold, nobody stays where they should not when there is room),
// the same when the input's slices are reordered, stable (after each step
// planning again gives the rest of the plan or an equivalent one, and
// nothing at the end), and,
// for small inputs, as good as the best placement found by brute force.
func FuzzPlan(f *testing.F) {
	f.Add([]byte{5, 2, 2, 0, 6, 0, 0, 0, 0, 1, 0, 1, 0, 0, 1, 1, 32, 4, 0, 0, 1, 1, 0, 1, 2, 2, 1})
	f.Add([]byte{9, 5, 2, 0, 11, 0, 0, 0, 1, 1, 4, 2, 0, 5, 3, 1, 6, 4, 0, 9, 0, 1, 8})
	f.Add([]byte{3, 3, 3, 1, 9, 0, 0, 0, 1, 1, 0, 2, 2, 12, 0, 1, 0, 0, 2, 40, 5, 7, 3, 1, 8, 0, 0, 9, 15, 1, 2})
	f.Add([]byte{0, 1, 1, 0, 1, 0, 0, 0, 3, 0, 0, 1, 1, 0, 1, 2, 0, 0, 1})
	f.Fuzz(func(t *testing.T, data []byte) {
		in := fuzzInput(data)
		r, err := Plan(in)
		if err != nil {
			t.Fatalf("Plan(%+v): %v", in, err)
		}
		if problem := validate(in, r); problem != "" {
			t.Fatalf("Plan(%+v): %s\nsteps %q", in, problem, stepStrings(r.Steps))
		}

		reordered := in
		reordered.Domains = slices.Clone(in.Domains)
		reordered.Members = slices.Clone(in.Members)
		slices.Reverse(reordered.Domains)
		slices.Reverse(reordered.Members)
		if len(reordered.Members) > 1 {
			reordered.Members = append(reordered.Members[1:], reordered.Members[0])
		}
		if again, _ := Plan(reordered); !reflect.DeepEqual(again, r) {
			t.Fatalf("Plan(%+v) depends on order:\n%+v\n%+v", in, r, again)
		}

		if o := newOracle(in); len(o.domains) <= 6 && in.Replicas <= 9 {
			if got, want := scoreTarget(in, r.Target), bruteBest(in); got != want {
				t.Fatalf("Plan(%+v):\n got %v\nwant %v\nsteps %q", in, got, want, stepStrings(r.Steps))
			}
		}

		walkPlan(t, in, r)
	})
}
