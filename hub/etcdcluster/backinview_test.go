package etcdcluster

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	etcdfedv1 "github.com/etcdfed/etcdfed/api/v1alpha1"
	"github.com/etcdfed/etcdfed/hub/planner"
)

// A member that went unready while the hub could not see its cluster (a
// partition cut it off, with its cluster, from the hub and the majority)
// is not replaced the moment the cluster comes back into view: its grace
// counts from then. Seen in TestScenarioGossipBroken: a member cut off
// for 90 s was replaced 24 s after the heal, "unhealthy since" 4 s after
// the cut, while it was catching up.
func TestMemberGraceCountsFromClusterBackInView(t *testing.T) {
	grace := 30 * time.Second
	unready := func(back time.Time) *snapshot {
		s := ring()
		s.ec.Spec.FailurePolicy.MemberGracePeriod = &metav1.Duration{Duration: grace}
		since := metav1.NewTime(now.Add(-2 * time.Minute))
		m := &s.ec.Status.Members[2]
		m.Ready, m.LastTransitionTime = false, &since
		s.etcd.Members[2].Healthy = false
		cs := s.cluster(m.Cluster)
		obj := cs.members[m.Name]
		meta := metav1.Condition{Type: etcdfedv1.ConditionMemberHealthy, Status: metav1.ConditionFalse, Reason: "Unhealthy", LastTransitionTime: since}
		for i := range obj.Status.Conditions {
			if obj.Status.Conditions[i].Type == meta.Type {
				obj.Status.Conditions[i] = meta
			}
		}
		cs.backSince = back
		return s
	}
	replaces := func(s *snapshot) bool {
		d := decide(s)
		return d.plan.Action == planner.ActBegin && d.plan.Operation != nil && d.plan.Operation.Type == planner.OpReplace
	}

	if s := unready(time.Time{}); !replaces(s) {
		d := decide(s)
		t.Fatalf("a member unready for 2m in a cluster always in view (grace %s): plan %s (%s), want a Replace", grace, d.plan.Action, d.plan.Reason)
	}
	if s := unready(now.Add(-5 * time.Second)); replaces(s) {
		t.Fatalf("a member unready since before its cluster came back into view 5s ago was replaced (grace %s)", grace)
	}
	if s := unready(now.Add(-grace - time.Second)); !replaces(s) {
		d := decide(s)
		t.Fatalf("back in view for longer than the grace and still unready: plan %s (%s), want a Replace", d.plan.Action, d.plan.Reason)
	}
}

// A promotion starts a member's grace clock afresh: a Move's new
// incarnation, never ready as a learner, is judged as a silent voter from
// when it became one (the planner then gives the Move up), not from when
// it was placed, which a long catch-up would already have spent.
func TestPromotionStartsTheGraceClock(t *testing.T) {
	placed := metav1.NewTime(now.Add(-10 * time.Minute))
	for _, c := range []struct {
		role etcdfedv1.MemberRole
		want time.Time
	}{
		{etcdfedv1.RoleLearner, now},          // promoted since the last pass
		{etcdfedv1.RoleFollower, placed.Time}, // a voter already: its clock runs on
		{etcdfedv1.RoleUnknown, placed.Time},  // not known to be a learner
	} {
		s := ring()
		m := &s.ec.Status.Members[2]
		m.Ready, m.LastTransitionTime, m.Role = false, &placed, c.role
		s.etcd.Members[2].Healthy = false
		st := s.ec.Status.DeepCopy()
		recordObservations(s, st)
		if got := st.Members[2].LastTransitionTime.Time; !got.Equal(c.want) {
			t.Errorf("last recorded role %s, a silent voter now: readiness clock from %s, want %s", c.role, got.Format(time.RFC3339), c.want.Format(time.RFC3339))
		}
	}
}
