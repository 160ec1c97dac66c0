package shard

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/go-logr/logr"
	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdfedv1 "github.com/etcdfed/etcdfed/api/v1alpha1"
)

// Overlapping shards. The selectors of two shards must not overlap, and
// the unsharded hub owns every ring: two hubs that both own a ring would
// both plan and act on it. A label selector's overlap with another cannot
// be decided in general, so it is checked where it matters, per ring: the
// leader of every hub claims its shard in a Lease of the hub's namespace
// (ClaimLabel, its selector in SelectorAnnotation, renewed every few
// seconds), and before it acts on a ring it reads the claims: a ring that
// a live claim of another shard selects too is acted on by neither hub
// (Claims.Conflict says why) until the selectors no longer overlap or the
// other hub stops (its claim is deleted when it stops, and a claim not
// renewed for StaleAfter is a stopped hub's).
//
// Neither can act before the other sees it: a hub acts only once it reads
// its own claim back, and a claim is written before its hub reads: of two
// hubs that start together, the one that reads second sees the first.

const (
	// ClaimLabel marks the Leases by which hubs claim their shards.
	ClaimLabel = "etcdfed.dev/shard-claim"
	// SelectorAnnotation is a claim's selector over EtcdClusters; empty:
	// every ring (the unsharded hub).
	SelectorAnnotation = "etcdfed.dev/shard-selector"
)

// claimsReadTimeout bounds one read of the claims.
const claimsReadTimeout = 5 * time.Second

// ClaimName is the name of the Lease by which the hub of s claims it.
func (s Shard) ClaimName() string {
	if s.Name == "" {
		return LeaseName + "-claim"
	}
	return LeaseName + "-claim-" + s.Name
}

// Claims claims the hub's shard and checks each ring against the other
// hubs' claims. Start runs on the leader only (the hub's replicas that do
// not lead act on nothing).
type Claims struct {
	Shard Shard
	// Client reads the claims (the hub's cache, filtered to the hub's
	// namespace and ClaimLabel) and writes its own.
	Client client.Client
	// Namespace is the hub's namespace, where the claims live.
	Namespace string
	// Identity names this hub process in its claim.
	Identity string
	// Every is how often the claim is renewed; 0: 5 s.
	Every time.Duration
	// StaleAfter: a claim not renewed for it is a stopped hub's; 0: 30 s.
	StaleAfter time.Duration
	// Now is the clock; nil: time.Now.
	Now func() time.Time
	Log logr.Logger

	mu   sync.Mutex
	held map[string]bool // rings (namespace/name) held for an overlap
}

func (c *Claims) now() time.Time {
	if c.Now != nil {
		return c.Now()
	}
	return time.Now()
}

func (c *Claims) every() time.Duration {
	if c.Every > 0 {
		return c.Every
	}
	return 5 * time.Second
}

func (c *Claims) staleAfter() time.Duration {
	if c.StaleAfter > 0 {
		return c.StaleAfter
	}
	return 30 * time.Second
}

// Start claims the shard and renews the claim until ctx ends, then
// deletes it (a hub that stops on purpose frees the rings it overlapped
// at once rather than after StaleAfter).
func (c *Claims) Start(ctx context.Context) error {
	t := time.NewTicker(c.every())
	defer t.Stop()
	for {
		if err := c.Renew(ctx); err != nil && ctx.Err() == nil {
			c.Log.Error(err, "Renew the shard's claim", "shard", c.Shard.String(), "lease", c.Shard.ClaimName())
		}
		select {
		case <-ctx.Done():
			dctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			if err := c.Release(dctx); err != nil {
				c.Log.Error(err, "Release the shard's claim", "lease", c.Shard.ClaimName())
			}
			return nil
		case <-t.C:
		}
	}
}

// Renew writes the claim: this hub holds its shard, with its selector, now.
func (c *Claims) Renew(ctx context.Context) error {
	now := metav1.NewMicroTime(c.now())
	sel := c.selector()
	var l coordinationv1.Lease
	err := c.Client.Get(ctx, client.ObjectKey{Namespace: c.Namespace, Name: c.Shard.ClaimName()}, &l)
	switch {
	case apierrors.IsNotFound(err):
		l = coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: c.Namespace, Name: c.Shard.ClaimName()}}
	case err != nil:
		return fmt.Errorf("read the claim: %w", err)
	}
	if l.Labels == nil {
		l.Labels = map[string]string{}
	}
	if l.Annotations == nil {
		l.Annotations = map[string]string{}
	}
	l.Labels[ClaimLabel] = "true"
	l.Annotations[SelectorAnnotation] = sel
	l.Spec.HolderIdentity = ptr.To(c.Identity)
	l.Spec.LeaseDurationSeconds = ptr.To(int32(c.staleAfter() / time.Second))
	l.Spec.RenewTime = &now
	if l.ResourceVersion == "" {
		l.Spec.AcquireTime = &now
		if err := c.Client.Create(ctx, &l); err != nil {
			return fmt.Errorf("create the claim: %w", err)
		}
		return nil
	}
	if err := c.Client.Update(ctx, &l); err != nil {
		return fmt.Errorf("renew the claim: %w", err)
	}
	return nil
}

// selector is the claim's SelectorAnnotation: the shard's selector, ""
// for the unsharded hub.
func (c *Claims) selector() string {
	if c.Shard.Selector == nil {
		return ""
	}
	return c.Shard.Selector.String()
}

