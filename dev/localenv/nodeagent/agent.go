package nodeagent

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"sort"
	"sync"
	"syscall"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
)

// Labels and names the agent uses.
const (
	// ZoneLabel is the well-known zone label of nodes.
	ZoneLabel = corev1.LabelTopologyZone
	// LocalNodeLabel marks nodes run by a node agent.
	LocalNodeLabel = "node.etcdfed.dev/local"
	// DefaultProvisioner is the provisioner name of the agent's volumes.
	DefaultProvisioner = "etcdfed.dev/local-dir"
	// DefaultStorageClass is the default StorageClass the agent creates.
	DefaultStorageClass = "standard"
	// DNSServersEnv is the variable that points a process's resolver at the
	// cluster DNS (see internal/resolverenv).
	DNSServersEnv = "ETCDFED_DNS_SERVERS"
	// KubeletVersion is what the nodes report.
	KubeletVersion = "v1.36.3-etcdfed-local"
)

// PodNetwork gives pods their own source address.
type PodNetwork interface {
	// AttachPod makes connections from processes in cgroup (a directory)
	// come from ip. It is called before the pod's first process starts.
	AttachPod(ip netip.Addr, cgroup string) error
	// DetachPod undoes AttachPod once the pod's processes are gone.
	DetachPod(ip netip.Addr, cgroup string)
}

// Node is one node the agent registers and runs pods on.
type Node struct {
	Name string
	Zone string
	// IP is the node's InternalIP and the pods' host IP.
	IP netip.Addr
	// PodIPs is where pod IPs come from. Nodes may share a range.
	PodIPs IPRange
	// Labels are added to the node's labels.
	Labels map[string]string
}

// Config configures an Agent.
type Config struct {
	// ClusterName names the member cluster in logs and process names.
	ClusterName string
	// REST is the admin config of the member cluster's apiserver.
	REST *rest.Config
	// Nodes are the nodes this agent registers and runs.
	Nodes []Node
	// BinDir holds the binaries containers run (etcd, etcdctl, etcdfed...).
	BinDir string
	// StateDir holds volumes/ (provisioned PVs), pods/ (per-pod volume
	// directories) and logs/ (container output).
	StateDir string
	// PIDDir receives one pid file per running container; "" means
	// StateDir/pids.
	PIDDir string
	// DNSServers are the cluster DNS servers (host:port) given to every
	// process as ETCDFED_DNS_SERVERS.
	DNSServers []string
	// Cgroup returns the cgroup v2 directory of a zone; each pod's
	// processes start in a cgroup of their own below it. Nil or "" means no
	// cgroups.
	Cgroup func(zone string) string
	// Network, when set, is told when a pod's address and cgroup come and
	// go, so that it can make the pod's connections come from its address
	// (on loopback they would come from 127.0.0.1). Needs Cgroup.
	Network PodNetwork
	// Mark, when not 0, is set (SO_MARK) on the agent's own connections to
	// the apiserver and on probes, so partition rules can exempt them: a
	// kubelet sits inside its zone and keeps reaching its pods and its
	// control plane.
	Mark uint32
	// BackoffBase and BackoffMax shape the restart back-off of crashing
	// containers: restarts wait 0, base, 2*base, ... up to max. Defaults
	// are kubelet's, 10s and 5m.
	BackoffBase, BackoffMax time.Duration
	// HeartbeatInterval is how often node status is renewed; default 20s.
	HeartbeatInterval time.Duration
	// NodeLeaseDuration is the duration of the node Leases in
	// kube-node-lease, renewed every quarter of it as kubelet does;
	// default 40s (kubelet's).
	NodeLeaseDuration time.Duration
	// ShutdownGrace caps the termination grace when the agent itself stops
	// (not when a pod is deleted); default 10s.
	ShutdownGrace time.Duration
	// StorageClassName and Provisioner name the default StorageClass the
	// agent creates and the volumes it provisions.
	StorageClassName, Provisioner string
	// ExtraEnv is added to every process's environment before the pod's
	// own variables.
	ExtraEnv []string
	// Kubelet, when set, makes the agent serve container logs (pods/log)
	// on every node IP, as kubelet does.
	Kubelet *KubeletServing
	// Log receives the agent's log.
	Log logr.Logger
}

type nodeState struct {
	Node
	failed bool
	// leasesStopped: the node's Lease is not renewed (StopNodeLeases).
	leasesStopped bool
}

// Agent runs the nodes of one member cluster. Create it with New, run it
// with Run.
type Agent struct {
	cfg Config
	log logr.Logger
	cs  kubernetes.Interface

	pods  corelisters.PodLister
	pvcs  corelisters.PersistentVolumeClaimLister
	pvs   corelisters.PersistentVolumeLister
	queue workqueue.TypedRateLimitingInterface[string]

	mu      sync.Mutex
	nodes   map[string]*nodeState
	workers map[types.UID]*podWorker
	ips     map[netip.Addr]types.UID
	crashed bool
	running bool

	wg sync.WaitGroup // pod workers
}

