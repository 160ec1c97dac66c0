package localenv

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"time"

	"github.com/etcdfed/etcdfed/dev/localenv/addr"
)

// StateVersion is the layout version of state.json.
const StateVersion = 1

// State is the persisted description of an environment: its topology and
// every address. It is written once when the state directory is created
// and read by every later start and by the CLI.
type State struct {
	Version int       `json:"version"`
	Slot    int       `json:"slot"`
	Created time.Time `json:"created"`
	// Dir is the state directory (absolute; not persisted).
	Dir string `json:"-"`
	// Members is the demo EtcdCluster's size.
	Members int `json:"members"`
	// Nodes is how the nodes run ("" in states written before real nodes
	// existed: process).
	Nodes NodeMode `json:"nodes,omitempty"`
	// StoreEtcd is the etcd binary the apiservers' stores run
	// (Config.StoreEtcd; "" in states written before it: etcd).
	StoreEtcd string `json:"storeEtcd,omitempty"`
	// Hub is the hub cluster.
	Hub ClusterState `json:"hub"`
	// MemberClusters are the member clusters.
	MemberClusters []ClusterState `json:"memberClusters"`
	// Distance is the distance between units set last (`dev up
	// --latency`, `dev latency set`, Env.SetDistance), in its text form;
	// the next start sets it again.
	Distance *Distance `json:"distance,omitempty"`
}

// ClusterState describes one cluster.
type ClusterState struct {
	Name  string `json:"name"`
	Index int    `json:"index"`
	// APIServer is the apiserver URL.
	APIServer string `json:"apiServer"`
	// Kubeconfig is the admin kubeconfig, relative to the state directory.
	Kubeconfig string `json:"kubeconfig"`
	// CIDR is the cluster's loopback block.
	CIDR string `json:"cidr"`
	// AgentAddress is the address of the cluster's agent (spoke or hub):
	// bind DNS, gossip, metrics and health there.
	AgentAddress string `json:"agentAddress"`
	// DNS is where the spoke serves the ring's DNS (host:port); members only.
	DNS string `json:"dns,omitempty"`
	// Gossip is the spoke's gossip address (host:port); members only.
	Gossip string `json:"gossip,omitempty"`
	// Metrics and Health are the agent's metrics and health addresses.
	Metrics string `json:"metrics"`
	Health  string `json:"health"`
	// Zones of a member cluster (with real nodes, the hub cluster has one
	// too: its node runs the hub).
	Zones []ZoneState `json:"zones,omitempty"`
	// PodCIDR is the cluster's pod range (real nodes).
	PodCIDR string `json:"podCIDR,omitempty"`
}

// ZoneState is one zone of a member cluster.
type ZoneState struct {
	Name  string      `json:"name"`
	Index int         `json:"index"`
	CIDR  string      `json:"cidr"`
	Nodes []NodeState `json:"nodes"`
}

// NodeState is one node.
type NodeState struct {
	Name string `json:"name"`
	IP   string `json:"ip"`
	// PodIPFirst and PodIPLast bound the pod addresses of the node's zone
	// (process nodes).
	PodIPFirst string `json:"podIPFirst,omitempty"`
	PodIPLast  string `json:"podIPLast,omitempty"`
	// PodCIDR is the node's pod range (real nodes).
	PodCIDR string `json:"podCIDR,omitempty"`
}

func newState(dir string, slot int, cfg Config) *State {
	if cfg.Nodes == NodesReal {
		return newRealState(dir, slot, cfg)
	}
	p := addr.Plan{Slot: slot}
	cluster := func(name string, c int) ClusterState {
		agent := p.Agent(c)
		return ClusterState{
			Name: name, Index: c,
			APIServer:    "https://" + p.APIServer(c).String(),
			Kubeconfig:   filepath.Join("kubeconfigs", name+".yaml"),
			CIDR:         p.Cluster(c).String(),
			AgentAddress: agent.String(),
			Metrics:      netip.AddrPortFrom(agent, addr.AgentMetricsPort).String(),
			Health:       netip.AddrPortFrom(agent, addr.AgentHealthPort).String(),
		}
	}
	st := &State{Version: StateVersion, Slot: slot, Created: time.Now().UTC(), Dir: dir, Members: cfg.Members, StoreEtcd: cfg.StoreEtcd,
		Nodes: NodesProcess, Hub: cluster(HubClusterName, 0)}
	for i := 1; i <= cfg.Clusters; i++ {
		cs := cluster(MemberClusterName(i), i)
		cs.DNS = p.DNS(i).String()
		cs.Gossip = p.Gossip(i).String()
		for z := 1; z <= cfg.ZonesPerCluster; z++ {
			zr := p.Zone(i, z)
			base := zr.Addr().As4()
			first, last := base, base
			first[3], last[3] = addr.FirstPodHost, addr.LastPodHost
			zs := ZoneState{Name: ZoneName(i, z, cfg.ZonesPerCluster), Index: z, CIDR: zr.String()}
			for n := 0; n < cfg.NodesPerZone; n++ {
				zs.Nodes = append(zs.Nodes, NodeState{
					Name: fmt.Sprintf("%s-%s-node-%d", cs.Name, zs.Name, n),
					IP:   p.Node(i, z, n).String(), PodIPFirst: netip.AddrFrom4(first).String(), PodIPLast: netip.AddrFrom4(last).String(),
				})
			}
			cs.Zones = append(cs.Zones, zs)
		}
		st.MemberClusters = append(st.MemberClusters, cs)
	}
	return st
}