// Release deletes the claim if this hub holds it.
func (c *Claims) Release(ctx context.Context) error {
	var l coordinationv1.Lease
	if err := c.Client.Get(ctx, client.ObjectKey{Namespace: c.Namespace, Name: c.Shard.ClaimName()}, &l); err != nil {
		return client.IgnoreNotFound(err)
	}
	if ptr.Deref(l.Spec.HolderIdentity, "") != c.Identity {
		return nil
	}
	return client.IgnoreNotFound(c.Client.Delete(ctx, &l, client.Preconditions{UID: &l.UID, ResourceVersion: &l.ResourceVersion}))
}

// A Hold says why a hub must not act on a ring now; the zero Hold: it may.
type Hold struct {
	// Why says it, for logs and events; empty: no hold.
	Why string
	// Overlap: a live claim of another hub's shard selects the ring too
	// (rather than a wait for this hub's own claim, or claims unreadable).
	Overlap bool
}

// Conflict says why this hub must not act on ec now: its own claim not
// read back yet, the claims unreadable, or a live claim of another shard
// that selects ec too. Call it only for a ring the shard owns
// (Shard.Owns).
func (c *Claims) Conflict(ctx context.Context, ec *etcdfedv1.EtcdCluster) Hold {
	h := c.conflict(ctx, ec)
	ring := ec.Namespace + "/" + ec.Name
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.held == nil {
		c.held = map[string]bool{}
	}
	if h.Overlap {
		c.held[ring] = true
	} else {
		delete(c.held, ring)
	}
	metricConflicts.Set(float64(len(c.held)))
	return h
}

func (c *Claims) conflict(ctx context.Context, ec *etcdfedv1.EtcdCluster) Hold {
	// Bounded: a hub whose role lacks list or watch on Leases (an older
	// install's) would otherwise wait for the claims' informer for ever.
	ctx, cancel := context.WithTimeout(ctx, claimsReadTimeout)
	defer cancel()
	var list coordinationv1.LeaseList
	if err := c.Client.List(ctx, &list, client.InNamespace(c.Namespace), client.MatchingLabels{ClaimLabel: "true"}); err != nil {
		return Hold{Why: fmt.Sprintf("the hubs' shard claims cannot be read (%v): acting on nothing another hub may own", err)}
	}
	own := false
	now := c.now()
	for i := range list.Items {
		l := &list.Items[i]
		if l.Name == c.Shard.ClaimName() {
			// Its own claim, with the selector it owns by now: a process
			// restarted under the same name (its pod's) with other flags
			// waits for its own renewal, as other hubs read the selector.
			own = ptr.Deref(l.Spec.HolderIdentity, "") == c.Identity && l.Annotations[SelectorAnnotation] == c.selector()
			continue
		}
		if l.Spec.RenewTime == nil || now.Sub(l.Spec.RenewTime.Time) > c.staleAfter() {
			continue
		}
		raw := l.Annotations[SelectorAnnotation]
		sel, err := labels.Parse(raw)
		if err != nil {
			return Hold{Overlap: true, Why: fmt.Sprintf("hub %s claims a shard with a selector that does not parse (%q, Lease %s): acting on nothing it may own", ptr.Deref(l.Spec.HolderIdentity, "?"), raw, l.Name)}
		}
		if sel.Matches(labels.Set(ec.Labels)) {
			other := "the unsharded hub (every ring)"
			if raw != "" {
				other = fmt.Sprintf("shard %q (%s)", shardOfClaim(l.Name), raw)
			}
			return Hold{Overlap: true, Why: fmt.Sprintf("the ring is of shard %s and also of %s, held by hub %s (Lease %s): two hubs would act on one ring, so neither does until the selectors no longer overlap or that hub stops",
				c.Shard.String(), other, ptr.Deref(l.Spec.HolderIdentity, "?"), l.Name)}
		}
	}
	if !own {
		return Hold{Why: fmt.Sprintf("this hub's claim on %s (Lease %s) is not read back yet", c.Shard.String(), c.Shard.ClaimName())}
	}
	return Hold{}
}

// shardOfClaim is the shard name a claim's Lease name carries.
func shardOfClaim(name string) string {
	const prefix = LeaseName + "-claim-"
	if len(name) > len(prefix) {
		return name[len(prefix):]
	}
	return ""
}

// ClaimNews says whether a change of a claim Lease (old nil: created; new
// nil: deleted) can change which rings the hubs hold for an overlap: a
// claim made or deleted, its selector or holder changed, or a claim stale
// for StaleAfter renewed again (its hub is back). A plain renewal changes
// nothing. A hub acts on no ring without reading the claims first, so
// these only keep its account (ShardConflict events, the conflicts gauge)
// current: without them a quiet ring learned of a new overlapping shard at
// its next pass, which at rest may be hours away.
func (c *Claims) ClaimNews(old, new *coordinationv1.Lease) bool {
	switch {
	case old == nil || new == nil:
		return true
	case old.Annotations[SelectorAnnotation] != new.Annotations[SelectorAnnotation],
		ptr.Deref(old.Spec.HolderIdentity, "") != ptr.Deref(new.Spec.HolderIdentity, ""):
		return true
	case old.Spec.RenewTime == nil || new.Spec.RenewTime == nil:
		return old.Spec.RenewTime != new.Spec.RenewTime
	}
	return new.Spec.RenewTime.Sub(old.Spec.RenewTime.Time) > c.staleAfter()
}
