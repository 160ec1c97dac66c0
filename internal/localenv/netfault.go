package localenv

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"sort"
	"strings"
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
// Source addresses cannot be used: a connection between two loopback
// addresses is sourced from 127.0.0.1 unless the client binds. For the same
// reason replies (to 127.0.0.1) are let through; every connection still has
// one direction dropped. The node agent marks its own sockets (SO_MARK) and
// is let through, as a kubelet inside the zone would be. Both directions are
// dropped silently (no RST), as a real partition does: clients see
// timeouts, not refusals.
type partitioner struct {
	chain string
	mark  uint32
	cgfs  string // cgroup2 mount point, to make paths relative
}

// partitionMark is the SO_MARK of node agent traffic.
const partitionMark = 0x6564

// partitionUnit is one partitioned zone or cluster.
type partitionUnit struct {
	CIDR   string
	Cgroup string // absolute cgroup directory
}

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
	p := &partitioner{chain: fmt.Sprintf("ETCDFED-%d", slot), mark: partitionMark, cgfs: cgfs}
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

// reset creates the chain (empty but for the exemptions) and the jump.
func (p *partitioner) reset() error {
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
// partitions.
func (p *partitioner) apply(units []partitionUnit) error {
	if out, err := runIPTables("-F", p.chain); err != nil {
		return fmt.Errorf("iptables: flush %s: %w: %s", p.chain, err, out)
	}
	rules := [][]string{
		{"-d", "127.0.0.1/32", "-j", "RETURN"},
		{"-m", "mark", "--mark", fmt.Sprintf("0x%x", p.mark), "-j", "RETURN"},
	}
	sort.Slice(units, func(i, j int) bool { return units[i].CIDR < units[j].CIDR })
	for _, u := range units {
		rel := strings.TrimPrefix(strings.TrimPrefix(u.Cgroup, p.cgfs), "/")
		rules = append(rules,
			[]string{"-m", "cgroup", "--path", rel, "!", "-d", u.CIDR, "-j", "DROP"},
			[]string{"-m", "cgroup", "!", "--path", rel, "-d", u.CIDR, "-j", "DROP"},
		)
	}
	for _, r := range rules {
		if out, err := runIPTables(append([]string{"-A", p.chain}, r...)...); err != nil {
			return fmt.Errorf("iptables -A %s %s: %w: %s", p.chain, strings.Join(r, " "), err, out)
		}
	}
	return nil
}

// remove deletes the jump and the chain.
func (p *partitioner) remove() error {
	return removeChain(p.chain)
}

func removeChain(chain string) error {
	for {
		if _, err := runIPTables("-D", "OUTPUT", "-o", "lo", "-j", chain); err != nil {
			break
		}
	}
	_, _ = runIPTables("-F", chain)
	if out, err := runIPTables("-X", chain); err != nil && !strings.Contains(out, "No chain") && !strings.Contains(out, "does not exist") {
		return fmt.Errorf("iptables -X %s: %w: %s", chain, err, out)
	}
	return nil
}
