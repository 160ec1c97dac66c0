package etcdcluster

import (
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	etcdfedv1 "github.com/etcdfed/etcdfed/api/v1alpha1"
	"github.com/etcdfed/etcdfed/hub/membership"
)

// Quorum-loss recovery, the hub's side: what the planner needs to declare
// the loss (when it began, the grace, the request) and how its Recover
// steps are written into the survivor's object (spec.forceNewCluster).

// quorumInput reads the loss's start from the Available condition, the
// grace and the policy from the spec, and the request from the annotation.
func quorumInput(ec *etcdfedv1.EtcdCluster) membership.QuorumInput {
	q := membership.QuorumInput{
		Grace:     durationOr(ec.Spec.FailurePolicy.MemberGracePeriod, 5*time.Minute),
		Automatic: ec.Spec.FailurePolicy.QuorumLossRecovery == etcdfedv1.QuorumLossRecoveryAutomatic,
	}
	if c := meta.FindStatusCondition(ec.Status.Conditions, etcdfedv1.ConditionAvailable); c != nil &&
		c.Status == metav1.ConditionFalse && ec.Status.ClusterID != "" && c.Reason != etcdfedv1.ReasonNotBootstrapped {
		q.LostSince = c.LastTransitionTime.Time
	}
	if v, ok := ec.Annotations[etcdfedv1.AnnotationRecover]; ok {
		r, err := etcdfedv1.ParseRecoveryRequest(v)
		if err != nil {
			q.RequestError = err.Error()
		} else {
			q.Request = &membership.RecoveryRequest{FromMember: r.FromMember, FromBackup: r.FromBackup, RequestedAt: r.RequestedAt}
		}
	}
	return q
}

// etcdView is what the planner needs of a member's own etcd view: the
// spoke's last read, and whether etcd answered it: MemberHealthy is True,
// or False because etcd sees no leader or answers with errors (without
// quorum etcd 3.6 answers its status with "etcdserver: no leader"). A read
// that failed (Unreachable, NoPod) is not an answer.
func etcdView(obj *etcdfedv1.EtcdMember) *membership.EtcdView {
	v := obj.Status.Etcd
	if v == nil || obj.Status.Incarnation != obj.Spec.Incarnation {
		return nil
	}
	c := meta.FindStatusCondition(obj.Status.Conditions, etcdfedv1.ConditionMemberHealthy)
	answers := c != nil && c.ObservedGeneration == obj.Generation &&
		(c.Reason == etcdfedv1.ReasonMemberHealthy || c.Reason == etcdfedv1.ReasonMemberNoLeader || c.Reason == etcdfedv1.ReasonMemberAlarm)
	return &membership.EtcdView{ID: parseID(v.ID), RaftIndex: v.RaftIndex, Answers: answers && v.ID != ""}
}

// forceNewClusterToken is the value of spec.forceNewCluster for the
// Recover in flight: its start, so that each recovery is its own.
func forceNewClusterToken(st *etcdfedv1.EtcdClusterStatus) string {
	if st.Operation == nil {
		return "recover"
	}
	return "recover-" + st.Operation.StartedAt.UTC().Format("20060102T150405Z")
}

// writeForceNewCluster renders the survivor's object with
// spec.forceNewCluster set (on) or cleared.
func (out *step) writeForceNewCluster(s *snapshot, st *etcdfedv1.EtcdClusterStatus, member string, on bool) {
	n := len(out.writes)
	out.write(s, st, member, nil)
	if len(out.writes) == n {
		return
	}
	want := out.writes[n].want
	want.Spec.ForceNewCluster = ""
	if on {
		want.Spec.ForceNewCluster = forceNewClusterToken(st)
	}
}

// quorumLostMessage is Available's message while the planner declares the
// loss of quorum, "" when it does not. It says what happens next: a human
// runs `etcdfed recover`, or, with quorumLossRecovery Automatic, the hub
// recovers by itself.
func quorumLostMessage(in membership.Input) string {
	q := membership.AssessQuorum(in)
	if !q.Declared {
		return ""
	}
	next := "recover with `etcdfed recover`"
	if _, ok := q.Freshest(); ok && in.Quorum.Automatic {
		next = "recovering from the freshest survivor by itself (failurePolicy.quorumLossRecovery: Automatic)"
	}
	return "quorum lost: " + q.Message() + "; " + next
}
