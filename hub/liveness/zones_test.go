package liveness

import (
	"strings"
	"testing"
	"time"
)

// A zone is failed only when its node Leases are stale on the hub's clock
// AND a majority of the peers outside it lost it, for the zone grace;
// either signal alone is Unknown, with the evidence.
func TestJudgeZone(t *testing.T) {
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	ago := func(s int) time.Time { return now.Add(-time.Duration(s) * time.Second) }
	const stale, grace = 40 * time.Second, 30 * time.Second
	for _, tc := range []struct {
		name  string
		nodes map[string]time.Time
		peers map[string]bool
		// abstain are witnesses that cannot vote.
		abstain map[string]string
		want    State
		says    []string
	}{
		{"one node renews", map[string]time.Time{"n1": ago(100), "n2": ago(5)}, map[string]bool{"a": true, "b": true}, nil, Alive,
			[]string{"node Leases of n2 renewed"}},
		{"no node seen", nil, map[string]bool{"a": true}, nil, Unknown, []string{"no node Lease seen"}},
		{"nodes stale, no witness", map[string]time.Time{"n1": ago(100)}, nil, nil, Unknown, []string{"no peer outside the zone to confirm"}},
		{"nodes stale, peers still reach it", map[string]time.Time{"n1": ago(100), "n2": ago(90)}, map[string]bool{"a": false, "b": true, "c": false}, nil, Unknown,
			[]string{"all 2 node Leases unrenewed, the last renewed " + At(ago(90)), "only 1 of 3 peers", "a, c still reach it"}},
		{"both, within grace", map[string]time.Time{"n1": ago(60)}, map[string]bool{"a": true, "b": true}, nil, Unknown,
			[]string{"a, b lost it", "declared failed after 30s"}},
		{"both, past grace", map[string]time.Time{"n1": ago(71)}, map[string]bool{"a": true, "b": true, "c": false}, nil, Failed,
			[]string{"zone m1/z1: all 1 node Leases unrenewed, the last renewed " + At(ago(71)) + " and a, b lost it"}},
		{"never renewed, peers lost", map[string]time.Time{"n1": {}}, map[string]bool{"a": true}, nil, Unknown, []string{"declared failed after"}},
		// Rule 8 restated: the majority is of ALL the witnesses; one the
		// hub cannot read, or one that reaches no peer at all, abstains.
		{"one of three lost it, two abstain", map[string]time.Time{"n1": ago(71)}, map[string]bool{"a": true},
			map[string]string{"b": "no peer view", "c": "no active peer at all"}, Unknown,
			[]string{"only 1 of 3 peers outside it lost it", "b (no peer view), c (no active peer at all) abstain"}},
		{"two of three lost it, one abstains", map[string]time.Time{"n1": ago(71)}, map[string]bool{"a": true, "b": true},
			map[string]string{"c": "no peer view"}, Failed, []string{"a, b lost it"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v := JudgeZone(ZoneObservation{Cluster: "m1", Zone: "z1", NodesLastSeen: tc.nodes, PeersLost: tc.peers, Abstaining: tc.abstain}, now, stale, grace)
			if v.State != tc.want {
				t.Errorf("state %s, want %s (%s)", v.State, tc.want, v.Reason)
			}
			for _, s := range tc.says {
				if !strings.Contains(v.Reason, s) {
					t.Errorf("reason %q lacks %q", v.Reason, s)
				}
			}
		})
	}
}
