package localenv

import (
	"errors"
)

// Partitions (groups and one-way cuts, Partition) with real nodes: the
// units' blocks (realBlocks: a cluster's nodes, apiserver, load
// balancers and pods; a zone's nodes and pods) are cut in the
// environment's namespace, where every packet between two nodes, and
// between a node and an apiserver, passes: one filter chain jumped to
// from FORWARD (routed between nodes), INPUT and OUTPUT (to and from the
// apiservers, and through the delay proxy, which keeps both ends'
// addresses). The environment's own processes (the test or the CLI, the
// cloud controller) send from addresses outside every unit, or from the
// apiserver's own address to itself, so a partition does not cut them
// off, as with process nodes. FailZone's ModePartition keeps its own
// rules (realnode.Cut, which also cuts a zone from the outside).

// realPartChain is the filter chain of Partition with real nodes.
const realPartChain = "ETCDFED-PART-GROUPS"

// realPartitionRules are the DROP rules of p with real nodes: every
// block of every unit of a group to every block of every unit of every
// other group (both ways, since the other group's rules drop the
// replies), then the one-way cuts, which drop only the packets of the
// connections (and UDP flows) From opens to To: its replies to
// connections To opened pass. Pure; deterministic.
func realPartitionRules(p resolvedPartition, blocks func(string) []string) [][]string {
	var out [][]string
	for i, g := range p.groups {
		for j, h := range p.groups {
			if i == j {
				continue
			}
			for _, u := range g {
				for _, v := range h {
					for _, from := range blocks(u.Name) {
						for _, to := range blocks(v.Name) {
							out = append(out, []string{"-s", from, "-d", to, "-j", "DROP"})
						}
					}
				}
			}
		}
	}
	for _, c := range p.oneWay {
		for _, from := range blocks(c[0].Name) {
			for _, to := range blocks(c[1].Name) {
				out = append(out, []string{"-s", from, "-d", to, "-m", "conntrack", "--ctdir", "ORIGINAL", "-j", "DROP"})
			}
		}
	}
	return out
}

// applyRealPartition replaces the partition chain's rules with the
// partition in place.
func (e *Env) applyRealPartition() error {
	p, err := e.state.resolvePartition(e.CurrentPartition(), e.cgroot)
	if err != nil {
		return err
	}
	var errs []error
	for _, hook := range []string{"FORWARD", "INPUT", "OUTPUT"} {
		errs = append(errs, ensureJump("filter", hook, realPartChain))
	}
	if err := errors.Join(errs...); err != nil {
		return err
	}
	return replaceChain("filter", realPartChain, realPartitionRules(p, e.state.realBlocks))
}
