package etcdcluster

import (
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"

	"github.com/etcdfed/etcdfed/hub/liveness"
	"github.com/etcdfed/etcdfed/hub/registry"
)

// During an outage nothing changes from pass to pass but the clock: the
// status two passes compute seconds apart is the same, so the hub writes
// it once (patchStatus skips an equal status), not on every pass.
func TestStatusDuringOutageDoesNotMoveWithTheClock(t *testing.T) {
	pass := func(at time.Time) *snapshot {
		s := ring()
		s.now = at
		lastSeen := now.Add(-20 * time.Second)
		var obs []liveness.Observation
		for _, cs := range s.clusters {
			o := liveness.Observation{Cluster: cs.name, LastSeen: at.Add(-time.Second), Gossip: map[string]bool{"member-2": false}}
			if cs.name == "member-2" {
				o = liveness.Observation{Cluster: cs.name, LastSeen: lastSeen}
			}
			obs = append(obs, o)
		}
		for _, v := range liveness.Judge(obs, at, DefaultLeaseStaleAfter, 2*time.Minute) {
			s.cluster(v.Cluster).verdict = v
		}
		cs := s.cluster("member-2")
		cs.engaged, cs.client = false, nil
		cs.conn = &registry.ClusterState{Since: now.Add(-40 * time.Second), Problem: "dial tcp 127.0.0.2:6443: connection refused"}
		return s
	}
	s1, s2 := pass(now), pass(now.Add(7*time.Second))
	st1 := computeStatus(s1, decide(s1), applyResult{}, "")
	s2.ec.Status = *st1.DeepCopy() // the second pass reads what the first wrote
	st2 := computeStatus(s2, decide(s2), applyResult{}, "")
	if c := condition(st1, "Degraded"); c.Message == "" || c.Status != "True" {
		t.Fatalf("Degraded %s %q: the outage is not told", c.Status, c.Message)
	}
	if !equality.Semantic.DeepEqual(st1, st2) {
		t.Errorf("status moved with the clock alone:\n%+v\n%+v", condition(st1, "Degraded"), condition(st2, "Degraded"))
	}
}
