package registry

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/cluster"
	"sigs.k8s.io/multicluster-runtime/pkg/multicluster"

	etcdfedv1 "github.com/etcdfed/etcdfed/api/v1alpha1"
)

func (m *member) stop() {
	if m.cancel != nil {
		m.cancel()
	}
	m.cl, m.cancel, m.engaged = nil, nil, false
}

// failedAttempt counts a failed attempt of the cluster name and sets when
// the next may start: after a backoff, capped at retryMax; an attempt whose
// caches did not sync in time gives the next twice as long (syncWait).
func (m *member) failedAttempt(name string, err error, now time.Time, retryMax time.Duration) {
	m.attempts++
	if errors.Is(err, errSyncTimeout) {
		m.slowSyncs++
	} else {
		m.slowSyncs = 0
	}
	m.next = now.Add(backoff(m.attempts, retryMax))
	metricEngageFailures.WithLabelValues(name).Inc()
}

// attempt creates the cluster, starts its cache and engages it, all within
// wait; on failure everything it started is stopped.
func (p *Provider) attempt(ctx context.Context, aware multicluster.Aware, reg Registration, gen int, token *tokenHolder, wait time.Duration) {
	log := p.Log.WithValues("cluster", reg.Name)
	clusterCtx, cancel := context.WithCancel(ctx)
	cl, probe, handedOver, err := p.engage(clusterCtx, aware, reg, token, wait)
	now := p.now()
	p.mu.Lock()
	defer p.mu.Unlock()
	m, ok := p.members[reg.Name]
	if !ok || m.gen != gen {
		cancel() // deregistered or changed meanwhile
		return
	}
	m.attempting = false
	if err != nil && m.engaged && !handedOver {
		// A refresh that failed before Engage: the controllers are still
		// on the engaged connection. Keep it: a hub or apiserver too busy
		// to answer a probe, list and sync in time is not a lost cluster.
		// But its watches may wait out a backoff of their own, or never
		// catch up with an apiserver that came back, so the refresh is
		// tried again (failingFrom stays set) after a backoff, a slow
		// sync given twice as long each time.
		cancel()
		m.failedAttempt(reg.Name, err, now, p.RetryMax)
		log.Info("Member cluster reconnect failed; keeping the engaged connection and retrying", "error", err.Error(), "attempts", m.attempts, "retryIn", m.next.Sub(now).String())
		return
	}
	if err != nil && m.engaged {
		// A refresh that failed in Engage, which may already have moved
		// the controllers off the old connection: drop it and connect anew.
		cancel()
		m.stop()
		metricEngaged.WithLabelValues(reg.Name).Set(0)
		m.since = now
	}
	if err != nil {
		cancel()
		refused := errors.Is(err, ErrUnsafeKubeconfig)
		if m.lastErr == nil || m.lastErr.Error() != err.Error() {
			if refused {
				log.Error(err, "Member cluster not engaged: its kubeconfig Secret is refused; change the Secret", "secret", reg.Secret.Namespace+"/"+reg.Secret.Name)
				if p.Recorder != nil {
					p.Recorder.Eventf(reg.Secret, nil, corev1.EventTypeWarning, etcdfedv1.EventKubeconfigRefused, "Engage", "%s", err.Error())
				}
			} else {
				log.Info("Member cluster not engaged; retrying", "error", err.Error())
			}
		}
		if m.engaged || m.attempts == 0 {
			m.since = now
		}
		m.lastErr = err
		m.failedAttempt(reg.Name, err, now, p.RetryMax)
		if refused {
			// Only a changed Secret helps, and a change starts anew.
			m.next = now.Add(refusedRetry)
		}
		return
	}
	if m.engaged {
		log.Info("Member cluster reconnected after its apiserver came back")
		m.cancel() // the controllers moved to the new cluster in Engage
	} else {
		log.Info("Member cluster engaged", "afterAttempts", m.attempts)
		m.since = now
	}
	m.cl, m.cancel, m.engaged, m.attempts, m.slowSyncs, m.lastErr, m.probe, m.failingFrom = cl, cancel, true, 0, 0, nil, probe, time.Time{}
	metricEngaged.WithLabelValues(reg.Name).Set(1)
}

