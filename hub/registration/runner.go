package registration

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"sync"
	"time"

	"github.com/go-logr/logr"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdfedv1 "github.com/etcdfed/etcdfed/api/v1alpha1"
	"github.com/etcdfed/etcdfed/hub/liveness"
	"github.com/etcdfed/etcdfed/hub/registry"
	"github.com/etcdfed/etcdfed/internal/tokenseal"
)

// Runner renews the hub's tokens in member clusters (opening the ones
// their spokes sealed to it) and writes each registration's status on its
// Secret. It runs on the elected hub only
// (a manager Runnable that needs leader election).
type Runner struct {
	// Client writes the registration Secrets (the hub cluster).
	Client client.Client
	// Reader lists them (the hub's cache of its namespace).
	Reader client.Reader
	// Namespace holds the registration Secrets.
	Namespace string
	// Registry tells whether each cluster is engaged.
	Registry registry.Registry
	// Tracker is the EtcdCluster controller's record of spoke Lease
	// renewals on the hub's clock.
	Tracker *liveness.Tracker
	// StaleAfter: a spoke whose Lease the hub has not seen renewed for
	// longer is SpokeStale.
	StaleAfter time.Duration
	// Interval between passes; default 5s.
	Interval time.Duration
	// RenewAfter is the part of a token's life after which it is renewed;
	// default DefaultRenewAfter.
	RenewAfter float64
	// RequestTimeout bounds one request to a member cluster; default 15s.
	RequestTimeout time.Duration
	// RetryAfter is the wait after a failed renewal, or before looking
	// again for a sealed token not there yet; default 30s.
	RetryAfter time.Duration
	Log        logr.Logger
	// Now is the clock; time.Now when nil.
	Now func() time.Time

	mu    sync.Mutex
	state map[string]*renewal
}

type renewal struct {
	lastErr string
	next    time.Time
}

func (r *Runner) now() time.Time {
	if r.Now != nil {
		return r.Now()
	}
	return time.Now()
}

