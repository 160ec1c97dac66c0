package localenv

import (
	"bytes"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"strings"
	"sync"
)

// Partitions are iptables rules in a chain of the environment's own
// (ETCDFED-<slot>), jumped to from OUTPUT for loopback traffic. Every
// packet on loopback is sent by a local socket, and the kernel remembers
// the cgroup of the process that created each socket; a partitioned zone
// or cluster is a loopback block plus a cgroup:
//
//	-m cgroup   --path G ! -d BLOCK -j DROP   # the zone's processes reach nothing outside it
//	-m cgroup ! --path G   -d BLOCK -j DROP   # nothing outside reaches into it
//
// and a partition into groups (partition.go) is one rule per pair of units
// of different groups:
//
//	-m cgroup   --path G -d BLOCK' -j DROP    # G's processes reach nothing of BLOCK'
//
// Source addresses cannot be used: a connection between two loopback
// addresses is sourced from 127.0.0.1 unless the client binds. For the same
// reason replies (to 127.0.0.1) are let through; every connection still has
// one direction dropped. The node agent marks its own sockets (SO_MARK) and
// is let through, as a kubelet inside the zone would be. Both directions are
// dropped silently (no RST), as a real partition does: clients see
// timeouts, not refusals.
//
// The same machinery gives pods real source addresses: a SNAT rule per pod
// cgroup in the nat chain ETCDFED-SNAT-<slot> (AttachPod). Filter rules see
// replies already translated back (to 127.0.0.1), so partitions are
// unaffected.
type partitioner struct {
	chain string
	// snat is the nat chain that gives every pod its address as source
	// (see AttachPod).
	snat string
	// delay is the nat chain that sends traffic between units at a
	// distance to the delay proxy (distance.go).
	delay string
	mark  uint32
	cgfs  string // cgroup2 mount point, to make paths relative
	mu    sync.Mutex
}

// partitionMark is the SO_MARK of node agent traffic.
const partitionMark = 0x6564

func iptablesPath() (string, error) {
	for _, p := range []string{"iptables", "/usr/sbin/iptables", "/sbin/iptables"} {
		if path, err := exec.LookPath(p); err == nil {
			return path, nil
		}
	}
	return "", errors.New("iptables not found (install the iptables package; `make system-deps` does)")
}

func newPartitioner(slot int, cgfs string) (*partitioner, error) {
	if os.Geteuid() != 0 {
		return nil, errors.New("partitions need root (iptables rules and cgroups); `--mode kill` works without")
	}
	if cgfs == "" {
		return nil, errors.New("partitions need a writable cgroup v2 hierarchy")
	}
	if _, err := iptablesPath(); err != nil {
		return nil, err
	}
	p := &partitioner{chain: fmt.Sprintf("ETCDFED-%d", slot), snat: snatChain(slot), delay: delayChain(slot), mark: partitionMark, cgfs: cgfs}
	if err := p.reset(); err != nil {
		return nil, err
	}
	return p, nil
}

func runIPTables(args ...string) (string, error) {
	path, err := iptablesPath()
	if err != nil {
		return "", err
	}
	var out bytes.Buffer
	cmd := exec.Command(path, append([]string{"-w", "5"}, args...)...)
	cmd.Stdout, cmd.Stderr = &out, &out
	err = cmd.Run()
	return out.String(), err
}

func snatChain(slot int) string { return fmt.Sprintf("ETCDFED-SNAT-%d", slot) }

func delayChain(slot int) string { return fmt.Sprintf("ETCDFED-DELAY-%d", slot) }

// reset creates the chains (empty but for the exemptions) and the jumps.
func (p *partitioner) reset() error {
	if _, err := runIPTables("-t", "nat", "-N", p.delay); err != nil {
		if out, err := runIPTables("-t", "nat", "-F", p.delay); err != nil {
			return fmt.Errorf("iptables: flush nat %s: %w: %s", p.delay, err, out)
		}
	}
	if _, err := runIPTables("-t", "nat", "-C", "OUTPUT", "-o", "lo", "-j", p.delay); err != nil {
		if out, err := runIPTables("-t", "nat", "-I", "OUTPUT", "-o", "lo", "-j", p.delay); err != nil {
			return fmt.Errorf("iptables: jump to nat %s: %w: %s", p.delay, err, out)
		}
	}
	if _, err := runIPTables("-t", "nat", "-N", p.snat); err != nil {
		if out, err := runIPTables("-t", "nat", "-F", p.snat); err != nil {
			return fmt.Errorf("iptables: flush nat %s: %w: %s", p.snat, err, out)
		}
	}
	if _, err := runIPTables("-t", "nat", "-C", "POSTROUTING", "-o", "lo", "-j", p.snat); err != nil {
		if out, err := runIPTables("-t", "nat", "-I", "POSTROUTING", "-o", "lo", "-j", p.snat); err != nil {
			return fmt.Errorf("iptables: jump to nat %s: %w: %s", p.snat, err, out)
		}
	}
	if _, err := runIPTables("-N", p.chain); err != nil {
		if out, err := runIPTables("-F", p.chain); err != nil {
			return fmt.Errorf("iptables: flush %s: %w: %s", p.chain, err, out)
		}
	}
	if _, err := runIPTables("-C", "OUTPUT", "-o", "lo", "-j", p.chain); err != nil {
		if out, err := runIPTables("-I", "OUTPUT", "-o", "lo", "-j", p.chain); err != nil {
			return fmt.Errorf("iptables: jump to %s: %w: %s", p.chain, err, out)
		}
	}
	return p.apply(nil)
}

