package etcdcluster

import (
	"fmt"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	etcdfedv1 "github.com/etcdfed/etcdfed/api/v1alpha1"
	"github.com/etcdfed/etcdfed/hub/planner"
)

// Quorum-loss recovery, the hub's side: what the planner needs to declare
// the loss (when it began, the grace, the request) and how its Recover
// steps are written into the survivor's object (spec.forceNewCluster).

// maxRequestSkew is how far in the future of the hub's clock a request or
// a fencing confirmation may be dated (the writer's clock running ahead)
// before it is refused.
const maxRequestSkew = time.Minute

// recovery is the feature of quorum-loss recovery: the recovery request
// (etcdfed.dev/recover) judged once a pass, the planner's Quorum input
// and each member's fencing (etcdfed.dev/fenced), the request's outcome
// recorded (status.lastRecoveryRequest), the planner's verdict on the
// quorum (assess: status.quorumLoss, and Available's QuorumLost through
// quorumLostMessage), and Degraded's note on a request not acted on.
type recovery struct {
	s *snapshot
	// request is the recovery request when it may be acted on; note says
	// why not, "" with no request at all (recoveryRequest).
	request *etcdfedv1.RecoveryRequest
	note    string
}

func newRecovery(s *snapshot) *recovery {
	r, note := recoveryRequest(s.requests(), s.ec, s.now)
	return &recovery{s: s, request: r, note: note}
}

func (f *recovery) observe(*etcdfedv1.EtcdClusterStatus, *decision) {}

func (f *recovery) input(in *planner.Input, st *etcdfedv1.EtcdClusterStatus) {
	in.Quorum = f.quorumInput()
	f.fence(in.Members, st)
}

// record records the request's outcome; d.requestRefused is the message
// of a request refused now, for its event.
func (f *recovery) record(st *etcdfedv1.EtcdClusterStatus, d *decision) {
	d.requestRefused = f.recordRequest(st, d.plan)
}

func (f *recovery) status(st *etcdfedv1.EtcdClusterStatus, d *decision, _ applyResult) {
	st.QuorumLoss = quorumLossStatus(d.quorum)
}

// fence sets each member's confirmation of its fencing, by the ledger st.
func (f *recovery) fence(members []planner.Member, st *etcdfedv1.EtcdClusterStatus) {
	fenced, _ := fencedMembers(f.s.requests(), f.s.ec, st, f.s.now)
	for i := range members {
		members[i].Fenced = fenced[members[i].Name]
	}
}

// assess judges the quorum on the ledger st.
func (f *recovery) assess(st *etcdfedv1.EtcdClusterStatus) quorumVerdict {
	s := f.s
	in := planner.Input{
		Now:          s.now,
		Bootstrapped: st.ClusterID != "",
		Etcd:         s.etcd,
		Quorum:       f.quorumInput(),
		Members:      plannerMembers(s, st),
	}
	f.fence(in.Members, st)
	return quorumVerdict{loss: planner.AssessQuorum(in), in: in.Quorum}
}

// quorumInput reads the loss's start from the Available condition, the
// grace and the policy from the spec, and the request from the annotation:
// a request already consumed (status.lastRecoveryRequest) or dated in the
// future is no request (recoveryRequest).
func (f *recovery) quorumInput() planner.QuorumInput {
	ec := f.s.ec
	in := planner.QuorumInput{
		Grace:     durationOr(ec.Spec.FailurePolicy.MemberGracePeriod, 5*time.Minute),
		Automatic: ec.Spec.FailurePolicy.QuorumLossRecovery == etcdfedv1.QuorumLossRecoveryAutomatic,
		LostSince: lostSince(ec),
	}
	switch r, note := f.request, f.note; {
	case note != "":
		in.RequestError = note
	case r != nil:
		in.Request = &planner.RecoveryRequest{FromMember: r.FromMember, FromBackup: r.FromBackup, RequestedAt: r.RequestedAt, UID: r.UID}
	}
	return in
}

// lostSince is when etcd stopped answering with a leader (Available's last
// change to False once the ring formed); zero while it answers.
func lostSince(ec *etcdfedv1.EtcdCluster) time.Time {
	if c := meta.FindStatusCondition(ec.Status.Conditions, etcdfedv1.ConditionAvailable); c != nil &&
		c.Status == metav1.ConditionFalse && ec.Status.ClusterID != "" && c.Reason != etcdfedv1.ReasonNotBootstrapped {
		return c.LastTransitionTime.Time
	}
	return time.Time{}
}

