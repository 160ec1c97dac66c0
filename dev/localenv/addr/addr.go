// Package addr is the local environment's address plan: every environment
// owns one slot, the loopback block 127.<slot>.0.0/16, and inside it every
// cluster owns a /21 and every zone a /24, so that a zone or a whole
// cluster is one CIDR (which is what the partition rules match on).
//
//	cluster c (0 = hub, 1..31 = member clusters): 127.S.(8c).0/21
//	  infrastructure /24 127.S.(8c).0/24:
//	    .1  kube-apiserver (:6443) and the etcd behind it (:2379, :2380)
//	    .2  the cluster's agent address: the spoke's DNS (:1053), gossip
//	        (:7946), metrics (:8080) and health (:8081); in the hub
//	        cluster the hub's metrics and health
//	  zone z (1..7) /24 127.S.(8c+z).0/24:
//	    .1-.9    node InternalIPs (the node agent's kubelet endpoint :10250)
//	    .10-.254 pod IPs
//
// A slot is held by a listening abstract unix socket named after it, so it
// is free again the moment its holder exits, however it exits.
package addr

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
)

// Limits of the plan.
const (
	MinSlot           = 1
	MaxSlot           = 250
	MaxMemberClusters = 31
	MaxZones          = clusterSpan - 1
	MaxNodesPerZone   = 9
	FirstPodHost      = 10
	LastPodHost       = 254
)

// Ports used on the fixed addresses.
const (
	APIServerPort    = 6443
	APIEtcdPort      = 2379
	APIEtcdPeerPort  = 2380
	DNSPort          = 1053
	GossipPort       = 7946
	AgentMetricsPort = 8080
	AgentHealthPort  = 8081
	// KubeletPort is where each node's agent serves kubelet's container
	// log endpoint, on the node's IP (kubelet's port).
	KubeletPort = 10250
)

// clusterSpan is how many /24s (third octets) one cluster owns: its
// infrastructure /24 and one per zone. Eight (a /21) gives 31 member
// clusters of up to 7 zones each in one slot's /16: a fleet of 20 member
// clusters fits, and no environment of the project's uses more than 3
// zones in one cluster.
const clusterSpan = 8

// ErrSlotTaken says another environment holds the slot.
var ErrSlotTaken = errors.New("addr: slot in use by another local environment")

// Plan is the address plan of one slot.
type Plan struct{ Slot int }

func (p Plan) ip(c, third, host int) netip.Addr {
	return netip.AddrFrom4([4]byte{127, byte(p.Slot), byte(clusterSpan*c + third), byte(host)})
}

// Prefix is the whole slot, 127.S.0.0/16.
func (p Plan) Prefix() netip.Prefix {
	return netip.PrefixFrom(netip.AddrFrom4([4]byte{127, byte(p.Slot), 0, 0}), 16)
}

// Cluster is the /21 of cluster c.
func (p Plan) Cluster(c int) netip.Prefix { return netip.PrefixFrom(p.ip(c, 0, 0), 21) }

// Zone is the /24 of zone z (1-based) of cluster c.
func (p Plan) Zone(c, z int) netip.Prefix { return netip.PrefixFrom(p.ip(c, z, 0), 24) }

// APIServer is the address kube-apiserver of cluster c listens on.
func (p Plan) APIServer(c int) netip.AddrPort {
	return netip.AddrPortFrom(p.ip(c, 0, 1), APIServerPort)
}

// APIEtcd is the client address of the etcd behind the apiserver.
func (p Plan) APIEtcd(c int) netip.AddrPort { return netip.AddrPortFrom(p.ip(c, 0, 1), APIEtcdPort) }

// APIEtcdPeer is that etcd's peer address (unused, but etcd listens).
func (p Plan) APIEtcdPeer(c int) netip.AddrPort {
	return netip.AddrPortFrom(p.ip(c, 0, 1), APIEtcdPeerPort)
}

// Agent is the address of the cluster's agent (the spoke, or the hub in the
// hub cluster).
func (p Plan) Agent(c int) netip.Addr { return p.ip(c, 0, 2) }

// DNS is where the spoke of cluster c serves the ring's DNS.
func (p Plan) DNS(c int) netip.AddrPort { return netip.AddrPortFrom(p.Agent(c), DNSPort) }

// Gossip is the spoke's gossip address.
func (p Plan) Gossip(c int) netip.AddrPort { return netip.AddrPortFrom(p.Agent(c), GossipPort) }

// Node is the InternalIP of node n (0-based) of zone z of cluster c.
func (p Plan) Node(c, z, n int) netip.Addr { return p.ip(c, z, 1+n) }

// Slot is a held slot. Release it when the environment is gone.
type Slot struct {
	Plan
	l net.Listener
}

// Release frees the slot.
func (s *Slot) Release() {
	if s != nil && s.l != nil {
		_ = s.l.Close()
	}
}

func lockName(slot int) string { return fmt.Sprintf("@etcdfed-localenv-slot-%d", slot) }

// Acquire holds the given slot, or the lowest free slot when slot is 0.
func Acquire(slot int) (*Slot, error) {
	if slot != 0 {
		if slot < MinSlot || slot > MaxSlot {
			return nil, fmt.Errorf("addr: slot %d out of range %d..%d", slot, MinSlot, MaxSlot)
		}
		l, err := net.Listen("unix", lockName(slot))
		if err != nil {
			return nil, fmt.Errorf("%w: slot %d (127.%d.0.0/16)", ErrSlotTaken, slot, slot)
		}
		return newSlot(slot, l), nil
	}
	for s := MinSlot; s <= MaxSlot; s++ {
		if l, err := net.Listen("unix", lockName(s)); err == nil {
			return newSlot(s, l), nil
		}
	}
	return nil, errors.New("addr: every slot is in use")
}

