package realnode

import (
	"bytes"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"sort"
	"strings"
)

// Gateway is the address every node's default route points at: the
// environment's end of each node's veth carries it (one /32 per link, as
// routed pod networks do), so a node needs no subnet of its own.
const Gateway = "169.254.0.1"

// SetupWorld prepares this process's network namespace, the environment's
// own network, to route between nodes: forwarding on, and extra addresses
// (the apiservers', the load balancers') on its loopback.
func SetupWorld(addrs []netip.Addr) error {
	if err := os.WriteFile("/proc/sys/net/ipv4/ip_forward", []byte("1"), 0o644); err != nil {
		return fmt.Errorf("enable forwarding in the environment's network: %w", err)
	}
	for _, a := range addrs {
		if err := AddLocalAddr(a); err != nil {
			return err
		}
	}
	return nil
}

// AddLocalAddr puts a /32 on this namespace's loopback (idempotent).
func AddLocalAddr(a netip.Addr) error {
	if err := IP("addr", "replace", a.String()+"/32", "dev", "lo"); err != nil {
		return err
	}
	return nil
}

// Attach creates the node's network namespace and its veth to the
// environment's network: eth0 with the node's IP inside, Link outside, a
// route to the node and one to its pod range.
func (n *Node) Attach() error {
	if err := CreateNetns(n.Netns); err != nil {
		return err
	}
	_ = IP("link", "del", n.Link) // a leftover of a crashed run
	steps := [][]string{
		{"link", "add", n.Link, "type", "veth", "peer", "name", "eth0", "netns", n.Netns},
		{"addr", "add", Gateway + "/32", "dev", n.Link},
		{"link", "set", n.Link, "up"},
		{"-n", n.Netns, "addr", "add", n.IP.String() + "/32", "dev", "eth0"},
		{"-n", n.Netns, "link", "set", "eth0", "up"},
		{"-n", n.Netns, "route", "add", Gateway, "dev", "eth0", "scope", "link"},
		{"-n", n.Netns, "route", "add", "default", "via", Gateway, "dev", "eth0", "onlink"},
		{"route", "replace", n.IP.String() + "/32", "dev", n.Link},
		{"route", "replace", n.PodCIDR.String(), "via", n.IP.String(), "dev", n.Link},
	}
	for _, s := range steps {
		if err := IP(s...); err != nil {
			return fmt.Errorf("connect node %s: %w", n.Name, err)
		}
	}
	if err := Sysctl(n.Netns, "net.ipv4.ip_forward", "1"); err != nil {
		return err
	}
	// Bridged pod-to-pod traffic through a Service goes through
	// kube-proxy's rules only when bridged packets meet iptables.
	if err := Sysctl(n.Netns, "net.bridge.bridge-nf-call-iptables", "1"); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	return nil
}

// Detach deletes the node's network namespace (and with it its veth).
func (n *Node) Detach() error {
	_ = IP("link", "del", n.Link)
	return DeleteNetns(n.Netns)
}

// Cut is one partitioned part of the environment's network (a zone or a
// whole cluster): its nodes (their veths, Links) and the environment's own
// addresses that belong to it (Local: a whole cluster's apiserver and load
// balancer addresses). Traffic inside the cut flows; traffic across its
// border is dropped silently, both ways.
type Cut struct {
	Name  string
	Links []string
	Local []netip.Prefix
}

// partChains are the filter chains of the partitions in the environment's
// network namespace (the environment's own: its iptables hold nothing
// else of ours), one per hook they are jumped to from.
var partChains = map[string]string{"FORWARD": "ETCDFED-PART-FWD", "INPUT": "ETCDFED-PART-IN", "OUTPUT": "ETCDFED-PART-OUT"}

func iptables(args ...string) (string, error) {
	path, err := exec.LookPath("iptables")
	if err != nil {
		return "", errors.New("iptables not found: hack/system-deps.sh realnodes installs it")
	}
	var out bytes.Buffer
	cmd := exec.Command(path, append([]string{"-w", "5"}, args...)...)
	cmd.Stdout, cmd.Stderr = &out, &out
	err = cmd.Run()
	return out.String(), err
}

