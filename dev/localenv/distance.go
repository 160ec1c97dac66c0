package localenv

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/etcdfed/etcdfed/dev/localenv/addr"
	"github.com/etcdfed/etcdfed/dev/localenv/delayproxy"
)

// Distance is what lies between the environment's units: a round trip,
// a jitter and a loss per pair of zones, of member clusters, or of the
// hub and a member cluster (units as in partition.go). The kernel here
// has no netem qdisc, so distance is made in user space: the process
// node mode sends a unit's traffic for another unit through a delaying
// proxy (package delayproxy) with iptables REDIRECT rules matched by the
// sender's cgroup and the destination's block; real nodes through a
// transparent one chosen by the sender's and the destination's blocks
// (realdistance.go).
//
// A distance is a preset, links of its own, or both (links win over the
// preset's for the same pair); its text form is what `etcdfed dev up
// --latency` and `etcdfed dev latency set` take:
//
//	three-regions
//	member-1:member-2=20ms/5ms/0.1%,zone-1a:zone-1b=1ms
//	one-region,hub:member-3=40ms
//
// A link is ROUNDTRIP[/JITTER[/LOSS%]]: each direction is delayed by
// half the round trip plus or minus half the jitter, so that a round
// trip lies within ROUNDTRIP ± JITTER; a TCP segment lost costs a
// retransmission timeout (200ms or the round trip, whichever is
// longer), a datagram lost is dropped. Links are symmetric. The most
// specific pair wins: a pair of zones over the pair of their clusters.
type Distance struct {
	// Preset is one of Presets ("" or "none": no preset).
	Preset string
	// Links are pairs of units and their link.
	Links []PairLink
}

// Link is a round trip, jitter and loss (delayproxy.Link).
type Link = delayproxy.Link

// PairLink is the link between two units, both ways.
type PairLink struct {
	A, B string
	Link
}

// Presets of Distance.
const (
	// PresetNone: zero distance everywhere.
	PresetNone = "none"
	// PresetOneRegion: every member cluster and every zone in one region,
	// 1 to 2ms apart (1.5ms ± 0.5ms).
	PresetOneRegion = "one-region"
	// PresetThreeRegions: member cluster i in region (i-1) mod 3; between
	// regions 1 and 2 10ms, 1 and 3 30ms, 2 and 3 60ms (each ± a tenth);
	// clusters of one region and zones of one cluster as one-region. The
	// hub stays at zero distance (add hub:member-N links to move it).
	PresetThreeRegions = "three-regions"
)

// Presets lists the presets.
var Presets = []string{PresetNone, PresetOneRegion, PresetThreeRegions}

// Bounds of a link.
const (
	MaxRTT  = 10 * time.Second
	MaxLoss = 0.5
)

// ErrBadDistance says a distance cannot be made as given.
var ErrBadDistance = errors.New("localenv: bad distance")

var (
	oneRegion    = Link{RTT: 1500 * time.Microsecond, Jitter: time.Millisecond}
	regionRTTs   = [3][3]time.Duration{{0, 10 * time.Millisecond, 30 * time.Millisecond}, {10 * time.Millisecond, 0, 60 * time.Millisecond}, {30 * time.Millisecond, 60 * time.Millisecond, 0}}
	regionJitter = 10 // a tenth of the round trip
)

// IsZero reports whether d adds no distance anywhere.
func (d Distance) IsZero() bool {
	if d.Preset != "" && d.Preset != PresetNone {
		return false
	}
	for _, l := range d.Links {
		if !l.IsZero() {
			return false
		}
	}
	return true
}

// String renders d in the text form ParseDistance reads ("none" when
// zero).
func (d Distance) String() string {
	var parts []string
	if d.Preset != "" && d.Preset != PresetNone {
		parts = append(parts, d.Preset)
	}
	for _, l := range d.Links {
		parts = append(parts, l.A+":"+l.B+"="+FormatLink(l.Link))
	}
	if len(parts) == 0 {
		return PresetNone
	}
	return strings.Join(parts, ",")
}

// MarshalText stores a distance as its text form (state.json).
func (d Distance) MarshalText() ([]byte, error) { return []byte(d.String()), nil }

// UnmarshalText reads the text form.
func (d *Distance) UnmarshalText(b []byte) error {
	v, err := ParseDistance(string(b))
	if err != nil {
		return err
	}
	*d = v
	return nil
}

