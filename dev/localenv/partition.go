package localenv

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"path/filepath"
	"slices"
	"sort"
	"strings"
)

// A partition splits the environment's units into groups: each group
// reaches only its own members. A unit is the hub cluster ("hub": its
// apiserver and the hub), a whole member cluster ("member-2": its
// apiserver, its spoke and every zone), or one zone of a member cluster
// ("zone-2", "zone-1b": the zone's nodes and pods, not its cluster's
// apiserver or spoke). Units no group names are not cut from anything:
// they reach every group, and every group reaches them (a bridge). The
// processes outside every unit (the test or the CLI that drives the
// environment, the node agents) reach every group too, as an observer
// would: a partition cuts the units from each other, not from the
// outside. (FailZone's ModePartition, which cuts one unit off from
// everything, the outside included, stays as it was.)
//
// A one-way cut stops one unit from reaching another while the other
// still reaches it: connections From opens to To's addresses (and
// datagrams it sends there) are dropped; connections To opens to From
// work, replies included. On loopback every reply to a connection goes
// to 127.0.0.1, which the rules always let through, so this is a cut of
// who may connect to whom, the way a one-way firewall rule is. (A UDP
// protocol whose peers send from their bound port, such as gossip,
// loses To's answers to From as well.)

// Partition is the shape of a partition: groups, and one-way cuts.
type Partition struct {
	// Groups are lists of unit names; each group reaches only itself.
	Groups [][]string `json:"groups,omitempty"`
	// OneWay are one-way cuts.
	OneWay []Cut `json:"oneWay,omitempty"`
}

// Cut is a one-way cut: From cannot reach To; To still reaches From.
type Cut struct {
	From string `json:"from"`
	To   string `json:"to"`
}

// IsZero reports whether p cuts nothing.
func (p Partition) IsZero() bool { return len(p.Groups) == 0 && len(p.OneWay) == 0 }

// String renders p in the CLI's syntax: groups joined by "|", one-way
// cuts as "from>to".
func (p Partition) String() string {
	var parts []string
	if len(p.Groups) > 0 {
		gs := make([]string, len(p.Groups))
		for i, g := range p.Groups {
			gs[i] = strings.Join(g, ",")
		}
		parts = append(parts, "groups "+strings.Join(gs, "|"))
	}
	for _, c := range p.OneWay {
		parts = append(parts, "one-way "+c.From+">"+c.To)
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, "; ")
}

// ParseGroups reads groups in the CLI's syntax: "hub,member-3|member-1,member-2".
func ParseGroups(s string) ([][]string, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return nil, nil
	}
	var out [][]string
	for _, g := range strings.Split(s, "|") {
		var group []string
		for _, u := range strings.Split(g, ",") {
			if u = strings.TrimSpace(u); u != "" {
				group = append(group, u)
			}
		}
		if len(group) == 0 {
			return nil, fmt.Errorf("localenv: empty group in %q", s)
		}
		out = append(out, group)
	}
	return out, nil
}

// ParseCut reads a one-way cut "from>to".
func ParseCut(s string) (Cut, error) {
	from, to, ok := strings.Cut(s, ">")
	from, to = strings.TrimSpace(from), strings.TrimSpace(to)
	if !ok || from == "" || to == "" {
		return Cut{}, fmt.Errorf("localenv: one-way cut %q: want FROM>TO (FROM cannot reach TO)", s)
	}
	return Cut{From: from, To: to}, nil
}

// ErrBadPartition says a partition cannot be made as given.
var ErrBadPartition = errors.New("localenv: bad partition")

// partitionUnit is one unit's loopback block and cgroup.
type partitionUnit struct {
	Name   string
	CIDR   string
	Cgroup string // absolute cgroup directory
}

