// Command hub is the etcdfed hub controller. It owns EtcdCluster objects in
// the hub cluster, places members over the member clusters' zones, performs
// every etcd membership change, writes EtcdMember objects, certificates and
// DNS zones into the member clusters, and reports status.
//
// Member clusters are registered with kubeconfig Secrets in the hub (the
// multicluster-runtime kubeconfig convention: label
// sigs.k8s.io/multicluster-runtime-kubeconfig=true, key "kubeconfig", the
// Secret's name is the cluster's name), or, for local use, with
// --member-kubeconfig NAME=PATH flags. hub/registry engages them and keeps
// them engaged through outages.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"strings"

	"github.com/go-logr/logr"
	"go.uber.org/zap/zapcore"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/uuid"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/cluster"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	mcmanager "sigs.k8s.io/multicluster-runtime/pkg/manager"
	"sigs.k8s.io/multicluster-runtime/pkg/multicluster"

	"github.com/etcdfed/etcdfed/hub/backup"
	"github.com/etcdfed/etcdfed/hub/clients"
	"github.com/etcdfed/etcdfed/hub/etcdcluster"
	"github.com/etcdfed/etcdfed/hub/liveness"
	"github.com/etcdfed/etcdfed/hub/registration"
	"github.com/etcdfed/etcdfed/hub/registry"
	"github.com/etcdfed/etcdfed/hub/restore"
	"github.com/etcdfed/etcdfed/hub/shard"
	"github.com/etcdfed/etcdfed/hub/spokes"
	"github.com/etcdfed/etcdfed/hub/tenancy"
	"github.com/etcdfed/etcdfed/internal/leaderlock"
	"github.com/etcdfed/etcdfed/internal/metricsserve"
	"github.com/etcdfed/etcdfed/internal/resolverenv"
	"github.com/etcdfed/etcdfed/internal/scheme"
	"github.com/etcdfed/etcdfed/internal/version"
)

func main() {
	resolverenv.Install()
	var o options
	o.bind(flag.CommandLine)
	// Sub-second timestamps: the steps of one membership change are often
	// less than a second apart.
	zapOpts := zap.Options{Development: false, TimeEncoder: zapcore.RFC3339NanoTimeEncoder}
	zapOpts.BindFlags(flag.CommandLine)
	flag.Usage = func() {
		fmt.Fprintf(os.Stderr, "Usage: hub [flags]\n\nThe etcdfed hub controller (%s). The hub cluster is taken from --kubeconfig or KUBECONFIG or the in-cluster config.\n\nFlags:\n", version.String())
		flag.PrintDefaults()
	}
	flag.Parse()
	ctrl.SetLogger(zap.New(zap.UseFlagOptions(&zapOpts)))
	if err := o.check(); err != nil {
		fmt.Fprintf(os.Stderr, "hub: %v\n", err)
		os.Exit(2)
	}
	sh, err := shard.Parse(o.shardName, o.shardSelector)
	if err != nil {
		fmt.Fprintf(os.Stderr, "hub: %v\n", err)
		os.Exit(2)
	}
	if err := run(ctrl.SetupSignalHandler(), o, sh); err != nil {
		ctrl.Log.Error(err, "Hub stopped")
		os.Exit(1)
	}
}

func run(ctx context.Context, o options, sh shard.Shard) error {
	log := ctrl.Log.WithName("hub")
	cfg, err := ctrl.GetConfig()
	if err != nil {
		return fmt.Errorf("hub kubeconfig: %w", err)
	}
	scheme := scheme.New()
	provider, err := newProvider(o, scheme, log)
	if err != nil {
		return err
	}
	mgr, err := newManager(cfg, scheme, o, sh, provider)
	if err != nil {
		return fmt.Errorf("create manager: %w", err)
	}
	if err := runProvider(mgr, provider, o); err != nil {
		return err
	}
	policy, err := o.policy()
	if err != nil {
		return err
	}
	sh.Export()
	tracker := liveness.NewTracker(nil)
	if err := setupRingControllers(mgr, o, sh, provider, tracker, policy); err != nil {
		return err
	}
	if err := setupFleetDuties(mgr, o, sh, provider, tracker, log); err != nil {
		return err
	}
	if err := mgr.GetLocalManager().AddHealthzCheck("ping", healthz.Ping); err != nil {
		return err
	}
	if err := mgr.GetLocalManager().AddReadyzCheck("ping", healthz.Ping); err != nil {
		return err
	}
	log.Info("Starting hub", "version", version.String(), "shard", sh.String(), "lease", sh.Lease(), "namespace", o.namespace, "ringNamespace", o.ringNamespace, "memberFiles", len(o.memberFiles))
	if err := mgr.Start(ctx); err != nil && !errors.Is(err, context.Canceled) {
		return err
	}
	return nil
}