// FormatLink renders a link as ROUNDTRIP[/JITTER[/LOSS%]].
func FormatLink(l Link) string {
	s := l.RTT.String()
	if l.Jitter > 0 || l.Loss > 0 {
		s += "/" + l.Jitter.String()
	}
	if l.Loss > 0 {
		s += "/" + strconv.FormatFloat(l.Loss*100, 'f', -1, 64) + "%"
	}
	return s
}

// ParseDistance reads a distance's text form: a preset and/or
// comma-separated links A:B=ROUNDTRIP[/JITTER[/LOSS%]]. It checks the
// syntax and the bounds; the unit names are checked against a topology
// when the distance is set.
func ParseDistance(s string) (Distance, error) {
	var d Distance
	s = strings.TrimSpace(s)
	if s == "" {
		return d, fmt.Errorf("%w: empty (give a preset: %s, or links like zone-1:zone-2=20ms/5ms/0.1%%)", ErrBadDistance, strings.Join(Presets, ", "))
	}
	seen := map[[2]string]bool{}
	for i, item := range strings.Split(s, ",") {
		item = strings.TrimSpace(item)
		pair, spec, isLink := strings.Cut(item, "=")
		if !isLink {
			if strings.Contains(item, ":") {
				return d, fmt.Errorf("%w: %q: a link needs its round trip: A:B=ROUNDTRIP[/JITTER[/LOSS%%]], e.g. %s=20ms", ErrBadDistance, item, item)
			}
			if i != 0 {
				return d, fmt.Errorf("%w: %q: a preset comes first, links are A:B=ROUNDTRIP[/JITTER[/LOSS%%]]", ErrBadDistance, item)
			}
			if !isPreset(item) {
				return d, fmt.Errorf("%w: no preset %q (presets: %s; or links like zone-1:zone-2=20ms/5ms/0.1%%)", ErrBadDistance, item, strings.Join(Presets, ", "))
			}
			d.Preset = item
			continue
		}
		a, b, ok := strings.Cut(pair, ":")
		a, b = strings.TrimSpace(a), strings.TrimSpace(b)
		if !ok || a == "" || b == "" {
			return d, fmt.Errorf("%w: %q: want A:B=ROUNDTRIP[/JITTER[/LOSS%%]] (two units, e.g. zone-1:zone-2)", ErrBadDistance, item)
		}
		if a == b {
			return d, fmt.Errorf("%w: %q: a unit has no distance to itself", ErrBadDistance, item)
		}
		key := [2]string{min(a, b), max(a, b)}
		if seen[key] {
			return d, fmt.Errorf("%w: %s:%s is given twice", ErrBadDistance, a, b)
		}
		seen[key] = true
		l, err := ParseLink(strings.TrimSpace(spec))
		if err != nil {
			return d, fmt.Errorf("%w: %s:%s: %w", ErrBadDistance, a, b, err)
		}
		d.Links = append(d.Links, PairLink{A: a, B: b, Link: l})
	}
	if d.Preset == PresetNone && len(d.Links) > 0 {
		d.Preset = ""
	}
	return d, nil
}

func isPreset(s string) bool {
	for _, p := range Presets {
		if s == p {
			return true
		}
	}
	return false
}

// ParseLink reads ROUNDTRIP[/JITTER[/LOSS%]]: "20ms", "20ms/5ms",
// "20ms/5ms/0.1%".
func ParseLink(s string) (Link, error) {
	var l Link
	parts := strings.Split(s, "/")
	if len(parts) > 3 || s == "" {
		return l, fmt.Errorf("link %q: want ROUNDTRIP[/JITTER[/LOSS%%]], e.g. 20ms/5ms/0.1%%", s)
	}
	dur := func(what, v string) (time.Duration, error) {
		d, err := time.ParseDuration(strings.TrimSpace(v))
		if err != nil {
			return 0, fmt.Errorf("%s %q: want a duration with its unit, e.g. 20ms", what, v)
		}
		if d < 0 || d > MaxRTT {
			return 0, fmt.Errorf("%s %s: want 0..%s", what, d, MaxRTT)
		}
		return d, nil
	}
	var err error
	if l.RTT, err = dur("round trip", parts[0]); err != nil {
		return l, err
	}
	if len(parts) > 1 {
		if l.Jitter, err = dur("jitter", parts[1]); err != nil {
			return l, err
		}
		if l.Jitter > l.RTT {
			return l, fmt.Errorf("jitter %s exceeds the round trip %s (a delay cannot be negative)", l.Jitter, l.RTT)
		}
	}
	if len(parts) > 2 {
		v := strings.TrimSpace(parts[2])
		num, ok := strings.CutSuffix(v, "%")
		f, err := strconv.ParseFloat(num, 64)
		if !ok || err != nil {
			return l, fmt.Errorf("loss %q: want a percentage, e.g. 0.1%%", v)
		}
		if f < 0 || f/100 > MaxLoss {
			return l, fmt.Errorf("loss %s: want 0%%..%g%%", v, MaxLoss*100)
		}
		l.Loss = f / 100
	}
	return l, nil
}

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