// recoveryRequest is q's recovery request when it may be acted on;
// otherwise note says why not ("" with no request at all): it cannot be
// read, it was consumed already (ec's status.lastRecoveryRequest), or it
// is dated in the future (refused: refusedRequest records it, so that it
// never arms a recovery later).
func recoveryRequest(q *requests, ec *etcdfedv1.EtcdCluster, now time.Time) (*etcdfedv1.RecoveryRequest, string) {
	if q.recoverErr != nil {
		return nil, "recovery request not read: " + q.recoverErr.Error()
	}
	if q.recover == nil {
		return nil, ""
	}
	r := *q.recover
	if last := ec.Status.LastRecoveryRequest; last != nil && last.UID == r.UID {
		return nil, ""
	}
	if why := futureDated(r, now); why != "" {
		return &r, why
	}
	return &r, ""
}

// futureDated says why a request is refused for its date, "" when it is not.
func futureDated(r etcdfedv1.RecoveryRequest, now time.Time) string {
	if !r.RequestedAt.After(now.Add(maxRequestSkew)) {
		return ""
	}
	return fmt.Sprintf("recovery request %s refused: dated %s, in the future of the hub's clock (%s): a request must be made when the ring has lost its quorum, not armed ahead of it; ask again with `etcdfed recover`",
		r.UID, r.RequestedAt.UTC().Format(time.RFC3339), now.UTC().Format(time.RFC3339))
}

// recordRequest records in the ledger a request consumed by this pass:
// accepted when the plan begins a Recover from it, refused when it is
// dated in the future. It returns the refusal's message ("" for none) for
// an event, when newly refused.
func (f *recovery) recordRequest(st *etcdfedv1.EtcdClusterStatus, plan planner.Decision) string {
	s, r, note := f.s, f.request, f.note
	if r == nil {
		return ""
	}
	at := metav1.NewTime(s.now)
	requested := metav1.NewTime(r.RequestedAt)
	switch {
	case note != "":
		st.LastRecoveryRequest = &etcdfedv1.RecoveryRequestStatus{UID: r.UID, RequestedAt: &requested, Outcome: etcdfedv1.RecoveryRequestRefused, Message: truncate(note, 2048), At: &at}
		return note
	case plan.Action == planner.ActBegin && plan.Request == r.UID:
		st.LastRecoveryRequest = &etcdfedv1.RecoveryRequestStatus{UID: r.UID, RequestedAt: &requested, Outcome: etcdfedv1.RecoveryRequestAccepted, Message: truncate(plan.Reason, 2048), At: &at}
	}
	return ""
}

// fencedMembers are the members the fencing annotation confirms fenced,
// by name, with who confirmed it and when: only a confirmation made after
// the quorum was lost (allowing for the writer's clock), not dated in the
// future, and naming the recorded etcd ID when it names one. note says why
// the annotation counts for nothing, "" when it counts or is absent.
func fencedMembers(q *requests, ec *etcdfedv1.EtcdCluster, st *etcdfedv1.EtcdClusterStatus, now time.Time) (map[string]string, string) {
	if q.fencedErr != nil {
		return nil, "fencing confirmation not read: " + q.fencedErr.Error()
	}
	if q.fenced == nil {
		return nil, ""
	}
	f := *q.fenced
	since := lostSince(ec)
	switch {
	case since.IsZero():
		return nil, ""
	case f.ConfirmedAt.Before(since.Add(-maxRequestSkew)):
		return nil, fmt.Sprintf("fencing confirmation of %s ignored: made before the quorum was lost (%s)", f.ConfirmedAt.UTC().Format(time.RFC3339), since.UTC().Format(time.RFC3339))
	case f.ConfirmedAt.After(now.Add(maxRequestSkew)):
		return nil, fmt.Sprintf("fencing confirmation ignored: dated %s, in the future of the hub's clock", f.ConfirmedAt.UTC().Format(time.RFC3339))
	}
	by := ""
	if f.By != "" {
		by = " by " + f.By
	}
	out := map[string]string{}
	var wrong []string
	for _, fm := range f.Members {
		m := statusMember(st, fm.Name)
		if m == nil {
			continue
		}
		if fm.ID != "" && !strings.EqualFold(fm.ID, m.ID) {
			wrong = append(wrong, fmt.Sprintf("%s [%s] is now [%s]", fm.Name, fm.ID, m.ID))
			continue
		}
		out[fm.Name] = "confirmed at " + f.ConfirmedAt.UTC().Format(time.RFC3339) + by
	}
	if len(wrong) > 0 {
		return out, "fencing confirmation names other incarnations: " + strings.Join(wrong, ", ")
	}
	return out, ""
}

