// Package credential keeps the hub's credential chain in the spoke's
// member cluster (issue 37): it mints the hub's tokens and seals them to
// the hub, and ends the chain when its time has passed.
//
// `etcdfed cluster join` starts a chain: the Secret etcdfed-hub-credential
// in the ring namespace (the anchor), annotated with the chain's end
// (etcdfed.dev/credential-not-after), the hub's public sealing key and the
// tokens' lifetime, to which every token of the hub is bound. The hub's
// identity may not mint a token (its RBAC grants none) nor write the
// anchor or the sealed token's Secret (the admission policy,
// config/rbac/hub-member). The spoke mints the hub's next token once a
// third of the current one's life has passed (TokenRequest for the
// ServiceAccount etcdfed-hub, bound to the anchor, never past the chain's
// end), seals it to the hub's public key (internal/tokenseal, bound to the
// anchor) and writes it to the Secret etcdfed-hub-sealed-token, where the
// hub reads and opens it (hub/registration). A thief holding one of the
// hub's tokens reads the sealed Secret but cannot open it: the token it
// holds is all it has, for that token's lifetime.
//
// The spoke deletes the anchor once the chain's end has passed; the
// apiserver then refuses every token bound to it. Only a new `cluster
// join` (a new anchor) lets the hub in again. An anchor without a sealing
// key (a join before sealing) is left to the hub's own renewal, as before.
package credential

import (
	"context"
	"errors"
	"fmt"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	etcdfedv1 "github.com/etcdfed/etcdfed/api/v1alpha1"
	"github.com/etcdfed/etcdfed/internal/tokenseal"
)

// HubServiceAccount is the hub's ServiceAccount in the ring namespace,
// whose tokens the spoke mints.
const HubServiceAccount = "etcdfed-hub"

// DefaultTokenLifetime is the lifetime of the hub's tokens when the anchor
// names none (`cluster join`'s default).
const DefaultTokenLifetime = 24 * time.Hour

// minLifetime is the shortest lifetime the TokenRequest API grants.
const minLifetime = 10 * time.Minute

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

// ErrNoSealedSecret says the Secret the spoke seals the hub's tokens into
// is missing: `cluster join` creates it (the spoke may only update it).
var ErrNoSealedSecret = errors.New("credential: no Secret " + etcdfedv1.HubSealedToken + " to seal the hub's token into: run `etcdfed cluster join` again")

// Mint is what DecideSeal asks for: a token of Lifetime, sealed.
type Mint struct {
	Lifetime time.Duration
	Why      string
}

// DecideSeal says, for the anchor of a running chain and the sealed
// token's Secret (nil when there is none), whether the spoke mints the
// hub's next token now (non-nil Mint), and otherwise how long until it is
// due (0: nothing to do, e.g. an anchor of a join before sealing, or a
// chain that ends before another token could be granted). The next token
// is due once a third of the current one's life has passed, or at once
// when the sealed one is of another anchor or key, or unreadable.
func DecideSeal(anchor, sealed *corev1.Secret, now time.Time) (*Mint, time.Duration, error) {
	key := anchor.Annotations[etcdfedv1.AnnotationHubSealingKey]
	if key == "" {
		return nil, 0, nil
	}
	if _, err := tokenseal.PublicKey(key); err != nil {
		return nil, 0, fmt.Errorf("anchor %s: %w", anchor.Name, err)
	}
	if sealed == nil {
		return nil, 0, ErrNoSealedSecret
	}
	want := DefaultTokenLifetime
	if v := anchor.Annotations[etcdfedv1.AnnotationHubTokenLifetime]; v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d <= 0 {
			return nil, 0, fmt.Errorf("anchor %s: annotation %s %q is not a duration", anchor.Name, etcdfedv1.AnnotationHubTokenLifetime, v)
		}
		want = d
	}
	life := max(want, minLifetime)
	if notAfter, err := time.Parse(time.RFC3339, anchor.Annotations[etcdfedv1.AnnotationCredentialNotAfter]); err == nil {
		left := notAfter.Sub(now).Truncate(time.Second)
		if left < minLifetime {
			return nil, 0, nil // the chain ends before another token could live; the hub's last one lasts until then
		}
		life = min(life, left)
	}
	mint := &Mint{Lifetime: life}
	issued, errI := time.Parse(time.RFC3339, sealed.Annotations[etcdfedv1.AnnotationSealedIssued])
	expiry, errE := time.Parse(time.RFC3339, sealed.Annotations[etcdfedv1.AnnotationSealedExpiry])
	switch {
	case len(sealed.Data[etcdfedv1.HubSealedTokenKey]) == 0:
		mint.Why = "none sealed yet"
	case sealed.Annotations[etcdfedv1.AnnotationSealedAnchor] != string(anchor.UID):
		mint.Why = "the sealed one is bound to another anchor"
	case sealed.Annotations[etcdfedv1.AnnotationSealedKey] != key:
		mint.Why = "the sealed one is sealed to another key"
	case errI != nil || errE != nil || !expiry.After(issued):
		mint.Why = "the sealed one's times are unreadable"
	default:
		due := issued.Add(expiry.Sub(issued) / 3)
		if now.Before(due) {
			return nil, due.Sub(now), nil
		}
		mint.Why = "a third of the current one's life has passed"
	}
	return mint, 0, nil
}