// Inherit holds a slot whose listening socket this process inherited as
// file f (a parent acquired it, then re-ran this program in another
// network namespace: abstract sockets belong to the namespace they were
// bound in, so the slot stays held machine-wide).
func Inherit(slot int, f *os.File) (*Slot, error) {
	l, err := net.FileListener(f)
	_ = f.Close()
	if err != nil {
		return nil, fmt.Errorf("addr: inherited slot %d: %w", slot, err)
	}
	if ul, ok := l.(*net.UnixListener); !ok || ul.Addr().String() != lockName(slot) {
		_ = l.Close()
		return nil, fmt.Errorf("addr: inherited socket is not the lock of slot %d", slot)
	}
	return newSlot(slot, l), nil
}

// File returns a duplicate of the slot's listening socket, to pass down
// to a process that re-holds it with Inherit.
func (s *Slot) File() (*os.File, error) {
	ul, ok := s.l.(*net.UnixListener)
	if !ok {
		return nil, errors.New("addr: slot has no unix listener")
	}
	return ul.File()
}

func newSlot(slot int, l net.Listener) *Slot {
	go func() { // answer Held's probes so they never fill the backlog
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			_ = c.Close()
		}
	}()
	return &Slot{Plan: Plan{Slot: slot}, l: l}
}

// Held reports whether some process holds slot.
func Held(slot int) bool {
	c, err := net.Dial("unix", lockName(slot))
	if err != nil {
		return false
	}
	_ = c.Close()
	return true
}

// Real-node addresses. With real nodes every cluster lives in the
// environment's own network namespace (created for it, so these ranges
// never meet the machine's): nodes are network namespaces routed through
// it, pods sit on each node's CNI bridge, and only loopback addresses are
// used outside it. The plan mirrors the loopback one:
//
//	cluster c: 172.20.(8c).0/21
//	  172.20.(8c).1            kube-apiserver (:6443), on the environment's loopback
//	  172.20.(8c).128/26       load balancer addresses (LoadBalancer Services)
//	  zone z: 172.20.(8c+z).0/24, node n at .(1+n)
//	pods of cluster c: 10.(100+c).0.0/16; node n of zone z: 10.(100+c).(16z+n).0/24
//	Services (every cluster): 10.0.0.0/24, cluster DNS 10.0.0.10
const (
	// RealServiceCIDR is every cluster's Service range.
	RealServiceCIDR = "10.0.0.0/24"
	// RealClusterDNS is the cluster DNS Service's address (kube-dns).
	RealClusterDNS = "10.0.0.10"
	// RealLBCount is how many load balancer addresses a cluster has.
	RealLBCount = 64
)

func realIP(a, b, c, d int) netip.Addr {
	return netip.AddrFrom4([4]byte{byte(a), byte(b), byte(c), byte(d)})
}

// RealCluster is cluster c's range of node, apiserver and load balancer
// addresses.
func (p Plan) RealCluster(c int) netip.Prefix {
	return netip.PrefixFrom(realIP(172, 20, clusterSpan*c, 0), 21)
}

// RealZone is zone z's node range.
func (p Plan) RealZone(c, z int) netip.Prefix {
	return netip.PrefixFrom(realIP(172, 20, clusterSpan*c+z, 0), 24)
}

// RealAPIServer is where cluster c's kube-apiserver listens.
func (p Plan) RealAPIServer(c int) netip.AddrPort {
	return netip.AddrPortFrom(realIP(172, 20, clusterSpan*c, 1), APIServerPort)
}

// RealNode is the InternalIP of node n (0-based) of zone z of cluster c.
func (p Plan) RealNode(c, z, n int) netip.Addr { return realIP(172, 20, clusterSpan*c+z, 1+n) }

// RealLB is load balancer address i (0-based) of cluster c.
func (p Plan) RealLB(c, i int) netip.Addr { return realIP(172, 20, clusterSpan*c, 128+i) }

// RealLBs is cluster c's range of load balancer addresses.
func (p Plan) RealLBs(c int) netip.Prefix {
	return netip.PrefixFrom(realIP(172, 20, clusterSpan*c, 128), 26)
}

// RealPods is cluster c's pod range.
func (p Plan) RealPods(c int) netip.Prefix { return netip.PrefixFrom(realIP(10, 100+c, 0, 0), 16) }

// RealZonePods is the pod range of zone z's nodes.
func (p Plan) RealZonePods(c, z int) netip.Prefix {
	return netip.PrefixFrom(realIP(10, 100+c, 16*z, 0), 20)
}

// RealNodePods is node n's pod range (its CNI bridge's subnet).
func (p Plan) RealNodePods(c, z, n int) netip.Prefix {
	return netip.PrefixFrom(realIP(10, 100+c, 16*z+n, 0), 24)
}

// RealService is address i (0-based) of the environment's own services
// on its network (a test's S3 server, say), reachable from every pod:
// 172.21.0.(1+i), outside every cluster's range.
func (p Plan) RealService(i int) netip.Addr { return realIP(172, 21, 0, 1+i) }