// etcdView is what the planner needs of a member's own etcd view: the
// spoke's last read, and whether etcd answered it: MemberHealthy is True,
// or False because etcd sees no leader or answers with errors (without
// quorum etcd 3.6 answers its status with "etcdserver: no leader"). A read
// that failed (Unreachable, NoPod) is not an answer.
func etcdView(obj *etcdfedv1.EtcdMember) *planner.EtcdView {
	v := obj.Status.Etcd
	if v == nil || obj.Status.Incarnation != obj.Spec.Incarnation {
		return nil
	}
	c := meta.FindStatusCondition(obj.Status.Conditions, etcdfedv1.ConditionMemberHealthy)
	answers := c != nil && c.ObservedGeneration == obj.Generation &&
		(c.Reason == etcdfedv1.ReasonMemberHealthy || c.Reason == etcdfedv1.ReasonMemberNoLeader || c.Reason == etcdfedv1.ReasonMemberAlarm)
	return &planner.EtcdView{ID: parseID(v.ID), RaftIndex: v.RaftIndex, Answers: answers && v.ID != ""}
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

// quorumVerdict is the planner's verdict on the ring's quorum
// (planner.AssessQuorum) with the quorum input it judged on.
type quorumVerdict struct {
	loss planner.QuorumLoss
	in   planner.QuorumInput
}

// quorumLostMessage is Available's message while the planner declares the
// loss of quorum, "" when it does not. It says what happens next: the
// members to fence first, then a human runs `etcdfed recover`, or, with
// quorumLossRecovery Automatic, the hub recovers by itself.
func quorumLostMessage(v quorumVerdict) string {
	q, in := v.loss, v.in
	if !q.Declared {
		return ""
	}
	_, survivor := q.Freshest()
	var next string
	switch {
	case !q.Proven() && in.Automatic:
		next = "no new cluster is forced while a lost voter may still serve: " + q.FenceHint() + "; then the hub recovers by itself (failurePolicy.quorumLossRecovery: Automatic)"
	case !q.Proven():
		next = "before a recovery, " + q.FenceHint()
	case survivor && in.Automatic:
		next = "recovering from the freshest survivor by itself (failurePolicy.quorumLossRecovery: Automatic)"
	default:
		next = "recover with `etcdfed recover`"
	}
	return "quorum lost: " + q.Message() + "; " + next
}

// quorumLossStatus is status.quorumLoss: what AssessQuorum found, while
// the quorum is lost; nil otherwise.
func quorumLossStatus(v quorumVerdict) *etcdfedv1.QuorumLossStatus {
	q := v.loss
	if !q.Lost {
		return nil
	}
	out := &etcdfedv1.QuorumLossStatus{}
	if !v.in.LostSince.IsZero() {
		t := metav1.NewTime(v.in.LostSince)
		out.Since = &t
	}
	for _, sv := range q.Survivors {
		out.Survivors = append(out.Survivors, etcdfedv1.QuorumMember{Name: sv.Name, ID: hexID(sv.ID), Cluster: sv.Cluster, RaftIndex: sv.RaftIndex})
	}
	lost := func(vs []planner.LostVoter) []etcdfedv1.QuorumMember {
		var out []etcdfedv1.QuorumMember
		for _, v := range vs {
			out = append(out, etcdfedv1.QuorumMember{Name: v.Name, ID: hexID(v.ID), Cluster: v.Cluster, Why: truncate(v.Why, 1024)})
		}
		return out
	}
	out.Gone, out.MustFence = lost(q.Gone), lost(q.MustFence)
	return out
}
