package topology

import (
	"fmt"
	"testing"
)

// benchDomains returns clusters x zones domains. With sharedZones the zones
// are the same three AZs in every cluster (one region); otherwise every
// cluster has zones of its own.
func benchDomains(clusters, zones int, sharedZones bool) []DomainInfo {
	var ds []DomainInfo
	for c := range clusters {
		for z := range zones {
			zone := fmt.Sprintf("zone-%c", 'a'+z)
			if !sharedZones {
				zone = fmt.Sprintf("c%02d-%s", c, zone)
			}
			ds = append(ds, DomainInfo{Domain: Domain{Cluster: fmt.Sprintf("c%02d", c), Zone: zone}})
		}
	}
	return ds
}

// BenchmarkPlan plans 9 members over 50 clusters x 3 zones: from nothing
// (bootstrap), from the optimal placement (the common reconcile), and with
// the zone holding three members failed (evacuation).
func BenchmarkPlan(b *testing.B) {
	for _, shared := range []bool{true, false} {
		domains := benchDomains(50, 3, shared)
		boot, err := Plan(Input{Replicas: 9, NamePrefix: "main-", Domains: domains})
		if err != nil {
			b.Fatal(err)
		}
		failed := append([]DomainInfo(nil), domains...)
		zone := boot.Target[0].Domain.Zone
		for i := range failed {
			if failed[i].Zone == zone {
				failed[i].Unschedulable = Unhealthy
			}
		}
		inputs := []struct {
			name string
			in   Input
		}{
			{"bootstrap", Input{Replicas: 9, NamePrefix: "main-", Domains: domains}},
			{"steady", Input{Replicas: 9, NamePrefix: "main-", Domains: domains, Members: boot.Target, Leader: "main-0"}},
			{"zone-failed", Input{Replicas: 9, NamePrefix: "main-", Domains: failed, Members: boot.Target, Leader: "main-1"}},
		}
		for _, c := range inputs {
			b.Run(fmt.Sprintf("9-members-50x3-shared-zones=%t/%s", shared, c.name), func(b *testing.B) {
				b.ReportAllocs()
				for b.Loop() {
					if _, err := Plan(c.in); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}
