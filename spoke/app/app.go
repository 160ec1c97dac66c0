// Package app wires the spoke into one controller-runtime manager: the
// EtcdMember, EtcdDNSZone and EtcdSpoke reconcilers, the liveness Lease, the
// gossip agent and the embedded DNS server. cmd/spoke parses flags into
// Options and calls New and Start; tests do the same with their own rest
// configs.
//
// The manager's cache holds only the ring namespace (pods, PVCs, Services
// and PodDisruptionBudgets with etcdfed's managed-by label; Secrets;
// etcdfed objects) plus the Nodes, cluster-wide and read-only (their zone
// labels, and whether they are cordoned). The EtcdMember and EtcdSpoke
// reconcilers, the liveness Lease, gossip, every status write and the
// leader's pod label (LabelLeader, which the gossip Service selects) run
// on the elected leader only. Every replica serves DNS from zones it
// rebuilds from the EtcdDNSZone objects when it starts, and is ready only
// once they are loaded (spoke/dnszone).
//
// Gossip is the leader's alone: a gossip node names its member cluster,
// and two replicas of one cluster under the same name would take each
// other's place in every peer's view.
package app

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/netip"
	"os"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/client-go/kubernetes"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	etcdfedv1 "github.com/etcdfed/etcdfed/api/v1alpha1"
	"github.com/etcdfed/etcdfed/dnsprovider/embedded"
	"github.com/etcdfed/etcdfed/internal/leaderlock"
	"github.com/etcdfed/etcdfed/internal/metricsserve"
	"github.com/etcdfed/etcdfed/internal/version"
	"github.com/etcdfed/etcdfed/pkg/allowlist"
	"github.com/etcdfed/etcdfed/spoke/component/pod"
	"github.com/etcdfed/etcdfed/spoke/credential"
	"github.com/etcdfed/etcdfed/spoke/dnszone"
	"github.com/etcdfed/etcdfed/spoke/etcdlog"
	"github.com/etcdfed/etcdfed/spoke/etcdstatus"
	"github.com/etcdfed/etcdfed/spoke/gossip"
	"github.com/etcdfed/etcdfed/spoke/lease"
	"github.com/etcdfed/etcdfed/spoke/member"
	"github.com/etcdfed/etcdfed/spoke/netpolicy"
	"github.com/etcdfed/etcdfed/spoke/spokestatus"
)

// Options configure a spoke. DefaultOptions gives the flag defaults.
type Options struct {
	// Namespace is the ring namespace.
	Namespace string
	// ClusterName overrides EtcdSpoke spec.clusterName as the gossip name.
	ClusterName string
	// HelperImage runs the init containers of member pods (wait-dns,
	// prepare-data): an image with etcdfed-init on its PATH.
	HelperImage string
	// WaitDNSTimeout bounds one run of wait-dns.
	WaitDNSTimeout time.Duration
	// AllowedPodAnnotations are the keys, or prefixes ending in '/' or
	// '.', members' spec.podTemplate.annotations may hold in this member
	// cluster ("*": every key); a member asking for another gets PodReady
	// False, RefusedByPolicy, and nothing created or deleted
	// (member.PodPolicy).
	AllowedPodAnnotations []string
	// MemberStatusInterval is how often a running member's etcd view is
	// refreshed; EtcdStatusTimeout bounds one read.
	MemberStatusInterval time.Duration
	EtcdStatusTimeout    time.Duration
	// EtcdLogInterval is the least time between two reads of a member's
	// etcd log (pods/log, only while the member is not ready);
	// EtcdLogTimeout bounds one read.
	EtcdLogInterval time.Duration
	EtcdLogTimeout  time.Duration

	// DNSListen is the DNS server's ip:port (UDP and TCP); empty disables it.
	DNSListen string
	// DNSAdvertise are the host:port addresses published as dnsAddresses;
	// empty: the listen address when it names an IP.
	DNSAdvertise []string
	// DNSRateLimit limits the DNS server's UDP responses per client
	// prefix (embedded.RRLConfig); ResponsesPerSecond 0 turns it off.
	DNSRateLimit embedded.RRLConfig

	// Gossip configures the gossip agent; an empty BindAddr disables gossip.
	Gossip gossip.Config
	// GossipSeeds are joined besides EtcdSpoke spec.gossipPeers.
	GossipSeeds []string
	// GossipSecret names the Secret with the gossip key ("key", and keys
	// accepted beside it in "accept"): etcdfedv1.GossipSecretName, which the
	// hub writes. Empty runs gossip unencrypted.
	GossipSecret string

	// LeaseRenewInterval and LeaseDuration tune the liveness Lease.
	LeaseRenewInterval time.Duration
	LeaseDuration      time.Duration

	// LeaderElection, LeaderElectionID: the manager's leader election, with
	// a Lease of that name in the ring namespace.
	LeaderElection   bool
	LeaderElectionID string
	// Identity names this replica (Lease holder, the election Lease's
	// too); empty: POD_NAME or the host name (then controller-runtime
	// names it in the election Lease, with a random suffix).
	Identity string

	// HealthProbeBindAddress and MetricsBindAddress; "0" disables.
	HealthProbeBindAddress string
	MetricsBindAddress     string
	// MetricsSecure serves /metrics over TLS to authenticated and
	// authorized callers (internal/metricsserve); MetricsCertDir holds
	// its certificate (empty: self-signed).
	MetricsSecure  bool
	MetricsCertDir string

	// Log is the root logger; zero: ctrl.Log.
	Log logr.Logger
	// SkipControllerNameValidation lets tests run several spokes in one
	// process.
	SkipControllerNameValidation bool

	// MemberController, when set, is set up in place of the EtcdMember
	// reconciler (spoke/member), with the manager and the spoke's etcd
	// status reader: the simulated member clusters of the hub's scale
	// benchmarks (dev/simcluster) run everything else of the spoke as it
	// is and play the members without pods. cmd/spoke never sets it.
	MemberController func(mgr manager.Manager, etcd *etcdstatus.Reader) error
}

