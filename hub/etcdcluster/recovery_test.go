package etcdcluster

import (
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	etcdfedv1 "github.com/etcdfed/etcdfed/api/v1alpha1"
	"github.com/etcdfed/etcdfed/hub/liveness"
	"github.com/etcdfed/etcdfed/hub/planner"
)

// lostRing is unfencedRing() with main-1 and main-2 confirmed fenced
// (annotation etcdfed.dev/fenced, made after the loss).
func lostRing() *snapshot {
	s := unfencedRing()
	s.ec.Annotations = map[string]string{etcdfedv1.AnnotationFenced: etcdfedv1.FencingConfirmation{
		Members: []etcdfedv1.FencedMember{{Name: "main-1", ID: hexID(2)}, {Name: "main-2"}}, ConfirmedAt: now.Add(-time.Minute), By: "test"}.String()}
	return s
}

// unfencedRing is ring() after member-2 and member-3 failed (declared by
// the liveness judge): etcd does not answer, main-0's etcd answers its
// spoke without a leader at raft index 500, and Available has been False
// for ten minutes (beyond the 5-minute default grace).
func unfencedRing() *snapshot {
	s := ring()
	s.etcd = planner.Etcd{Error: "context deadline exceeded"}
	for _, c := range []string{"member-2", "member-3"} {
		s.cluster(c).verdict = liveness.Verdict{Cluster: c, State: liveness.Failed}
	}
	obj := s.cluster("member-1").members["main-0"]
	// What etcd 3.6.16 answers its spoke without quorum.
	obj.Status.Etcd = &etcdfedv1.MemberEtcdView{ID: hexID(1), RaftIndex: 500, Error: "etcdserver: no leader"}
	for i, c := range obj.Status.Conditions {
		if c.Type == etcdfedv1.ConditionMemberHealthy {
			obj.Status.Conditions[i] = metav1.Condition{Type: c.Type, Status: metav1.ConditionFalse, Reason: etcdfedv1.ReasonMemberAlarm, ObservedGeneration: 1}
		}
	}
	s.ec.Status.Conditions = []metav1.Condition{{Type: etcdfedv1.ConditionAvailable, Status: metav1.ConditionFalse, Reason: etcdfedv1.ReasonNoQuorum,
		LastTransitionTime: metav1.NewTime(now.Add(-10 * time.Minute))}}
	return s
}

