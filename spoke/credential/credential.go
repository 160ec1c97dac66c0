// Package credential ends the hub's credential chain in the spoke's member
// cluster when its time has passed (issue 37).
//
// The hub renews its own token in a member cluster (serviceaccounts/token
// on etcdfed-hub), so a stolen token could renew itself for ever. `etcdfed
// cluster join` starts a chain instead: the Secret
// etcdfed-hub-credential in the ring namespace, annotated
// etcdfed.dev/credential-not-after, to which every token of the hub is
// bound (the member cluster's admission policy refuses the hub any other
// token, and any write to that Secret: config/rbac/hub-member). The
// spoke deletes the Secret once that time has passed; the apiserver then
// refuses every token bound to it, the hub's own and any copy. Only a
// new `cluster join` (a new Secret) lets the hub in again.
package credential

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	etcdfedv1 "github.com/etcdfed/etcdfed/api/v1alpha1"
)

// Decide says whether the chain whose anchor is sec has ended at now, and
// otherwise how long until it does. An anchor without a readable time
// ends at once: a chain with no end is what the anchor exists to prevent.
func Decide(sec *corev1.Secret, now time.Time) (ended bool, left time.Duration, why string) {
	v := sec.Annotations[etcdfedv1.AnnotationCredentialNotAfter]
	notAfter, err := time.Parse(time.RFC3339, v)
	switch {
	case v == "":
		return true, 0, "it has no annotation " + etcdfedv1.AnnotationCredentialNotAfter
	case err != nil:
		return true, 0, fmt.Sprintf("annotation %s %q is not an RFC 3339 time", etcdfedv1.AnnotationCredentialNotAfter, v)
	case !now.Before(notAfter):
		return true, 0, "the chain ended at " + notAfter.UTC().Format(time.RFC3339)
	}
	return false, notAfter.Sub(now), ""
}

// Reconciler deletes the anchor in Namespace once its chain has ended.
type Reconciler struct {
	Client    client.Client
	Namespace string
	// Now is the clock; time.Now when nil.
	Now func() time.Time
}

// SetupWithManager watches the anchor Secret of the ring namespace.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).
		Named("hub-credential").
		For(&corev1.Secret{}, builder.WithPredicates(predicate.NewPredicateFuncs(func(o client.Object) bool {
			return o.GetName() == etcdfedv1.HubCredentialAnchor && o.GetNamespace() == r.Namespace
		}))).
		Complete(r)
}

// Reconcile deletes the anchor when its chain has ended, and otherwise
// comes back when it will.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	if req.Name != etcdfedv1.HubCredentialAnchor || req.Namespace != r.Namespace {
		return ctrl.Result{}, nil
	}
	sec := &corev1.Secret{}
	if err := r.Client.Get(ctx, req.NamespacedName, sec); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	now := time.Now()
	if r.Now != nil {
		now = r.Now()
	}
	ended, left, why := Decide(sec, now)
	if !ended {
		return ctrl.Result{RequeueAfter: left}, nil
	}
	ctrl.LoggerFrom(ctx).Info("Ending the hub's credential chain: deleting the Secret its tokens are bound to; `etcdfed cluster join` starts a new one", "reason", why)
	err := r.Client.Delete(ctx, sec, client.Preconditions{UID: &sec.UID})
	if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
		return ctrl.Result{}, fmt.Errorf("delete Secret %s: %w", req.NamespacedName, err)
	}
	return ctrl.Result{}, nil
}
