package localenv

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/etcdfed/etcdfed/dev/localenv/delayproxy"
)

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
