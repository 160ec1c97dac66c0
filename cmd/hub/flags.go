package main

import (
	"flag"
	"fmt"
	"os"
	"strings"
	"time"

	etcdfedv1 "github.com/etcdfed/etcdfed/api/v1alpha1"
	"github.com/etcdfed/etcdfed/hub/backup"
	"github.com/etcdfed/etcdfed/hub/etcdcluster"
	"github.com/etcdfed/etcdfed/hub/registration"
	"github.com/etcdfed/etcdfed/hub/registry"
	"github.com/etcdfed/etcdfed/hub/restore"
	"github.com/etcdfed/etcdfed/hub/tenancy"
	"github.com/etcdfed/etcdfed/internal/leaderlock"
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
	leaderIdentity   string
	metricsAddr      string
	metricsSecure    bool
	metricsCertDir   string
	metricsReaders   commaList
	probeAddr        string
	pprofAddr        string
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

// bind defines the hub's flags on fs.
func (o *options) bind(fs *flag.FlagSet) {
	fs.StringVar(&o.namespace, "namespace", envOr("ETCDFED_NAMESPACE", etcdfedv1.DefaultRingNamespace),
		"Hub namespace holding member-cluster kubeconfig Secrets and the leader-election Lease (env ETCDFED_NAMESPACE).")
	fs.StringVar(&o.ringNamespace, "ring-namespace", envOr("ETCDFED_RING_NAMESPACE", etcdfedv1.DefaultRingNamespace),
		"Namespace of etcdfed objects in every member cluster (env ETCDFED_RING_NAMESPACE).")
	fs.Var(&o.memberFiles, "member-kubeconfig",
		"NAME=PATH of a member cluster's kubeconfig file; repeat per cluster. When given, kubeconfig Secrets are not used (local use).")
	fs.BoolVar(&o.leaderElect, "leader-elect", true, "Elect a leader among hub replicas with a Lease in --namespace.")
	fs.StringVar(&o.leaderIdentity, "leader-election-identity", os.Getenv(leaderlock.PodNameEnv),
		"This replica's name in the leader-election Lease (env POD_NAME, the pod's name from the downward API). A hub restarted under the name that holds the Lease leads at once instead of waiting for it to expire: the kubelet restarts a container only after its process exited. It must name one live replica at a time; empty: the host name and a random suffix, so a restarted hub waits the Lease out (15 s).")
	fs.StringVar(&o.metricsAddr, "metrics-bind-address", ":8080", "Address of the Prometheus metrics endpoint; 0 disables it.")
	fs.BoolVar(&o.metricsSecure, "metrics-secure", true, "Serve /metrics over TLS to callers whose bearer token the hub cluster's apiserver authenticates (TokenReview) and --metrics-readers names. false: plain HTTP to anyone.")
	fs.Var(&o.metricsReaders, "metrics-readers", "Who may read /metrics (with --metrics-secure): NAMESPACE/NAME (a ServiceAccount), user:NAME or group:NAME, comma-separated, repeatable; none: every caller is refused. The hub never asks the apiserver who may (no SubjectAccessReview).")
	fs.StringVar(&o.metricsCertDir, "metrics-cert-dir", "", "Directory with tls.crt and tls.key for /metrics; empty: a self-signed certificate made at start.")
	fs.StringVar(&o.probeAddr, "health-probe-bind-address", ":8081", "Address of /healthz and /readyz; 0 disables it.")
	fs.StringVar(&o.pprofAddr, "pprof-bind-address", "", "Address of Go's profiles (/debug/pprof/, plain HTTP, no authentication: bind it to loopback or a port nothing else reaches); empty or 0: off. For finding where a large fleet's CPU goes.")
	fs.DurationVar(&o.leaseStaleAfter, "lease-stale-after", etcdcluster.DefaultLeaseStaleAfter,
		"A spoke Lease not renewed for this long, on the hub's clock, makes its member cluster unknown to the hub (spokes renew every 1s by default; keep this at least 3 renewals).")
	fs.DurationVar(&o.nodeStaleAfter, "node-lease-stale-after", etcdcluster.DefaultNodeStaleAfter,
		"A node Lease (kube-node-lease) not renewed for this long, on the hub's clock, makes the node stale; a zone of a multi-zone member cluster whose nodes are all stale, and whose peers in other zones lost it, is failed after spec.failurePolicy.zoneGracePeriod. Keep it at least two kubelet renewals (kubelet renews every quarter of --node-lease-duration-seconds, 10s by default).")
	fs.DurationVar(&o.memberAPITimeout, "member-api-timeout", 15*time.Second, "Timeout of each request to a member cluster's apiserver.")
	fs.StringVar(&o.backupScratchDir, "backup-scratch-dir", os.TempDir(),
		"Directory where snapshots are held between the stream from a member and the upload; it needs room for the largest database.")
	fs.IntVar(&o.maxBackups, "max-concurrent-backups", 2, "Backups (of different EtcdClusters) taken at once; one namespace runs one at a time, so a tenant with a slow store holds one of them.")
	fs.DurationVar(&o.maxBackupTime, "max-backup-timeout", backup.DefaultMaxTimeout,
		"The longest one backup may take, whatever its spec.backup.timeout (up to 24h) says: a backup holds one of --max-concurrent-backups while it runs, so a tenant's slow store holds it no longer than this.")
	fs.IntVar(&o.maxRestores, "max-concurrent-restores", restore.DefaultMaxConcurrentRestores,
		"Snapshots of bootstrap.fromSnapshot (and recoveries from a backup) resolved at once; one namespace resolves one at a time, so a tenant with a slow store holds one of them.")
	fs.IntVar(&o.maxMemberObjects, "max-member-cluster-objects", registry.DefaultMaxObjects,
		"Objects of each kind (EtcdMembers, EtcdDNSZones, Secrets, Leases, Nodes) the hub caches of one member cluster at most; a member cluster holding more (a hostile one can label any number as etcdfed's) has the rest ignored, with an error logged. Raise it above the EtcdMembers one member cluster hosts.")
	fs.IntVar(&o.workers, "max-concurrent-reconciles", etcdcluster.DefaultMaxConcurrentReconciles,
		"EtcdClusters reconciled at once (passes of one EtcdCluster never overlap). Passes mostly wait on etcd and apiservers; raise it for hundreds of rings, so that every ring is visited soon after a hub restart.")
	fs.IntVar(&o.fleetDisruptions, "max-fleet-disruptions", 0,
		"Rings that may have a disruptive operation (Replace, Move, Roll, Disrupt, Defrag) in flight at once, across every EtcdCluster of this hub (of its shard, with --shard: each shard has its own limit): a version roll or the evacuation of a lost member cluster over hundreds of rings restarts or replaces this many members at a time. A ring over the limit waits (Progressing=False, reason WaitingForFleetLimit, its place in the queue); places go to a ring that lost a member first, then moves, disruptions, rolls and defragmentation, the namespace with fewest in flight, the longest waiting. 0: no limit.")
	fs.BoolVar(&o.clientsOtherNamespaces, "allow-client-secrets-in-other-namespaces", false,
		"Let spec.clients[].namespace name a namespace other than the EtcdCluster's own (in the hub or a member cluster). Off: every EtcdCluster author reaches only the namespace they write the EtcdCluster in.")
	fs.Float64Var(&o.renewAfter, "member-token-renew-after", registration.DefaultRenewAfter,
		"Part of its life (0 to 1) after which the hub renews the token a registration Secret holds for a member cluster (written by `etcdfed cluster join`). The default, a third, lets the hub be away for two thirds of the token's life.")
	fs.BoolVar(&o.ambientStore, "allow-ambient-store-credentials", false,
		"Let an EtcdCluster's backup or restore store without credentialsSecretName use the hub's own cloud identity (environment, instance role, workload identity), and file:// stores use the hub's (and the member nodes') filesystem. Off: such stores are refused (BackupHealthy/SnapshotVerified False, reason ForbiddenByHubPolicy).")
	fs.Var(&o.sourceNamespaces, "allowed-restore-source-namespaces",
		"Namespaces (comma-separated, repeatable; * for all) whose EtcdClusters' snapshots an EtcdCluster of another namespace may restore with bootstrap.fromSnapshot.sourceCluster. Its own namespace is always allowed.")
	fs.Var(&o.imagePrefixes, "allowed-image-prefixes",
		"Prefixes (comma-separated, repeatable; * for any image) spec.image must start with. Default: etcd's releases, "+strings.Join(tenancy.DefaultImagePrefixes, " and ")+". An EtcdCluster that names another is refused (PolicyViolation).")
	fs.Var(&o.priorityClasses, "allowed-priority-classes",
		"PriorityClasses (comma-separated, repeatable; * for any) spec.podTemplate.priorityClassName may name. Default: none.")
	fs.Var(&o.tolerationKeys, "allowed-toleration-keys",
		"Taint keys (comma-separated, repeatable; * for any, and for a toleration without a key) spec.podTemplate.tolerations may tolerate. Default: none.")
	fs.Var(&o.podAnnotations, "allowed-pod-annotations",
		"Annotation keys, or prefixes ending in '/' or '.' (comma-separated, repeatable; * for any), spec.podTemplate.annotations may hold; they reach every member pod. Default: none (an EtcdCluster with another is refused, PolicyViolation).")
	fs.Var(&o.domains, "allowed-domains",
		"NAMESPACE=DOMAIN pairs (comma-separated, repeatable; NAMESPACE * for namespaces without their own; DOMAIN * for any): an EtcdCluster's spec.dns.domain must equal or lie inside a domain its namespace is given, or it is refused (PolicyViolation), and a ring refused so holds no domain against others. Default: none, every domain first come first served (a ring that has begun keeps its domain).")
	fs.BoolVar(&o.sharedCA, "allow-shared-ca", false,
		"Let EtcdClusters of different namespaces use the same CA (the same key in spec.tls.caSecretName). Off: the ring whose namespace came second is refused (PolicyViolation): the hub issues certificates from a ring's CA (its own root client, spec.clients), so a shared CA makes one namespace's certificates trusted by the other's rings.")
	fs.BoolVar(&o.allowLoopback, "allow-loopback-member-addresses", false,
		"Accept loopback addresses (127.0.0.0/8, ::1) in what spokes report (member addresses, DNS server addresses, gossip addresses). Only for a local environment where every pod runs on the loopback network.")
	fs.BoolVar(&o.unsafeKubeconfig, "allow-unsafe-kubeconfigs", false,
		"Engage member clusters whose kubeconfig Secret runs an exec or auth-provider plugin, skips TLS verification, talks plain http, or reads files of the hub's filesystem. Off: such a Secret is refused with an event on it and the reason in every EtcdCluster's Degraded condition.")
	fs.StringVar(&o.shardName, "shard", os.Getenv("ETCDFED_SHARD"),
		"Name of this hub's shard of the rings, when several hubs share the member clusters, spokes, gossip and DNS (env ETCDFED_SHARD): its leader-election Lease is etcdfed-hub-NAME. Without --shard-selector the shard owns the EtcdClusters labelled etcdfed.dev/shard=NAME; empty: one hub owns every ring.")
	fs.StringVar(&o.shardSelector, "shard-selector", os.Getenv("ETCDFED_SHARD_SELECTOR"),
		"Label selector over EtcdClusters (e.g. etcdfed.dev/shard=a, or team in (x,y)) choosing the rings this hub owns (env ETCDFED_SHARD_SELECTOR). The hub writes, deletes and releases nothing of another ring; change a ring's labels to move it to another shard. The selectors of the shards must not overlap.")
	fs.BoolVar(&o.fleetDuties, "fleet-duties", true,
		"Run the duties that concern every ring at once: the EtcdSpokes' gossip peers and key in the member clusters, and the registration Secrets' tokens and annotations. With shards, give them to one shard's hub (false on the others); both running them is harmless, none lets the registration tokens expire.")
}

// check refuses flag values the hub cannot run with.
func (o *options) check() error {
	if o.workers < 1 {
		return fmt.Errorf("--max-concurrent-reconciles %d: must be at least 1", o.workers)
	}
	if o.leaseStaleAfter < time.Second {
		return fmt.Errorf("--lease-stale-after %s: must be at least 1s (several spoke Lease renewals)", o.leaseStaleAfter)
	}
	if o.renewAfter <= 0 || o.renewAfter > 1 {
		return fmt.Errorf("--member-token-renew-after %g: must be above 0 and at most 1", o.renewAfter)
	}
	if o.nodeStaleAfter < time.Second {
		return fmt.Errorf("--node-lease-stale-after %s: must be at least 1s (several node Lease renewals)", o.nodeStaleAfter)
	}
	return nil
}
