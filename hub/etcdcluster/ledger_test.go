package etcdcluster

import (
	"slices"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	etcdfedv1 "github.com/etcdfed/etcdfed/api/v1alpha1"
	"github.com/etcdfed/etcdfed/hub/liveness"
	"github.com/etcdfed/etcdfed/hub/planner"
)

// TestStaleRecordCatchesUp (issue 36, a stale hub never harms a ring): the
// hub cluster's store restored to before main-1 was replaced in member-2
// (its volume lost: incarnation 5, etcd ID [21], the same object). The
// record says incarnation 2, ID [2], which etcd no longer lists, and
// lastIncarnation 3. The pass must record main-1 as the incarnation that
// runs it (the object whose spoke reports [21], which etcd lists under
// main-1's name), raise lastIncarnation past every incarnation an object
// holds, and begin nothing: before, it forgot main-1 as removed outside
// etcdfed and then stopped on "etcd has members etcdfed does not manage"
// for good, with a record that would number the next incarnation 4 or 5
// again.
func TestStaleRecordCatchesUp(t *testing.T) {
	s := ring()
	moved := s.cluster("member-2").members["main-1"]
	moved.Spec.Incarnation = 5
	moved.Status.Incarnation, moved.Status.Address = 5, "127.0.2.11"
	moved.Status.Etcd = &etcdfedv1.MemberEtcdView{ID: hexID(0x21)}
	for i, e := range s.etcd.Members {
		if e.Name == "main-1" {
			s.etcd.Members[i] = planner.ListEntry{ID: 0x21, Name: "main-1", PeerURLs: e.PeerURLs, ClientURLs: e.ClientURLs, Healthy: true}
		}
	}

	d := decide(s)
	m := statusMember(d.ledger, "main-1")
	if m == nil {
		t.Fatalf("main-1 forgotten: the record has %v", incarnationsOf(d.ledger))
	}
	if m.Cluster != "member-2" || m.Incarnation != 5 || m.ID != hexID(0x21) || m.Zone != "zone-2" || m.Object != moved.Name || m.Address != "127.0.2.11" {
		t.Errorf("main-1 recorded as %s/%s incarnation %d ID %s object %q address %s, want member-2/zone-2 incarnation 5 ID %s object %s address 127.0.2.11",
			m.Cluster, m.Zone, m.Incarnation, m.ID, m.Object, m.Address, hexID(0x21), moved.Name)
	}
	if d.ledger.LastIncarnation < 5 {
		t.Errorf("lastIncarnation %d, below incarnation 5 that member-2 holds", d.ledger.LastIncarnation)
	}
	if d.ledger.Operation != nil {
		t.Errorf("the stale record began %s %s", d.ledger.Operation.Type, d.ledger.Operation.Member)
	}
	if strings.Contains(d.plan.Reason, "does not manage") {
		t.Errorf("the planner stops: %s", d.plan.Reason)
	}
	if len(d.sweep) > 0 {
		t.Errorf("the pass sweeps %v", d.sweep)
	}
}

// A member whose recorded ID etcd no longer lists, with no object running
// a listed ID of its name, is still forgotten as removed outside etcdfed
// (rule 1): the catch-up needs the spoke's word and etcd's.
func TestStaleRecordWithoutARunningObjectIsForgotten(t *testing.T) {
	s := ring()
	for i, e := range s.etcd.Members {
		if e.Name == "main-1" {
			s.etcd.Members = append(s.etcd.Members[:i], s.etcd.Members[i+1:]...)
			break
		}
	}
	st := s.ec.Status.DeepCopy()
	recordObservations(s, st)
	if m := statusMember(st, "main-1"); m != nil {
		t.Errorf("main-1, which etcd no longer lists, is still recorded: %+v", *m)
	}
}

func incarnationsOf(st *etcdfedv1.EtcdClusterStatus) []string {
	var out []string
	for _, m := range st.Members {
		out = append(out, m.Name+"@"+m.Cluster)
	}
	return out
}

