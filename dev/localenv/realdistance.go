package localenv

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os/exec"
	"strconv"

	"golang.org/x/sys/unix"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/etcdfed/etcdfed/dev/localenv/delayproxy"
	"github.com/etcdfed/etcdfed/dev/localenv/realnode"
)

// Distance with real nodes. A node is a network namespace whose traffic
// for another node, another cluster's load balancer or an apiserver is
// routed through the environment's own namespace (realnet.go), with the
// pod's or the node's own source address (no masquerade). The delaying
// proxy runs there (in the supervisor or the test binary), transparent
// (delayproxy.NewTransparent), and is chosen by the sender's and the
// destination's blocks instead of cgroups:
//
//	mangle ETCDFED-DELAY (from PREROUTING)
//	  -p tcp -m socket --transparent -j MARK   a packet for one of the proxy's
//	  -p udp -m socket --transparent -j MARK   own connections or flows
//	  -m mark --mark M -j RETURN
//	  per pair, most specific first, per source and destination block:
//	    zero link: -s FROM -d TO -j RETURN
//	    link:      -p tcp -s FROM -d TO -j TPROXY --on-ip 127.0.0.1 --on-port P
//	nat ETCDFED-DELAY (from PREROUTING)
//	  per pair: zero link RETURN; link: UDP for each spoke service
//	  (DNS, gossip) inside TO REDIRECTed to the route's port
//
// and a policy route: mark M looks up a table whose only route makes
// every address local, so that TPROXY's packets and the replies to the
// proxy's transparent sockets (which carry the sender's address) reach
// the proxy instead of being forwarded. TPROXY works per packet, not per
// connection: a connection that crossed directly before its pair was
// set at a distance has its next packet delivered to the proxy's
// listener, which resets it (both ends, on their next segment), and it
// reconnects through the proxy; one already through the proxy keeps it
// (the socket rule comes first), at zero distance once its route
// retires. UDP is nat, decided once per flow: gossip flows between the
// spokes are forgotten (conntrack) when their pair changes.
//
// Only what nodes and pods send is delayed: traffic that starts in the
// environment's own namespace (an apiserver's to a kubelet, a test's
// clients) takes OUTPUT, where no rule is.

const (
	// realDelayChain is the chain, in mangle and nat, of the real-node
	// distance in the environment's namespace (its own: no slot suffix).
	realDelayChain = "ETCDFED-DELAY"
	// tproxyMark marks the packets the proxy takes; tproxyTable is the
	// routing table that mark looks up.
	tproxyMark  uint32 = 0x6567
	tproxyTable int    = 0x6567
)

// realBlocks are a unit's addresses with real nodes: a cluster's block
// (nodes, apiserver, load balancers) and pod range; a zone's node range
// and its nodes' pod ranges.
func (s *State) realBlocks(name string) []string {
	for _, c := range s.Clusters() {
		if c.Name == name {
			return []string{c.CIDR, c.PodCIDR}
		}
		for _, z := range c.Zones {
			if z.Name != name {
				continue
			}
			out := []string{z.CIDR}
			for _, n := range z.Nodes {
				out = append(out, n.PodCIDR)
			}
			return out
		}
	}
	return nil
}

// realDistanceRules are the rules of the mangle and the nat chain for
// pairs, given the proxy's ports (see the comment at the top). Pure;
// deterministic.
func realDistanceRules(pairs []distancePair, ports map[delayproxy.Route]uint16, blocks func(string) []string) (mangle, nat [][]string) {
	mark := fmt.Sprintf("0x%x", tproxyMark)
	mangle = [][]string{
		{"-p", "tcp", "-m", "socket", "--transparent", "-j", "MARK", "--set-mark", mark},
		{"-p", "udp", "-m", "socket", "--transparent", "-j", "MARK", "--set-mark", mark},
		{"-m", "mark", "--mark", mark, "-j", "RETURN"},
	}
	for _, p := range pairs {
		for _, from := range blocks(p.from.Name) {
			for _, to := range blocks(p.to.Name) {
				if p.link.IsZero() {
					mangle = append(mangle, []string{"-s", from, "-d", to, "-j", "RETURN"})
					nat = append(nat, []string{"-s", from, "-d", to, "-j", "RETURN"})
					continue
				}
				mangle = append(mangle, []string{"-p", "tcp", "-s", from, "-d", to, "-j", "TPROXY",
					"--on-ip", "127.0.0.1", "--on-port", strconv.Itoa(int(ports[tcpRoute(p)])), "--tproxy-mark", mark})
			}
			if p.link.IsZero() {
				continue
			}
			for _, ep := range p.udp {
				nat = append(nat, []string{"-p", "udp", "-s", from, "-d", ep.Addr().String() + "/32", "--dport", strconv.Itoa(int(ep.Port())),
					"-j", "REDIRECT", "--to-ports", strconv.Itoa(int(ports[udpRoute(p, ep)]))})
			}
		}
	}
	return mangle, nat
}

// setupRealDelay creates the chains, their jumps from PREROUTING and the
// policy route of the environment's namespace (idempotent).
func setupRealDelay() error {
	for _, table := range []string{"mangle", "nat"} {
		if err := ensureJump(table, "PREROUTING", realDelayChain); err != nil {
			return err
		}
	}
	table := strconv.Itoa(tproxyTable)
	_ = realnode.IP("rule", "del", "fwmark", fmt.Sprintf("0x%x", tproxyMark), "lookup", table)
	if err := realnode.IP("rule", "add", "fwmark", fmt.Sprintf("0x%x", tproxyMark), "lookup", table); err != nil {
		return fmt.Errorf("localenv: the distance's policy route: %w", err)
	}
	if err := realnode.IP("route", "replace", "local", "0.0.0.0/0", "dev", "lo", "table", table); err != nil {
		return fmt.Errorf("localenv: the distance's local route: %w", err)
	}
	return nil
}