func TestQuorumLossRecovery(t *testing.T) {
	t.Run("the loss is declared in Available, naming the gone and the freshest survivor", func(t *testing.T) {
		s := lostRing()
		d := decide(s)
		st := computeStatus(s, d, applyResult{}, "")
		c := condition(st, etcdfedv1.ConditionAvailable)
		if c.Status != metav1.ConditionFalse || c.Reason != etcdfedv1.ReasonQuorumLost {
			t.Fatalf("Available = %s %s: %s", c.Status, c.Reason, c.Message)
		}
		for _, want := range []string{"main-1 [2]: confirmed fenced (confirmed at " + now.Add(-time.Minute).UTC().Format(time.RFC3339) + " by test)", "main-2 [3]: confirmed fenced", "freshest survivor: main-0 [1] at raft index 500", "etcdfed recover"} {
			if !strings.Contains(c.Message, want) {
				t.Errorf("message %q lacks %q", c.Message, want)
			}
		}
		if d.plan.Action != planner.ActWait || st.Operation != nil {
			t.Errorf("no request: plan %s, operation %+v; want a wait and nothing recorded", d.plan.Action, st.Operation)
		}
	})

	t.Run("with Automatic the loss is declared and recovered from the freshest survivor without a request", func(t *testing.T) {
		s := lostRing()
		s.ec.Spec.FailurePolicy.QuorumLossRecovery = etcdfedv1.QuorumLossRecoveryAutomatic
		d := decide(s)
		st := computeStatus(s, d, applyResult{}, "")
		c := condition(st, etcdfedv1.ConditionAvailable)
		if c.Status != metav1.ConditionFalse || c.Reason != etcdfedv1.ReasonQuorumLost {
			t.Fatalf("Available = %s %s: %s", c.Status, c.Reason, c.Message)
		}
		for _, want := range []string{"freshest survivor: main-0 [1] at raft index 500", "recovering from the freshest survivor by itself (failurePolicy.quorumLossRecovery: Automatic)"} {
			if !strings.Contains(c.Message, want) {
				t.Errorf("message %q lacks %q", c.Message, want)
			}
		}
		if strings.Contains(c.Message, "etcdfed recover") {
			t.Errorf("message %q asks a human to recover a ring the hub recovers by itself", c.Message)
		}
		op := d.ledger.Operation
		if d.plan.Action != planner.ActBegin || op == nil || op.Type != etcdfedv1.OperationRecover || op.Member != "main-0" || !strings.Contains(d.plan.Reason, "automatic") {
			t.Fatalf("plan %s (%s), operation %+v; want Begin Recover from main-0, automatic", d.plan.Action, d.plan.Reason, op)
		}
	})

	t.Run("within the grace it is only NoQuorum", func(t *testing.T) {
		s := lostRing()
		s.ec.Status.Conditions[0].LastTransitionTime = metav1.NewTime(now.Add(-time.Minute))
		st := computeStatus(s, decide(s), applyResult{}, "")
		if c := condition(st, etcdfedv1.ConditionAvailable); c.Reason != etcdfedv1.ReasonNoQuorum {
			t.Fatalf("Available reason %s: %s", c.Reason, c.Message)
		}
	})

	t.Run("a request made after the loss records Recover before anything is done", func(t *testing.T) {
		s := lostRing()
		s.ec.Annotations[etcdfedv1.AnnotationRecover] = etcdfedv1.RecoveryRequest{RequestedAt: now.Add(-time.Second), UID: "req-1"}.String()
		d := decide(s)
		op := d.ledger.Operation
		if d.plan.Action != planner.ActBegin || op == nil || op.Type != etcdfedv1.OperationRecover || op.Member != "main-0" || op.MemberID != hexID(1) {
			t.Fatalf("plan %s (%s), operation %+v", d.plan.Action, d.plan.Reason, op)
		}
		if len(d.step.writes) != 0 {
			t.Errorf("Begin wrote %d objects; it must only record", len(d.step.writes))
		}
		// Consumed once: recorded, and the same request is never acted
		// on again (a later loss, the operation gone).
		if r := d.ledger.LastRecoveryRequest; r == nil || r.UID != "req-1" || r.Outcome != etcdfedv1.RecoveryRequestAccepted {
			t.Fatalf("lastRecoveryRequest %+v, want req-1 accepted", r)
		}
		s.ec.Status.LastRecoveryRequest = d.ledger.LastRecoveryRequest
		if d := decide(s); d.plan.Action == planner.ActBegin {
			t.Errorf("a consumed request began a second recovery: %s", d.plan.Reason)
		}
	})

	// Issue 24: the hub on the minority side saw its one survivor and
	// declared the other clusters failed; with Automatic it forced a new
	// cluster beside a live majority.
	t.Run("the split: lost voters out of sight, not fenced: nothing forced, and the hub says whom to fence", func(t *testing.T) {
		s := unfencedRing()
		s.ec.Spec.FailurePolicy.QuorumLossRecovery = etcdfedv1.QuorumLossRecoveryAutomatic
		d := decide(s)
		st := computeStatus(s, d, applyResult{}, "")
		if d.plan.Action == planner.ActBegin || d.ledger.Operation != nil {
			t.Fatalf("forced: plan %s (%s), operation %+v", d.plan.Action, d.plan.Reason, d.ledger.Operation)
		}
		c := condition(st, etcdfedv1.ConditionAvailable)
		for _, want := range []string{"2 not known gone", "unreachable is not dead", "--confirm-fenced main-1,main-2", "then the hub recovers by itself"} {
			if !strings.Contains(c.Message, want) {
				t.Errorf("Available %q lacks %q", c.Message, want)
			}
		}
		q := st.QuorumLoss
		if q == nil || len(q.Survivors) != 1 || q.Survivors[0].Name != "main-0" || len(q.MustFence) != 2 || q.MustFence[0].Name != "main-1" || len(q.Gone) != 0 {
			t.Errorf("status.quorumLoss %+v", q)
		}
	})

	t.Run("a fencing confirmation made before the loss counts for nothing", func(t *testing.T) {
		s := lostRing()
		s.ec.Spec.FailurePolicy.QuorumLossRecovery = etcdfedv1.QuorumLossRecoveryAutomatic
		s.ec.Annotations[etcdfedv1.AnnotationFenced] = etcdfedv1.FencingConfirmation{Members: []etcdfedv1.FencedMember{{Name: "main-1"}, {Name: "main-2"}}, ConfirmedAt: now.Add(-time.Hour)}.String()
		d := decide(s)
		st := computeStatus(s, d, applyResult{}, "")
		if d.plan.Action == planner.ActBegin {
			t.Fatalf("forced on a stale confirmation: %s", d.plan.Reason)
		}
		if c := condition(st, etcdfedv1.ConditionDegraded); !strings.Contains(c.Message, "made before the quorum was lost") {
			t.Errorf("Degraded %q does not say why the confirmation counts for nothing", c.Message)
		}
	})

	t.Run("a confirmation naming another incarnation's ID does not count for the current one", func(t *testing.T) {
		s := lostRing()
		s.ec.Annotations[etcdfedv1.AnnotationFenced] = etcdfedv1.FencingConfirmation{Members: []etcdfedv1.FencedMember{{Name: "main-1", ID: "77"}, {Name: "main-2"}}, ConfirmedAt: now}.String()
		s.ec.Annotations[etcdfedv1.AnnotationRecover] = etcdfedv1.RecoveryRequest{RequestedAt: now, UID: "req-2"}.String()
		if d := decide(s); d.plan.Action == planner.ActBegin || !strings.Contains(d.plan.Reason, "--confirm-fenced main-1") {
			t.Fatalf("plan %s (%s)", d.plan.Action, d.plan.Reason)
		}
	})

	// A request dated in the future was taken as made after the loss and
	// armed a recovery later, on a Manual ring: refused at once, recorded,
	// never acted on.
	t.Run("a request dated in the future is refused, recorded, and never arms a recovery", func(t *testing.T) {
		s := lostRing()
		s.ec.Annotations[etcdfedv1.AnnotationRecover] = etcdfedv1.RecoveryRequest{RequestedAt: now.Add(time.Hour), UID: "req-future"}.String()
		d := decide(s)
		if d.plan.Action == planner.ActBegin {
			t.Fatalf("a future-dated request began a recovery: %s", d.plan.Reason)
		}
		r := d.ledger.LastRecoveryRequest
		if r == nil || r.UID != "req-future" || r.Outcome != etcdfedv1.RecoveryRequestRefused || !strings.Contains(r.Message, "in the future") || d.requestRefused == "" {
			t.Fatalf("lastRecoveryRequest %+v (refused %q), want req-future refused", r, d.requestRefused)
		}
		// An hour later the date has passed; the request stays consumed.
		s.ec.Status.LastRecoveryRequest = r
		s.now = now.Add(2 * time.Hour)
		if d := decide(s); d.plan.Action == planner.ActBegin {
			t.Errorf("the refused request armed a recovery once its date passed: %s", d.plan.Reason)
		}
	})

	t.Run("ForceNewCluster writes the flag on the survivor only, and etcd is dialled through it", func(t *testing.T) {
		s := lostRing()
		inFlight(s, etcdfedv1.MembershipOperation{Type: etcdfedv1.OperationRecover, Member: "main-0", MemberID: hexID(1), Step: string(planner.ActBegin)})
		d := decide(s)
		if d.plan.Action != planner.ActForceNewCluster || len(d.step.writes) != 1 {
			t.Fatalf("plan %s (%s), %d writes", d.plan.Action, d.plan.Reason, len(d.step.writes))
		}
		w := d.step.writes[0]
		if w.cluster != "member-1" || w.want.Spec.MemberName != "main-0" || !strings.HasPrefix(w.want.Spec.ForceNewCluster, "recover-") {
			t.Errorf("write %s %s forceNewCluster %q", w.cluster, w.want.Spec.MemberName, w.want.Spec.ForceNewCluster)
		}
		if w.want.Spec.Incarnation != 1 || w.want.Spec.Bootstrap == nil {
			t.Errorf("the survivor keeps its incarnation and bootstrap: %+v", w.want.Spec)
		}
		if eps := clientEndpoints(s, d.ledger, nil); len(eps) != 1 || !strings.Contains(eps[0], "main-0.") {
			t.Errorf("endpoints %v: want the survivor's alone (the gone members' may hold requests until they time out)", eps)
		}
	})

	t.Run("the flag is kept by the upkeep and cleared once etcd answers as the survivor alone", func(t *testing.T) {
		s := lostRing()
		inFlight(s, etcdfedv1.MembershipOperation{Type: etcdfedv1.OperationRecover, Member: "main-0", MemberID: hexID(1), Step: string(planner.ActForceNewCluster)})
		s.cluster("member-1").members["main-0"].Spec.ForceNewCluster = "recover-x"
		d := decide(s)
		if d.plan.Action != planner.ActWait || len(d.updates) != 0 {
			t.Fatalf("etcd down: plan %s, upkeep updates %d; want a wait and the flag left alone", d.plan.Action, len(d.updates))
		}
		s.etcd = planner.Etcd{Reachable: true, LeaderID: 1, ClusterID: 0xc1, Members: s.etcd.Members}
		s.etcd.Members = []planner.ListEntry{{ID: 1, Name: "main-0", PeerURLs: []string{memberURL(s.ec, "main-0", 2380)}, Healthy: true}}
		d = decide(s)
		if d.plan.Action != planner.ActClearForceNewCluster || len(d.step.writes) != 1 || d.step.writes[0].want.Spec.ForceNewCluster != "" {
			t.Fatalf("plan %s (%s), writes %+v", d.plan.Action, d.plan.Reason, d.step.writes)
		}
		var names []string
		for _, m := range d.ledger.Members {
			names = append(names, m.Name)
		}
		if strings.Join(names, ",") != "main-0" {
			t.Errorf("ledger keeps %v; the gone members are forgotten once etcd no longer lists them", names)
		}
	})
}
