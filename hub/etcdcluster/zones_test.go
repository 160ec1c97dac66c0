package etcdcluster

import (
	"slices"
	"strings"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	etcdfedv1 "github.com/etcdfed/etcdfed/api/v1alpha1"
	"github.com/etcdfed/etcdfed/hub/liveness"
	"github.com/etcdfed/etcdfed/hub/planner"
	"github.com/etcdfed/etcdfed/pkg/topology"
)

// Zone witness defaults of these tests.
const (
	testNodeStale = 20 * time.Second
	testZoneGrace = 2 * time.Minute
)

// twoByTwoView is a formed 3-member ring over two member clusters of two
// zones each: main-0 in member-1/zone-1a, main-1 in member-1/zone-1b,
// main-2 in member-2/zone-2a; member-2/zone-2b is free. Every node Lease
// was renewed a second ago, every member sees the two others.
func twoByTwoView() *snapshot {
	now := time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)
	seen := metav1.NewTime(now)
	ec := &etcdfedv1.EtcdCluster{ObjectMeta: metav1.ObjectMeta{Name: "main", Namespace: "default"}}
	ec.Spec.Replicas = 3
	ec.Status.ClusterID = "abc"
	v := &snapshot{ec: ec, now: now, byName: map[string]*clusterSnapshot{}}
	for _, c := range []string{"member-1", "member-2"} {
		n := c[len(c)-1:]
		cv := &clusterSnapshot{name: c, engaged: true, registered: true, eligible: true, verdict: liveness.Verdict{Cluster: c, State: liveness.Alive},
			spoke:   &etcdfedv1.EtcdSpoke{Status: etcdfedv1.EtcdSpokeStatus{Zones: []string{"zone-" + n + "a", "zone-" + n + "b"}, ObservedAt: &seen}},
			members: map[string]*etcdfedv1.EtcdMember{},
			nodes: map[string]nodeSeen{
				"node-" + n + "a": {zone: "zone-" + n + "a", lastSeen: now.Add(-time.Second)},
				"node-" + n + "b": {zone: "zone-" + n + "b", lastSeen: now.Add(-time.Second)},
			}}
		v.clusters = append(v.clusters, cv)
		v.byName[c] = cv
	}
	place := []struct{ cluster, zone string }{{"member-1", "zone-1a"}, {"member-1", "zone-1b"}, {"member-2", "zone-2a"}}
	for i, p := range place {
		name := "main-" + string(rune('0'+i))
		id := uint64(i + 1)
		ec.Status.Members = append(ec.Status.Members, etcdfedv1.MemberStatus{Name: name, Cluster: p.cluster, Zone: p.zone, ID: hexID(id), Incarnation: 1, Ready: true})
		v.etcd.Members = append(v.etcd.Members, planner.ListEntry{ID: id, Name: name, Healthy: true, PeerURLs: []string{"https://" + name + ".etcd.test:2380"}})
		var active []string
		for j := range place {
			if j != i {
				active = append(active, hexID(uint64(j+1)))
			}
		}
		obj := &etcdfedv1.EtcdMember{ObjectMeta: metav1.ObjectMeta{Name: name}}
		obj.Spec.Incarnation, obj.Status.Incarnation = 1, 1
		obj.Status.Zone = p.zone
		obj.Status.Etcd = &etcdfedv1.MemberEtcdView{ID: hexID(id), LeaderID: hexID(1), Peers: &etcdfedv1.MemberPeerView{Active: active}}
		v.byName[p.cluster].members[name] = obj
	}
	v.etcd.Reachable = true
	v.etcd.LeaderID = 1
	return v
}

// Mutations of twoByTwoView.
func staleNodes(cluster, zone string, ago time.Duration) func(*snapshot) {
	return func(v *snapshot) {
		cs := v.byName[cluster]
		for name, n := range cs.nodes {
			if n.zone == zone {
				n.lastSeen = v.now.Add(-ago)
				cs.nodes[name] = n
			}
		}
	}
}

// losesPeer: witness (a member name) no longer holds a connection to id.
func losesPeer(witness string, id uint64) func(*snapshot) {
	return func(v *snapshot) {
		for _, cs := range v.clusters {
			if obj := cs.members[witness]; obj != nil {
				p := obj.Status.Etcd.Peers
				var active []string
				for _, a := range p.Active {
					if a != hexID(id) {
						active = append(active, a)
					}
				}
				p.Active, p.Lost = active, append(p.Lost, hexID(id))
			}
		}
	}
}

// noView: the witness's metrics could not be read.
func noView(witness string) func(*snapshot) {
	return func(v *snapshot) {
		for _, cs := range v.clusters {
			if obj := cs.members[witness]; obj != nil {
				obj.Status.Etcd.Peers = nil
			}
		}
	}
}