// ensureJump creates chain in table unless it exists, and jumps to it
// first from hook unless it does already.
func ensureJump(table, hook, chain string) error {
	path, err := iptablesPath()
	if err != nil {
		return err
	}
	run := func(args ...string) error {
		out, err := exec.Command(path, append([]string{"-w", "5", "-t", table}, args...)...).CombinedOutput()
		if err != nil {
			return fmt.Errorf("iptables -t %s %v: %w: %s", table, args, err, out)
		}
		return nil
	}
	if run("-S", chain) != nil {
		if err := run("-N", chain); err != nil {
			return err
		}
	}
	if run("-C", hook, "-j", chain) != nil {
		return run("-I", hook, "-j", chain)
	}
	return nil
}

// applyRealDistance is applyDistance with real nodes: the transparent
// proxy's routes, then both chains.
func (e *Env) applyRealDistance(ctx context.Context, d Distance, pairs []distancePair) error {
	if d.IsZero() && e.delay == nil {
		e.dist, e.distPairs = d, pairs
		return nil
	}
	if e.delay == nil {
		if err := setupRealDelay(); err != nil {
			return err
		}
		e.delay = delayproxy.NewTransparent(proxyMark, e.log.WithName("delayproxy"))
	}
	before, ports, err := e.setDelayRoutes(d, pairs)
	if err != nil {
		return err
	}
	var mangle, nat [][]string
	if !d.IsZero() {
		mangle, nat = realDistanceRules(pairs, ports, e.state.realBlocks)
	}
	if err := replaceChain("mangle", realDelayChain, mangle); err != nil {
		return err
	}
	if err := replaceChain("nat", realDelayChain, nat); err != nil {
		return err
	}
	// Gossip flows of every pair that changed meet the new rules.
	var errs []error
	now := map[string]bool{}
	for _, p := range pairs {
		if !p.link.IsZero() {
			now[p.name()] = true
		}
	}
	for _, p := range append(append([]distancePair{}, pairs...), e.distPairs...) {
		if before[p.name()] != now[p.name()] {
			errs = append(errs, e.forgetRealGossip(ctx, p))
		}
	}
	e.dist, e.distPairs = d, pairs
	e.progress("distance: "+d.String(), true)
	return errors.Join(errs...)
}

// forgetRealGossip forgets the gossip flows from the spokes of p's
// sender to the spoke of p's destination (their conntrack entries in
// the environment's namespace, from the spoke pod's address).
func (e *Env) forgetRealGossip(ctx context.Context, p distancePair) error {
	to, ok := e.state.Cluster(p.to.Name)
	if !ok || to.Gossip == "" {
		if c, ok := e.zoneCluster(p.to.Name); ok {
			to = c
		} else {
			return nil
		}
	}
	dst, err := netip.ParseAddrPort(to.Gossip)
	if err != nil {
		return nil //nolint:nilerr // no gossip address, no flow
	}
	from, ok := e.state.Cluster(p.from.Name)
	if !ok {
		if from, ok = e.zoneCluster(p.from.Name); !ok {
			return nil
		}
	}
	cs, err := kubernetes.NewForConfig(e.pki.restConfig(from.APIServer))
	if err != nil {
		return err
	}
	pods, err := cs.CoreV1().Pods(RingNamespace).List(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/name=etcdfed-spoke"})
	if err != nil {
		return nil //nolint:nilerr // no spokes reachable (a cluster killed): no flow to forget
	}
	var errs []error
	for _, pod := range pods.Items {
		if a, err := netip.ParseAddr(pod.Status.PodIP); err == nil {
			errs = append(errs, forgetUDPFlow(netip.AddrPortFrom(a, dst.Port()), dst))
		}
	}
	return errors.Join(errs...)
}

// zoneCluster is the cluster of a zone.
func (e *Env) zoneCluster(zone string) (ClusterState, bool) {
	for _, c := range e.state.MemberClusters {
		for _, z := range c.Zones {
			if z.Name == zone {
				return c, true
			}
		}
	}
	return ClusterState{}, false
}

// PodNetns returns the network namespace (a /proc/PID/ns/net path) of
// the pod with address ip on a node of cluster (real nodes only), for a
// test that opens sockets there (realnode.InNetnsPath) to see the
// network as the pod does.
func (e *Env) PodNetns(cluster string, ip netip.Addr) (string, error) {
	rc := e.realCluster(cluster)
	if rc == nil {
		return "", fmt.Errorf("localenv: no real cluster %q running", cluster)
	}
	seen := map[[2]uint64]bool{}
	for _, n := range rc.nodes {
		for _, pid := range realnode.CgroupPIDs(n.spec.CgroupRoot) {
			path := fmt.Sprintf("/proc/%d/ns/net", pid)
			var st unix.Stat_t
			if unix.Stat(path, &st) != nil || seen[[2]uint64{st.Dev, st.Ino}] {
				continue
			}
			seen[[2]uint64{st.Dev, st.Ino}] = true
			found := false
			_ = realnode.InNetnsPath(path, func() error {
				addrs, err := net.InterfaceAddrs()
				if err != nil {
					return err
				}
				for _, a := range addrs {
					if n, ok := a.(*net.IPNet); ok && n.IP.Equal(ip.AsSlice()) {
						found = true
					}
				}
				return nil
			})
			if found {
				return path, nil
			}
		}
	}
	return "", fmt.Errorf("localenv: no pod with address %s on the nodes of %s", ip, cluster)
}