// New checks cfg and returns an agent.
func New(cfg Config) (*Agent, error) {
	if cfg.REST == nil {
		return nil, errors.New("nodeagent: REST config is nil")
	}
	if len(cfg.Nodes) == 0 {
		return nil, errors.New("nodeagent: no nodes")
	}
	if cfg.BinDir == "" || cfg.StateDir == "" {
		return nil, errors.New("nodeagent: BinDir and StateDir are required")
	}
	if cfg.PIDDir == "" {
		cfg.PIDDir = filepath.Join(cfg.StateDir, "pids")
	}
	if cfg.BackoffBase <= 0 {
		cfg.BackoffBase = 10 * time.Second
	}
	if cfg.BackoffMax <= 0 {
		cfg.BackoffMax = 5 * time.Minute
	}
	if cfg.NodeLeaseDuration <= 0 {
		cfg.NodeLeaseDuration = DefaultNodeLeaseDuration
	}
	if cfg.HeartbeatInterval <= 0 {
		cfg.HeartbeatInterval = 20 * time.Second
	}
	if cfg.ShutdownGrace <= 0 {
		cfg.ShutdownGrace = 10 * time.Second
	}
	if cfg.StorageClassName == "" {
		cfg.StorageClassName = DefaultStorageClass
	}
	if cfg.Provisioner == "" {
		cfg.Provisioner = DefaultProvisioner
	}
	if cfg.Log.GetSink() == nil {
		cfg.Log = logr.Discard()
	}
	a := &Agent{cfg: cfg, log: cfg.Log, nodes: map[string]*nodeState{}, workers: map[types.UID]*podWorker{}, ips: map[netip.Addr]types.UID{}}
	for _, n := range cfg.Nodes {
		if n.Name == "" || n.Zone == "" || !n.IP.Is4() || !n.PodIPs.First.Is4() || !n.PodIPs.Last.Is4() {
			return nil, fmt.Errorf("nodeagent: node %q needs a name, a zone, an IPv4 address and a pod IP range", n.Name)
		}
		if _, dup := a.nodes[n.Name]; dup {
			return nil, fmt.Errorf("nodeagent: node %q listed twice", n.Name)
		}
		a.nodes[n.Name] = &nodeState{Node: n}
	}
	rc := rest.CopyConfig(cfg.REST)
	rc.Dial = a.dialer().DialContext
	if rc.QPS == 0 {
		rc.QPS, rc.Burst = 50, 100
	}
	rc.UserAgent = "etcdfed-nodeagent/" + cfg.ClusterName
	cs, err := kubernetes.NewForConfig(rc)
	if err != nil {
		return nil, fmt.Errorf("nodeagent: client: %w", err)
	}
	a.cs = cs
	return a, nil
}

// dialer returns a dialer that marks its connections with cfg.Mark.
func (a *Agent) dialer() *net.Dialer {
	d := &net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second}
	if mark := a.cfg.Mark; mark != 0 {
		d.Control = func(_, _ string, c syscall.RawConn) error {
			var serr error
			if err := c.Control(func(fd uintptr) {
				serr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_MARK, int(mark))
			}); err != nil {
				return err
			}
			return serr
		}
	}
	return d
}

// Client returns the agent's clientset.
func (a *Agent) Client() kubernetes.Interface { return a.cs }

// Run registers the nodes and runs pods until ctx is done. When it returns,
// every process the agent started has exited: with the agent's shutdown
// grace after a normal stop, at once after Crash.
func (a *Agent) Run(ctx context.Context) error {
	if err := a.markRunning(); err != nil {
		return err
	}
	defer a.markStopped()
	for _, d := range []string{a.cfg.StateDir, a.cfg.PIDDir} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return fmt.Errorf("nodeagent: %w", err)
		}
	}
	if !a.registerUntilUp(ctx) {
		return nil // ctx done before the apiserver answered: nothing runs yet
	}

	factory := a.watchObjects()
	infCtx, stopInformers := context.WithCancel(context.WithoutCancel(ctx))
	defer stopInformers()
	factory.Start(infCtx.Done())
	for typ, ok := range factory.WaitForCacheSync(ctx.Done()) {
		if !ok {
			a.log.Info("Cache did not sync", "type", typ.String())
		}
	}

	a.reserveKnownIPs()
	if a.cfg.Kubelet != nil {
		if err := a.serveKubelet(infCtx); err != nil {
			return err
		}
	}
	loops := a.runLoops(ctx)
	a.log.Info("Node agent running", "cluster", a.cfg.ClusterName, "nodes", len(a.nodes))

	<-ctx.Done()
	a.queue.ShutDown()
	loops.Wait()
	a.stopAllWorkers()
	stopInformers()
	factory.Shutdown()
	return nil
}

// markRunning marks the agent running, or fails when it runs already.
func (a *Agent) markRunning() error {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.running {
		return errors.New("nodeagent: already running")
	}
	a.running, a.crashed = true, false
	return nil
}

// markStopped marks the agent no longer running.
func (a *Agent) markStopped() {
	a.mu.Lock()
	a.running = false
	a.mu.Unlock()
}

