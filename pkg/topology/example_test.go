package topology_test

import (
	"fmt"

	"github.com/etcdfed/etcdfed/pkg/topology"
)

// The hub plans on every reconcile and executes the first step. Here zone c
// has failed: its member is evacuated, and the report says why the result
// does not survive the loss of a zone.
func ExamplePlan() {
	r, err := topology.Plan(topology.Input{
		Replicas:   5,
		NamePrefix: "main-",
		Domains: []topology.DomainInfo{
			{Domain: topology.Domain{Cluster: "seed-1", Zone: "a"}},
			{Domain: topology.Domain{Cluster: "seed-2", Zone: "b"}},
			{Domain: topology.Domain{Cluster: "seed-3", Zone: "c"}, Unschedulable: topology.Unhealthy},
		},
		Members: []topology.Member{
			{Name: "main-0", Domain: topology.Domain{Cluster: "seed-1", Zone: "a"}, Healthy: true},
			{Name: "main-1", Domain: topology.Domain{Cluster: "seed-2", Zone: "b"}, Healthy: true},
			{Name: "main-2", Domain: topology.Domain{Cluster: "seed-3", Zone: "c"}, Healthy: false},
		},
		Leader: "main-0",
	})
	if err != nil {
		panic(err)
	}
	for _, s := range r.Steps {
		fmt.Println(s)
	}
	fmt.Println("now:", r.Current.ZoneFailures, r.Current.ZoneReason)
	fmt.Println("then:", r.Tolerance.ZoneFailures, r.Tolerance.ZoneReason)
	// Output:
	// Move main-2 from seed-3/c to seed-1/a (Evacuate)
	// Add main-3 to seed-1/a (ScaleUp)
	// Add main-4 to seed-2/b (ScaleUp)
	// now: 0 three zones and three members, one unhealthy: losing zone a (1 member) loses quorum
	// then: 0 two zones and five members: losing zone a (3 members) loses quorum
}