// DistanceStatus is the distance in place, in Status.
type DistanceStatus struct {
	// Spec is the distance in its text form ("none" when zero).
	Spec string `json:"spec"`
	// Links are the links in effect, one per pair of units, in the text
	// form of a link ("member-1:member-2=10ms/1ms"), the most specific
	// first.
	Links []string `json:"links,omitempty"`
	// Proxied counts the connections and UDP flows through the proxy.
	Proxied int `json:"proxied,omitempty"`
	// Routes are the proxy's routes with their open connections or
	// flows ("member-1>member-2/tcp 12").
	Routes []string `json:"routes,omitempty"`
}

// SetDistance sets the distance between the environment's units,
// replacing the one in place; the zero Distance ("none") removes every
// rule. Connections and flows already through the proxy take the new
// numbers at once; TCP connections between two units that were direct
// and now lie at a distance are reset, as a route change would, and
// reconnect through the proxy. The distance is recorded in state.json:
// the next start of the environment keeps it. Needs what partitions need
// (root, iptables; cgroup v2 with process nodes; real nodes: see
// realdistance.go).
func (e *Env) SetDistance(ctx context.Context, d Distance) error {
	e.distMu.Lock()
	defer e.distMu.Unlock()
	if err := e.applyDistance(ctx, d); err != nil {
		return err
	}
	e.mu.Lock()
	st := *e.state
	st.Distance = &d
	e.state.Distance = &d
	e.mu.Unlock()
	return st.save()
}

// Distance returns the distance in place (zero when none).
func (e *Env) Distance() Distance {
	e.distMu.Lock()
	defer e.distMu.Unlock()
	return e.dist
}

// setDelayRoutes gives the delaying proxy the routes of pairs (none when
// d is zero) and returns the pairs at a distance before (by name) and the
// proxy's ports; both node modes begin their distance with it.
func (e *Env) setDelayRoutes(d Distance, pairs []distancePair) (map[string]bool, map[delayproxy.Route]uint16, error) {
	before := map[string]bool{}
	for _, p := range e.distPairs {
		if !p.link.IsZero() {
			before[p.name()] = true
		}
	}
	routes := distanceRoutes(pairs)
	if d.IsZero() {
		routes = nil
	}
	ports, err := e.delay.Set(routes)
	return before, ports, err
}

// applyDistance resolves d, sets the proxy's routes and replaces the
// nat chain's rules in one iptables-restore (atomic), then resets the
// TCP connections of pairs newly at a distance and forgets their
// spokes' gossip flow.
func (e *Env) applyDistance(ctx context.Context, d Distance) error {
	pairs, err := e.state.resolveDistance(d, e.cgroot)
	if err != nil {
		return err
	}
	if e.state.Real() {
		return e.applyRealDistance(ctx, d, pairs)
	}
	if d.IsZero() && e.delay == nil {
		e.dist, e.distPairs = d, pairs
		return nil
	}
	if e.part == nil {
		return fmt.Errorf("localenv: distance unavailable: %w", e.partErr)
	}
	if e.delay == nil {
		e.delay = delayproxy.New(proxyMark, e.log.WithName("delayproxy"))
	}
	before, ports, err := e.setDelayRoutes(d, pairs)
	if err != nil {
		return err
	}
	var rules [][]string
	if !d.IsZero() {
		rules = distanceRules(pairs, ports, proxyMark, e.cgfs)
	}
	if err := replaceChain("nat", e.part.delay, rules); err != nil {
		return err
	}
	var errs []error
	now := map[string]bool{}
	for _, p := range pairs {
		if !p.link.IsZero() {
			now[p.name()] = true
			if !before[p.name()] {
				errs = append(errs, e.resetConnections(ctx, p), e.forgetGossip(p))
			}
		}
	}
	// Gossip between spokes now at zero distance goes direct again, not
	// through a retired route.
	for _, p := range e.distPairs {
		if before[p.name()] && !now[p.name()] {
			errs = append(errs, e.forgetGossip(p))
		}
	}
	e.dist, e.distPairs = d, pairs
	e.progress("distance: "+d.String(), true)
	return errors.Join(errs...)
}

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

