package registry

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/cluster"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
	"sigs.k8s.io/multicluster-runtime/pkg/multicluster"
)

var (
	metricEngaged = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "etcdfed_hub_member_cluster_engaged", Help: "1 while the hub holds a synced connection to the member cluster, else 0.",
	}, []string{"member_cluster"})
	metricEngageFailures = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "etcdfed_hub_member_cluster_engage_failures_total", Help: "Failed attempts to connect to the member cluster (apiserver not answering, API not served, caches not synced in time).",
	}, []string{"member_cluster"})
)

func init() { metrics.Registry.MustRegister(metricEngaged, metricEngageFailures) }

// Registration is a registered member cluster and how to reach it.
type Registration struct {
	MemberCluster
	// Kubeconfig is the cluster's kubeconfig; a change re-creates the
	// cluster's client and cache.
	Kubeconfig []byte
	// Secret is the kubeconfig Secret it came from; nil for a file the
	// hub's operator named. A Secret's kubeconfig is checked
	// (CheckKubeconfig) unless the provider allows unsafe ones.
	Secret *corev1.ObjectReference
	// Token, when set, is the bearer token used instead of the
	// kubeconfig's credentials. A new token is used from the next request
	// on: it does not re-create the client or the cache.
	Token []byte
}

// Source lists registrations: kubeconfig Secrets or files.
type Source interface {
	Registrations(ctx context.Context) ([]Registration, error)
}

// Provider is the hub's multicluster provider. It engages every registered
// member cluster and keeps it engaged through outages, so that nothing that
// reads a member cluster ever waits on a cache that is not synced:
//
//   - an engagement attempt runs in its own goroutine, first checks in a
//     few seconds that the apiserver answers and serves etcdfed's API, and
//     is abandoned (its cache stopped) when it does not finish within
//     EngageTimeout, doubled for each attempt in a row abandoned so
//     (syncWait): an apiserver that lists slowly, or a hub starved of
//     CPU, gets its caches synced in the end instead of relisting every
//     kind from the start at every retry;
//   - a failed attempt is retried after at most RetryMax, however long the
//     cluster was away, so a cluster that answers again is engaged within
//     seconds; a kubeconfig refused as unsafe is retried every
//     refusedRetry (at once when its Secret changes), with a
//     KubeconfigRefused event on the Secret;
//   - Get returns only engaged clusters: their caches synced every kind the
//     hub's controllers watch. An engaged cluster stays engaged while its
//     apiserver is away (its informers reconnect by themselves); it is
//     replaced when its registration changes (a renewed token is used
//     without reconnecting), reconnected with fresh lists when its
//     apiserver answers again after failing for RefreshAfter or longer
//     (checkHealth, the old connection kept until the new one is engaged),
//     and removed when it is deregistered.
//
// Provider is also the hub's Registry: List reports every registered
// cluster with its engagement state, and fails until the first listing of
// the source succeeded, so the hub never decides on a partial set.
type Provider struct {
	// Source lists registrations. Required before Start.
	Source Source
	// ClusterOptions configure each member cluster's client and cache.
	ClusterOptions []cluster.Option
	// RESTOptions adjust each member cluster's REST config.
	RESTOptions []func(*rest.Config) error
	// Interval between listings of the source; default 1s.
	Interval time.Duration
	// PreflightTimeout bounds the check that an apiserver answers before
	// an attempt; default 3s.
	PreflightTimeout time.Duration
	// EngageTimeout bounds one engagement attempt; default 20s. An
	// attempt after n in a row whose caches did not sync in time gets
	// 2^n times as long, at most maxSyncWait.
	EngageTimeout time.Duration
	// RetryMax caps the wait between failed attempts; default 5s.
	RetryMax time.Duration
	// HealthInterval is how often an engaged cluster's apiserver is
	// probed; default 2s.
	HealthInterval time.Duration
	// RefreshAfter: an engaged cluster whose apiserver answers again after
	// failing probes for at least this long is reconnected at once (fresh
	// lists) instead of waiting out its watches' retry backoff, which
	// grows to 30s; default 5s.
	RefreshAfter time.Duration
	// Kinds are the kinds the hub's controllers watch in every member
	// cluster. An attempt opens their informers and waits for their lists
	// before it engages the cluster: the controllers move to a new
	// connection only once its caches hold them, so a reconnect whose
	// lists do not come in time (a starved hub or apiserver) leaves the
	// engaged connection, and the controllers on it, where they are; and
	// a standby replica's caches are warm before it takes the Lease.
	// Empty: the controllers open their informers in Engage.
	Kinds []client.Object
	// AllowUnsafeKubeconfigs engages clusters whose kubeconfig Secret
	// fails CheckKubeconfig (exec or auth-provider plugins, skipped TLS
	// verification, files of the hub). Off: such a cluster is not engaged;
	// its state says why and an event on the Secret too.
	AllowUnsafeKubeconfigs bool
	// Recorder records events on kubeconfig Secrets; nil records none.
	Recorder events.EventRecorder
	// Log is the provider's logger.
	Log logr.Logger
	// Now is the clock; time.Now when nil.
	Now func() time.Time

	mu       sync.RWMutex
	loaded   bool
	members  map[string]*member
	indexers []indexer
}