// reconcileTimeout bounds every reconcile of the spoke's controllers.
const reconcileTimeout = 30 * time.Second

// DefaultOptions returns the defaults of every option.
func DefaultOptions() Options {
	return Options{
		Namespace:              etcdfedv1.DefaultRingNamespace,
		HelperImage:            version.Image("etcdfed-init"),
		WaitDNSTimeout:         10 * time.Minute,
		AllowedPodAnnotations:  []string{allowlist.Any},
		MemberStatusInterval:   member.DefaultStatusInterval,
		EtcdStatusTimeout:      etcdstatus.DefaultTimeout,
		EtcdLogInterval:        etcdlog.DefaultInterval,
		EtcdLogTimeout:         etcdlog.DefaultTimeout,
		DNSListen:              "0.0.0.0:5353",
		DNSRateLimit:           DefaultDNSRateLimit(),
		Gossip:                 gossip.Config{BindAddr: "0.0.0.0:7946", Profile: gossip.ProfileWAN},
		GossipSecret:           etcdfedv1.GossipSecretName,
		LeaseRenewInterval:     lease.DefaultRenewInterval,
		LeaseDuration:          lease.DefaultDuration,
		LeaderElection:         true,
		LeaderElectionID:       "etcdfed-spoke-leader",
		HealthProbeBindAddress: ":8081",
		MetricsBindAddress:     ":8080",
		MetricsSecure:          true,
	}
}