// down: main-0's etcd no longer answers (its zone is gone).
func down(name string) func(*snapshot) {
	return func(v *snapshot) {
		for i := range v.etcd.Members {
			if v.etcd.Members[i].Name == name {
				v.etcd.Members[i].Healthy = false
			}
		}
		for i := range v.ec.Status.Members {
			if v.ec.Status.Members[i].Name == name {
				v.ec.Status.Members[i].Ready = false
				v.ec.Status.Members[i].LastTransitionTime = &metav1.Time{Time: v.now.Add(-3 * time.Minute)}
			}
		}
	}
}

// TestZoneWitness runs the zone witness through observe's judgement, the
// placement and the planner: only both signals for the zone grace evacuate
// the zone; one signal keeps its member where it is.
func TestZoneWitness(t *testing.T) {
	beyond := testNodeStale + testZoneGrace + time.Second // stale for longer than the grace
	for _, tc := range []struct {
		name    string
		mutate  []func(*snapshot)
		want    liveness.State // the verdict on member-1/zone-1a
		stale   bool           // NodesStale
		move    bool           // main-0 is moved out of member-1/zone-1a
		degrade string         // in Degraded's message
	}{
		{name: "all renewed, all connected", want: liveness.Alive},
		{name: "nodes stale and both peers lost it beyond the grace: evacuated",
			mutate: []func(*snapshot){staleNodes("member-1", "zone-1a", beyond), losesPeer("main-1", 1), losesPeer("main-2", 1), down("main-0")},
			want:   liveness.Failed, stale: true, move: true, degrade: "zone member-1/zone-1a failed: all 1 node Leases unrenewed"},
		{name: "nodes stale and peers lost it within the grace: unknown, kept",
			mutate: []func(*snapshot){staleNodes("member-1", "zone-1a", testNodeStale+time.Minute), losesPeer("main-1", 1), losesPeer("main-2", 1), down("main-0")},
			want:   liveness.Unknown, stale: true, degrade: "zone member-1/zone-1a unknown"},
		{name: "only the node Leases stopped (kubelets lost their apiserver): unknown, kept",
			mutate: []func(*snapshot){staleNodes("member-1", "zone-1a", beyond)},
			want:   liveness.Unknown, stale: true, degrade: "still reach it"},
		{name: "only the peers lost it (network cut between zones): alive, kept",
			mutate: []func(*snapshot){losesPeer("main-1", 1), losesPeer("main-2", 1), down("main-0")},
			want:   liveness.Alive},
		{name: "one peer of two lost it: no majority, kept",
			mutate: []func(*snapshot){staleNodes("member-1", "zone-1a", beyond), losesPeer("main-2", 1), down("main-0")},
			want:   liveness.Unknown, stale: true},
		// Rule 8 restated (issue 24): a witness without a view abstains
		// and still counts: one of two is no majority. (It used to be
		// left out, and the other alone decided.)
		{name: "a witness without a view abstains: one of two lost it, kept",
			mutate: []func(*snapshot){staleNodes("member-1", "zone-1a", beyond), noView("main-1"), losesPeer("main-2", 1), down("main-0")},
			want:   liveness.Unknown, stale: true},
		{name: "no witness with a view: unknown, kept",
			mutate: []func(*snapshot){staleNodes("member-1", "zone-1a", beyond), noView("main-1"), noView("main-2"), down("main-0")},
			want:   liveness.Unknown, stale: true},
		{name: "no node Lease ever seen: no node signal, as before the witness",
			mutate: []func(*snapshot){staleNodes("member-1", "zone-1a", 0), func(v *snapshot) {
				for name, n := range v.byName["member-1"].nodes {
					if n.zone == "zone-1a" {
						n.lastSeen = time.Time{}
						v.byName["member-1"].nodes[name] = n
					}
				}
			}, losesPeer("main-1", 1), losesPeer("main-2", 1)},
			want: liveness.Unknown},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v := twoByTwoView()
			for _, m := range tc.mutate {
				m(v)
			}
			judgeZones(v, &v.ec.Status, testNodeStale, testZoneGrace)
			got, ok := v.byName["member-1"].zoneVerdict("zone-1a")
			if !ok || got.State != tc.want || got.NodesStale != tc.stale {
				t.Fatalf("verdict %+v (judged %v), want %s with NodesStale %v", got, ok, tc.want, tc.stale)
			}
			for _, other := range []string{"zone-1b"} {
				if o, _ := v.byName["member-1"].zoneVerdict(other); o.State != liveness.Alive {
					t.Errorf("zone %s judged %s: %s", other, o.State, o.Reason)
				}
			}
			res := plan(t, v)
			moved := len(res.Steps) == 1 && res.Steps[0].Action == topology.Move && res.Steps[0].Member == "main-0" &&
				res.Steps[0].To == topology.Domain{Cluster: "member-2", Zone: "zone-2b"}
			if moved != tc.move || (!tc.move && len(res.Steps) > 0) {
				t.Fatalf("steps %v, want main-0 moved to member-2/zone-2b: %v", res.Steps, tc.move)
			}
			d := decide(v)
			if tc.move {
				if op := d.plan.Operation; d.plan.Action != planner.ActBegin || op == nil || op.Type != planner.OpReplace || op.Member != "main-0" || op.Reason != string(topology.Evacuate) {
					t.Fatalf("planner %s %+v, want a Replace of main-0 begun (Evacuate)", d.plan.Action, op)
				}
			} else if d.plan.Action == planner.ActBegin {
				t.Fatalf("planner began %+v; nothing may move", d.plan.Operation)
			}
			st := computeStatus(v, d, applyResult{}, "")
			c := meta.FindStatusCondition(st.Conditions, etcdfedv1.ConditionDegraded)
			if tc.degrade != "" && (c == nil || !strings.Contains(c.Message, tc.degrade)) {
				t.Errorf("Degraded %+v, want it to say %q", c, tc.degrade)
			}
		})
	}
}