// Real reports whether the environment runs real nodes.
func (s *State) Real() bool { return s.Nodes == NodesReal }

// StoreBinary is the etcd binary (in the bin directory) the apiservers'
// stores run: StoreEtcd, or etcd for states written before it.
func (s *State) StoreBinary() string {
	if s.StoreEtcd == "" {
		return "etcd"
	}
	return s.StoreEtcd
}

// NodeMode is how the environment's nodes run (process for states
// written before real nodes existed).
func (s *State) NodeMode() NodeMode {
	if s.Nodes == "" {
		return NodesProcess
	}
	return s.Nodes
}

// StatePath is the state file of a state directory.
func StatePath(dir string) string { return filepath.Join(dir, "state.json") }

// LoadState reads the state of a state directory.
func LoadState(dir string) (*State, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, err
	}
	data, err := os.ReadFile(StatePath(abs))
	if err != nil {
		return nil, err
	}
	st := &State{}
	if err := json.Unmarshal(data, st); err != nil {
		return nil, fmt.Errorf("localenv: parse %s: %w", StatePath(abs), err)
	}
	if st.Version != StateVersion {
		return nil, fmt.Errorf("localenv: %s has layout version %d, this etcdfed reads %d: remove the state directory", StatePath(abs), st.Version, StateVersion)
	}
	st.Dir = abs
	return st, nil
}

func (s *State) save() error {
	data, err := json.MarshalIndent(s, "", "  ")
	if err != nil {
		return err
	}
	if err := os.MkdirAll(s.Dir, 0o755); err != nil {
		return err
	}
	tmp := StatePath(s.Dir) + ".tmp"
	if err := os.WriteFile(tmp, data, 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, StatePath(s.Dir))
}

// Clusters returns the hub followed by the member clusters.
func (s *State) Clusters() []ClusterState {
	return append([]ClusterState{s.Hub}, s.MemberClusters...)
}

// Cluster returns the cluster of that name.
func (s *State) Cluster(name string) (ClusterState, bool) {
	for _, c := range s.Clusters() {
		if c.Name == name {
			return c, true
		}
	}
	return ClusterState{}, false
}

// KubeconfigPath returns the absolute path of a cluster's kubeconfig.
func (s *State) KubeconfigPath(cluster string) string {
	return filepath.Join(s.Dir, "kubeconfigs", cluster+".yaml")
}

// MemberKubeconfigDir holds the member clusters' kubeconfigs only.
func (s *State) MemberKubeconfigDir() string { return filepath.Join(s.Dir, "kubeconfigs", "members") }

// DNSServers returns the ring's DNS servers: every member cluster's spoke
// DNS address (host:port).
func (s *State) DNSServers() []string {
	var out []string
	for _, c := range s.MemberClusters {
		out = append(out, c.DNS)
	}
	return out
}

// dnsServersFor lists the DNS servers for a pod of cluster c: its own
// cluster's first (kubelet's cluster DNS), then the others.
func (s *State) dnsServersFor(c ClusterState) []string {
	out := []string{c.DNS}
	for _, o := range s.MemberClusters {
		if o.Name != c.Name {
			out = append(out, o.DNS)
		}
	}
	return out
}

// Zones lists every zone as cluster/zone pairs.
func (s *State) Zones() []ZoneRef {
	var out []ZoneRef
	for _, c := range s.MemberClusters {
		for _, z := range c.Zones {
			out = append(out, ZoneRef{Cluster: c.Name, Zone: z.Name})
		}
	}
	return out
}

// ZoneRef names one zone of one member cluster.
type ZoneRef struct {
	Cluster string `json:"cluster"`
	Zone    string `json:"zone"`
}

func (z ZoneRef) String() string { return z.Cluster + "/" + z.Zone }

// Resolve maps a name given to fail-zone or restore-zone to zones: a zone
// name (in every cluster that has it) or a member cluster name (all its
// zones).
func (s *State) Resolve(name string) ([]ZoneRef, error) {
	var out []ZoneRef
	for _, z := range s.Zones() {
		if z.Zone == name || z.Cluster == name {
			out = append(out, z)
		}
	}
	if len(out) == 0 {
		var names []string
		for _, c := range s.MemberClusters {
			names = append(names, c.Name)
			for _, z := range c.Zones {
				names = append(names, z.Name)
			}
		}
		return nil, fmt.Errorf("%w: %q (zones and member clusters: %v)", ErrUnknownZone, name, names)
	}
	return out, nil
}

// ErrUnknownZone says a name is neither a zone nor a member cluster.
var ErrUnknownZone = errors.New("localenv: no such zone or member cluster")

// Paths inside the state directory.
func (s *State) logDir() string                { return filepath.Join(s.Dir, "logs") }
func (s *State) pidDir() string                { return filepath.Join(s.Dir, "run", "pids") }
func (s *State) clusterDir(name string) string { return filepath.Join(s.Dir, "clusters", name) }
func (s *State) pkiDir() string                { return filepath.Join(s.Dir, "pki") }

// PIDDir is where every live process of the environment has a pid file.
func PIDDir(stateDir string) string { return filepath.Join(stateDir, "run", "pids") }