// unit resolves a unit name (cgroot is the environment's cgroup).
func (s *State) unit(name, cgroot string) (partitionUnit, bool) {
	if name == HubClusterName {
		return partitionUnit{Name: name, CIDR: s.Hub.CIDR, Cgroup: filepath.Join(cgroot, s.Hub.Name)}, true
	}
	for _, c := range s.MemberClusters {
		if c.Name == name {
			return partitionUnit{Name: name, CIDR: c.CIDR, Cgroup: filepath.Join(cgroot, c.Name)}, true
		}
		for _, z := range c.Zones {
			if z.Name == name {
				return partitionUnit{Name: name, CIDR: z.CIDR, Cgroup: filepath.Join(cgroot, c.Name, z.Name)}, true
			}
		}
	}
	return partitionUnit{}, false
}

// unitNames lists every unit name, for error messages.
func (s *State) unitNames() []string {
	out := []string{HubClusterName}
	for _, c := range s.MemberClusters {
		out = append(out, c.Name)
		for _, z := range c.Zones {
			out = append(out, z.Name)
		}
	}
	return out
}

// resolvedPartition is a Partition with its units resolved.
type resolvedPartition struct {
	groups [][]partitionUnit
	oneWay [][2]partitionUnit
}

// resolvePartition checks p against the topology and resolves its units:
// every name known, no unit in two groups, none inside another named one
// (a zone and its cluster), at least two groups or a one-way cut.
func (s *State) resolvePartition(p Partition, cgroot string) (resolvedPartition, error) {
	var out resolvedPartition
	resolve := func(name string) (partitionUnit, error) {
		u, ok := s.unit(name, cgroot)
		if !ok {
			return u, fmt.Errorf("%w: no unit %q (units: %s)", ErrBadPartition, name, strings.Join(s.unitNames(), ", "))
		}
		return u, nil
	}
	if len(p.Groups) == 1 {
		return out, fmt.Errorf("%w: one group cuts nothing: give two or more, separated by |", ErrBadPartition)
	}
	var named []partitionUnit
	for _, g := range p.Groups {
		var group []partitionUnit
		for _, name := range g {
			u, err := resolve(name)
			if err != nil {
				return out, err
			}
			for _, o := range named {
				if o.Name == u.Name {
					return out, fmt.Errorf("%w: %s is named twice", ErrBadPartition, u.Name)
				}
				if overlaps(o.CIDR, u.CIDR) {
					return out, fmt.Errorf("%w: %s and %s overlap (a zone and its cluster): name one of them", ErrBadPartition, o.Name, u.Name)
				}
			}
			named = append(named, u)
			group = append(group, u)
		}
		out.groups = append(out.groups, group)
	}
	for _, c := range p.OneWay {
		from, err := resolve(c.From)
		if err != nil {
			return out, err
		}
		to, err := resolve(c.To)
		if err != nil {
			return out, err
		}
		if overlaps(from.CIDR, to.CIDR) {
			return out, fmt.Errorf("%w: one-way cut %s>%s: they overlap", ErrBadPartition, c.From, c.To)
		}
		out.oneWay = append(out.oneWay, [2]partitionUnit{from, to})
	}
	return out, nil
}

// overlaps: one block contains the other.
func overlaps(a, b string) bool {
	pa, err1 := netip.ParsePrefix(a)
	pb, err2 := netip.ParsePrefix(b)
	if err1 != nil || err2 != nil {
		return a == b
	}
	return pa.Overlaps(pb)
}

// dropRule drops packets sent by the sockets of a cgroup (or, with
// notFrom, of every other cgroup) to a block (or, with notTo, to anything
// outside it).
type dropRule struct {
	cgroup  string // absolute
	notFrom bool
	cidr    string
	notTo   bool
}

// args renders the rule for iptables, with cgroup paths relative to the
// cgroup2 mount cgfs.
func (r dropRule) args(cgfs string) []string {
	rel := strings.TrimPrefix(strings.TrimPrefix(r.cgroup, cgfs), "/")
	out := []string{"-m", "cgroup"}
	if r.notFrom {
		out = append(out, "!")
	}
	out = append(out, "--path", rel)
	if r.notTo {
		out = append(out, "!")
	}
	return append(out, "-d", r.cidr, "-j", "DROP")
}