// newProvider is the registry of member clusters: their kubeconfig
// Secrets in the hub, or the --member-kubeconfig files.
func newProvider(o options, s *runtime.Scheme, log logr.Logger) (*registry.Provider, error) {
	// Member-cluster caches: the ring namespace only, etcdfed's own
	// objects only, bounded (registry.MemberCacheOptions).
	memberCache := registry.MemberCacheOptions(s, o.ringNamespace, o.maxMemberObjects)
	provider := &registry.Provider{
		ClusterOptions: []cluster.Option{func(co *cluster.Options) { *co = memberCache }},
		RESTOptions:    []func(*rest.Config) error{func(c *rest.Config) error { c.Timeout = o.memberAPITimeout; return nil }},
		Kinds:          memberKinds(),
		Log:            log.WithName("member-clusters"),
		// Only kubeconfig Secrets are checked: files are the operator's own.
		AllowUnsafeKubeconfigs: o.unsafeKubeconfig,
	}
	if len(o.memberFiles) > 0 {
		files := registry.Files{}
		for _, f := range o.memberFiles {
			name, path, ok := strings.Cut(f, "=")
			if !ok || name == "" || path == "" {
				return nil, fmt.Errorf("--member-kubeconfig %q: want NAME=PATH", f)
			}
			if _, err := os.Stat(path); err != nil {
				return nil, fmt.Errorf("--member-kubeconfig %s: %w", name, err)
			}
			files[name] = path
		}
		provider.Source = files
	}
	return provider, nil
}

// newManager is the multicluster manager over the hub cluster and the
// member clusters provider engages.
func newManager(cfg *rest.Config, s *runtime.Scheme, o options, sh shard.Shard, provider *registry.Provider) (mcmanager.Manager, error) {
	// The provider (passed hidden behind passiveProvider, so that the
	// manager does not start it among the leader's runnables) runs on
	// every replica: a standby engages the member clusters and opens the
	// informers the controllers watch (warm.go) like the leader, so that
	// it reconciles within a pass of taking the Lease instead of after a
	// cold start.
	readers, err := metricsserve.ParseReaders(o.metricsReaders)
	if err != nil {
		return nil, fmt.Errorf("--metrics-readers: %w", err)
	}
	// Under the pod's name (--leader-election-identity), a hub whose
	// container restarted leads again at once: the Lease is its own.
	var lock resourcelock.Interface
	if o.leaderElect && o.leaderIdentity != "" {
		if lock, err = leaderlock.New(cfg, o.namespace, sh.Lease(), o.leaderIdentity); err != nil {
			return nil, err
		}
	}
	return mcmanager.New(cfg, passiveProvider{provider}, manager.Options{
		Scheme:                 s,
		Metrics:                metricsserve.ReaderOptions(o.metricsAddr, o.metricsSecure, o.metricsCertDir, readers),
		HealthProbeBindAddress: o.probeAddr,
		PprofBindAddress:       o.pprofAddr,
		LeaderElection:         o.leaderElect,
		// One Lease per shard: each shard's hub has its own leader.
		LeaderElectionID:        sh.Lease(),
		LeaderElectionNamespace: o.namespace,
		// nil: controller-runtime's own lock, under a name of its making.
		LeaderElectionResourceLockInterface: lock,
		// A hub stopped on purpose (a rollout, a drain) hands the lease
		// over at once instead of making its successor wait out the lease
		// (15 s): the process exits as soon as the manager returns, so
		// nothing acts as leader after the release.
		LeaderElectionReleaseOnCancel: true,
		// Secrets are cached in the hub's namespace only (the kubeconfig
		// Secrets of the member clusters); CA, client and TSIG Secrets in
		// EtcdCluster namespaces are read uncached, so the hub needs no
		// cluster-wide list/watch on Secrets. EtcdClusters are cached
		// whatever the shard: a domain or CA held by another shard's ring
		// must still count as held (admit), and a ring missing from a
		// filtered cache would read as deleted; the controllers let go of
		// other shards' rings when they read them (hub/shard). Leases are
		// cached in the hub's namespace with the claim label only: the
		// hubs' shard claims (hub/shard).
		Cache: cache.Options{ByObject: map[client.Object]cache.ByObject{
			&corev1.Secret{}: {Namespaces: map[string]cache.Config{o.namespace: {}}},
			&coordinationv1.Lease{}: {
				Namespaces: map[string]cache.Config{o.namespace: {}},
				Label:      labels.SelectorFromSet(labels.Set{shard.ClaimLabel: "true"}),
			},
		}},
	})
}

