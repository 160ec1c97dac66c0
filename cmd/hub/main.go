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
	"time"

	"go.uber.org/zap/zapcore"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/cluster"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	mcmanager "sigs.k8s.io/multicluster-runtime/pkg/manager"
	"sigs.k8s.io/multicluster-runtime/pkg/multicluster"

	etcdfedv1 "github.com/etcdfed/etcdfed/api/v1alpha1"
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
	"github.com/etcdfed/etcdfed/internal/metricsserve"
	"github.com/etcdfed/etcdfed/internal/resolverenv"
	"github.com/etcdfed/etcdfed/internal/scheme"
	"github.com/etcdfed/etcdfed/internal/version"
)

type memberFiles []string

func (m *memberFiles) String() string     { return strings.Join(*m, ",") }
func (m *memberFiles) Set(v string) error { *m = append(*m, v); return nil }

// commaList is a flag of comma-separated values, repeatable.
type commaList []string

func (c *commaList) String() string { return strings.Join(*c, ",") }
func (c *commaList) Set(v string) error {
	for _, s := range strings.Split(v, ",") {
		if s = strings.TrimSpace(s); s != "" {
			*c = append(*c, s)
		}
	}
	return nil
}

type options struct {
	namespace        string
	ringNamespace    string
	memberFiles      memberFiles
	leaderElect      bool
	metricsAddr      string
	metricsSecure    bool
	metricsCertDir   string
	metricsReaders   commaList
	probeAddr        string
	leaseStaleAfter  time.Duration
	nodeStaleAfter   time.Duration
	memberAPITimeout time.Duration
	backupScratchDir string
	maxBackups       int
	maxBackupTime    time.Duration
	maxRestores      int
	maxMemberObjects int
	workers          int
	fleetDisruptions int
	// clientsOtherNamespaces lets spec.clients write Secrets outside the
	// EtcdCluster's namespace.
	clientsOtherNamespaces bool
	// The tenancy policy (hub/tenancy) and the checks of what member
	// clusters report and are registered with.
	ambientStore     bool
	sourceNamespaces commaList
	imagePrefixes    commaList
	priorityClasses  commaList
	tolerationKeys   commaList
	podAnnotations   commaList
	domains          commaList
	sharedCA         bool
	allowLoopback    bool
	unsafeKubeconfig bool
	renewAfter       float64
	// The hub's shard of the rings (hub/shard), and whether it runs the
	// duties that concern every ring at once.
	shardName     string
	shardSelector string
	fleetDuties   bool
}