// registerUntilUp registers the nodes and the storage class, retrying
// while the apiserver is still starting (or restarting after a zone
// failure). It returns false when ctx was done first.
func (a *Agent) registerUntilUp(ctx context.Context) bool {
	err := wait.PollUntilContextCancel(ctx, 500*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		if err := a.registerNodes(ctx); err != nil {
			a.log.V(1).Info("Registering nodes", "err", err.Error())
			return false, nil
		}
		if err := a.ensureStorageClass(ctx); err != nil {
			a.log.V(1).Info("Creating storage class", "err", err.Error())
			return false, nil
		}
		return true, nil
	})
	return err == nil
}

// watchObjects sets up the agent's listers and work queue on a new
// informer factory, not started: a pod, claim or volume that changes
// queues its key; a node that changes queues the pods waiting for one
// (scheduling waits on nodes).
func (a *Agent) watchObjects() informers.SharedInformerFactory {
	factory := informers.NewSharedInformerFactory(a.cs, 30*time.Second)
	podInf := factory.Core().V1().Pods()
	pvcInf := factory.Core().V1().PersistentVolumeClaims()
	pvInf := factory.Core().V1().PersistentVolumes()
	a.pods, a.pvcs, a.pvs = podInf.Lister(), pvcInf.Lister(), pvInf.Lister()
	a.queue = workqueue.NewTypedRateLimitingQueueWithConfig(
		workqueue.NewTypedItemExponentialFailureRateLimiter[string](200*time.Millisecond, 10*time.Second),
		workqueue.TypedRateLimitingQueueConfig[string]{Name: "nodeagent-" + a.cfg.ClusterName})
	enqueue := func(kind string) cache.ResourceEventHandlerFuncs {
		add := func(obj any) {
			if key, err := cache.DeletionHandlingMetaNamespaceKeyFunc(obj); err == nil {
				a.queue.Add(kind + "/" + key)
			}
		}
		return cache.ResourceEventHandlerFuncs{AddFunc: add, UpdateFunc: func(_, o any) { add(o) }, DeleteFunc: add}
	}
	_, _ = podInf.Informer().AddEventHandler(enqueue("pod"))
	_, _ = pvcInf.Informer().AddEventHandler(enqueue("pvc"))
	_, _ = pvInf.Informer().AddEventHandler(enqueue("pv"))
	_, _ = factory.Core().V1().Nodes().Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { a.enqueuePending() },
		UpdateFunc: func(any, any) { a.enqueuePending() },
	})
	return factory
}

// runLoops starts the agent's loops until ctx is done: two workers on the
// queue, the disruption budgets, the nodes' heartbeat and Leases, and the
// resync.
func (a *Agent) runLoops(ctx context.Context) *sync.WaitGroup {
	loops := &sync.WaitGroup{}
	for range 2 {
		loops.Add(1)
		go func() {
			defer loops.Done()
			for a.processNext(ctx) {
			}
		}()
	}
	loops.Add(4)
	go func() { defer loops.Done(); a.disruptionBudgets(ctx) }()
	go func() { defer loops.Done(); a.heartbeat(ctx) }()
	go func() { defer loops.Done(); a.renewNodeLeases(ctx) }()
	go func() { defer loops.Done(); a.resync(ctx) }()
	return loops
}

// Crash makes the next stop of Run kill every process at once and write
// nothing to the apiserver, as when a machine loses power. Call it before
// cancelling Run's context.
func (a *Agent) Crash() {
	a.mu.Lock()
	a.crashed = true
	a.mu.Unlock()
}

func (a *Agent) stopAllWorkers() {
	a.mu.Lock()
	crashed := a.crashed
	ws := make([]*podWorker, 0, len(a.workers))
	for uid, w := range a.workers {
		ws = append(ws, w)
		delete(a.workers, uid)
	}
	a.mu.Unlock()
	var wg sync.WaitGroup
	for _, w := range ws {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if crashed {
				w.halt(0)
			} else {
				w.halt(a.cfg.ShutdownGrace)
			}
		}()
	}
	wg.Wait()
	a.wg.Wait()
	a.mu.Lock()
	a.ips = map[netip.Addr]types.UID{}
	a.mu.Unlock()
}

func (a *Agent) ownsNode(name string) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	_, ok := a.nodes[name]
	return ok
}

func (a *Agent) node(name string) (nodeState, bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	n, ok := a.nodes[name]
	if !ok {
		return nodeState{}, false
	}
	return *n, true
}

// ProcessInfo describes one running container process.
type ProcessInfo struct {
	Namespace, Pod, Container, Node, Zone string
	PodIP                                 string
	PID                                   int
}

// Processes lists the container processes running now.
func (a *Agent) Processes() []ProcessInfo {
	a.mu.Lock()
	ws := make([]*podWorker, 0, len(a.workers))
	for _, w := range a.workers {
		ws = append(ws, w)
	}
	a.mu.Unlock()
	var out []ProcessInfo
	for _, w := range ws {
		out = append(out, w.processes()...)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Namespace != out[j].Namespace {
			return out[i].Namespace < out[j].Namespace
		}
		if out[i].Pod != out[j].Pod {
			return out[i].Pod < out[j].Pod
		}
		return out[i].Container < out[j].Container
	})
	return out
}
