package localenv

import (
	"fmt"
	"net/netip"
	"os/exec"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/etcdfed/etcdfed/dev/localenv/addr"
	"github.com/etcdfed/etcdfed/dev/localenv/delayproxy"
)

// distancePair is one ordered pair of units with its link.
type distancePair struct {
	from, to partitionUnit
	link     Link
	// udp are the UDP services inside to (its spoke's DNS and gossip):
	// datagrams are redirected per destination.
	udp []netip.AddrPort
	// zones counts the zones among from and to: more specific pairs
	// come first in the rules.
	zones int
}

func (p distancePair) name() string { return p.from.Name + ">" + p.to.Name }

// links expands d into one link per unordered pair of units, for s's
// topology: the preset's, then d's own links over them.
func (s *State) links(d Distance) (map[[2]string]Link, error) {
	out := map[[2]string]Link{}
	key := func(a, b string) [2]string { return [2]string{min(a, b), max(a, b)} }
	switch d.Preset {
	case "", PresetNone:
	case PresetOneRegion, PresetThreeRegions:
		for i, c := range s.MemberClusters {
			for j := i + 1; j < len(s.MemberClusters); j++ {
				l := oneRegion
				if ri, rj := i%3, j%3; d.Preset == PresetThreeRegions && ri != rj {
					rtt := regionRTTs[ri][rj]
					l = Link{RTT: rtt, Jitter: rtt / time.Duration(regionJitter)}
				}
				out[key(c.Name, s.MemberClusters[j].Name)] = l
			}
			for a := range c.Zones {
				for b := a + 1; b < len(c.Zones); b++ {
					out[key(c.Zones[a].Name, c.Zones[b].Name)] = oneRegion
				}
			}
		}
	default:
		return nil, fmt.Errorf("%w: no preset %q (presets: %s)", ErrBadDistance, d.Preset, strings.Join(Presets, ", "))
	}
	for _, l := range d.Links {
		out[key(l.A, l.B)] = l.Link
	}
	return out, nil
}

// resolveDistance checks d against the topology (every unit known, no
// pair of a zone and its own cluster) and returns its ordered pairs, the
// most specific first. Zero links are kept: an explicit zero between
// two zones keeps them near while their clusters are far apart.
func (s *State) resolveDistance(d Distance, cgroot string) ([]distancePair, error) {
	links, err := s.links(d)
	if err != nil {
		return nil, err
	}
	var out []distancePair
	for k, l := range links {
		var us [2]partitionUnit
		for i, name := range k {
			u, ok := s.unit(name, cgroot)
			if !ok {
				return nil, fmt.Errorf("%w: no unit %q (units: %s)", ErrBadDistance, name, strings.Join(s.unitNames(), ", "))
			}
			us[i] = u
		}
		if overlaps(us[0].CIDR, us[1].CIDR) {
			return nil, fmt.Errorf("%w: %s:%s: they overlap (a zone and its own cluster)", ErrBadDistance, k[0], k[1])
		}
		for _, dir := range [][2]partitionUnit{{us[0], us[1]}, {us[1], us[0]}} {
			p := distancePair{from: dir[0], to: dir[1], link: l}
			for _, u := range dir {
				if s.isZone(u.Name) {
					p.zones++
				}
			}
			if c, ok := s.Cluster(dir[1].Name); ok && c.Name != HubClusterName {
				for _, ep := range []string{c.DNS, c.Gossip} {
					if ap, err := netip.ParseAddrPort(ep); err == nil {
						p.udp = append(p.udp, ap)
					}
				}
			}
			out = append(out, p)
		}
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].zones != out[j].zones {
			return out[i].zones > out[j].zones
		}
		return out[i].name() < out[j].name()
	})
	return out, nil
}

func (s *State) isZone(name string) bool {
	for _, c := range s.MemberClusters {
		for _, z := range c.Zones {
			if z.Name == name {
				return true
			}
		}
	}
	return false
}

// distanceRoutes are the proxy routes of pairs: one TCP route per pair
// with a link, and one UDP route per service inside its destination.
func distanceRoutes(pairs []distancePair) map[delayproxy.Route]Link {
	out := map[delayproxy.Route]Link{}
	for _, p := range pairs {
		if p.link.IsZero() {
			continue
		}
		out[tcpRoute(p)] = p.link
		for _, ep := range p.udp {
			out[udpRoute(p, ep)] = p.link
		}
	}
	return out
}

func tcpRoute(p distancePair) delayproxy.Route {
	return delayproxy.Route{Name: p.name() + "/tcp"}
}

func udpRoute(p distancePair, ep netip.AddrPort) delayproxy.Route {
	return delayproxy.Route{Name: p.name() + "/udp/" + ep.String(), UDP: true, Target: ep, AnswerEnds: ep.Port() == addr.DNSPort}
}

// distanceRules are the nat rules of pairs, given the proxy's ports:
// the proxy's own traffic returns first; then, most specific pair
// first, a zero link returns (nothing later redirects it) and a link
// redirects the sender's TCP for the destination's block, and its UDP
// for each service there, to the route's port. Pure; deterministic.
func distanceRules(pairs []distancePair, ports map[delayproxy.Route]uint16, mark uint32, cgfs string) [][]string {
	rel := func(cg string) string { return strings.TrimPrefix(strings.TrimPrefix(cg, cgfs), "/") }
	out := [][]string{{"-m", "mark", "--mark", fmt.Sprintf("0x%x", mark), "-j", "RETURN"}}
	for _, p := range pairs {
		from := []string{"-m", "cgroup", "--path", rel(p.from.Cgroup)}
		if p.link.IsZero() {
			out = append(out, append(append([]string{}, from...), "-d", p.to.CIDR, "-j", "RETURN"))
			continue
		}
		for _, ep := range p.udp {
			out = append(out, append([]string{"-p", "udp"}, append(append([]string{}, from...),
				"-d", ep.Addr().String()+"/32", "--dport", strconv.Itoa(int(ep.Port())),
				"-j", "REDIRECT", "--to-ports", strconv.Itoa(int(ports[udpRoute(p, ep)])))...))
		}
		out = append(out, append([]string{"-p", "tcp"}, append(append([]string{}, from...),
			"-d", p.to.CIDR, "-j", "REDIRECT", "--to-ports", strconv.Itoa(int(ports[tcpRoute(p)])))...))
	}
	return out
}

// proxyMark is the SO_MARK of the delay proxy's own sockets: the nat
// chain lets them through, so that what the proxy sends on is never
// redirected again.
const proxyMark = 0x6566

// replaceChain replaces a chain's rules at once (iptables-restore
// --noflush: the rest of the table stays).
func replaceChain(table, chain string, rules [][]string) error {
	path, err := iptablesPath()
	if err != nil {
		return err
	}
	var b strings.Builder
	fmt.Fprintf(&b, "*%s\n-F %s\n", table, chain)
	for _, r := range rules {
		fmt.Fprintf(&b, "-A %s %s\n", chain, strings.Join(r, " "))
	}
	b.WriteString("COMMIT\n")
	cmd := exec.Command(path+"-restore", "-w", "5", "--noflush")
	cmd.Stdin = strings.NewReader(b.String())
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("iptables-restore %s %s: %w: %s", table, chain, err, out)
	}
	return nil
}