// Start runs a pass every Interval until ctx ends.
func (r *Runner) Start(ctx context.Context) error {
	if r.Interval <= 0 {
		r.Interval = 5 * time.Second
	}
	// The hub's sealing key: `hub install` creates it, and so does the hub
	// itself, so that a hub installed without the CLI (kubectl apply -k
	// config/hub) has one before the first join, and `cluster join` can
	// tell a hub that opens sealed tokens (it has made its key) from one
	// that predates them (none: join refuses to take its renewal away).
	if _, err := tokenseal.EnsureKey(ctx, r.Client, r.Namespace, nil, false); err != nil {
		r.Log.Error(err, "Making the hub's sealing key; sealed tokens cannot be opened until it exists")
	}
	t := time.NewTicker(r.Interval)
	defer t.Stop()
	for {
		r.Pass(ctx)
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

// Pass renews what is due and reports every registration's status once.
func (r *Runner) Pass(ctx context.Context) {
	var list corev1.SecretList
	if err := r.Reader.List(ctx, &list, client.InNamespace(r.Namespace), client.MatchingLabels{registry.KubeconfigSecretLabel: "true"}); err != nil {
		r.Log.Error(err, "Listing member cluster registrations")
		return
	}
	states := map[string]*registry.ClusterState{}
	if clusters, err := r.Registry.List(ctx); err == nil {
		for _, c := range clusters {
			states[c.Name] = c.State
		}
	}
	r.mu.Lock()
	if r.state == nil {
		r.state = map[string]*renewal{}
	}
	seen := map[string]bool{}
	r.mu.Unlock()
	for i := range list.Items {
		sec := &list.Items[i]
		if sec.DeletionTimestamp != nil {
			continue
		}
		seen[sec.Name] = true
		renewErr := r.renewIfDue(ctx, sec)
		var lastSeen time.Time
		if r.Tracker != nil {
			lastSeen, _ = r.Tracker.LastSeen(sec.Name)
		}
		seenAt := 0.0
		if !lastSeen.IsZero() {
			seenAt = float64(lastSeen.Unix())
		}
		metricSpokeSeen.WithLabelValues(sec.Name).Set(seenAt)
		r.report(ctx, sec, judge(states[sec.Name], lastSeen, r.now(), r.StaleAfter, renewErr))
	}
	r.mu.Lock()
	for name := range r.state {
		if !seen[name] {
			delete(r.state, name)
			forgetMetrics(name)
		}
	}
	for name := range seen {
		if r.state[name] == nil {
			r.state[name] = &renewal{}
		}
	}
	r.mu.Unlock()
}

// renewIfDue renews the Secret's token when it is due, and returns the
// last renewal error ("" after a success, or when none was due).
func (r *Runner) renewIfDue(ctx context.Context, sec *corev1.Secret) string {
	tok := sec.Data[registry.TokenKey]
	kind := sec.Annotations[AnnotationCredential]
	if (kind != CredentialSealedToken && kind != CredentialServiceAccountToken) || len(tok) == 0 {
		return ""
	}
	r.mu.Lock()
	st := r.state[sec.Name]
	if st == nil {
		st = &renewal{}
		r.state[sec.Name] = st
	}
	r.mu.Unlock()
	claims, err := ParseToken(string(tok))
	if err != nil {
		return err.Error()
	}
	metricCredentialExpiry.WithLabelValues(sec.Name).Set(float64(claims.Expiry.Unix()))
	// Both results are exported from the first pass on, at 0: the first
	// failed renewal is then an increase the alert
	// EtcdfedHubCredentialRenewalFailing sees (a series that appears at 1
	// is none), and a live hub exports the series the alerts use.
	metricRenewals.WithLabelValues(sec.Name, "ok")
	metricRenewals.WithLabelValues(sec.Name, "error")
	if end, err := time.Parse(time.RFC3339, sec.Annotations[etcdfedv1.AnnotationCredentialNotAfter]); err == nil {
		metricChainEnd.WithLabelValues(sec.Name).Set(float64(end.Unix()))
	}
	now := r.now()
	if !RenewDue(claims, now, r.RenewAfter) || now.Before(st.next) {
		return st.lastErr
	}
	log := r.Log.WithValues("cluster", sec.Name)
	var fresh string
	if kind == CredentialSealedToken {
		log.V(1).Info("Reading the hub's next token, sealed by the spoke", "expires", claims.Expiry.UTC().Format(time.RFC3339))
		fresh, err = r.unseal(ctx, sec, claims)
		if errors.Is(err, errNotSealedYet) && now.Before(claims.IssuedAt.Add(claims.Lifetime()/2)) {
			// The spoke seals the next token once a third of the
			// current one's life has passed, as the hub looks: give it
			// until half before calling it a failure.
			st.next = now.Add(r.retryAfter())
			return st.lastErr
		}
	} else {
		log.Info("Renewing the hub's token in the member cluster itself: it was joined before the spoke sealed the hub's tokens; join it again to end the hub's self-renewal", "expires", claims.Expiry.UTC().Format(time.RFC3339))
		fresh, err = r.renew(ctx, sec, claims)
	}
	if err == nil {
		patched := sec.DeepCopy()
		patched.Data[registry.TokenKey] = []byte(fresh)
		err = r.Client.Patch(ctx, patched, client.MergeFromWithOptions(sec, client.MergeFromWithOptimisticLock{}))
		if err != nil {
			err = fmt.Errorf("store the new token in Secret %s/%s: %w", sec.Namespace, sec.Name, err)
		}
	}
	if err != nil {
		log.Error(err, "Renewing the hub's token failed; retrying", "after", r.retryAfter())
		metricRenewals.WithLabelValues(sec.Name, "error").Inc()
		st.lastErr, st.next = err.Error(), now.Add(r.retryAfter())
		return st.lastErr
	}
	if c, err := ParseToken(fresh); err == nil {
		metricCredentialExpiry.WithLabelValues(sec.Name).Set(float64(c.Expiry.Unix()))
		log.Info("Renewed the hub's token in the member cluster", "expires", c.Expiry.UTC().Format(time.RFC3339))
	}
	metricRenewals.WithLabelValues(sec.Name, "ok").Inc()
	st.lastErr, st.next = "", time.Time{}
	return ""
}

func (r *Runner) retryAfter() time.Duration {
	if r.RetryAfter > 0 {
		return r.RetryAfter
	}
	return 30 * time.Second
}

// errNotSealedYet: the sealed token in the member cluster is not newer
// than the hub's.
var errNotSealedYet = errors.New("registration: the spoke has not sealed a new token")

// unseal reads the hub's next token from the member cluster, where its
// spoke sealed it to the hub's key (etcdfedv1.HubSealedToken), with the
// current token c, and opens it: a token of the same ServiceAccount,
// bound to the same anchor, expiring later than c. The hub never asks
// for a token itself.
func (r *Runner) unseal(ctx context.Context, sec *corev1.Secret, c Claims) (string, error) {
	if c.SecretName == "" || c.SecretUID == "" {
		return "", fmt.Errorf("the hub's token is bound to no credential anchor: run etcdfed cluster join %s again", sec.Name)
	}
	key, err := tokenseal.ReadKey(ctx, r.Reader, r.Namespace)
	if err != nil {
		return "", err
	}
	cs, host, err := r.memberClient(sec)
	if err != nil {
		return "", err
	}
	notYet := fmt.Errorf("%w: the spoke of %s has not sealed a new token; the current one expires at %s", errNotSealedYet, sec.Name, c.Expiry.UTC().Format(time.RFC3339))
	sealed, err := cs.CoreV1().Secrets(c.Namespace).Get(ctx, etcdfedv1.HubSealedToken, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		return "", fmt.Errorf("%w (no Secret %s/%s at %s: run etcdfed cluster join %s again)", notYet, c.Namespace, etcdfedv1.HubSealedToken, host, sec.Name)
	case err != nil:
		return "", fmt.Errorf("read the sealed token (Secret %s/%s at %s): %w", c.Namespace, etcdfedv1.HubSealedToken, host, err)
	case len(sealed.Data[etcdfedv1.HubSealedTokenKey]) == 0:
		return "", notYet
	}
	fresh, err := tokenseal.Open(key, tokenseal.Info(c.Namespace, c.SecretName, c.SecretUID), sealed.Data[etcdfedv1.HubSealedTokenKey])
	if err != nil {
		return "", fmt.Errorf("open the sealed token of %s (Secret %s/%s): %w; if the hub's sealing key changed, run etcdfed cluster join %s again", sec.Name, c.Namespace, etcdfedv1.HubSealedToken, err, sec.Name)
	}
	n, err := ParseToken(fresh)
	switch {
	case err != nil:
		return "", fmt.Errorf("the sealed token of %s: %w", sec.Name, err)
	case n.Namespace != c.Namespace || n.ServiceAccount != c.ServiceAccount || n.SecretName != c.SecretName || n.SecretUID != c.SecretUID:
		return "", fmt.Errorf("the sealed token of %s is of %s/%s bound to %s %s, want %s/%s bound to %s %s", sec.Name,
			n.Namespace, n.ServiceAccount, n.SecretName, n.SecretUID, c.Namespace, c.ServiceAccount, c.SecretName, c.SecretUID)
	case !n.Expiry.After(c.Expiry):
		return "", notYet
	}
	return fresh, nil
}

// memberClient is a client of the member cluster of registration sec,
// with the hub's current token and RequestTimeout (15s by default) per
// request, and the cluster's address.
func (r *Runner) memberClient(sec *corev1.Secret) (kubernetes.Interface, string, error) {
	cfg, err := registry.RESTConfig(sec)
	if err != nil {
		return nil, "", err
	}
	cfg.Timeout = r.RequestTimeout
	if cfg.Timeout <= 0 {
		cfg.Timeout = 15 * time.Second
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, "", err
	}
	return cs, cfg.Host, nil
}

// renew asks the member cluster for a new token of the same
// ServiceAccount and lifetime, authenticated by the current one.
func (r *Runner) renew(ctx context.Context, sec *corev1.Secret, c Claims) (string, error) {
	cs, host, err := r.memberClient(sec)
	if err != nil {
		return "", err
	}
	var notAfter time.Time
	if v := sec.Annotations[etcdfedv1.AnnotationCredentialNotAfter]; v != "" {
		if notAfter, err = time.Parse(time.RFC3339, v); err != nil {
			return "", fmt.Errorf("annotation %s: %w", etcdfedv1.AnnotationCredentialNotAfter, err)
		}
	}
	life, err := NextLifetime(c.Lifetime(), r.now(), notAfter)
	if err != nil {
		return "", err
	}
	secs := int64(life.Seconds())
	spec := authenticationv1.TokenRequestSpec{ExpirationSeconds: &secs}
	if c.SecretName != "" {
		// The chain's anchor: the member cluster admits no other
		// token of the hub, and ends them all with it.
		spec.BoundObjectRef = &authenticationv1.BoundObjectReference{Kind: "Secret", APIVersion: "v1", Name: c.SecretName, UID: types.UID(c.SecretUID)}
	}
	tr, err := cs.CoreV1().ServiceAccounts(c.Namespace).CreateToken(ctx, c.ServiceAccount,
		&authenticationv1.TokenRequest{Spec: spec}, metav1.CreateOptions{})
	if err != nil {
		return "", fmt.Errorf("TokenRequest for %s/%s at %s: %w", c.Namespace, c.ServiceAccount, host, err)
	}
	if tr.Status.Token == "" {
		return "", fmt.Errorf("TokenRequest for %s/%s at %s: empty token", c.Namespace, c.ServiceAccount, host)
	}
	return tr.Status.Token, nil
}

// report writes st on the Secret when it differs from what is there.
func (r *Runner) report(ctx context.Context, sec *corev1.Secret, st Status) {
	want := st.Annotations()
	cur := map[string]string{}
	for _, k := range []string{AnnotationEngaged, AnnotationSpoke, AnnotationProblem} {
		if v, ok := sec.Annotations[k]; ok {
			cur[k] = v
		}
	}
	if maps.Equal(cur, want) {
		return
	}
	r.Log.Info("Member cluster registration status changed", "cluster", sec.Name, "engaged", st.Engaged, "spoke", st.Spoke, "problem", st.Problem)
	patched := sec.DeepCopy()
	if patched.Annotations == nil {
		patched.Annotations = map[string]string{}
	}
	delete(patched.Annotations, AnnotationProblem)
	maps.Copy(patched.Annotations, want)
	patched.Annotations[AnnotationSince] = r.now().UTC().Format(time.RFC3339)
	if err := r.Client.Patch(ctx, patched, client.MergeFrom(sec)); err != nil {
		r.Log.Error(err, "Writing the registration status", "cluster", sec.Name)
	}
}