func main() {
	resolverenv.Install()
	var o options
	flag.StringVar(&o.namespace, "namespace", envOr("ETCDFED_NAMESPACE", etcdfedv1.DefaultRingNamespace),
		"Hub namespace holding member-cluster kubeconfig Secrets and the leader-election Lease (env ETCDFED_NAMESPACE).")
	flag.StringVar(&o.ringNamespace, "ring-namespace", envOr("ETCDFED_RING_NAMESPACE", etcdfedv1.DefaultRingNamespace),
		"Namespace of etcdfed objects in every member cluster (env ETCDFED_RING_NAMESPACE).")
	flag.Var(&o.memberFiles, "member-kubeconfig",
		"NAME=PATH of a member cluster's kubeconfig file; repeat per cluster. When given, kubeconfig Secrets are not used (local use).")
	flag.BoolVar(&o.leaderElect, "leader-elect", true, "Elect a leader among hub replicas with a Lease in --namespace.")
	flag.StringVar(&o.metricsAddr, "metrics-bind-address", ":8080", "Address of the Prometheus metrics endpoint; 0 disables it.")
	flag.BoolVar(&o.metricsSecure, "metrics-secure", true, "Serve /metrics over TLS to callers whose bearer token the hub cluster's apiserver authenticates (TokenReview) and --metrics-readers names. false: plain HTTP to anyone.")
	flag.Var(&o.metricsReaders, "metrics-readers", "Who may read /metrics (with --metrics-secure): NAMESPACE/NAME (a ServiceAccount), user:NAME or group:NAME, comma-separated, repeatable; none: every caller is refused. The hub never asks the apiserver who may (no SubjectAccessReview).")
	flag.StringVar(&o.metricsCertDir, "metrics-cert-dir", "", "Directory with tls.crt and tls.key for /metrics; empty: a self-signed certificate made at start.")
	flag.StringVar(&o.probeAddr, "health-probe-bind-address", ":8081", "Address of /healthz and /readyz; 0 disables it.")
	flag.DurationVar(&o.leaseStaleAfter, "lease-stale-after", etcdcluster.DefaultLeaseStaleAfter,
		"A spoke Lease not renewed for this long, on the hub's clock, makes its member cluster unknown to the hub (spokes renew every 1s by default; keep this at least 3 renewals).")
	flag.DurationVar(&o.nodeStaleAfter, "node-lease-stale-after", etcdcluster.DefaultNodeStaleAfter,
		"A node Lease (kube-node-lease) not renewed for this long, on the hub's clock, makes the node stale; a zone of a multi-zone member cluster whose nodes are all stale, and whose peers in other zones lost it, is failed after spec.failurePolicy.zoneGracePeriod. Keep it at least two kubelet renewals (kubelet renews every quarter of --node-lease-duration-seconds, 10s by default).")
	flag.DurationVar(&o.memberAPITimeout, "member-api-timeout", 15*time.Second, "Timeout of each request to a member cluster's apiserver.")
	flag.StringVar(&o.backupScratchDir, "backup-scratch-dir", os.TempDir(),
		"Directory where snapshots are held between the stream from a member and the upload; it needs room for the largest database.")
	flag.IntVar(&o.maxBackups, "max-concurrent-backups", 2, "Backups (of different EtcdClusters) taken at once; one namespace runs one at a time, so a tenant with a slow store holds one of them.")
	flag.DurationVar(&o.maxBackupTime, "max-backup-timeout", backup.DefaultMaxTimeout,
		"The longest one backup may take, whatever its spec.backup.timeout (up to 24h) says: a backup holds one of --max-concurrent-backups while it runs, so a tenant's slow store holds it no longer than this.")
	flag.IntVar(&o.maxRestores, "max-concurrent-restores", restore.DefaultMaxConcurrentRestores,
		"Snapshots of bootstrap.fromSnapshot (and recoveries from a backup) resolved at once; one namespace resolves one at a time, so a tenant with a slow store holds one of them.")
	flag.IntVar(&o.maxMemberObjects, "max-member-cluster-objects", registry.DefaultMaxObjects,
		"Objects of each kind (EtcdMembers, EtcdDNSZones, Secrets, Leases, Nodes) the hub caches of one member cluster at most; a member cluster holding more (a hostile one can label any number as etcdfed's) has the rest ignored, with an error logged. Raise it above the EtcdMembers one member cluster hosts.")
	flag.IntVar(&o.workers, "max-concurrent-reconciles", etcdcluster.DefaultMaxConcurrentReconciles,
		"EtcdClusters reconciled at once (passes of one EtcdCluster never overlap). Passes mostly wait on etcd and apiservers; raise it for hundreds of rings, so that every ring is visited soon after a hub restart.")
	flag.IntVar(&o.fleetDisruptions, "max-fleet-disruptions", 0,
		"Rings that may have a disruptive operation (Replace, Move, Roll, Disrupt, Defrag) in flight at once, across every EtcdCluster of this hub (of its shard, with --shard: each shard has its own limit): a version roll or the evacuation of a lost member cluster over hundreds of rings restarts or replaces this many members at a time. A ring over the limit waits (Progressing=False, reason WaitingForFleetLimit, its place in the queue); places go to a ring that lost a member first, then moves, disruptions, rolls and defragmentation, the namespace with fewest in flight, the longest waiting. 0: no limit.")
	flag.BoolVar(&o.clientsOtherNamespaces, "allow-client-secrets-in-other-namespaces", false,
		"Let spec.clients[].namespace name a namespace other than the EtcdCluster's own (in the hub or a member cluster). Off: every EtcdCluster author reaches only the namespace they write the EtcdCluster in.")
	flag.Float64Var(&o.renewAfter, "member-token-renew-after", registration.DefaultRenewAfter,
		"Part of its life (0 to 1) after which the hub renews the token a registration Secret holds for a member cluster (written by `etcdfed cluster join`). The default, a third, lets the hub be away for two thirds of the token's life.")
	flag.BoolVar(&o.ambientStore, "allow-ambient-store-credentials", false,
		"Let an EtcdCluster's backup or restore store without credentialsSecretName use the hub's own cloud identity (environment, instance role, workload identity), and file:// stores use the hub's (and the member nodes') filesystem. Off: such stores are refused (BackupHealthy/SnapshotVerified False, reason ForbiddenByHubPolicy).")
	flag.Var(&o.sourceNamespaces, "allowed-restore-source-namespaces",
		"Namespaces (comma-separated, repeatable; * for all) whose EtcdClusters' snapshots an EtcdCluster of another namespace may restore with bootstrap.fromSnapshot.sourceCluster. Its own namespace is always allowed.")
	flag.Var(&o.imagePrefixes, "allowed-image-prefixes",
		"Prefixes (comma-separated, repeatable; * for any image) spec.image must start with. Default: etcd's releases, "+strings.Join(tenancy.DefaultImagePrefixes, " and ")+". An EtcdCluster that names another is refused (PolicyViolation).")
	flag.Var(&o.priorityClasses, "allowed-priority-classes",
		"PriorityClasses (comma-separated, repeatable; * for any) spec.podTemplate.priorityClassName may name. Default: none.")
	flag.Var(&o.tolerationKeys, "allowed-toleration-keys",
		"Taint keys (comma-separated, repeatable; * for any, and for a toleration without a key) spec.podTemplate.tolerations may tolerate. Default: none.")
	flag.Var(&o.podAnnotations, "allowed-pod-annotations",
		"Annotation keys, or prefixes ending in '/' or '.' (comma-separated, repeatable; * for any), spec.podTemplate.annotations may hold; they reach every member pod. Default: none (an EtcdCluster with another is refused, PolicyViolation).")
	flag.Var(&o.domains, "allowed-domains",
		"NAMESPACE=DOMAIN pairs (comma-separated, repeatable; NAMESPACE * for namespaces without their own; DOMAIN * for any): an EtcdCluster's spec.dns.domain must equal or lie inside a domain its namespace is given, or it is refused (PolicyViolation), and a ring refused so holds no domain against others. Default: none, every domain first come first served (a ring that has begun keeps its domain).")
	flag.BoolVar(&o.sharedCA, "allow-shared-ca", false,
		"Let EtcdClusters of different namespaces use the same CA (the same key in spec.tls.caSecretName). Off: the ring whose namespace came second is refused (PolicyViolation): the hub issues certificates from a ring's CA (its own root client, spec.clients), so a shared CA makes one namespace's certificates trusted by the other's rings.")
	flag.BoolVar(&o.allowLoopback, "allow-loopback-member-addresses", false,
		"Accept loopback addresses (127.0.0.0/8, ::1) in what spokes report (member addresses, DNS server addresses, gossip addresses). Only for a local environment where every pod runs on the loopback network.")
	flag.BoolVar(&o.unsafeKubeconfig, "allow-unsafe-kubeconfigs", false,
		"Engage member clusters whose kubeconfig Secret runs an exec or auth-provider plugin, skips TLS verification, talks plain http, or reads files of the hub's filesystem. Off: such a Secret is refused with an event on it and the reason in every EtcdCluster's Degraded condition.")
	flag.StringVar(&o.shardName, "shard", os.Getenv("ETCDFED_SHARD"),
		"Name of this hub's shard of the rings, when several hubs share the member clusters, spokes, gossip and DNS (env ETCDFED_SHARD): its leader-election Lease is etcdfed-hub-NAME. Without --shard-selector the shard owns the EtcdClusters labelled etcdfed.dev/shard=NAME; empty: one hub owns every ring.")
	flag.StringVar(&o.shardSelector, "shard-selector", os.Getenv("ETCDFED_SHARD_SELECTOR"),
		"Label selector over EtcdClusters (e.g. etcdfed.dev/shard=a, or team in (x,y)) choosing the rings this hub owns (env ETCDFED_SHARD_SELECTOR). The hub writes, deletes and releases nothing of another ring; change a ring's labels to move it to another shard. The selectors of the shards must not overlap.")
	flag.BoolVar(&o.fleetDuties, "fleet-duties", true,
		"Run the duties that concern every ring at once: the EtcdSpokes' gossip peers and key in the member clusters, and the registration Secrets' tokens and annotations. With shards, give them to one shard's hub (false on the others); both running them is harmless, none lets the registration tokens expire.")
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
	if o.workers < 1 {
		fmt.Fprintf(os.Stderr, "hub: --max-concurrent-reconciles %d: must be at least 1\n", o.workers)
		os.Exit(2)
	}
	if o.leaseStaleAfter < time.Second {
		fmt.Fprintf(os.Stderr, "hub: --lease-stale-after %s: must be at least 1s (several spoke Lease renewals)\n", o.leaseStaleAfter)
		os.Exit(2)
	}

	if o.renewAfter <= 0 || o.renewAfter > 1 {
		fmt.Fprintf(os.Stderr, "hub: --member-token-renew-after %g: must be above 0 and at most 1\n", o.renewAfter)
		os.Exit(2)
	}

	if o.nodeStaleAfter < time.Second {
		fmt.Fprintf(os.Stderr, "hub: --node-lease-stale-after %s: must be at least 1s (several node Lease renewals)\n", o.nodeStaleAfter)
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
	// Member-cluster caches: the ring namespace only, etcdfed's own
	// objects only, bounded (registry.MemberCacheOptions).
	memberCache := registry.MemberCacheOptions(scheme, o.ringNamespace, o.maxMemberObjects)
	provider := &registry.Provider{
		ClusterOptions: []cluster.Option{func(co *cluster.Options) { *co = memberCache }},
		RESTOptions:    []func(*rest.Config) error{func(c *rest.Config) error { c.Timeout = o.memberAPITimeout; return nil }},
		Log:            log.WithName("member-clusters"),
		// Only kubeconfig Secrets are checked: files are the operator's own.
		AllowUnsafeKubeconfigs: o.unsafeKubeconfig,
	}
	if len(o.memberFiles) > 0 {
		files := registry.Files{}
		for _, f := range o.memberFiles {
			name, path, ok := strings.Cut(f, "=")
			if !ok || name == "" || path == "" {
				return fmt.Errorf("--member-kubeconfig %q: want NAME=PATH", f)
			}
			if _, err := os.Stat(path); err != nil {
				return fmt.Errorf("--member-kubeconfig %s: %w", name, err)
			}
			files[name] = path
		}
		provider.Source = files
	}

	// The provider (passed hidden behind passiveProvider, so that the
	// manager does not start it among the leader's runnables) runs on
	// every replica: a standby engages the member clusters and opens the
	// informers the controllers watch (warm.go) like the leader, so that
	// it reconciles within a pass of taking the Lease instead of after a
	// cold start.
	readers, err := metricsserve.ParseReaders(o.metricsReaders)
	if err != nil {
		return fmt.Errorf("--metrics-readers: %w", err)
	}
	mgr, err := mcmanager.New(cfg, passiveProvider{provider}, manager.Options{
		Scheme:                 scheme,
		Metrics:                metricsserve.ReaderOptions(o.metricsAddr, o.metricsSecure, o.metricsCertDir, readers),
		HealthProbeBindAddress: o.probeAddr,
		LeaderElection:         o.leaderElect,
		// One Lease per shard: each shard's hub has its own leader.
		LeaderElectionID:        sh.Lease(),
		LeaderElectionNamespace: o.namespace,
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
		// other shards' rings when they read them (hub/shard).
		Cache: cache.Options{ByObject: map[client.Object]cache.ByObject{
			&corev1.Secret{}: {Namespaces: map[string]cache.Config{o.namespace: {}}},
		}},
	})
	if err != nil {
		return fmt.Errorf("create manager: %w", err)
	}
	if provider.Source == nil {
		provider.Source = registry.Secrets{Client: mgr.GetLocalManager().GetClient(), Namespace: o.namespace}
	}
	provider.Recorder = mgr.GetLocalManager().GetEventRecorder("etcdfed-hub-registry")
	reg := provider
	if err := mgr.GetLocalManager().Add(everyReplica{manager.RunnableFunc(func(ctx context.Context) error {
		return provider.Start(ctx, warmingAware{mgr})
	})}); err != nil {
		return fmt.Errorf("registry provider: %w", err)
	}
	if err := mgr.GetLocalManager().Add(everyReplica{manager.RunnableFunc(func(ctx context.Context) error {
		warm(ctx, mgr.GetLocalManager(), "hub", localKinds())
		return nil
	})}); err != nil {
		return fmt.Errorf("warm the hub cluster's informers: %w", err)
	}

	domains, err := tenancy.ParseDomains(o.domains)
	if err != nil {
		return fmt.Errorf("--allowed-domains: %w", err)
	}
	policy := tenancy.Policy{
		Domains:                 domains,
		SharedCA:                o.sharedCA,
		AmbientStoreCredentials: o.ambientStore,
		SourceNamespaces:        o.sourceNamespaces,
		ImagePrefixes:           o.imagePrefixes,
		PriorityClasses:         o.priorityClasses,
		TolerationKeys:          o.tolerationKeys,
		PodAnnotations:          o.podAnnotations,
	}
	sh.Export()
	tracker := liveness.NewTracker(nil)
	rec := &etcdcluster.Reconciler{
		Policy:                  policy,
		AllowLoopbackAddresses:  o.allowLoopback,
		Manager:                 mgr,
		Registry:                reg,
		Tracker:                 tracker,
		RingNamespace:           o.ringNamespace,
		LeaseStaleAfter:         o.leaseStaleAfter,
		NodeTracker:             liveness.NewTracker(nil),
		NodeStaleAfter:          o.nodeStaleAfter,
		Recorder:                mgr.GetLocalManager().GetEventRecorder("etcdfed-hub"),
		MaxConcurrentReconciles: o.workers,
		MaxFleetDisruptions:     o.fleetDisruptions,
		Owns:                    sh.Owns,
	}
	if err := rec.SetupWithManager(mgr); err != nil {
		return fmt.Errorf("EtcdCluster controller: %w", err)
	}
	// The controllers beside the EtcdCluster one read each ring before they
	// act on it: through shardReader, another shard's ring is NotFound to
	// them, which each takes as nothing to do (hub/shard).
	shardReader := shard.Reader{Reader: mgr.GetLocalManager().GetAPIReader(), Shard: sh}
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
	if !o.fleetDuties {
		log.Info("Leaving the fleet's duties (EtcdSpokes, registration Secrets) to another shard's hub", "shard", sh.String())
	} else if err := (&spokes.Reconciler{Manager: mgr, Registry: reg, RingNamespace: o.ringNamespace, HubNamespace: o.namespace, AllowLoopback: o.allowLoopback,
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
			Registry:   reg,
			Tracker:    tracker,
			StaleAfter: o.leaseStaleAfter,
			RenewAfter: o.renewAfter,
			Log:        log.WithName("registration"),
		}); err != nil {
			return fmt.Errorf("registration runner: %w", err)
		}
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

func envOr(key, def string) string {
	if v := os.Getenv(key); v != "" {
		return v
	}
	return def
}

// passiveProvider is the registry provider without its Start, which the
// multicluster manager would add as a leader-only runnable; run adds it
// as everyReplica instead.
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
