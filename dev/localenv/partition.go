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

// partitionUnit is one unit's loopback block and cgroup, and the
// connection mark of the connections its processes open.
type partitionUnit struct {
	Name   string
	CIDR   string
	Cgroup string // absolute cgroup directory
	// Mark and MarkMask: a connection one of the unit's processes opened
	// carries Mark in the bits MarkMask of its conntrack mark (openerMarks).
	Mark, MarkMask uint32
}

// Connection marks say which unit opened a connection, so that a cut can
// drop the replies too: a reply travels to the opener's address, which
// the kernel has translated back to 127.0.0.1 by the time the filter
// rules see it (the pods' SNAT), so neither its destination nor its
// sender's cgroup (the accepting side's) names the opener. The top byte
// is the member cluster's index (1 for the first; hubMarkCluster for the
// hub cluster), the next the zone's (1 for the first; 0 for the
// cluster's own processes: apiserver, spoke). agentConnMark marks the
// node agents' connections, which no cut touches.
const (
	unitMarkMask    uint32 = 0xffff0000
	clusterMarkMask uint32 = 0xff000000
	hubMarkCluster  uint32 = 0xfe
	agentConnMark   uint32 = 0xff000000
)

func clusterMark(i int) uint32         { return uint32(i+1) << 24 }
func zoneMark(i, j int) uint32         { return clusterMark(i) | uint32(j+1)<<16 }
func hubMark() uint32                  { return hubMarkCluster << 24 }
func markArg(mark, mask uint32) string { return fmt.Sprintf("0x%x/0x%x", mark, mask) }

// unit resolves a unit name (cgroot is the environment's cgroup).
func (s *State) unit(name, cgroot string) (partitionUnit, bool) {
	if name == HubClusterName {
		return partitionUnit{Name: name, CIDR: s.Hub.CIDR, Cgroup: filepath.Join(cgroot, s.Hub.Name), Mark: hubMark(), MarkMask: clusterMarkMask}, true
	}
	for i, c := range s.MemberClusters {
		if c.Name == name {
			return partitionUnit{Name: name, CIDR: c.CIDR, Cgroup: filepath.Join(cgroot, c.Name), Mark: clusterMark(i), MarkMask: clusterMarkMask}, true
		}
		for j, z := range c.Zones {
			if z.Name == name {
				return partitionUnit{Name: name, CIDR: z.CIDR, Cgroup: filepath.Join(cgroot, c.Name, z.Name), Mark: zoneMark(i, j), MarkMask: unitMarkMask}, true
			}
		}
	}
	return partitionUnit{}, false
}

// openerMarks are the rules that mark each new connection with the unit
// of the process that opened it (the innermost: a zone's before its
// cluster's), for the cuts' reply rules. Pure; deterministic order.
func (s *State) openerMarks(cgroot string) []markRule {
	var out []markRule
	for i, c := range s.MemberClusters {
		for j, z := range c.Zones {
			out = append(out, markRule{cgroup: filepath.Join(cgroot, c.Name, z.Name), mark: zoneMark(i, j)})
		}
	}
	for i, c := range s.MemberClusters {
		out = append(out, markRule{cgroup: filepath.Join(cgroot, c.Name), mark: clusterMark(i)})
	}
	return append(out, markRule{cgroup: filepath.Join(cgroot, s.Hub.Name), mark: hubMark()})
}

// markRule marks the new connections a cgroup's processes open.
type markRule struct {
	cgroup string // absolute
	mark   uint32
}

// args renders the rule for iptables: only a connection no rule marked
// yet (its first packet) is marked.
func (r markRule) args(cgfs string) []string {
	rel := strings.TrimPrefix(strings.TrimPrefix(r.cgroup, cgfs), "/")
	return []string{"-m", "conntrack", "--ctstate", "NEW", "-m", "connmark", "--mark", markArg(0, unitMarkMask),
		"-m", "cgroup", "--path", rel, "-j", "CONNMARK", "--set-xmark", markArg(r.mark, unitMarkMask)}
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
// outside it). A reply rule drops instead the replies of the connections
// a unit opened (its mark; with notFrom, any other unit or none) to a
// block (with notTo, outside it): what the accepting side sends back.
type dropRule struct {
	cgroup  string // absolute
	notFrom bool
	cidr    string
	notTo   bool
	// reply: mark and mask name the opener instead of cgroup.
	reply      bool
	mark, mask uint32
}

// replyArgs renders a reply rule for iptables: matched on the
// connection's mark and original destination (before a REDIRECT to the
// delay proxy, so the same rule holds at a distance).
func (r dropRule) replyArgs() []string {
	out := []string{"-m", "connmark"}
	if r.notFrom {
		out = append(out, "!")
	}
	out = append(out, "--mark", markArg(r.mark, r.mask), "-m", "conntrack", "--ctdir", "REPLY")
	if r.notTo {
		out = append(out, "!")
	}
	return append(append(out, "--ctorigdst", r.cidr), loseArgs...)
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
	return append(append(out, "-d", r.cidr), loseArgs...)
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
	return append(append(out, "--ctorigdst", r.cidr), loseArgs...)
}

// partitionRules are the DROP rules of the isolated units (FailZone's
// ModePartition: nothing leaves, nothing enters, replies included), then
// of the groups (every unit of a group to every unit of every other
// group, and the replies of the connections it opened to them), then of
// the one-way cuts (the opener's packets only: a one-way cut is a
// stateful firewall rule). Pure; deterministic order.
func partitionRules(isolated []partitionUnit, p resolvedPartition) []dropRule {
	var out []dropRule
	iso := slices.Clone(isolated)
	sort.Slice(iso, func(i, j int) bool { return iso[i].CIDR < iso[j].CIDR })
	for _, u := range iso {
		out = append(out,
			dropRule{cgroup: u.Cgroup, cidr: u.CIDR, notTo: true},
			dropRule{cgroup: u.Cgroup, notFrom: true, cidr: u.CIDR},
			// What answers the unit's connections from outside, and what
			// the unit answers to connections from outside.
			dropRule{reply: true, mark: u.Mark, mask: u.MarkMask, cidr: u.CIDR, notTo: true},
			dropRule{reply: true, mark: u.Mark, mask: u.MarkMask, notFrom: true, cidr: u.CIDR},
		)
	}
	for i, g := range p.groups {
		for j, h := range p.groups {
			if i == j {
				continue
			}
			for _, u := range g {
				for _, v := range h {
					// u's packets to v, and v's answers to the
					// connections u opened: a cut drops both ways.
					out = append(out, dropRule{cgroup: u.Cgroup, cidr: v.CIDR},
						dropRule{reply: true, mark: u.Mark, mask: u.MarkMask, cidr: v.CIDR})
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
	if e.part == nil && !e.state.Real() {
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