// resetConnections resets the established TCP connections from p's
// sender to p's destination (ss -K, per cgroup below the sender's): a
// connection opened before the distance was set would otherwise stay
// direct for its life (nat decides once per connection), and etcd's
// peer streams live for hours.
func (e *Env) resetConnections(ctx context.Context, p distancePair) error {
	ss, err := exec.LookPath("ss")
	if err != nil {
		e.log.Info("Cannot reset connections opened before the distance (no ss; install iproute2)", "pair", p.name())
		return nil
	}
	var errs []error
	_ = filepath.WalkDir(p.from.Cgroup, func(path string, de os.DirEntry, err error) error {
		if err != nil || !de.IsDir() {
			return nil //nolint:nilerr // a cgroup gone meanwhile has no connections
		}
		rel := "/" + strings.TrimPrefix(strings.TrimPrefix(path, e.cgfs), "/")
		out, err := exec.CommandContext(ctx, ss, "-K", "-t", "-n", "cgroup", rel, "dst", p.to.CIDR).CombinedOutput()
		if err != nil {
			errs = append(errs, fmt.Errorf("ss -K cgroup %s dst %s: %w: %s", rel, p.to.CIDR, err, out))
		}
		return nil
	})
	return errors.Join(errs...)
}

// forgetGossip forgets the gossip flow from p's sender's spoke to p's
// destination's (UDP from port 7946 to port 7946, which never pauses
// long enough to end): its next datagram meets the rules in place.
func (e *Env) forgetGossip(p distancePair) error {
	from, ok1 := e.state.Cluster(p.from.Name)
	to, ok2 := e.state.Cluster(p.to.Name)
	if !ok1 || !ok2 || from.Gossip == "" || to.Gossip == "" {
		return nil
	}
	a, err1 := netip.ParseAddrPort(from.Gossip)
	b, err2 := netip.ParseAddrPort(to.Gossip)
	if err1 != nil || err2 != nil {
		return nil //nolint:nilerr // no gossip address, no flow
	}
	return forgetUDPFlow(a, b)
}

// distanceStatus is the distance in place for Status.
func (e *Env) distanceStatus() *DistanceStatus {
	e.distMu.Lock()
	defer e.distMu.Unlock()
	if e.dist.IsZero() && e.delay == nil {
		return nil
	}
	s := &DistanceStatus{Spec: e.dist.String()}
	for _, p := range e.distPairs {
		if p.from.Name < p.to.Name {
			s.Links = append(s.Links, p.from.Name+":"+p.to.Name+"="+FormatLink(p.link))
		}
	}
	if e.delay != nil {
		for _, r := range e.delay.Routes() {
			s.Proxied += r.Open
			s.Routes = append(s.Routes, fmt.Sprintf("%s %d", r.Name, r.Open))
		}
	}
	return s
}

// startDistance sets, before anything starts, the distance Config asks
// for or else the one state.json recorded.
func (e *Env) startDistance(ctx context.Context) error {
	d, explicit := e.cfg.Distance, e.cfg.Distance != nil
	if d == nil {
		d = e.state.Distance
	}
	if d == nil || d.IsZero() {
		if explicit {
			e.state.Distance = d
		}
		return nil
	}
	if e.part == nil && !e.state.Real() {
		if explicit {
			return fmt.Errorf("localenv: distance %s unavailable: %w", d, e.partErr)
		}
		e.warn(fmt.Sprintf("the distance recorded in state.json (%s) is unavailable here (%v): running at zero distance", d, e.partErr))
		return nil
	}
	e.distMu.Lock()
	defer e.distMu.Unlock()
	if err := e.applyDistance(ctx, *d); err != nil {
		return err
	}
	e.state.Distance = d
	return nil
}
