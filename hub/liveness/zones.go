package liveness

import (
	"fmt"
	"sort"
	"strings"
	"time"
)

// Zones inside a member cluster the hub sees (docs/architecture.md,
// "Failure domains and placement"): a zone is failed only when two independent signals agree,
// each measured on the hub's clock.
//
//  1. The zone's nodes: every node Lease of the zone (kube-node-lease, kept
//     by kubelet) has gone unrenewed for NodeStaleAfter, as the hub saw
//     them (a Tracker keyed "cluster/node" records when each changed).
//  2. The zone's peers: a majority of the witnesses outside the zone (the
//     ring's members in other zones, through their spokes' peer reports)
//     have lost every member in the zone.
//
// Either alone is Unknown: node Leases stop when a zone's kubelets lose
// their apiserver while the machines (and etcd) run on; peers lose a zone
// when the network between zones is cut while its nodes are fine. Both,
// for the zone grace, is Failed: its members may be moved out as a unit.

// ZoneObservation is what the hub knows about one zone of a visible
// member cluster.
type ZoneObservation struct {
	Cluster, Zone string
	// NodesLastSeen is, per node of the zone, when the hub last saw its
	// node Lease renewed (hub clock; zero when never).
	NodesLastSeen map[string]time.Time
	// PeersLost is, per witness outside the zone (for example
	// "member-2/zone-b/main-3"), whether it has lost every member in the
	// zone.
	PeersLost map[string]bool
	// Abstaining are the witnesses outside the zone that cannot vote, with
	// why: no peer view the hub can read (its cluster not visible, its
	// metrics not read), or a view with no active peer at all (it may be
	// the one cut off). They count in the majority's denominator (rule 8
	// restated: a majority of ALL the witnesses), never as "lost".
	Abstaining map[string]string
}

// ZoneVerdict is the judgement on one zone with its evidence.
type ZoneVerdict struct {
	Cluster, Zone string
	State         State
	// Since is when the zone's node Leases went stale (zero unless
	// stale): the zone grace counts from there.
	Since time.Time
	// NodesStale is true when the first signal holds: every node Lease of
	// the zone the hub has seen is stale. An Unknown zone without it has
	// no node signal at all (no node Lease seen).
	NodesStale bool
	Reason     string
}

// JudgeZone applies the two-signal rule to one zone.
func JudgeZone(o ZoneObservation, now time.Time, nodeStaleAfter, grace time.Duration) ZoneVerdict {
	v := ZoneVerdict{Cluster: o.Cluster, Zone: o.Zone, State: Unknown}
	name := o.Cluster + "/" + o.Zone
	if len(o.NodesLastSeen) == 0 {
		v.Reason = fmt.Sprintf("zone %s: no node Lease seen", name)
		return v
	}
	var latest time.Time
	var renewing []string
	for n, seen := range o.NodesLastSeen {
		if seen.After(latest) {
			latest = seen
		}
		if !seen.IsZero() && now.Sub(seen) <= nodeStaleAfter {
			renewing = append(renewing, n)
		}
	}
	if len(renewing) > 0 {
		sort.Strings(renewing)
		v.State = Alive
		v.Reason = fmt.Sprintf("zone %s: node Leases of %s renewed within %s", name, strings.Join(renewing, ", "), nodeStaleAfter)
		return v
	}
	v.NodesStale = true
	nodes := fmt.Sprintf("all %d node Leases unrenewed", len(o.NodesLastSeen))
	if !latest.IsZero() {
		v.Since = latest.Add(nodeStaleAfter)
		nodes += ", the last renewed " + At(latest)
	}
	var lost, still, abstain []string
	for w, l := range o.PeersLost {
		if l {
			lost = append(lost, w)
		} else {
			still = append(still, w)
		}
	}
	for w, why := range o.Abstaining {
		abstain = append(abstain, w+" ("+why+")")
	}
	sort.Strings(lost)
	sort.Strings(still)
	sort.Strings(abstain)
	witnesses := len(lost) + len(still) + len(abstain)
	switch {
	case witnesses == 0:
		v.Reason = fmt.Sprintf("zone %s: %s; no peer outside the zone to confirm", name, nodes)
	case len(lost) < witnesses/2+1:
		v.Reason = fmt.Sprintf("zone %s: %s; only %d of %d peers outside it lost it", name, nodes, len(lost), witnesses)
		var notes []string
		if len(still) > 0 {
			notes = append(notes, strings.Join(still, ", ")+" still reach it: its kubelets may have lost only their apiserver")
		}
		if len(abstain) > 0 {
			notes = append(notes, strings.Join(abstain, ", ")+" abstain")
		}
		if len(notes) > 0 {
			v.Reason += " (" + strings.Join(notes, "; ") + ")"
		}
	case v.Since.IsZero() || now.Sub(v.Since) < grace:
		v.Reason = fmt.Sprintf("zone %s: %s and %s lost it; declared failed after %s", name, nodes, strings.Join(lost, ", "), grace)
	default:
		v.State = Failed
		v.Reason = fmt.Sprintf("zone %s: %s and %s lost it", name, nodes, strings.Join(lost, ", "))
	}
	return v
}