type indexer struct {
	obj     client.Object
	field   string
	extract client.IndexerFunc
}

type member struct {
	reg  Registration
	hash string
	// token is the registration's current token, read by every request
	// of the cluster's clients (nil without one).
	token *tokenHolder
	// gen identifies the registration an attempt was started for; a
	// changed or removed registration makes a late attempt's result moot.
	gen        int
	cl         cluster.Cluster
	cancel     context.CancelFunc
	engaged    bool
	attempting bool
	// health of an engaged cluster
	probe       *discovery.DiscoveryClient
	probing     bool
	lastProbe   time.Time
	failingFrom time.Time
	attempts    int
	// slowSyncs counts the attempts in a row abandoned because the caches
	// had not synced in time; each gives the next one twice as long
	// (syncWait).
	slowSyncs int
	next      time.Time
	since     time.Time // engaged since, or first failure since
	lastErr   error
}

// ClusterState is a member cluster as the provider sees it.
type ClusterState struct {
	Engaged bool
	// Since is when it was engaged, or when the current run of failed
	// attempts began.
	Since time.Time
	// Attempts counts failed attempts since the last engagement.
	Attempts int
	// Problem is why it is not engaged ("" when engaged).
	Problem string
}

var _ multicluster.Provider = (*Provider)(nil)
var _ multicluster.ProviderRunnable = (*Provider)(nil)
var _ Registry = (*Provider)(nil)

func (p *Provider) now() time.Time {
	if p.Now != nil {
		return p.Now()
	}
	return time.Now()
}

func (p *Provider) defaults() {
	if p.Interval <= 0 {
		p.Interval = time.Second
	}
	if p.PreflightTimeout <= 0 {
		p.PreflightTimeout = 3 * time.Second
	}
	if p.EngageTimeout <= 0 {
		p.EngageTimeout = 20 * time.Second
	}
	if p.RetryMax <= 0 {
		p.RetryMax = 5 * time.Second
	}
	if p.HealthInterval <= 0 {
		p.HealthInterval = 2 * time.Second
	}
	if p.RefreshAfter <= 0 {
		p.RefreshAfter = 5 * time.Second
	}
}

// Get returns an engaged cluster, or multicluster.ErrClusterNotFound.
func (p *Provider) Get(_ context.Context, name multicluster.ClusterName) (cluster.Cluster, error) {
	p.mu.RLock()
	defer p.mu.RUnlock()
	if m, ok := p.members[string(name)]; ok && m.engaged {
		return m.cl, nil
	}
	return nil, multicluster.ErrClusterNotFound
}

// IndexField adds an index to every engaged cluster and to every cluster
// engaged later.
func (p *Provider) IndexField(ctx context.Context, obj client.Object, field string, extract client.IndexerFunc) error {
	p.mu.Lock()
	p.indexers = append(p.indexers, indexer{obj: obj, field: field, extract: extract})
	var cls []cluster.Cluster
	for _, m := range p.members {
		if m.cl != nil {
			cls = append(cls, m.cl)
		}
	}
	p.mu.Unlock()
	for _, cl := range cls {
		if err := cl.GetFieldIndexer().IndexField(ctx, obj, field, extract); err != nil {
			return fmt.Errorf("index %s: %w", field, err)
		}
	}
	return nil
}