// runProvider runs the registry and warms the hub cluster's informers on
// every replica, leader or standby.
func runProvider(mgr mcmanager.Manager, provider *registry.Provider, o options) error {
	if provider.Source == nil {
		provider.Source = registry.Secrets{Client: mgr.GetLocalManager().GetClient(), Namespace: o.namespace}
	}
	provider.Recorder = mgr.GetLocalManager().GetEventRecorder("etcdfed-hub-registry")
	if err := mgr.GetLocalManager().Add(everyReplica{manager.RunnableFunc(func(ctx context.Context) error {
		return provider.Start(ctx, mgr)
	})}); err != nil {
		return fmt.Errorf("registry provider: %w", err)
	}
	if err := mgr.GetLocalManager().Add(everyReplica{manager.RunnableFunc(func(ctx context.Context) error {
		warmHub(ctx, mgr.GetLocalManager())
		return nil
	})}); err != nil {
		return fmt.Errorf("warm the hub cluster's informers: %w", err)
	}
	return nil
}

// policy is the hub's tenancy policy from its flags.
func (o options) policy() (tenancy.Policy, error) {
	domains, err := tenancy.ParseDomains(o.domains)
	if err != nil {
		return tenancy.Policy{}, fmt.Errorf("--allowed-domains: %w", err)
	}
	return tenancy.Policy{
		Domains:                 domains,
		SharedCA:                o.sharedCA,
		AmbientStoreCredentials: o.ambientStore,
		SourceNamespaces:        o.sourceNamespaces,
		ImagePrefixes:           o.imagePrefixes,
		PriorityClasses:         o.priorityClasses,
		TolerationKeys:          o.tolerationKeys,
		PodAnnotations:          o.podAnnotations,
	}, nil
}

// setupRingControllers sets up the controllers of the rings this hub's
// shard owns: EtcdCluster, backup, restore and clients, and the leader's
// claim on the shard, against which every ring is checked before it is
// acted on (hub/shard, claims.go).
func setupRingControllers(mgr mcmanager.Manager, o options, sh shard.Shard, provider *registry.Provider, tracker *liveness.Tracker, policy tenancy.Policy) error {
	claims := &shard.Claims{
		Shard:     sh,
		Client:    mgr.GetLocalManager().GetClient(),
		Namespace: o.namespace,
		Identity:  hubIdentity(o.leaderIdentity),
		Log:       ctrl.Log.WithName("hub").WithName("shard"),
	}
	if err := mgr.GetLocalManager().Add(claims); err != nil {
		return fmt.Errorf("shard claim: %w", err)
	}
	rec := &etcdcluster.Reconciler{
		Policy:                  policy,
		AllowLoopbackAddresses:  o.allowLoopback,
		Manager:                 mgr,
		Registry:                provider,
		Tracker:                 tracker,
		RingNamespace:           o.ringNamespace,
		LeaseStaleAfter:         o.leaseStaleAfter,
		NodeTracker:             liveness.NewTracker(nil),
		NodeStaleAfter:          o.nodeStaleAfter,
		Recorder:                mgr.GetLocalManager().GetEventRecorder("etcdfed-hub"),
		MaxConcurrentReconciles: o.workers,
		MaxFleetDisruptions:     o.fleetDisruptions,
		Owns:                    sh.Owns,
		Claims:                  claims,
	}
	if err := rec.SetupWithManager(mgr); err != nil {
		return fmt.Errorf("EtcdCluster controller: %w", err)
	}
	// The controllers beside the EtcdCluster one read each ring before they
	// act on it: through shardReader, another shard's ring is NotFound to
	// them, which each takes as nothing to do (hub/shard).
	shardReader := shard.Reader{Reader: mgr.GetLocalManager().GetAPIReader(), Shard: sh, Claims: claims}
	if err := (&backup.Reconciler{
		Client:               mgr.GetLocalManager().GetClient(),
		Reader:               shardReader,
		Recorder:             mgr.GetLocalManager().GetEventRecorder("etcdfed-hub-backup"),
		ScratchDir:           o.backupScratchDir,
		MaxConcurrentBackups: o.maxBackups,
		MaxTimeout:           o.maxBackupTime,
		Policy:               policy,
	}).SetupWithManager(mgr.GetLocalManager()); err != nil {
		return fmt.Errorf("backup controller: %w", err)
	}
	if err := (&restore.Reconciler{
		Client:                mgr.GetLocalManager().GetClient(),
		Reader:                shardReader,
		Recorder:              mgr.GetLocalManager().GetEventRecorder("etcdfed-hub-restore"),
		ScratchDir:            o.backupScratchDir,
		Policy:                policy,
		MaxConcurrentRestores: o.maxRestores,
	}).SetupWithManager(mgr.GetLocalManager()); err != nil {
		return fmt.Errorf("restore controller: %w", err)
	}
	if err := (&clients.Reconciler{
		Client:   mgr.GetLocalManager().GetClient(),
		Reader:   shardReader,
		Clusters: clients.ManagerClusters{Manager: mgr},
		Recorder: mgr.GetLocalManager().GetEventRecorder("etcdfed-hub-clients"),
		Policy:   clients.Policy{OtherNamespaces: o.clientsOtherNamespaces, RingNamespace: o.ringNamespace},
	}).SetupWithManager(mgr.GetLocalManager()); err != nil {
		return fmt.Errorf("clients controller: %w", err)
	}
	return nil
}

