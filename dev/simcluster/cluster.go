package simcluster

import (
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"net/netip"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	etcdfedv1 "github.com/etcdfed/etcdfed/api/v1alpha1"
	"github.com/etcdfed/etcdfed/spoke/component/pod"
	"github.com/etcdfed/etcdfed/spoke/etcdlog"
	"github.com/etcdfed/etcdfed/spoke/member"

	"github.com/etcdfed/etcdfed/cli/install"
	"github.com/etcdfed/etcdfed/spoke/app"
	"github.com/etcdfed/etcdfed/spoke/etcdstatus"
	"github.com/etcdfed/etcdfed/spoke/gossip"
	"sigs.k8s.io/controller-runtime/pkg/manager"
)

// Zone is one zone of a simulated cluster: the members placed there get
// addresses from its block (hosts 254 down to FirstHost of the /24; the
// node agent's real pods take theirs from FirstHost up).
type Zone struct {
	Name string
	CIDR netip.Prefix
}

// FirstHost is the first host of a zone's block given to members (the
// local environment's pod range starts there).
const FirstHost = 10

// Config is one simulated member cluster.
type Config struct {
	// Name is the member cluster's name as registered with the hub.
	Name string
	// REST reaches its apiserver.
	REST *rest.Config
	// Namespace is the ring namespace (default etcdfed-system).
	Namespace string
	// DNSListen, GossipBind are the spoke's DNS and gossip addresses
	// (the local environment reserves them per cluster); GossipSeeds the
	// other spokes'.
	DNSListen   string
	GossipBind  string
	GossipSeeds []string
	// Zones are the cluster's zones and their address blocks.
	Zones []Zone
	// StatusInterval is how often a running member's etcd view is read
	// (default the real spoke's, 10 s).
	StatusInterval time.Duration
	// Real selects the EtcdMembers this cluster runs for real: the real
	// spoke's EtcdMember reconciler (spoke/member) makes their volume,
	// Service and pod, which the environment's node agent runs with real
	// etcd; every other EtcdMember is simulated. Nil: all simulated. So
	// a real ring and simulated ones share member clusters.
	Real func(*etcdfedv1.EtcdMember) bool
	Log  logr.Logger
}

// Cluster is a running simulated member cluster's spoke.
type Cluster struct {
	cfg    Config
	fleet  *Fleet
	spoke  *app.Spoke
	rec    *memberReconciler
	cancel context.CancelFunc
	done   chan error

	mu      sync.Mutex
	lost    bool
	stopErr error
}

// Start runs the simulated spoke of one member cluster until Lose or Stop.
func Start(ctx context.Context, fleet *Fleet, cfg Config) (*Cluster, error) {
	if cfg.Namespace == "" {
		cfg.Namespace = "etcdfed-system"
	}
	if len(cfg.Zones) == 0 {
		return nil, errors.New("simcluster: a cluster needs at least one zone")
	}
	if cfg.Log.GetSink() == nil {
		cfg.Log = logr.Discard()
	}
	c := &Cluster{cfg: cfg, fleet: fleet, done: make(chan error, 1)}
	o := app.DefaultOptions()
	o.Namespace = cfg.Namespace
	o.ClusterName = cfg.Name
	o.DNSListen = cfg.DNSListen
	o.Gossip = gossip.Config{BindAddr: cfg.GossipBind, Profile: gossip.ProfileLocal}
	o.GossipSeeds = cfg.GossipSeeds
	o.GossipSecret = install.GossipSecret
	o.LeaderElection = false
	o.Identity = "simspoke-" + cfg.Name
	o.HealthProbeBindAddress, o.MetricsBindAddress, o.MetricsSecure = "0", "0", false
	o.SkipControllerNameValidation = true
	o.Log = cfg.Log.WithName(cfg.Name)
	o.MemberController = func(mgr manager.Manager, etcd *etcdstatus.Reader) error {
		c.rec = newMemberReconciler(c, mgr, etcd)
		if err := c.rec.setup(mgr); err != nil {
			return err
		}
		if cfg.Real == nil {
			return nil
		}
		cs, err := kubernetes.NewForConfig(cfg.REST)
		if err != nil {
			return fmt.Errorf("clientset: %w", err)
		}
		real := cfg.Real
		onlyReal := predicate.NewPredicateFuncs(func(o client.Object) bool {
			m, ok := o.(*etcdfedv1.EtcdMember)
			return !ok || real(m)
		})
		// The event filter drops the simulated members' own events; Runs
		// the requests other objects map to them (a member certificate
		// Secret the hub rewrote, a node): the real reconciler once took
		// a simulated member for its own, found no PVC for the volume
		// its status names, and reported the volume lost.
		return (&member.Reconciler{
			Runs:   real,
			Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(), Scheme: mgr.GetScheme(),
			Recorder: mgr.GetEventRecorder("etcdfed-spoke"), Etcd: etcd,
			HelperImage: o.HelperImage, WaitDNSTimeout: o.WaitDNSTimeout, StatusInterval: o.MemberStatusInterval,
			Logs: &etcdlog.Reader{Pods: cs.CoreV1(), Container: pod.ContainerEtcd, Interval: o.EtcdLogInterval, Timeout: o.EtcdLogTimeout},
		}).SetupWithManager(context.Background(), mgr, func(b *builder.Builder) { b.WithEventFilter(onlyReal) })
	}
	s, err := app.New(cfg.REST, o)
	if err != nil {
		return nil, fmt.Errorf("simcluster %s: %w", cfg.Name, err)
	}
	c.spoke = s
	rctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	c.cancel = cancel
	go func() { c.done <- s.Start(rctx) }()
	return c, nil
}

// Name is the member cluster's name.
func (c *Cluster) Name() string { return c.cfg.Name }

// Hosted is the number of members whose process runs here.
func (c *Cluster) Hosted() int { return c.rec.runningCount() }

// Lose fails the cluster as a power loss does: every member it hosts
// stops, the spoke stops at once (no gossip leave, no more Lease
// renewals, no DNS answers). The caller stops the apiserver.
func (c *Cluster) Lose() {
	c.mu.Lock()
	if c.lost {
		c.mu.Unlock()
		return
	}
	c.lost = true
	c.mu.Unlock()
	c.rec.stopAll()
	c.cancel()
	if err := <-c.done; err != nil && !errors.Is(err, context.Canceled) {
		c.mu.Lock()
		c.stopErr = err
		c.mu.Unlock()
	}
}

// StopErr is the error the simulated spoke stopped with when it was lost,
// other than its cancellation (nil while it runs).
func (c *Cluster) StopErr() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.stopErr
}

// Stop stops the spoke and every member it hosts (the end of a test).
func (c *Cluster) Stop() { c.Lose() }

func certPool(ca []byte) (*x509.CertPool, error) {
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(ca) {
		return nil, errors.New("ca.crt holds no certificate")
	}
	return pool, nil
}
