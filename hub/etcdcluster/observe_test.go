package etcdcluster

import (
	"slices"
	"strings"
	"testing"

	"github.com/etcdfed/etcdfed/hub/liveness"
)

// A member whose cluster or zone the hub does not see is out of sight: its
// status request is short and its endpoint is left out of the client while
// another remains. Nothing else changes because of it.
func TestOutOfSight(t *testing.T) {
	for _, tc := range []struct {
		name      string
		mutate    func(s *snapshot)
		wantAway  []string
		wantHosts []string // members whose client URL the hub dials
	}{
		{
			name:      "every cluster seen",
			mutate:    func(*snapshot) {},
			wantHosts: []string{"main-0", "main-1", "main-2"},
		},
		{
			name:      "a cluster whose spoke Lease went stale (unknown)",
			mutate:    func(s *snapshot) { s.cluster("member-2").verdict.State = liveness.Unknown },
			wantAway:  []string{"main-1"},
			wantHosts: []string{"main-0", "main-2"},
		},
		{
			name:      "a cluster declared failed",
			mutate:    func(s *snapshot) { s.cluster("member-3").verdict.State = liveness.Failed },
			wantAway:  []string{"main-2"},
			wantHosts: []string{"main-0", "main-1"},
		},
		{
			name:      "a cluster the hub is not connected to",
			mutate:    func(s *snapshot) { s.cluster("member-1").engaged = false },
			wantAway:  []string{"main-0"},
			wantHosts: []string{"main-1", "main-2"},
		},
		{
			name: "a stale zone of a visible cluster",
			mutate: func(s *snapshot) {
				s.cluster("member-1").zoneVerdicts = map[string]liveness.ZoneVerdict{"zone-1": {State: liveness.Unknown, NodesStale: true}}
			},
			wantAway:  []string{"main-0"},
			wantHosts: []string{"main-1", "main-2"},
		},
		{
			name: "nothing seen: every endpoint kept, since the hub must still ask someone",
			mutate: func(s *snapshot) {
				for _, cs := range s.clusters {
					cs.verdict.State = liveness.Unknown
				}
			},
			wantAway:  []string{"main-0", "main-1", "main-2"},
			wantHosts: []string{"main-0", "main-1", "main-2"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := ring()
			tc.mutate(s)
			away := outOfSight(s, &s.ec.Status)
			var got []string
			for name := range away {
				got = append(got, name)
			}
			slices.Sort(got)
			if !slices.Equal(got, tc.wantAway) {
				t.Errorf("out of sight %v, want %v", got, tc.wantAway)
			}
			eps := clientEndpoints(s, &s.ec.Status, away)
			var hosts []string
			for _, ep := range eps {
				for _, m := range s.ec.Status.Members {
					if strings.Contains(ep, m.Name+".") {
						hosts = append(hosts, m.Name)
					}
				}
			}
			if !slices.Equal(hosts, tc.wantHosts) {
				t.Errorf("endpoints %v (members %v), want members %v", eps, hosts, tc.wantHosts)
			}
		})
	}
}