// redirectedArgs renders the rule for connections the delay proxy's
// REDIRECT (distance.go) turned towards 127.0.0.1: matched on their
// original destination, in the direction that opens them (the replies
// of a connection whose opening passed belong to it).
func (r dropRule) redirectedArgs(cgfs string) []string {
	rel := strings.TrimPrefix(strings.TrimPrefix(r.cgroup, cgfs), "/")
	out := []string{"-m", "cgroup"}
	if r.notFrom {
		out = append(out, "!")
	}
	out = append(out, "--path", rel, "-m", "conntrack", "--ctstate", "DNAT", "--ctdir", "ORIGINAL")
	if r.notTo {
		out = append(out, "!")
	}
	return append(out, "--ctorigdst", r.cidr, "-j", "DROP")
}

// partitionRules are the DROP rules of the isolated units (FailZone's
// ModePartition: nothing leaves, nothing enters), then of the groups
// (every unit of a group to every unit of every other group), then of
// the one-way cuts. Pure; deterministic order.
func partitionRules(isolated []partitionUnit, p resolvedPartition) []dropRule {
	var out []dropRule
	iso := slices.Clone(isolated)
	sort.Slice(iso, func(i, j int) bool { return iso[i].CIDR < iso[j].CIDR })
	for _, u := range iso {
		out = append(out,
			dropRule{cgroup: u.Cgroup, cidr: u.CIDR, notTo: true},
			dropRule{cgroup: u.Cgroup, notFrom: true, cidr: u.CIDR},
		)
	}
	for i, g := range p.groups {
		for j, h := range p.groups {
			if i == j {
				continue
			}
			for _, u := range g {
				for _, v := range h {
					out = append(out, dropRule{cgroup: u.Cgroup, cidr: v.CIDR})
				}
			}
		}
	}
	for _, c := range p.oneWay {
		out = append(out, dropRule{cgroup: c[0].Cgroup, cidr: c[1].CIDR})
	}
	return slices.CompactFunc(out, func(a, b dropRule) bool { return a == b })
}

// Partition cuts the environment's network into p's groups and one-way
// cuts, replacing the partition in place (if any); zones failed with
// FailZone stay as they are. Root only. HealPartition undoes it.
func (e *Env) Partition(ctx context.Context, p Partition) error {
	if e.part == nil {
		return fmt.Errorf("localenv: partition unavailable: %w", e.partErr)
	}
	if p.IsZero() {
		return fmt.Errorf("%w: no groups and no one-way cut (heal with HealPartition)", ErrBadPartition)
	}
	if _, err := e.state.resolvePartition(p, e.cgroot); err != nil {
		return err
	}
	e.mu.Lock()
	e.partition = Partition{Groups: slices.Clone(p.Groups), OneWay: slices.Clone(p.OneWay)}
	before := e.snapshotFailed()
	e.mu.Unlock()
	e.progress("partitioning: "+p.String(), false)
	err := e.reconcileFaults(ctx, before)
	e.progress("partitioned: "+p.String(), true)
	return err
}

// HealPartition removes the partition Partition made (FailZone's faults
// stay).
func (e *Env) HealPartition(ctx context.Context) error {
	e.mu.Lock()
	was := e.partition
	e.partition = Partition{}
	before := e.snapshotFailed()
	e.mu.Unlock()
	if was.IsZero() {
		return errors.New("localenv: no partition to heal")
	}
	e.progress("healing the partition ("+was.String()+")", false)
	err := e.reconcileFaults(ctx, before)
	e.progress("healed the partition", true)
	return err
}

// CurrentPartition returns the partition in place (zero when none).
func (e *Env) CurrentPartition() Partition {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.partition
}