// A failed zone stays failed, and named in Degraded, while its member is
// being moved out: from Begin on the ledger records the member in its new
// domain, and the zone must not lose its verdict with it (the scenario
// TestScenarioZoneOfMultiZoneClusterKilled missed "failed" once the hub
// began the evacuation in the same pass that declared it).
func TestZoneWitnessKeepsAFailedZoneWhileItsMemberLeaves(t *testing.T) {
	beyond := testNodeStale + testZoneGrace + time.Second
	v := twoByTwoView()
	for _, m := range []func(*snapshot){staleNodes("member-1", "zone-1a", beyond), losesPeer("main-1", 1), losesPeer("main-2", 1), down("main-0")} {
		m(v)
	}
	judgeZones(v, &v.ec.Status, testNodeStale, testZoneGrace)
	d := decide(v)
	if d.plan.Action != planner.ActBegin {
		t.Fatalf("planner %s (%s), want Begin", d.plan.Action, d.plan.Reason)
	}
	// The next pass: the status as Begin wrote it.
	next := twoByTwoView()
	for _, m := range []func(*snapshot){staleNodes("member-1", "zone-1a", beyond), losesPeer("main-1", 1), losesPeer("main-2", 1), down("main-0")} {
		m(next)
	}
	next.ec.Status = computeStatus(v, d, applyResult{}, "")
	if i := slices.IndexFunc(next.ec.Status.Members, func(m etcdfedv1.MemberStatus) bool { return m.Name == "main-0" }); i < 0 || next.ec.Status.Members[i].Zone == "zone-1a" {
		t.Fatalf("Begin did not record main-0 in its new domain: %+v", next.ec.Status.Members)
	}
	judgeZones(next, &next.ec.Status, testNodeStale, testZoneGrace)
	if got, _ := next.byName["member-1"].zoneVerdict("zone-1a"); got.State != liveness.Failed {
		t.Errorf("zone-1a %s while main-0 leaves it: %s", got.State, got.Reason)
	}
	c := meta.FindStatusCondition(computeStatus(next, decide(next), applyResult{}, "").Conditions, etcdfedv1.ConditionDegraded)
	if c == nil || !strings.Contains(c.Message, "zone member-1/zone-1a failed") {
		t.Errorf("Degraded %+v, want it to name zone-1a failed", c)
	}
}

// TestZoneWitnessPlannerMarksTheDomainFailed: the members of a failed zone
// are the placement's to move (DomainFailed), not replaced in place after
// memberGracePeriod, and a member of a stale zone stays a fixed point.
func TestZoneWitnessPlannerMarksTheDomainFailed(t *testing.T) {
	v := twoByTwoView()
	beyond := testNodeStale + testZoneGrace + time.Second
	for _, m := range []func(*snapshot){staleNodes("member-1", "zone-1a", beyond), losesPeer("main-1", 1), losesPeer("main-2", 1), down("main-0")} {
		m(v)
	}
	judgeZones(v, &v.ec.Status, testNodeStale, testZoneGrace)
	in := plannerInput(v, &v.ec.Status, plan(t, v))
	for _, m := range in.Members {
		if want := m.Name == "main-0"; m.DomainFailed != want {
			t.Errorf("%s DomainFailed %v, want %v", m.Name, m.DomainFailed, want)
		}
	}
}