// cutRules are the rules of cut i: the chains (each ends in DROP) and the
// jumps to them from each hook.
//
//	FORWARD  in on a cut link, out on another link           -> drop
//	         out on a cut link, in on another link           -> drop
//	         to an address of the cut, in on another link    -> drop
//	INPUT    in on a cut link, to an address not of the cut  -> drop
//	         to an address of the cut, in on another link (this
//	         namespace's own processes included)             -> drop
//	OUTPUT   out on a cut link, from an address not of the cut -> drop
func cutRules(i int, c Cut) (chains map[string][][]string, jumps map[string][][]string) {
	ch := func(kind string) string { return fmt.Sprintf("ETCDFED-CUT-%d-%s", i, kind) }
	chains, jumps = map[string][][]string{}, map[string][][]string{}
	add := func(name string, rule ...string) { chains[name] = append(chains[name], rule) }
	for _, l := range c.Links {
		add(ch("FWD-OUT"), "-o", l, "-j", "RETURN")
		add(ch("FWD-IN"), "-i", l, "-j", "RETURN")
		add(ch("FROM-OUTSIDE"), "-i", l, "-j", "RETURN")
		jumps["FORWARD"] = append(jumps["FORWARD"], []string{"-i", l, "-j", ch("FWD-OUT")}, []string{"-o", l, "-j", ch("FWD-IN")})
		jumps["INPUT"] = append(jumps["INPUT"], []string{"-i", l, "-j", ch("TO-OUTSIDE")})
		jumps["OUTPUT"] = append(jumps["OUTPUT"], []string{"-o", l, "-j", ch("FROM-LOCAL")})
	}
	for _, p := range c.Local {
		add(ch("TO-OUTSIDE"), "-d", p.String(), "-j", "RETURN")
		add(ch("FROM-LOCAL"), "-s", p.String(), "-j", "RETURN")
		for _, hook := range []string{"FORWARD", "INPUT"} {
			jumps[hook] = append(jumps[hook], []string{"-d", p.String(), "-j", ch("FROM-OUTSIDE")})
		}
	}
	for _, name := range []string{ch("FWD-OUT"), ch("FWD-IN"), ch("FROM-OUTSIDE"), ch("TO-OUTSIDE"), ch("FROM-LOCAL")} {
		add(name, "-j", "DROP")
	}
	return chains, jumps
}

// ApplyCuts replaces the partition rules of this network namespace with
// cuts (see cutRules).
func ApplyCuts(cuts []Cut) error {
	for hook, chain := range partChains {
		if _, err := iptables("-N", chain); err != nil {
			if out, err := iptables("-F", chain); err != nil {
				return fmt.Errorf("iptables -F %s: %w: %s", chain, err, out)
			}
		}
		if _, err := iptables("-C", hook, "-j", chain); err != nil {
			if out, err := iptables("-I", hook, "-j", chain); err != nil {
				return fmt.Errorf("iptables -I %s: %w: %s", hook, err, out)
			}
		}
	}
	existing := listChains("ETCDFED-CUT-")
	sort.Slice(cuts, func(i, j int) bool { return cuts[i].Name < cuts[j].Name })
	want := map[string]bool{}
	for i, c := range cuts {
		chains, jumps := cutRules(i, c)
		for name, rules := range chains {
			want[name] = true
			if _, err := iptables("-N", name); err != nil {
				if o, err := iptables("-F", name); err != nil {
					return fmt.Errorf("iptables -F %s: %w: %s", name, err, o)
				}
			}
			for _, r := range rules {
				if o, err := iptables(append([]string{"-A", name}, r...)...); err != nil {
					return fmt.Errorf("iptables -A %s %s (cut %s): %w: %s", name, strings.Join(r, " "), c.Name, err, o)
				}
			}
		}
		for hook, rules := range jumps {
			for _, r := range rules {
				if o, err := iptables(append([]string{"-A", partChains[hook]}, r...)...); err != nil {
					return fmt.Errorf("iptables -A %s %s (cut %s): %w: %s", partChains[hook], strings.Join(r, " "), c.Name, err, o)
				}
			}
		}
	}
	for _, ch := range existing {
		if !want[ch] {
			_, _ = iptables("-F", ch)
			_, _ = iptables("-X", ch)
		}
	}
	return nil
}

func listChains(prefix string) []string {
	out, err := iptables("-S")
	if err != nil {
		return nil
	}
	var chains []string
	for _, l := range strings.Split(out, "\n") {
		f := strings.Fields(l)
		if len(f) == 2 && f[0] == "-N" && strings.HasPrefix(f[1], prefix) {
			chains = append(chains, f[1])
		}
	}
	return chains
}
