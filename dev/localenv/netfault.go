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
//	-m cgroup   --path G ! -d BLOCK -j LOSE   # the zone's processes reach nothing outside it
//	-m cgroup ! --path G   -d BLOCK -j LOSE   # nothing outside reaches into it
//
// and a partition into groups (partition.go) is one rule per pair of units
// of different groups:
//
//	-m cgroup   --path G -d BLOCK' -j LOSE    # G's processes reach nothing of BLOCK'
//
// LOSE marks the packet lost (lostMark); the chain ETCDFED-IN-<slot>,
// jumped to from INPUT, drops it there: on the receive path, after it
// left its sender, as a real network loses packets (a drop in the
// sender's OUTPUT would be a local error its TCP retries at once).
//
// Source addresses cannot be used: a connection between two loopback
// addresses is sourced from 127.0.0.1 unless the client binds, and a
// reply reaches these rules addressed to 127.0.0.1 (the pods' SNAT is
// undone before them). So every new connection is marked (CONNMARK) with
// the unit that opened it, and the replies of a connection opened by a
// unit on one side of a cut to an address on the other are lost too:
//
//	-m connmark --mark UNIT -m conntrack --ctdir REPLY --ctorigdst BLOCK' -j LOSE
//
// A real partition loses both directions of every connection that
// crosses it; before these rules the accepting side's packets still
// reached the opener (a connection half cut), which a real network never
// does. (A one-way cut is a stateful firewall rule: the replies of the
// connections To opens to From pass.) The node agent marks its own
// sockets (SO_MARK) and is let through both ways, as a kubelet inside the
// zone would be. Everything is lost silently (no RST), as a real
// partition does: clients see timeouts, not refusals.
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
	// input is the filter chain, jumped to from INPUT for loopback
	// traffic, that drops the packets the cuts marked lost (lostMark).
	input string
	mark  uint32
	cgfs  string // cgroup2 mount point, to make paths relative
	// marks mark each new connection with the unit that opened it (for
	// the cuts' reply rules: partition.go).
	marks []markRule
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

func newPartitioner(slot int, cgfs string, marks []markRule) (*partitioner, error) {
	if os.Geteuid() != 0 {
		return nil, errors.New("partitions need root (iptables rules and cgroups); `--mode kill` works without")
	}
	if cgfs == "" {
		return nil, errors.New("partitions need a writable cgroup v2 hierarchy")
	}
	if _, err := iptablesPath(); err != nil {
		return nil, err
	}
	p := &partitioner{chain: fmt.Sprintf("ETCDFED-%d", slot), snat: snatChain(slot), delay: delayChain(slot), input: inputChain(slot), mark: partitionMark, cgfs: cgfs, marks: marks}
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

func inputChain(slot int) string { return fmt.Sprintf("ETCDFED-IN-%d", slot) }

// lostMark is the packet mark (a bit of it) of a packet a cut loses: set
// in the sender's OUTPUT chain (where the sender's cgroup and the
// connection's opener are known), the packet is dropped on the receive
// path (INPUT, the chain ETCDFED-IN-<slot>), after it left its sender.
// A packet dropped in the sender's own OUTPUT chain never counts as sent:
// the sender's TCP sees a local error and tries again at once with every
// new write, so the first write after a heal gets through; a packet lost
// on the way counts as in flight, and the sender's retransmissions back
// off as over a real cut (issue 35: a heal measured with the OUTPUT drop
// was easier than a real network's). A packet mark set in OUTPUT stays
// with the packet through loopback to INPUT.
const lostMark = 0x00800000

// loseArgs is the target of a cut's rules: mark the packet lost.
var loseArgs = []string{"-j", "MARK", "--set-xmark", markArg(lostMark, lostMark)}

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
	if _, err := runIPTables("-N", p.input); err != nil {
		if out, err := runIPTables("-F", p.input); err != nil {
			return fmt.Errorf("iptables: flush %s: %w: %s", p.input, err, out)
		}
	}
	if out, err := runIPTables("-A", p.input, "-m", "mark", "--mark", markArg(lostMark, lostMark), "-j", "DROP"); err != nil {
		return fmt.Errorf("iptables: drop lost packets in %s: %w: %s", p.input, err, out)
	}
	if _, err := runIPTables("-C", "INPUT", "-i", "lo", "-j", p.input); err != nil {
		if out, err := runIPTables("-I", "INPUT", "-i", "lo", "-j", p.input); err != nil {
			return fmt.Errorf("iptables: jump to %s: %w: %s", p.input, err, out)
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
	agent := markArg(agentConnMark, clusterMarkMask)
	rules := [][]string{
		// The node agents' connections, both ways: they are outside
		// every cut, as a kubelet's own link to its node would be.
		{"-m", "mark", "--mark", fmt.Sprintf("0x%x", p.mark), "-j", "CONNMARK", "--set-xmark", agent},
		{"-m", "connmark", "--mark", agent, "-j", "RETURN"},
		// The delay proxy's own connections (distance.go), both ways:
		// the connection it stands in for was judged when it was
		// opened (below), and the proxy dials from the sender's address,
		// so without this the peer's replies would meet rules a reply
		// to 127.0.0.1 never meets.
		{"-m", "mark", "--mark", proxy, "-j", "CONNMARK", "--set-mark", proxy},
		{"-m", "connmark", "--mark", proxy, "-j", "RETURN"},
	}
	// Every new connection is marked with the unit that opens it.
	for _, m := range p.marks {
		rules = append(rules, m.args(p.cgfs))
	}
	// Connections redirected to the delay proxy reach this chain with the
	// destination 127.0.0.1, and replies with the opener's 127.0.0.1:
	// they are matched on their original destination (and the opener's
	// mark), before 127.0.0.1 is let through.
	for _, d := range drops {
		if d.reply {
			rules = append(rules, d.replyArgs())
		} else {
			rules = append(rules, d.redirectedArgs(p.cgfs))
		}
	}
	rules = append(rules, []string{"-d", "127.0.0.1/32", "-j", "RETURN"})
	for _, d := range drops {
		if !d.reply {
			rules = append(rules, d.args(p.cgfs))
		}
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
	return errors.Join(removeChain("filter", "OUTPUT", p.chain), removeChain("nat", "POSTROUTING", p.snat), removeChain("nat", "OUTPUT", p.delay),
		removeChain("filter", "INPUT", p.input))
}

func removeChain(table, from, chain string) error {
	iface := "-o" // OUTPUT, POSTROUTING
	if from == "INPUT" {
		iface = "-i"
	}
	for {
		if _, err := runIPTables("-t", table, "-D", from, iface, "lo", "-j", chain); err != nil {
			break
		}
	}
	_, _ = runIPTables("-t", table, "-F", chain)
	if out, err := runIPTables("-t", table, "-X", chain); err != nil && !strings.Contains(out, "No chain") && !strings.Contains(out, "does not exist") {
		return fmt.Errorf("iptables -t %s -X %s: %w: %s", table, chain, err, out)
	}
	return nil
}

// removeChainIfRoot removes a partition chain a crashed run may have left.
func removeChainIfRoot(slot int) error {
	if os.Geteuid() != 0 {
		return nil
	}
	if _, err := iptablesPath(); err != nil {
		return nil //nolint:nilerr // no iptables: no chain
	}
	return errors.Join(removeChain("filter", "OUTPUT", fmt.Sprintf("ETCDFED-%d", slot)), removeChain("nat", "POSTROUTING", snatChain(slot)),
		removeChain("nat", "OUTPUT", delayChain(slot)), removeChain("filter", "INPUT", inputChain(slot)))
}