// DefaultDNSRateLimit is the spoke DNS server's response-rate limit: 200
// responses per second per client /24 (IPv6 /56), bursts of 400, every
// second response over it sent truncated; loopback exempt. A resolver
// that asks for a ring's few names (kube-dns caches them for their TTL)
// stays far below it; a flood with a forged source is cut to it.
func DefaultDNSRateLimit() embedded.RRLConfig {
	return embedded.RRLConfig{ResponsesPerSecond: 200, Slip: 2,
		Exempt: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8"), netip.MustParsePrefix("::1/128")}}
}

// Scheme returns a scheme with the Kubernetes and etcdfed types.
func Scheme() *runtime.Scheme {
	s := runtime.NewScheme()
	utilruntime.Must(clientgoscheme.AddToScheme(s))
	utilruntime.Must(etcdfedv1.AddToScheme(s))
	return s
}

// Spoke is a configured spoke, ready to Start.
type Spoke struct {
	Manager manager.Manager
	// DNS is the embedded DNS server (nil when disabled), already listening.
	DNS *embedded.Server
	// Gossip is the gossip agent (nil when disabled).
	Gossip *gossip.Agent

	etcd  *etcdstatus.Reader
	zones *dnszone.Reconciler
	log   logr.Logger
}

// New builds the spoke. It binds the DNS server's sockets right away, so
// that the advertised address is known (port 0 picks a free port); Start
// serves and stops them.
func New(cfg *rest.Config, o Options) (*Spoke, error) {
	if o.Namespace == "" {
		return nil, errors.New("spoke: namespace is empty")
	}
	log := o.Log
	if log.GetSink() == nil {
		log = ctrl.Log.WithName("spoke")
	}
	identity := o.Identity
	if identity == "" {
		identity = os.Getenv(leaderlock.PodNameEnv)
	}
	// A replica named (a pod, or --identity) holds the election Lease under
	// that name, so that a spoke whose container restarted leads again at
	// once; under the host name, which several replicas of one machine
	// share, controller-runtime names it afresh.
	var lock resourcelock.Interface
	if identity != "" && o.LeaderElection {
		var err error
		if lock, err = leaderlock.New(cfg, o.Namespace, o.LeaderElectionID, identity); err != nil {
			return nil, fmt.Errorf("spoke: %w", err)
		}
	}
	if identity == "" {
		h, _ := os.Hostname()
		identity = h
	}

	managed := labels.SelectorFromSet(labels.Set{etcdfedv1.LabelManagedBy: etcdfedv1.ManagedByValue})
	mopts := ctrl.Options{
		Scheme: Scheme(),
		Logger: log,
		Cache: cache.Options{
			DefaultNamespaces: map[string]cache.Config{o.Namespace: {}},
			ByObject: map[client.Object]cache.ByObject{
				&corev1.Pod{}:                   {Label: managed},
				&corev1.PersistentVolumeClaim{}: {Label: managed},
				&corev1.Service{}:               {Label: managed},
				&policyv1.PodDisruptionBudget{}: {Label: managed},
				&networkingv1.NetworkPolicy{}:   {Label: managed},
			},
		},
		LeaderElection:                      o.LeaderElection,
		LeaderElectionID:                    o.LeaderElectionID,
		LeaderElectionNamespace:             o.Namespace,
		LeaderElectionResourceLockInterface: lock,
		LeaderElectionReleaseOnCancel:       true,
		HealthProbeBindAddress:              o.HealthProbeBindAddress,
		Metrics:                             metricsserve.Options(o.MetricsBindAddress, o.MetricsSecure, o.MetricsCertDir),
		// Every reconcile has a deadline: an apiserver that stops
		// answering fails a pass (retried), never parks a worker.
		Controller: config.Controller{SkipNameValidation: ptr.To(o.SkipControllerNameValidation), ReconciliationTimeout: reconcileTimeout},
	}
	mgr, err := ctrl.NewManager(cfg, mopts)
	if err != nil {
		return nil, fmt.Errorf("spoke: new manager: %w", err)
	}
	s := &Spoke{Manager: mgr, log: log, etcd: &etcdstatus.Reader{Timeout: o.EtcdStatusTimeout}}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("spoke: clientset: %w", err)
	}

	ctx := context.Background()
	if o.MemberController != nil {
		if err := o.MemberController(mgr, s.etcd); err != nil {
			return nil, fmt.Errorf("spoke: EtcdMember controller: %w", err)
		}
	} else if err := (&member.Reconciler{
		Client:         mgr.GetClient(),
		APIReader:      mgr.GetAPIReader(),
		Scheme:         mgr.GetScheme(),
		Recorder:       mgr.GetEventRecorder("etcdfed-spoke"),
		Etcd:           s.etcd,
		HelperImage:    o.HelperImage,
		WaitDNSTimeout: o.WaitDNSTimeout,
		PodPolicy:      member.PodPolicy{Annotations: o.AllowedPodAnnotations},
		StatusInterval: o.MemberStatusInterval,
		Logs: &etcdlog.Reader{Pods: cs.CoreV1(), Container: pod.ContainerEtcd,
			Interval: o.EtcdLogInterval, Timeout: o.EtcdLogTimeout},
	}).SetupWithManager(ctx, mgr); err != nil {
		return nil, fmt.Errorf("spoke: EtcdMember controller: %w", err)
	}

	if err := (&netpolicy.Reconciler{Client: mgr.GetClient(), Scheme: mgr.GetScheme()}).SetupWithManager(mgr); err != nil {
		return nil, fmt.Errorf("spoke: NetworkPolicy controller: %w", err)
	}
	if err := (&credential.Reconciler{Client: mgr.GetClient(), Namespace: o.Namespace}).SetupWithManager(mgr); err != nil {
		return nil, fmt.Errorf("spoke: hub credential controller: %w", err)
	}

	var dnsAddrs []string
	if o.DNSListen != "" {
		// Held until the zones are rebuilt from the EtcdDNSZone objects
		// (dnszone.Reconciler.Load): a restarted replica answers nothing
		// rather than REFUSED while the other replica serves.
		srv, err := embedded.New(embedded.Config{Addr: o.DNSListen, RRL: o.DNSRateLimit, Log: log.WithName("dns"), Hold: true})
		if err != nil {
			return nil, fmt.Errorf("spoke: DNS server: %w", err)
		}
		if err := srv.Start(); err != nil {
			return nil, fmt.Errorf("spoke: DNS server: %w", err)
		}
		s.DNS = srv
		if err := ctrlmetrics.Registry.Register(srv.Collector()); err != nil {
			var are prometheus.AlreadyRegisteredError
			if !errors.As(err, &are) {
				_ = srv.Stop()
				return nil, fmt.Errorf("spoke: DNS metrics: %w", err)
			}
		}
		dnsAddrs = o.DNSAdvertise
		if len(dnsAddrs) == 0 {
			if a := srv.Addr(); !a.Addr().IsUnspecified() {
				dnsAddrs = []string{a.String()}
			}
		}
		zones := &dnszone.Reconciler{Client: mgr.GetClient(), Server: srv, Addresses: dnsAddrs}
		if o.LeaderElection {
			zones.Elected = mgr.Elected()
		}
		s.zones = zones
		if err := zones.SetupWithManager(mgr); err != nil {
			_ = srv.Stop()
			return nil, fmt.Errorf("spoke: EtcdDNSZone controller: %w", err)
		}
	}

	if o.Gossip.BindAddr != "" {
		gc := o.Gossip
		gc.Log = log.WithName("gossip")
		if _, err := gc.MemberlistConfig(); err != nil {
			s.stopDNS()
			return nil, err
		}
		s.Gossip = gossip.New(gc)
	}
	if err := (&spokestatus.Reconciler{
		Client:       mgr.GetClient(),
		APIReader:    mgr.GetAPIReader(),
		Namespace:    o.Namespace,
		ClusterName:  o.ClusterName,
		Gossip:       s.Gossip,
		GossipSecret: o.GossipSecret,
		GossipSeeds:  o.GossipSeeds,
		DNSAddresses: dnsAddrs,
		Version:      version.String(),
	}).SetupWithManager(mgr); err != nil {
		s.stopDNS()
		return nil, fmt.Errorf("spoke: EtcdSpoke controller: %w", err)
	}

	if err := mgr.Add(&lease.Renewer{
		Client:    mgr.GetClient(),
		Reader:    mgr.GetAPIReader(),
		Namespace: o.Namespace,
		Holder:    identity,
		Interval:  o.LeaseRenewInterval,
		Duration:  o.LeaseDuration,
		Log:       log.WithName("lease"),
	}); err != nil {
		s.stopDNS()
		return nil, fmt.Errorf("spoke: lease: %w", err)
	}

	// In a pod with leader election: the gossip Service follows the leader
	// (LabelLeader).
	if pod := os.Getenv("POD_NAME"); pod != "" && o.LeaderElection {
		for _, leader := range []bool{false, true} {
			if err := mgr.Add(&leaderLabel{c: mgr.GetClient(), reader: mgr.GetAPIReader(), namespace: o.Namespace,
				pod: pod, leader: leader, log: log.WithName("leader-label")}); err != nil {
				s.stopDNS()
				return nil, fmt.Errorf("spoke: leader label: %w", err)
			}
		}
	}

	if err := mgr.AddHealthzCheck("ping", healthz.Ping); err != nil {
		s.stopDNS()
		return nil, err
	}
	if err := mgr.AddReadyzCheck("cache", func(req *http.Request) error {
		if !mgr.GetCache().WaitForCacheSync(req.Context()) {
			return errors.New("cache not synced")
		}
		return nil
	}); err != nil {
		s.stopDNS()
		return nil, err
	}
	if s.DNS != nil {
		if err := mgr.AddReadyzCheck("dns", func(*http.Request) error {
			if s.DNS.Addr() == (netip.AddrPort{}) {
				return errors.New("DNS server not listening")
			}
			if !s.zones.Loaded() || !s.DNS.Serving() {
				return errors.New("DNS zones not loaded yet")
			}
			return nil
		}); err != nil {
			s.stopDNS()
			return nil, err
		}
	}
	log.Info("Spoke configured", "namespace", o.Namespace, "identity", identity, "dns", dnsAddrs,
		"gossipBind", o.Gossip.BindAddr, "gossipProfile", o.Gossip.Profile, "leaderElection", o.LeaderElection, "version", version.String())
	return s, nil
}

func (s *Spoke) stopDNS() {
	if s.DNS != nil {
		_ = s.DNS.Stop()
	}
}

// Start runs the manager until ctx ends, then stops gossip and the DNS
// server.
func (s *Spoke) Start(ctx context.Context) error {
	defer s.etcd.Close()
	defer s.stopDNS()
	defer func() {
		if s.Gossip != nil {
			s.Gossip.Stop()
		}
	}()
	if err := s.Manager.Start(ctx); err != nil {
		return fmt.Errorf("spoke: %w", err)
	}
	return nil
}