// apply replaces the chain's rules with the exemptions and the given
// DROP rules (partitionRules).
func (p *partitioner) apply(drops []dropRule) error {
	if out, err := runIPTables("-F", p.chain); err != nil {
		return fmt.Errorf("iptables: flush %s: %w: %s", p.chain, err, out)
	}
	proxy := fmt.Sprintf("0x%x", proxyMark)
	rules := [][]string{
		{"-m", "mark", "--mark", fmt.Sprintf("0x%x", p.mark), "-j", "RETURN"},
		// The delay proxy's own connections (distance.go), both ways:
		// the connection it stands in for was judged when it was
		// opened (below), and the proxy dials from the sender's address,
		// so without this the peer's replies would meet rules a reply
		// to 127.0.0.1 never meets.
		{"-m", "mark", "--mark", proxy, "-j", "CONNMARK", "--set-mark", proxy},
		{"-m", "connmark", "--mark", proxy, "-j", "RETURN"},
	}
	// Connections redirected to the delay proxy reach this chain with the
	// destination 127.0.0.1: they are matched on their original
	// destination, before 127.0.0.1 is let through.
	for _, d := range drops {
		rules = append(rules, d.redirectedArgs(p.cgfs))
	}
	rules = append(rules, []string{"-d", "127.0.0.1/32", "-j", "RETURN"})
	for _, d := range drops {
		rules = append(rules, d.args(p.cgfs))
	}
	for _, r := range rules {
		if out, err := runIPTables(append([]string{"-A", p.chain}, r...)...); err != nil {
			return fmt.Errorf("iptables -A %s %s: %w: %s", p.chain, strings.Join(r, " "), err, out)
		}
	}
	return nil
}

// AttachPod makes every connection a pod's processes open come from the
// pod's address, as on a real node: a SNAT rule for the pod's cgroup in
// the nat chain. Without it a loopback connection comes from 127.0.0.1,
// and a peer that checks the client's address (etcd's peer TLS checks it
// against the certificate's names) sees nonsense.
func (p *partitioner) AttachPod(ip netip.Addr, cgroup string) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if out, err := runIPTables(append([]string{"-t", "nat", "-A", p.snat}, p.snatRule(ip, cgroup)...)...); err != nil {
		return fmt.Errorf("iptables: SNAT for %s: %w: %s", ip, err, out)
	}
	return nil
}

// DetachPod removes the pod's SNAT rule.
func (p *partitioner) DetachPod(ip netip.Addr, cgroup string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for { // every copy, should one have been added twice
		if _, err := runIPTables(append([]string{"-t", "nat", "-D", p.snat}, p.snatRule(ip, cgroup)...)...); err != nil {
			return
		}
	}
}

func (p *partitioner) snatRule(ip netip.Addr, cgroup string) []string {
	rel := strings.TrimPrefix(strings.TrimPrefix(cgroup, p.cgfs), "/")
	return []string{"-m", "cgroup", "--path", rel, "-j", "SNAT", "--to-source", ip.String()}
}

// remove deletes the jumps and the chains.
func (p *partitioner) remove() error {
	return errors.Join(removeChain("filter", "OUTPUT", p.chain), removeChain("nat", "POSTROUTING", p.snat), removeChain("nat", "OUTPUT", p.delay))
}

func removeChain(table, from, chain string) error {
	for {
		if _, err := runIPTables("-t", table, "-D", from, "-o", "lo", "-j", chain); err != nil {
			break
		}
	}
	_, _ = runIPTables("-t", table, "-F", chain)
	if out, err := runIPTables("-t", table, "-X", chain); err != nil && !strings.Contains(out, "No chain") && !strings.Contains(out, "does not exist") {
		return fmt.Errorf("iptables -t %s -X %s: %w: %s", table, chain, err, out)
	}
	return nil
}
