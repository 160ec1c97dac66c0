package localenv

import (
	"context"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/etcdfed/etcdfed/dev/localenv/addr"
	"github.com/etcdfed/etcdfed/dev/localenv/realnode"
)

// HubZoneName is the zone of the hub cluster's node (real nodes only: the
// hub runs in-cluster there). It is no failure domain of any ring.
const HubZoneName = "hub"

// newRealState lays out an environment of real nodes (addr's real plan):
// apiservers, nodes and load balancers on the environment's own network,
// and a node in the hub cluster too, for the hub's pod. A member
// cluster's agent address is its spoke's DNS load balancer address (the
// first of the cluster's pool), where its DNS is reached; its gossip is
// reached on the gossip Service's own load balancer address, the second
// (the two Services are created together, DNS first; checkSpokeAddresses
// checks both). The distance's UDP routes (realdistance.go) are made for
// these addresses before the spokes run.
func newRealState(dir string, slot int, cfg Config) *State {
	p := addr.Plan{Slot: slot}
	cluster := func(name string, c, zones, nodes int) ClusterState {
		cs := ClusterState{
			Name: name, Index: c,
			APIServer:  "https://" + p.RealAPIServer(c).String(),
			Kubeconfig: filepath.Join("kubeconfigs", name+".yaml"),
			CIDR:       p.RealCluster(c).String(),
			PodCIDR:    p.RealPods(c).String(),
		}
		for z := 1; z <= zones; z++ {
			zs := ZoneState{Name: ZoneName(c, z, zones), Index: z, CIDR: p.RealZone(c, z).String()}
			if c == 0 {
				zs.Name = HubZoneName
			}
			for n := 0; n < nodes; n++ {
				name := fmt.Sprintf("%s-%s-node-%d", cs.Name, zs.Name, n)
				if c == 0 {
					name = fmt.Sprintf("%s-node-%d", cs.Name, n)
				}
				zs.Nodes = append(zs.Nodes, NodeState{Name: name, IP: p.RealNode(c, z, n).String(), PodCIDR: p.RealNodePods(c, z, n).String()})
			}
			cs.Zones = append(cs.Zones, zs)
		}
		return cs
	}
	st := &State{Version: StateVersion, Slot: slot, Created: time.Now().UTC(), Dir: dir, Members: cfg.Members, StoreEtcd: cfg.StoreEtcd,
		Nodes: NodesReal, Hub: cluster(HubClusterName, 0, 1, 1)}
	for i := 1; i <= cfg.Clusters; i++ {
		cs := cluster(MemberClusterName(i), i, cfg.ZonesPerCluster, cfg.NodesPerZone)
		lb := p.RealLB(i, 0)
		cs.AgentAddress = lb.String()
		cs.DNS = netip.AddrPortFrom(lb, 53).String()
		cs.Gossip = netip.AddrPortFrom(p.RealLB(i, realGossipLB), addr.GossipPort).String()
		st.MemberClusters = append(st.MemberClusters, cs)
	}
	return st
}

// realGossipLB is the index in a member cluster's pool of the gossip
// Service's load balancer address (the DNS Service's is 0).
const realGossipLB = 1

// realNodes lists every node of every cluster (the hub's first).
func (s *State) realNodes() []nodeRef {
	var out []nodeRef
	for _, c := range s.Clusters() {
		for _, z := range c.Zones {
			for i, n := range z.Nodes {
				out = append(out, nodeRef{Cluster: c, Zone: z, Node: n, Index: i})
			}
		}
	}
	return out
}

// nodeRef is one node with its cluster and zone.
type nodeRef struct {
	Cluster ClusterState
	Zone    ZoneState
	Node    NodeState
	Index   int
}

// link is the name of the node's veth end in the environment's network
// (at most 15 characters).
func (r nodeRef) link() string {
	return fmt.Sprintf("en%d-%d-%d", r.Cluster.Index, r.Zone.Index, r.Index)
}

// realStatus lists a real cluster's processes: scheduler and controller
// manager, each node's own processes (anchor, containerd, kubelet,
// kube-proxy), and every other process in a node's cgroup (shims, pause,
// the containers' processes) as pods, named by their command.
func (e *Env) realStatus(rc *realCluster) (procs, pods []ProcessStatus) {
	for _, s := range []*service{rc.sched, rc.kcm} {
		if s != nil {
			pid, r, le := s.Info()
			procs = append(procs, ProcessStatus{Name: s.name, PID: pid, Restarts: r, LastExit: le})
		}
	}
	for _, n := range rc.nodes {
		n.mu.Lock()
		svcs, killed := n.svcs, n.killed
		n.mu.Unlock()
		own := map[int]bool{}
		for _, s := range svcs {
			pid, r, le := s.Info()
			own[pid] = true
			procs = append(procs, ProcessStatus{Name: s.name, PID: pid, Restarts: r, LastExit: le, Detail: n.spec.Zone})
		}
		if killed {
			procs = append(procs, ProcessStatus{Name: n.spec.Name, Detail: "killed"})
			continue
		}
		for _, pid := range realnode.CgroupPIDs(n.spec.CgroupRoot) {
			if own[pid] {
				continue
			}
			comm, _ := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid))
			pods = append(pods, ProcessStatus{Name: strings.TrimSpace(string(comm)), PID: pid, Detail: n.spec.Name})
		}
	}
	return procs, pods
}

// realVolumeDir is the directory of a local volume, read from its PV.
func (e *Env) realVolumeDir(cluster, pvName string) string {
	c, ok := e.state.Cluster(cluster)
	if !ok {
		return ""
	}
	cs, err := kubernetes.NewForConfig(e.pki.restConfig(c.APIServer))
	if err != nil {
		return ""
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	pv, err := cs.CoreV1().PersistentVolumes().Get(ctx, pvName, metav1.GetOptions{})
	if err != nil || pv.Spec.Local == nil {
		return ""
	}
	return pv.Spec.Local.Path
}
