package localenv

import (
	"fmt"
	"path/filepath"
	"time"

	"github.com/go-logr/logr"

	"github.com/etcdfed/etcdfed/dev/localenv/addr"
)

// Defaults of Config.
const (
	DefaultClusters        = 3
	DefaultZonesPerCluster = 1
	DefaultNodesPerZone    = 1
	DefaultMembers         = 5
	HubClusterName         = "hub"
	// RingNamespace is where the member clusters' etcdfed objects and the
	// hub's kubeconfig Secrets live.
	RingNamespace = "etcdfed-system"
	// KubeconfigSecretLabel and KubeconfigSecretKey are multicluster-runtime's
	// kubeconfig provider format.
	KubeconfigSecretLabel = "sigs.k8s.io/multicluster-runtime-kubeconfig"
	KubeconfigSecretKey   = "kubeconfig"
)

// Config configures an environment. Topology fields apply when the state
// directory is new; an existing state directory keeps its topology.
type Config struct {
	// StateDir holds everything the environment owns. Required.
	StateDir string
	// Clusters is the number of member clusters (1..addr.MaxMemberClusters, 31).
	Clusters int
	// ZonesPerCluster is the number of zones in each member cluster (1..addr.MaxZones, 7).
	ZonesPerCluster int
	// NodesPerZone is the number of nodes per zone (1..9).
	NodesPerZone int
	// Members is the size of the demo EtcdCluster `etcdfed dev up` creates
	// (recorded in the state for the hub's demo).
	Members int
	// BinDir holds kube-apiserver, etcd and the binaries pods and
	// components run; "" means testenv.BinDir().
	BinDir string
	// StoreEtcd is the etcd binary in BinDir the clusters' apiservers
	// store in; "" means "etcd". `etcdfed dev up` passes the one its ring
	// runs (StoreEtcd), so that the demo needs one etcd build, not two.
	// Applies to new state directories: a store keeps the release that
	// wrote it.
	StoreEtcd string
	// Slot is the address slot (127.<slot>.0.0/16); 0 means the state's
	// slot, or for a new state the lowest free one.
	Slot int
	// Components returns the processes started besides apiservers and node
	// agents; nil means DefaultComponents (hub and spokes when bin/hub and
	// bin/spoke exist). Return nil for none.
	Components func(st *State, binDir string) []ComponentSpec
	// NoComponents starts no components at all (tests that play the hub
	// and the spokes themselves).
	NoComponents bool
	// SharedSourceAddress makes every pod connect from the shared loopback
	// source address (127.0.0.1) even where the environment could give
	// each pod its own (root, iptables, cgroup v2): the mode of machines
	// that cannot, on any machine. Partitions still work where they can.
	SharedSourceAddress bool
	// BackoffBase and BackoffMax tune the node agents' restart back-off;
	// zero means kubelet's 10s and 5m.
	BackoffBase, BackoffMax time.Duration
	// NodeLeaseDuration is the node Leases' duration (renewed every
	// quarter of it); zero means kubelet's 40s.
	NodeLeaseDuration time.Duration
	// Nodes is how nodes run: NodesProcess (the node agent runs pods as
	// local processes; the default) or NodesReal (kubelet, containerd and
	// runc per node, the hub and the spokes in-cluster from config/; see
	// realnodes.go). Applies to new state directories.
	Nodes NodeMode
	// RingDomains are the DNS domains every real-node cluster's CoreDNS
	// forwards to the spokes (the step docs/kind.md tells users to do for
	// their ring's domain); nil means DefaultRingDomains.
	RingDomains []string
	// ImagesDir holds the images real nodes get for etcdfed and etcd, as
	// `make images` writes them (OCI tarballs and images.txt; they are
	// imported into every node's containerd). "" means the environment
	// builds them itself (dev/images, as `make images` does) into
	// <state>/images/oci from SourceDir.
	ImagesDir string
	// SourceDir is the repository the images are built from; "" means
	// BinDir's parent.
	SourceDir string
	// Distance is the distance between the environment's units from the
	// start (see Distance); nil keeps the one state.json recorded (none
	// in a new state directory). Process nodes only; needs what
	// partitions need (root, iptables, cgroup v2).
	Distance *Distance
	// Progress receives what is starting and when it is ready.
	Progress func(Event)
	// Log receives the environment's and the node agents' logs.
	Log logr.Logger
}

