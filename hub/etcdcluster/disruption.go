package etcdcluster

import (
	"context"

	corev1 "k8s.io/api/core/v1"

	etcdfedv1 "github.com/etcdfed/etcdfed/api/v1alpha1"
	"github.com/etcdfed/etcdfed/hub/planner"
)

// grantsDisruption: the ledger's operation opens member's budget (the
// ring's one disruption, hub/planner/disruption.go).
func grantsDisruption(st *etcdfedv1.EtcdClusterStatus, member string) bool {
	op := st.Operation
	if op == nil {
		return false
	}
	return planner.Allows(&planner.Operation{Type: planner.OpType(op.Type), Member: op.Member, Step: planner.Action(op.Step)}, member)
}

// disruptionStep writes the member's object with the grant opened
// (GrantDisruption) or closed (AwaitReturn), and records the transition.
func (r *Reconciler) disruptionStep(ctx context.Context, t *taking) error {
	if err := r.applyWrites(ctx, t); err != nil {
		return err
	}
	s, p := t.s, t.d.plan
	if prev := s.ec.Status.Operation; prev != nil && prev.Step != string(p.Action) {
		switch p.Action {
		case planner.ActGrantDisruption:
			r.event(s.ec, corev1.EventTypeNormal, etcdfedv1.EventDisruptionAllowed, "GrantDisruption", "%s", p.Reason)
		case planner.ActAwaitReturn:
			r.event(s.ec, corev1.EventTypeNormal, etcdfedv1.EventDisruptionTaken, "AwaitReturn", "%s", p.Reason)
		}
	}
	return nil
}

// disruption is the feature of the ring's one disruption budget: the
// disruption each member's spoke asks for, in the planner's input. A
// grant is the operation membership records.
type disruption struct{ s *snapshot }

func (f *disruption) observe(*etcdfedv1.EtcdClusterStatus, *decision) {}

// input adds to each member's object the disruption its spoke asks for
// (its drained node), for the incarnation the object runs.
func (f *disruption) input(in *planner.Input, _ *etcdfedv1.EtcdClusterStatus) {
	for i := range in.Members {
		mm := &in.Members[i]
		if mm.Object == nil {
			continue
		}
		obj := f.s.cluster(mm.Domain.Cluster).members[mm.Name]
		if dr := obj.Status.Disruption; dr != nil && dr.Requested && obj.Status.Incarnation == obj.Spec.Incarnation {
			mm.Object.DisruptionRequested, mm.Object.DisruptionReason = true, dr.Reason
			if dr.Since != nil {
				mm.Object.DisruptionRequestedSince = dr.Since.Time
			}
		}
	}
}

func (f *disruption) record(*etcdfedv1.EtcdClusterStatus, *decision)              {}
func (f *disruption) status(*etcdfedv1.EtcdClusterStatus, *decision, applyResult) {}
