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
