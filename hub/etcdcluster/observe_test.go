package etcdcluster

import (
	"maps"
	"slices"
	"strings"
	"testing"

	etcdfedv1 "github.com/etcdfed/etcdfed/api/v1alpha1"
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
			if got := slices.Sorted(maps.Keys(away)); !slices.Equal(got, tc.wantAway) {
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

// Once a replacement has begun, the ledger places the member in its new
// domain, but etcd still lists the old incarnation: its ID is out of sight
// while the domain it leaves is, and only then.
func TestOutOfSightIDsFollowTheReplacedIncarnation(t *testing.T) {
	for _, tc := range []struct {
		name     string
		fromSeen bool
		want     []uint64
	}{
		{"the old domain failed", false, []uint64{2}},
		{"the old domain seen (a planned move)", true, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := ring()
			// main-1 (ID 2, member-2) is being replaced into member-1.
			s.ec.Status.Members[1].Cluster, s.ec.Status.Members[1].Zone = "member-1", "zone-1"
			inFlight(s, etcdfedv1.MembershipOperation{Type: etcdfedv1.OperationReplace, Member: "main-1", MemberID: hexID(2),
				From: &etcdfedv1.FailureDomain{Cluster: "member-2", Zone: "zone-2"}, To: &etcdfedv1.FailureDomain{Cluster: "member-1", Zone: "zone-1"}})
			if !tc.fromSeen {
				s.cluster("member-2").verdict.State = liveness.Failed
			}
			ids := outOfSightIDs(s, &s.ec.Status, outOfSight(s, &s.ec.Status))
			if got := slices.Sorted(maps.Keys(ids)); !slices.Equal(got, tc.want) {
				t.Errorf("out-of-sight IDs %v, want %v", got, tc.want)
			}
		})
	}
}