// setupFleetDuties sets up, with --fleet-duties, the duties that concern
// every ring at once: the EtcdSpokes' gossip peers and key, and (without
// --member-kubeconfig) the registration Secrets' tokens.
func setupFleetDuties(mgr mcmanager.Manager, o options, sh shard.Shard, provider *registry.Provider, tracker *liveness.Tracker, log logr.Logger) error {
	if !o.fleetDuties {
		log.Info("Leaving the fleet's duties (EtcdSpokes, registration Secrets) to another shard's hub", "shard", sh.String())
	} else if err := (&spokes.Reconciler{Manager: mgr, Registry: provider, RingNamespace: o.ringNamespace, HubNamespace: o.namespace, AllowLoopback: o.allowLoopback,
		HubClient: mgr.GetLocalManager().GetClient(), HubReader: mgr.GetLocalManager().GetAPIReader(),
		Recorder: mgr.GetLocalManager().GetEventRecorder("etcdfed-hub-spokes")}).SetupWithManager(mgr); err != nil {
		return fmt.Errorf("EtcdSpoke controller: %w", err)
	}
	if len(o.memberFiles) == 0 && o.fleetDuties {
		// Registration Secrets: renew the tokens `etcdfed cluster join`
		// stored, and say on each Secret how the cluster stands.
		if err := mgr.GetLocalManager().Add(&registration.Runner{
			Client:     mgr.GetLocalManager().GetClient(),
			Reader:     mgr.GetLocalManager().GetClient(),
			Namespace:  o.namespace,
			Registry:   provider,
			Tracker:    tracker,
			StaleAfter: o.leaseStaleAfter,
			RenewAfter: o.renewAfter,
			Log:        log.WithName("registration"),
		}); err != nil {
			return fmt.Errorf("registration runner: %w", err)
		}
	}
	return nil
}

// hubIdentity names this hub process in its shard claim: its name in the
// leader-election Lease when it has one (--leader-election-identity),
// otherwise the host (the pod's name in a cluster) and a random suffix, as
// controller-runtime's leader election names it.
func hubIdentity(leader string) string {
	if leader != "" {
		return leader
	}
	host, err := os.Hostname()
	if err != nil || host == "" {
		host = "hub"
	}
	return host + "_" + string(uuid.NewUUID())
}

func envOr(key, def string) string {
	if v := os.Getenv(key); v != "" {
		return v
	}
	return def
}

// passiveProvider is the registry provider without its Start, which the
// multicluster manager would add as a leader-only runnable; runProvider
// adds it as everyReplica instead.
type passiveProvider struct{ p *registry.Provider }

func (pp passiveProvider) Get(ctx context.Context, name multicluster.ClusterName) (cluster.Cluster, error) {
	return pp.p.Get(ctx, name)
}

func (pp passiveProvider) IndexField(ctx context.Context, obj client.Object, field string, extract client.IndexerFunc) error {
	return pp.p.IndexField(ctx, obj, field, extract)
}

// everyReplica runs a runnable on every replica, leader or standby.
type everyReplica struct{ manager.Runnable }

func (everyReplica) NeedLeaderElection() bool { return false }
