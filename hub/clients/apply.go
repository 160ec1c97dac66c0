package clients

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdfedv1 "github.com/etcdfed/etcdfed/api/v1alpha1"
	"github.com/etcdfed/etcdfed/hub/etcdops"
)

// applied is what apply did: the errors of the writes it tried and the
// content of the consumers' Secrets it wrote or kept.
type applied struct {
	// removed holds the error of each removed entry's deletion, by the
	// decision's index (nil: done, or nothing to do).
	removed []error
	// access is the error of the first change of etcd's authentication
	// that failed (the changes after it are not tried).
	access error
	// consumers holds each consumer's write, by the decision's index.
	consumers []written
}

// written is one consumer's Secret after apply.
type written struct {
	err error
	// data is what the Secret holds now (nil when err, or nothing was to
	// be done: the step failed before).
	data map[string][]byte
}

// apply makes the decision's writes in order: removed Secrets, etcd's
// authentication (a removed consumer's user goes in this pass, whatever
// happens to its Secret), consumers' Secrets. It decides nothing.
func (r *Reconciler) apply(ctx context.Context, s *snapshot, d *decision) applied {
	a := applied{removed: make([]error, len(d.removed))}
	for i, rm := range d.removed {
		a.removed[i] = r.applyRemoval(ctx, s.ec, rm)
		if rm.action != removalFailed && a.removed[i] == nil {
			forgetMetrics(s.ec.Namespace, s.ec.Name, []string{rm.t.Name})
		}
	}
	if d.access != nil {
		a.access = r.applyAccess(ctx, s, *d.access)
	}
	for _, c := range d.consumers {
		a.consumers = append(a.consumers, r.applyConsumer(ctx, s, c))
	}
	return a
}

// applyRemoval deletes a removed entry's Secret, or says it is left.
func (r *Reconciler) applyRemoval(ctx context.Context, ec *etcdfedv1.EtcdCluster, rm removal) error {
	t := rm.t
	switch rm.action {
	case removalLeave:
		r.event(ec, corev1.EventTypeNormal, etcdfedv1.EventClientSecretLeft, "Delete", "Client %s was removed; its Secret %s in the hub cluster is left in place (the hub deletes no Secret there): delete it by hand", t.Name, t)
	case removalDelete:
		ctx, cancel := context.WithTimeout(ctx, clusterTimeout)
		defer cancel()
		ctrl.LoggerFrom(ctx).Info("Deleting the Secret of a removed client", "client", t.Name, "secret", t.String())
		if err := rm.w.Delete(ctx, rm.cur, client.Preconditions{UID: &rm.cur.UID}); client.IgnoreNotFound(err) != nil {
			return fmt.Errorf("removed client %s (%s): delete Secret: %w", t.Name, t, err)
		}
		r.event(ec, corev1.EventTypeNormal, etcdfedv1.EventClientSecretDeleted, "Delete", "Deleted the Secret %s of removed client %s", t, t.Name)
	}
	return nil
}

// removalError is why a removed entry's Secret is not dealt with: it
// could not be read (decided), or its deletion failed (applied).
func removalError(rm removal, applyErr error) error {
	if rm.action == removalFailed {
		return fmt.Errorf("removed client %s (%s): %w", rm.t.Name, rm.t, rm.err)
	}
	return applyErr
}

// applyAccess makes PlanAccess's changes in order, with an event for each
// a user sees; it stops at the first that fails.
func (r *Reconciler) applyAccess(ctx context.Context, s *snapshot, p AccessPlan) error {
	ec := s.ec
	log := ctrl.LoggerFrom(ctx)
	for _, ch := range p.Changes {
		log.Info("Changing etcd's authentication", "change", ch.String())
		if err := s.auth.cli.ApplyAuth(ctx, ch); err != nil {
			return err
		}
		switch ch.Op {
		case etcdops.AuthDeleteUser:
			r.event(ec, corev1.EventTypeNormal, etcdfedv1.EventClientAccessRevoked, "Revoke", "Deleted etcd user %s: its consumer is no longer in spec.clients (its certificate reads and writes nothing from now on)", ch.User)
		case etcdops.AuthEnable:
			r.event(ec, corev1.EventTypeNormal, etcdfedv1.EventEtcdAuthEnabled, "EnableAuth", "Turned etcd authentication on: %d consumer(s) with their roles, the hub as root", len(ec.Spec.Clients))
		case etcdops.AuthDisable:
			r.event(ec, corev1.EventTypeWarning, etcdfedv1.EventEtcdAuthDisabled, "DisableAuth", "Turned etcd authentication off (spec.tls.auth: Disabled): every certificate of the ring's CA is root on the data")
		}
	}
	for _, m := range slices.Sorted(maps.Keys(p.MembersLeftAlone)) {
		log.Info("Member's etcd user left alone", "member", m, "why", p.MembersLeftAlone[m])
	}
	return nil
}

// applyConsumer writes one consumer's Secret as decided, issuing its
// certificate first when the step says so, and keeps its metrics.
func (r *Reconciler) applyConsumer(ctx context.Context, s *snapshot, c consumerStep) written {
	ec, t := s.ec, c.t
	if c.fail != "" {
		metricFailures.WithLabelValues(ec.Namespace, ec.Name, t.Name).Inc()
		return written{}
	}
	log := ctrl.LoggerFrom(ctx).WithValues("client", t.Name, "secret", t.String())
	fail := func(err error) written {
		metricFailures.WithLabelValues(ec.Namespace, ec.Name, t.Name).Inc()
		return written{err: err}
	}
	data := c.data
	switch c.plan.Action {
	case ActIssue:
		leaf, err := s.ca.Signer.IssueClientFor(t.CommonName, t.Lifetime, s.now)
		if err != nil {
			return fail(err)
		}
		data = Data(s.ca.Bundle(), leaf, s.endpoints)
		log.Info("Issuing client certificate", "reason", c.plan.Reason, "notAfter", expiry(leaf.CertPEM))
	case ActUpdate:
		log.Info("Updating client Secret", "reason", c.plan.Reason)
	}
	if c.write {
		wctx, cancel := context.WithTimeout(ctx, clusterTimeout)
		err := writeSecret(wctx, c.w, ec, t, c.cur != nil, c.cur, data)
		cancel()
		if err != nil {
			return fail(err)
		}
	}
	notAfter := expiry(data[etcdfedv1.ClientSecretKeyCert])
	if c.plan.Action == ActIssue {
		metricIssued.WithLabelValues(ec.Namespace, ec.Name, t.Name).Inc()
		r.event(ec, corev1.EventTypeNormal, etcdfedv1.EventClientCertificateIssued, "Issue", "Issued the client certificate of %s in Secret %s (%s), valid until %s", t.Name, t.String(), c.plan.Reason, notAfter.UTC().Format(time.RFC3339))
	}
	metricExpiry.WithLabelValues(ec.Namespace, ec.Name, t.Name).Set(float64(notAfter.Unix()))
	return written{data: data}
}