// engage connects to reg's apiserver, opens the informers of p.Kinds and
// waits for their lists, then engages the cluster with aware, all within
// wait. handedOver says whether Engage was called: only then may the
// controllers have left an engaged connection of the same cluster.
func (p *Provider) engage(ctx context.Context, aware multicluster.Aware, reg Registration, token *tokenHolder, wait time.Duration) (_ cluster.Cluster, _ *discovery.DiscoveryClient, handedOver bool, _ error) {
	if len(reg.Kubeconfig) == 0 {
		return nil, nil, false, errors.New("no kubeconfig: the Secret has no \"kubeconfig\" key, or the file cannot be read")
	}
	if reg.Secret != nil && !p.AllowUnsafeKubeconfigs {
		if err := CheckKubeconfig(reg.Kubeconfig); err != nil {
			return nil, nil, false, fmt.Errorf("kubeconfig Secret %s/%s: %w", reg.Secret.Namespace, reg.Secret.Name, err)
		}
	}
	cfg, err := clientcmd.RESTConfigFromKubeConfig(reg.Kubeconfig)
	if err != nil {
		return nil, nil, false, fmt.Errorf("kubeconfig: %w", err)
	}
	// A kubeconfig sets no client-side rate limit, and client-go's default
	// (5 requests a second, bursts of 10) would queue the hub's own writes
	// to a member cluster behind each other: at a fleet's bootstrap, tens
	// of rings' members and Secrets in one cluster. Like controller-runtime
	// for the hub's own apiserver (config.GetConfig), leave the limiting
	// to the apiserver's priority and fairness.
	cfg.QPS = -1
	if token != nil {
		useToken(cfg, "")
		cfg.Wrap(token.wrap)
	}
	for _, opt := range p.RESTOptions {
		if err := opt(cfg); err != nil {
			return nil, nil, false, fmt.Errorf("kubeconfig: %w", err)
		}
	}
	probe, err := preflight(cfg, p.PreflightTimeout)
	if err != nil {
		return nil, nil, false, err
	}
	cl, err := cluster.New(cfg, p.ClusterOptions...)
	if err != nil {
		return nil, nil, false, fmt.Errorf("create client: %w", err)
	}
	p.mu.RLock()
	idx := slices.Clone(p.indexers)
	p.mu.RUnlock()
	for _, i := range idx {
		if err := cl.GetFieldIndexer().IndexField(ctx, i.obj, i.field, i.extract); err != nil {
			return nil, nil, false, fmt.Errorf("index %s: %w", i.field, err)
		}
	}
	go func() {
		if err := cl.Start(ctx); err != nil && ctx.Err() == nil {
			p.Log.Error(err, "Member cluster cache stopped", "cluster", reg.Name)
		}
	}()
	t := time.NewTimer(wait)
	defer t.Stop()
	slow := func() error {
		return fmt.Errorf("%w within %s: the apiserver answers discovery but not lists or watches in time (the next attempt waits longer)", errSyncTimeout, wait)
	}
	if len(p.Kinds) > 0 {
		synced := make(chan error, 1)
		go func() { synced <- Warm(ctx, cl, p.Kinds) }()
		select {
		case err := <-synced:
			if err != nil {
				return nil, nil, false, err
			}
			p.Log.Info("Informers warm", "cluster", reg.Name, "kinds", len(p.Kinds))
		case <-t.C:
			return nil, nil, false, slow()
		case <-ctx.Done():
			return nil, nil, false, ctx.Err()
		}
	}
	done := make(chan error, 1)
	go func() { done <- aware.Engage(ctx, multicluster.ClusterName(reg.Name), cl) }()
	select {
	case err := <-done:
		if err != nil {
			return nil, nil, true, fmt.Errorf("engage: %w", err)
		}
		return cl, probe, true, nil
	case <-t.C:
		return nil, nil, true, slow()
	case <-ctx.Done():
		return nil, nil, true, ctx.Err()
	}
}