// TestLostRecordIgnoresIneligibleClusters (issue 37, low): the record of
// members lost, and a member cluster the ring's spec.topology does not
// allow holds an EtcdMember of main-2 with a higher incarnation than the
// real one (a hostile cluster, or one left by a deliberate move). The
// rebuilt record takes main-2 from member-3, where the ring may live;
// member-4's object is not adopted, and Degraded names member-4. Before,
// the highest incarnation anywhere won: member-4 became main-2's home.
func TestLostRecordIgnoresIneligibleClusters(t *testing.T) {
	s := ring()
	withFourthCluster(s)
	s.ec.Spec.Topology.Clusters = []string{"member-1", "member-2", "member-3"}
	cs4 := s.cluster("member-4")
	cs4.eligible = false
	squat := s.cluster("member-3").members["main-2"].DeepCopy()
	squat.Name, squat.Spec.Incarnation, squat.Status.Incarnation = "squat", 9, 9
	cs4.members["main-2"] = squat
	s.ec.Status.Members = nil

	d := decide(s)
	m := statusMember(d.ledger, "main-2")
	if m == nil || m.Cluster != "member-3" || m.Incarnation != 3 {
		t.Fatalf("main-2 rebuilt as %+v; want member-3, incarnation 3", m)
	}
	if len(d.ledger.Members) != 3 {
		t.Errorf("rebuilt record %v; want main-0, main-1, main-2", incarnationsOf(d.ledger))
	}
	st := computeStatus(s, d, applyResult{}, "")
	if c := condition(st, etcdfedv1.ConditionDegraded); c.Status != metav1.ConditionTrue || !strings.Contains(c.Message, "member cluster member-4 holds objects of main-2") {
		t.Errorf("Degraded %s %s: %s; want member-4's objects named", c.Status, c.Reason, c.Message)
	}
}

// A founding member whose ID is not bound yet when the ring forms (its
// cluster out of sight that pass: a spoke's Lease late under load) is
// kept, and bound by its object's peer URL once the cluster is back in
// sight; a record without an ID whose object, in sight, reports a peer
// URL etcd does not list is still forgotten (rule 1). Seen in
// TestDevUpStatusDown at a load average of 30: the records of three
// founding members were forgotten the pass after the ring formed, and the
// ring stopped on "etcd has members etcdfed does not manage" for good.
func TestUnboundRecordKeptWhileItsClusterIsOutOfSight(t *testing.T) {
	s := ring()
	s.ec.Status.Members[1].ID = ""
	cs := s.cluster(s.ec.Status.Members[1].Cluster)
	cs.verdict.State = liveness.Unknown
	st := s.ec.Status.DeepCopy()
	recordObservations(s, st)
	if statusMember(st, "main-1") == nil {
		t.Fatalf("main-1, without an ID and its cluster out of sight, was forgotten: %s", incarnationsOf(st))
	}
	d := decide(s)
	if d.plan.Action != planner.ActWait || !strings.Contains(d.plan.Reason, "not matched yet") {
		t.Errorf("plan with main-1's cluster out of sight: %s (%s), want a wait for the cluster", d.plan.Action, d.plan.Reason)
	}

	cs.verdict.State = liveness.Alive
	recordObservations(s, st)
	if m := statusMember(st, "main-1"); m == nil || m.ID != hexID(2) {
		t.Fatalf("main-1 back in sight: record %+v, want bound to etcd ID 2", m)
	}

	// In sight, reporting a peer URL etcd does not list: forgotten.
	s = ring()
	s.ec.Status.Members[1].ID = ""
	s.etcd.Members = slices.DeleteFunc(s.etcd.Members, func(e planner.ListEntry) bool { return e.Name == "main-1" })
	st = s.ec.Status.DeepCopy()
	recordObservations(s, st)
	if m := statusMember(st, "main-1"); m != nil {
		t.Errorf("main-1, in sight and not listed by etcd, is still recorded: %+v", *m)
	}
}

