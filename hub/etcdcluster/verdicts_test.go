package etcdcluster

import (
	"strings"
	"testing"

	etcdfedv1 "github.com/etcdfed/etcdfed/api/v1alpha1"
	"github.com/etcdfed/etcdfed/hub/liveness"
)

// A newly failed cluster with members is told once, with its zones and the
// evidence; its return is told once; unknown is not told, nor a cluster
// the ring has nothing in.
func TestVerdictEvents(t *testing.T) {
	has := func(s *snapshot) func(string) bool {
		return func(c string) bool { return hasMembers(&s.ec.Status, c) }
	}
	s := ring()
	s.cluster("member-2").verdict = liveness.Verdict{Cluster: "member-2", State: liveness.Failed, Reason: "spoke Lease last renewed 31s ago and member-1, member-3 see it gone"}
	events, now := verdictEvents(map[string]liveness.State{"member-1": liveness.Alive, "member-2": liveness.Unknown, "member-3": liveness.Alive}, s, has(s))
	if len(events) != 1 || events[0].reason != etcdfedv1.EventZoneFailed || events[0].typ != "Warning" ||
		!strings.Contains(events[0].message, "member cluster member-2 (zone zone-2) failed: spoke Lease last renewed 31s ago and member-1, member-3 see it gone") {
		t.Fatalf("newly failed: %+v", events)
	}
	// Still failed: nothing new.
	if again, _ := verdictEvents(now, s, has(s)); len(again) != 0 {
		t.Errorf("still failed, told again: %+v", again)
	}
	// Back.
	s.cluster("member-2").verdict = liveness.Verdict{Cluster: "member-2", State: liveness.Alive, Reason: "spoke Lease renewed 0s ago"}
	back, _ := verdictEvents(now, s, has(s))
	if len(back) != 1 || back[0].reason != etcdfedv1.EventZoneReturned || back[0].typ != "Normal" || !strings.Contains(back[0].message, "member cluster member-2 (zone zone-2) is back") {
		t.Errorf("returned: %+v", back)
	}
	// Back through a pass of unknown (its Lease renewed before its peers
	// saw it again): failed is remembered while unknown, and the return is
	// told once alive. TestScenarioLeaderZoneKilledAndReturned waited a
	// minute for a ZoneReturned the hub had skipped so.
	s.cluster("member-2").verdict = liveness.Verdict{Cluster: "member-2", State: liveness.Unknown, Reason: "only 0 of 2 other spokes see it alive"}
	unknown, mem := verdictEvents(now, s, has(s))
	if len(unknown) != 0 || mem["member-2"] != liveness.Failed {
		t.Errorf("failed, then unknown: told %+v, remembered %v; want nothing told and failed remembered", unknown, mem["member-2"])
	}
	s.cluster("member-2").verdict = liveness.Verdict{Cluster: "member-2", State: liveness.Failed, Reason: "gone again"}
	if again, _ := verdictEvents(mem, s, has(s)); len(again) != 0 {
		t.Errorf("failed, unknown, failed: told again %+v", again)
	}
	s.cluster("member-2").verdict = liveness.Verdict{Cluster: "member-2", State: liveness.Alive, Reason: "spoke Lease renewed 0s ago"}
	if back, after := verdictEvents(mem, s, has(s)); len(back) != 1 || back[0].reason != etcdfedv1.EventZoneReturned || after["member-2"] != liveness.Alive {
		t.Errorf("failed, unknown, alive: %+v (remembered %v); want one ZoneReturned", back, after["member-2"])
	}
	// Unknown after alive: not told.
	s.cluster("member-2").verdict.State = liveness.Unknown
	if quiet, _ := verdictEvents(map[string]liveness.State{"member-2": liveness.Alive}, s, has(s)); len(quiet) != 0 {
		t.Errorf("unknown told: %+v", quiet)
	}
	// A failed cluster the ring has nothing in, and is not placed in.
	s = ring()
	cs := s.cluster("member-3")
	cs.eligible = false
	cs.verdict.State = liveness.Failed
	s.ec.Status.Members = s.ec.Status.Members[:2]
	if none, _ := verdictEvents(nil, s, has(s)); len(none) != 0 {
		t.Errorf("a cluster without this ring's members told: %+v", none)
	}
}