// Warm opens an informer of each kind in cl's cache and waits until all
// have synced, or ctx ends.
func Warm(ctx context.Context, cl cluster.Cluster, kinds []client.Object) error {
	for _, obj := range kinds {
		if _, err := cl.GetCache().GetInformer(ctx, obj, cache.BlockUntilSynced(false)); err != nil {
			return fmt.Errorf("open the %T informer: %w", obj, err)
		}
	}
	if !cl.GetCache().WaitForCacheSync(ctx) {
		return ctx.Err()
	}
	return nil
}

// preflight checks within timeout that the apiserver answers and serves
// etcdfed's API, so an attempt against a dead or empty cluster fails fast
// and says why.
func preflight(cfg *rest.Config, timeout time.Duration) (*discovery.DiscoveryClient, error) {
	c := rest.CopyConfig(cfg)
	c.Timeout = timeout
	dc, err := discovery.NewDiscoveryClientForConfig(c)
	if err != nil {
		return nil, fmt.Errorf("apiserver %s: %w", cfg.Host, err)
	}
	if _, err := dc.ServerResourcesForGroupVersion(etcdfedv1.GroupVersion.String()); err != nil {
		return nil, fmt.Errorf("apiserver %s does not serve %s (not answering, or the CRDs are not installed): %w", cfg.Host, etcdfedv1.GroupVersion, err)
	}
	return dc, nil
}

// checkHealth probes an engaged cluster's apiserver. Once it answers again
// after failing for RefreshAfter or longer, the cluster is reconnected
// with fresh lists, the old connection kept until the new one is engaged.
func (p *Provider) checkHealth(ctx context.Context, aware multicluster.Aware, reg Registration, gen int, dc *discovery.DiscoveryClient, token *tokenHolder) {
	_, err := dc.ServerVersion()
	now := p.now()
	p.mu.Lock()
	defer p.mu.Unlock()
	m, ok := p.members[reg.Name]
	if !ok || m.gen != gen {
		return
	}
	m.probing = false
	switch {
	case err != nil:
		if m.failingFrom.IsZero() {
			m.failingFrom = now
			p.Log.Info("Member cluster apiserver not answering", "cluster", reg.Name, "error", err.Error())
		}
	case m.failingFrom.IsZero() || m.attempting:
		// Answering, with nothing to catch up on; or a reconnect is
		// under way.
	case m.attempts == 0 && now.Sub(m.failingFrom) < p.RefreshAfter:
		m.failingFrom = time.Time{} // a short blip: the watches catch up
	case now.Before(m.next):
		// The last reconnect failed; the next waits out its backoff.
	default:
		if m.attempts == 0 {
			p.Log.Info("Member cluster apiserver answers again; reconnecting", "cluster", reg.Name, "after", now.Sub(m.failingFrom).Truncate(time.Second).String())
		}
		// failingFrom stays set until a reconnect succeeds (attempt).
		m.attempting = true
		go p.attempt(ctx, aware, reg, gen, token, p.syncWait(m.slowSyncs))
	}
}

// errSyncTimeout: an attempt's caches did not sync within its wait.
var errSyncTimeout = errors.New("caches not synced")

// maxSyncWait caps an attempt's wait for its caches however many attempts
// before it timed out.
const maxSyncWait = 5 * time.Minute

// syncWait is how long an attempt after slowSyncs attempts in a row that
// timed out waits for its caches: EngageTimeout, doubled for each, at
// most maxSyncWait (never less than EngageTimeout).
func (p *Provider) syncWait(slowSyncs int) time.Duration {
	d := p.EngageTimeout
	for i := 0; i < slowSyncs && d < maxSyncWait; i++ {
		d *= 2
	}
	return max(p.EngageTimeout, min(d, maxSyncWait))
}

// refusedRetry: a refused kubeconfig is checked again this often (a
// changed Secret is retried at once).
const refusedRetry = 10 * time.Minute

// backoff: 250ms, 500ms, 1s, 2s, ... capped at max.
func backoff(attempts int, max time.Duration) time.Duration {
	d := 250 * time.Millisecond
	for i := 1; i < attempts && d < max; i++ {
		d *= 2
	}
	return min(d, max)
}
