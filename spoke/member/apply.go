package member

import (
	"context"
	"errors"

	ctrl "sigs.k8s.io/controller-runtime"

	etcdfedv1 "github.com/etcdfed/etcdfed/api/v1alpha1"
	"github.com/etcdfed/etcdfed/internal/text"
)

// apply carries out a decision: it records its events, then makes its
// writes in order through the one writer, recording each write's event once
// it succeeded. It decides nothing. The first write that fails ends the pass
// with its error, since a later write may rest on it (the pod on its
// volume). A create that finds the name taken means the snapshot is stale
// (the object was created since observe looked): apply stops there and
// reports stale, and the pass observes again.
func (r *Reconciler) apply(ctx context.Context, m *etcdfedv1.EtcdMember, d *decision) (out outcome, stale bool, err error) {
	for _, e := range d.events {
		r.event(m, e)
	}
	out = d.after
	for _, w := range d.writes {
		obj, err := r.writeOwned(ctx, m, w)
		if errors.Is(err, errNameTaken) {
			ctrl.LoggerFrom(ctx).Info("Observing again: a create found the name taken", "error", err.Error())
			return out, true, nil
		}
		if err != nil {
			return out, false, err
		}
		if w.event != nil {
			r.event(m, *w.event)
		}
		if obj != nil {
			out.set(obj)
		}
	}
	return out, false, nil
}

func (r *Reconciler) event(m *etcdfedv1.EtcdMember, e memberEvent) {
	if r.Recorder == nil {
		return
	}
	r.Recorder.Eventf(m, nil, e.typ, e.reason, e.reason, "%s", text.Truncate(e.note, 1024))
}