// Reconciler keeps the hub's credential chain in Namespace: it mints and
// seals the hub's tokens while the chain runs, and deletes the anchor once
// it has ended.
type Reconciler struct {
	Client    client.Client
	Namespace string
	// Now is the clock; time.Now when nil.
	Now func() time.Time
}

// SetupWithManager watches the anchor and the sealed token's Secret of the
// ring namespace (both reconcile the anchor).
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	anchor := func(context.Context, client.Object) []reconcile.Request {
		return []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: r.Namespace, Name: etcdfedv1.HubCredentialAnchor}}}
	}
	return ctrl.NewControllerManagedBy(mgr).
		Named("hub-credential").
		Watches(&corev1.Secret{}, handler.EnqueueRequestsFromMapFunc(anchor), builder.WithPredicates(predicate.NewPredicateFuncs(func(o client.Object) bool {
			return o.GetNamespace() == r.Namespace && (o.GetName() == etcdfedv1.HubCredentialAnchor || o.GetName() == etcdfedv1.HubSealedToken)
		}))).
		Complete(r)
}

// Reconcile deletes the anchor when its chain has ended, and otherwise
// seals the hub's next token when it is due and comes back when the next
// thing is.
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
	if ended {
		ctrl.LoggerFrom(ctx).Info("Ending the hub's credential chain: deleting the Secret its tokens are bound to; `etcdfed cluster join` starts a new one", "reason", why)
		err := r.Client.Delete(ctx, sec, client.Preconditions{UID: &sec.UID})
		if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
			return ctrl.Result{}, fmt.Errorf("delete Secret %s: %w", req.NamespacedName, err)
		}
		return ctrl.Result{}, nil
	}
	after, err := r.seal(ctx, sec, now)
	if err != nil {
		return ctrl.Result{}, err
	}
	if after > 0 && after < left {
		left = after
	}
	return ctrl.Result{RequeueAfter: left}, nil
}

// seal mints, seals and writes the hub's next token when it is due, and
// returns how long until the next one is (0: not known).
func (r *Reconciler) seal(ctx context.Context, anchor *corev1.Secret, now time.Time) (time.Duration, error) {
	sealed := &corev1.Secret{}
	switch err := r.Client.Get(ctx, client.ObjectKey{Namespace: r.Namespace, Name: etcdfedv1.HubSealedToken}, sealed); {
	case apierrors.IsNotFound(err):
		sealed = nil
	case err != nil:
		return 0, fmt.Errorf("read Secret %s/%s: %w", r.Namespace, etcdfedv1.HubSealedToken, err)
	}
	mint, after, err := DecideSeal(anchor, sealed, now)
	if err != nil || mint == nil {
		return after, err
	}
	log := ctrl.LoggerFrom(ctx)
	log.Info("Minting the hub's next token and sealing it to the hub", "reason", mint.Why, "lifetime", mint.Lifetime)
	secs := int64(mint.Lifetime.Seconds())
	tr := &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: &secs,
		BoundObjectRef: &authenticationv1.BoundObjectReference{Kind: "Secret", APIVersion: "v1", Name: anchor.Name, UID: anchor.UID}}}
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: r.Namespace, Name: HubServiceAccount}}
	if err := r.Client.SubResource("token").Create(ctx, sa, tr); err != nil {
		return 0, fmt.Errorf("mint the hub's token (TokenRequest for %s/%s): %w", r.Namespace, HubServiceAccount, err)
	}
	if tr.Status.Token == "" {
		return 0, fmt.Errorf("mint the hub's token (TokenRequest for %s/%s): empty token", r.Namespace, HubServiceAccount)
	}
	key := anchor.Annotations[etcdfedv1.AnnotationHubSealingKey]
	box, err := tokenseal.Seal(key, tokenseal.Info(r.Namespace, anchor.Name, string(anchor.UID)), tr.Status.Token)
	if err != nil {
		return 0, fmt.Errorf("seal the hub's token: %w", err)
	}
	expiry := tr.Status.ExpirationTimestamp.Time
	if expiry.IsZero() {
		expiry = now.Add(mint.Lifetime)
	}
	next := sealed.DeepCopy()
	if next.Annotations == nil {
		next.Annotations = map[string]string{}
	}
	next.Annotations[etcdfedv1.AnnotationSealedIssued] = now.UTC().Format(time.RFC3339)
	next.Annotations[etcdfedv1.AnnotationSealedExpiry] = expiry.UTC().Format(time.RFC3339)
	next.Annotations[etcdfedv1.AnnotationSealedAnchor] = string(anchor.UID)
	next.Annotations[etcdfedv1.AnnotationSealedKey] = key
	next.Data = map[string][]byte{etcdfedv1.HubSealedTokenKey: box}
	if err := r.Client.Update(ctx, next); err != nil {
		return 0, fmt.Errorf("write the hub's sealed token (update Secret %s/%s): %w", r.Namespace, etcdfedv1.HubSealedToken, err)
	}
	log.Info("Sealed the hub's next token", "expires", expiry.UTC().Format(time.RFC3339))
	return max(time.Second, expiry.Sub(now)/3), nil
}
