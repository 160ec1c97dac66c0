package localenv

import (
	"fmt"
	"net"
	"net/url"
	"sort"
)

// StopNodeLeases with real nodes: kubelet renews its node's Lease through
// its cluster's apiserver, which listens in the environment's namespace,
// so a zone's kubelets lose their apiserver when the packets from the
// zone's node addresses to that apiserver are dropped there (INPUT). Only
// the nodes' own addresses are cut (kubelet, kube-proxy): the zone's pods
// reach the apiserver from their pod addresses and run on, and the
// machines are fine, as when a zone's kubelets are cut off from their
// control plane.

// realLeaseChain is the filter chain of the cut node Leases.
const realLeaseChain = "ETCDFED-LEASES"

// cutRealNodeLeases cuts (stop) or restores the path from the nodes of
// zone of cluster to the cluster's apiserver.
func (e *Env) cutRealNodeLeases(cluster, zone string, stop bool) error {
	ref := ZoneRef{Cluster: cluster, Zone: zone}
	found := false
	for _, c := range e.state.MemberClusters {
		for _, z := range c.Zones {
			found = found || (c.Name == cluster && z.Name == zone)
		}
	}
	if !found {
		return fmt.Errorf("localenv: member cluster %q has no zone %q", cluster, zone)
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.leasesCut == nil {
		e.leasesCut = map[ZoneRef]bool{}
	}
	if stop {
		e.leasesCut[ref] = true
	} else {
		delete(e.leasesCut, ref)
	}
	rules, err := realLeaseRules(e.state, e.leasesCut)
	if err != nil {
		return err
	}
	if err := ensureJump("filter", "INPUT", realLeaseChain); err != nil {
		return err
	}
	return replaceChain("filter", realLeaseChain, rules)
}

// realLeaseRules are the DROP rules cutting each zone of cut from its
// cluster's apiserver: its node block to the apiserver's address and
// port. Pure; deterministic.
func realLeaseRules(st *State, cut map[ZoneRef]bool) ([][]string, error) {
	refs := make([]ZoneRef, 0, len(cut))
	for r := range cut {
		refs = append(refs, r)
	}
	sort.Slice(refs, func(i, j int) bool { return refs[i].String() < refs[j].String() })
	var out [][]string
	for _, r := range refs {
		for _, c := range st.MemberClusters {
			if c.Name != r.Cluster {
				continue
			}
			u, err := url.Parse(c.APIServer)
			if err != nil {
				return nil, fmt.Errorf("localenv: apiserver of %s: %w", c.Name, err)
			}
			host, port, err := net.SplitHostPort(u.Host)
			if err != nil {
				return nil, fmt.Errorf("localenv: apiserver of %s: %w", c.Name, err)
			}
			for _, z := range c.Zones {
				if z.Name == r.Zone {
					out = append(out, []string{"-s", z.CIDR, "-d", host + "/32", "-p", "tcp", "--dport", port, "-j", "DROP"})
				}
			}
		}
	}
	return out, nil
}