// TestZoneWitnessOnlyJudgesVisibleMultiZoneClusters: a single-zone
// cluster is rule 8's; a cluster the hub cannot see is not judged at all.
func TestZoneWitnessOnlyJudgesVisibleMultiZoneClusters(t *testing.T) {
	beyond := testNodeStale + testZoneGrace + time.Second
	for name, mutate := range map[string]func(*snapshot){
		"single-zone cluster": func(v *snapshot) { v.byName["member-1"].spoke.Status.Zones = []string{"zone-1a"} },
		"cluster not visible": func(v *snapshot) { v.byName["member-1"].verdict.State = liveness.Unknown },
	} {
		t.Run(name, func(t *testing.T) {
			v := twoByTwoView()
			for _, m := range []func(*snapshot){staleNodes("member-1", "zone-1a", beyond), losesPeer("main-1", 1), losesPeer("main-2", 1), down("main-0"), mutate} {
				m(v)
			}
			judgeZones(v, &v.ec.Status, testNodeStale, testZoneGrace)
			if got, ok := v.byName["member-1"].zoneVerdict("zone-1a"); ok {
				t.Fatalf("zone judged: %+v", got)
			}
		})
	}
}

// TestZoneWitnessSchedulesTheGraceEnd: a corroborated stale zone within
// its grace wakes its ring when the grace ends, without a new event.
func TestZoneWitnessSchedulesTheGraceEnd(t *testing.T) {
	v := twoByTwoView()
	for _, m := range []func(*snapshot){staleNodes("member-1", "zone-1a", testNodeStale+30*time.Second), losesPeer("main-1", 1), losesPeer("main-2", 1)} {
		m(v)
	}
	next, ok := judgeZones(v, &v.ec.Status, testNodeStale, testZoneGrace)
	if want := testZoneGrace - 30*time.Second; !ok || next != want {
		t.Fatalf("next change in %s (%v), want %s", next, ok, want)
	}
}

// TestZoneVerdictEvents: ZoneFailed once when a zone fails, with the
// evidence; ZoneReturned when it renews again.
func TestZoneVerdictEvents(t *testing.T) {
	beyond := testNodeStale + testZoneGrace + time.Second
	failed := twoByTwoView()
	for _, m := range []func(*snapshot){staleNodes("member-1", "zone-1a", beyond), losesPeer("main-1", 1), losesPeer("main-2", 1)} {
		m(failed)
	}
	judgeZones(failed, &failed.ec.Status, testNodeStale, testZoneGrace)
	all := func(string) bool { return true }
	now := map[string]liveness.State{}
	ev := zoneVerdictEvents(nil, failed, all, now)
	if len(ev) != 1 || ev[0].reason != etcdfedv1.EventZoneFailed || !strings.Contains(ev[0].message, "zone member-1/zone-1a failed") || !strings.Contains(ev[0].message, "main-1") {
		t.Fatalf("events %+v, want one ZoneFailed naming the zone and its witnesses", ev)
	}
	if again := zoneVerdictEvents(now, failed, all, map[string]liveness.State{}); len(again) != 0 {
		t.Fatalf("told twice: %+v", again)
	}
	back := twoByTwoView()
	judgeZones(back, &back.ec.Status, testNodeStale, testZoneGrace)
	ev = zoneVerdictEvents(now, back, all, map[string]liveness.State{})
	if len(ev) != 1 || ev[0].reason != etcdfedv1.EventZoneReturned || !strings.Contains(ev[0].message, "member-1/zone-1a") {
		t.Fatalf("events %+v, want one ZoneReturned", ev)
	}
}

// TestNodeLeaseRenewalsEnqueueNothing: a node Lease renewal wakes rings
// only when it changes a verdict (first sighting, back after being
// stale); the renewals in between (every 10s per node) enqueue nothing.
func TestNodeLeaseRenewalsEnqueueNothing(t *testing.T) {
	now := time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)
	r := &Reconciler{NodeTracker: liveness.NewTracker(func() time.Time { return now }), NodeStaleAfter: testNodeStale}
	renew := func(at time.Time) bool {
		l := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: "node-1a", Namespace: nodeLeaseNamespace},
			Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To("node-1a"), RenewTime: &metav1.MicroTime{Time: at}}}
		return r.observeNodeLease("member-1", l)
	}
	for _, step := range []struct {
		name    string
		advance time.Duration
		renewed bool // the Lease's renewTime moved
		wake    bool
	}{
		{"first sighting", 0, true, true},
		{"renewed 10s later", 10 * time.Second, true, false},
		{"unchanged", 5 * time.Second, false, false},
		{"renewed again", 5 * time.Second, true, false},
		{"back after being stale", testNodeStale + time.Second, true, true},
	} {
		now = now.Add(step.advance)
		at := now
		if !step.renewed {
			at = now.Add(-step.advance) // the previous renewTime
		}
		if got := renew(at); got != step.wake {
			t.Errorf("%s: woke %v, want %v", step.name, got, step.wake)
		}
	}
}