// A record rebuilt from the objects while one member cluster was out of
// sight (the hub's status lost, a zone down too) takes that cluster's
// member in once the cluster is back, if etcd lists the ID its object
// runs under its name; an object etcd does not list (a member removed
// meanwhile) is not taken in. Before, the member stayed one "etcdfed does
// not manage" for good.
func TestLateClusterMembersJoinARebuiltRecord(t *testing.T) {
	s := ring()
	for _, cs := range s.clusters {
		for _, obj := range cs.members {
			id := uint64(0)
			for _, m := range s.ec.Status.Members {
				if m.Name == obj.Spec.MemberName {
					id = parseID(m.ID)
				}
			}
			obj.Status.Etcd = &etcdfedv1.MemberEtcdView{ID: hexID(id)}
		}
	}
	s.ec.Status.Members = nil
	late := s.cluster("member-2")
	late.verdict.State = liveness.Unknown
	st := s.ec.Status.DeepCopy()
	adoptLostMembers(s, st)
	adoptLateMembers(s, st)
	if statusMember(st, "main-1") != nil || len(st.Members) != 2 {
		t.Fatalf("rebuilt with member-2 out of sight: %s, want main-0 and main-2", incarnationsOf(st))
	}

	late.verdict.State = liveness.Alive
	if d := decide(withRecord(s, st)); strings.Contains(d.plan.Reason, "does not manage") {
		t.Errorf("a pass with member-2 back in sight and main-1 not in the record: plan %s (%s)", d.plan.Action, d.plan.Reason)
	}
	adoptLateMembers(s, st)
	m := statusMember(st, "main-1")
	if m == nil || m.ID != hexID(2) || m.Cluster != "member-2" || m.Incarnation != 2 {
		t.Fatalf("member-2 back in sight: main-1 recorded as %+v, want incarnation 2 in member-2 with etcd ID 2", m)
	}

	// An object etcd does not list under its name is not taken in.
	st2 := s.ec.Status.DeepCopy()
	adoptLostMembers(s, st2)
	st2.Members = slices.DeleteFunc(st2.Members, func(m etcdfedv1.MemberStatus) bool { return m.Name == "main-1" })
	s.etcd.Members = slices.DeleteFunc(s.etcd.Members, func(e planner.ListEntry) bool { return e.Name == "main-1" })
	adoptLateMembers(s, st2)
	if statusMember(st2, "main-1") != nil {
		t.Errorf("main-1, which etcd no longer lists, was taken into the record")
	}
}

// withRecord is s with st as the EtcdCluster's status.
func withRecord(s *snapshot, st *etcdfedv1.EtcdClusterStatus) *snapshot {
	s.ec.Status = *st.DeepCopy()
	return s
}

// TestStepStartedAt: recordStep keeps status.operation.stepStartedAt while
// the same operation stays on the same step, and starts it afresh on a new
// step, a new operation, or a status an older hub wrote without it. The
// planner's fallbacks after a minute of MoveLeader count from it.
func TestStepStartedAt(t *testing.T) {
	began := metav1.NewTime(time.Date(2026, 12, 3, 20, 0, 0, 0, time.UTC))
	stepAt := metav1.NewTime(began.Add(30 * time.Second))
	now := began.Add(5 * time.Minute)
	op := func(step planner.Action, at *metav1.Time) *etcdfedv1.MembershipOperation {
		return &etcdfedv1.MembershipOperation{Type: etcdfedv1.OperationMove, Member: "main-1", Step: string(step), StartedAt: began, StepStartedAt: at}
	}
	for _, c := range []struct {
		name       string
		prev, next *etcdfedv1.MembershipOperation
		want       time.Time
	}{
		{"no operation before", nil, op(planner.ActBegin, nil), now},
		{"the same step again", op(planner.ActMoveLeader, &stepAt), op(planner.ActMoveLeader, nil), stepAt.Time},
		{"the next step", op(planner.ActMoveLeader, &stepAt), op(planner.ActRemoveMember, nil), now},
		{"the same step of another operation", op(planner.ActMoveLeader, &stepAt), func() *etcdfedv1.MembershipOperation {
			o := op(planner.ActMoveLeader, nil)
			o.StartedAt = metav1.NewTime(now)
			return o
		}(), now},
		{"another member's operation", op(planner.ActMoveLeader, &stepAt), func() *etcdfedv1.MembershipOperation {
			o := op(planner.ActMoveLeader, nil)
			o.Member = "main-2"
			return o
		}(), now},
		{"an older hub's status without it", op(planner.ActMoveLeader, nil), op(planner.ActMoveLeader, nil), now},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := stepStartedAt(c.prev, c.next, now); got == nil || !got.Time.Equal(c.want) {
				t.Errorf("stepStartedAt = %v, want %v", got, c.want)
			}
		})
	}
	// Through recordStep and back to the planner.
	s := ring()
	st := s.ec.Status.DeepCopy()
	st.Operation = op(planner.ActMoveLeader, &stepAt)
	s.now = now
	recordStep(s, st, planner.Decision{Action: planner.ActMoveLeader, Operation: fromAPIOperation(st.Operation)})
	if got := fromAPIOperation(st.Operation).StepStartedAt; !got.Equal(stepAt.Time) {
		t.Errorf("after recordStep the planner reads stepStartedAt %v, want %v", got, stepAt.Time)
	}
}