// NodeMode is how an environment's nodes run.
type NodeMode string

// Node modes.
const (
	// NodesProcess: one node agent per member cluster plays kubelet,
	// scheduler and volume provisioner and runs pods as local processes.
	NodesProcess NodeMode = "process"
	// NodesReal: every node is kubelet, containerd and runc in network and
	// mount namespaces of its own; the hub and the spokes run in-cluster.
	NodesReal NodeMode = "real"
)

// StoreEtcd is the binary in binDir a ring of etcd release runs on a
// process node, chosen as the node agent chooses it: etcd-<release> when
// binDir has it (hack/tools.sh builds etcd-3.7.3 and etcd-3.5.35 beside
// etcd), else etcd. Config.StoreEtcd takes it.
func StoreEtcd(binDir, release string) string {
	if release != "" && executable(filepath.Join(binDir, "etcd-"+release)) {
		return "etcd-" + release
	}
	return "etcd"
}

// DefaultRingDomains are the ring domains real-node clusters forward to the
// spokes: the tests' (*.etcd.test) and the demo's (demo.etcdfed.test).
var DefaultRingDomains = []string{"etcd.test", "etcdfed.test"}

// Event is one step of starting or stopping.
type Event struct {
	Elapsed time.Duration
	What    string
	Done    bool
	// Warning marks something the environment cannot do here, and what it
	// does instead.
	Warning bool
}

func (e Event) String() string {
	mark := "…"
	switch {
	case e.Warning:
		mark = "!"
	case e.Done:
		mark = "✓"
	}
	return fmt.Sprintf("[%6.1fs] %s %s", e.Elapsed.Seconds(), mark, e.What)
}

func (c *Config) defaults() error {
	if c.StateDir == "" {
		return fmt.Errorf("localenv: StateDir is required")
	}
	if c.Clusters == 0 {
		c.Clusters = DefaultClusters
	}
	if c.ZonesPerCluster == 0 {
		c.ZonesPerCluster = DefaultZonesPerCluster
	}
	if c.NodesPerZone == 0 {
		c.NodesPerZone = DefaultNodesPerZone
	}
	if c.Members == 0 {
		c.Members = DefaultMembers
	}
	if c.Clusters < 1 || c.Clusters > addr.MaxMemberClusters {
		return fmt.Errorf("localenv: %d member clusters: want 1..%d", c.Clusters, addr.MaxMemberClusters)
	}
	if c.ZonesPerCluster < 1 || c.ZonesPerCluster > addr.MaxZones {
		return fmt.Errorf("localenv: %d zones per cluster: want 1..%d", c.ZonesPerCluster, addr.MaxZones)
	}
	if c.NodesPerZone < 1 || c.NodesPerZone > addr.MaxNodesPerZone {
		return fmt.Errorf("localenv: %d nodes per zone: want 1..%d", c.NodesPerZone, addr.MaxNodesPerZone)
	}
	if c.Log.GetSink() == nil {
		c.Log = logr.Discard()
	}
	switch c.Nodes {
	case "":
		c.Nodes = NodesProcess
	case NodesProcess, NodesReal:
	default:
		return fmt.Errorf("localenv: nodes %q: want %q or %q", c.Nodes, NodesProcess, NodesReal)
	}
	if c.RingDomains == nil {
		c.RingDomains = DefaultRingDomains
	}
	return nil
}

// MemberClusterName names member cluster i (1-based).
func MemberClusterName(i int) string { return fmt.Sprintf("member-%d", i) }

// ZoneName names zone z (1-based) of member cluster i: zone-<i> when each
// cluster has one zone, zone-<i><letter> otherwise. Zones are failure
// domains, so every cluster gets zones of its own.
func ZoneName(i, z, zonesPerCluster int) string {
	if zonesPerCluster == 1 {
		return fmt.Sprintf("zone-%d", i)
	}
	return fmt.Sprintf("zone-%d%c", i, 'a'+z-1)
}