// List implements Registry: every registered cluster, sorted by name, with
// its engagement state.
func (p *Provider) List(context.Context) ([]MemberCluster, error) {
	p.mu.RLock()
	defer p.mu.RUnlock()
	if !p.loaded {
		return nil, errors.New("member clusters not listed yet")
	}
	out := make([]MemberCluster, 0, len(p.members))
	for _, m := range p.members {
		mc := m.reg.MemberCluster
		mc.Labels = maps.Clone(mc.Labels)
		mc.State = m.state()
		out = append(out, mc)
	}
	slices.SortFunc(out, func(a, b MemberCluster) int { return strings.Compare(a.Name, b.Name) })
	return out, nil
}

func (m *member) state() *ClusterState {
	s := &ClusterState{Engaged: m.engaged, Since: m.since, Attempts: m.attempts}
	switch {
	case m.engaged:
	case m.lastErr != nil:
		s.Problem = m.lastErr.Error()
	default:
		s.Problem = "connecting"
	}
	return s
}

// Start lists the source every Interval and engages what is registered
// until ctx ends.
func (p *Provider) Start(ctx context.Context, aware multicluster.Aware) error {
	if p.Source == nil {
		return errors.New("registry provider: no source")
	}
	p.defaults()
	t := time.NewTicker(p.Interval)
	defer t.Stop()
	for {
		p.sync(ctx, aware)
		select {
		case <-ctx.Done():
			p.stopAll()
			return nil
		case <-t.C:
		}
	}
}

func (p *Provider) stopAll() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for name, m := range p.members {
		if m.cancel != nil {
			m.cancel()
		}
		delete(p.members, name)
	}
}

func (p *Provider) sync(ctx context.Context, aware multicluster.Aware) {
	lctx, cancel := context.WithTimeout(ctx, p.PreflightTimeout)
	regs, err := p.Source.Registrations(lctx)
	cancel()
	if err != nil {
		p.Log.Error(err, "Listing member clusters")
		return
	}
	now := p.now()
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.members == nil {
		p.members = map[string]*member{}
	}
	seen := map[string]bool{}
	for _, reg := range regs {
		seen[reg.Name] = true
		h := hash(reg.Kubeconfig)
		m, ok := p.members[reg.Name]
		switch {
		case !ok:
			m = &member{reg: reg, hash: h, since: now, token: newTokenHolder(reg.Token)}
			p.members[reg.Name] = m
			metricEngaged.WithLabelValues(reg.Name).Set(0)
		case m.hash != h || (m.token == nil) != (len(reg.Token) == 0):
			p.Log.Info("Member cluster registration changed; reconnecting", "cluster", reg.Name)
			m.stop()
			*m = member{reg: reg, hash: h, gen: m.gen + 1, since: now, token: newTokenHolder(reg.Token)}
			metricEngaged.WithLabelValues(reg.Name).Set(0)
		default:
			m.reg.Labels = reg.Labels // labels may change without a reconnect
			if m.token.set(reg.Token) {
				p.Log.Info("Member cluster token renewed; using it from the next request", "cluster", reg.Name)
				m.reg.Token = reg.Token
				if !m.engaged && !m.attempting {
					m.next = now // a new token may be what the last attempt lacked
				}
			}
		}
		if !m.engaged && !m.attempting && !now.Before(m.next) {
			m.attempting = true
			go p.attempt(ctx, aware, reg, m.gen, m.token, p.syncWait(m.slowSyncs))
		}
		if m.engaged && !m.probing && !m.attempting && m.probe != nil && now.Sub(m.lastProbe) >= p.HealthInterval {
			m.probing, m.lastProbe = true, now
			go p.checkHealth(ctx, aware, reg, m.gen, m.probe, m.token)
		}
	}
	for name, m := range p.members {
		if !seen[name] {
			p.Log.Info("Member cluster deregistered", "cluster", name)
			m.stop()
			delete(p.members, name)
			metricEngaged.DeleteLabelValues(name)
			metricEngageFailures.DeleteLabelValues(name)
		}
	}
	p.loaded = true
}

func hash(b []byte) string {
	h := sha256.Sum256(b)
	return hex.EncodeToString(h[:8])
}
