package etcdcluster

import (
	"context"
	"slices"

	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	mcmanager "sigs.k8s.io/multicluster-runtime/pkg/manager"
	mcreconcile "sigs.k8s.io/multicluster-runtime/pkg/reconcile"

	etcdfedv1 "github.com/etcdfed/etcdfed/api/v1alpha1"
)

// Which rings a member cluster's news concerns. A spoke's report, its
// Lease coming back or going stale, and the end of its grace were news to
// every ring on the hub, and each woke them all. In a fleet a cluster
// concerns a few rings of hundreds: with 300 rings over 20 clusters, one
// cluster lost kept all 300 in the hub's queue for the whole repair, and
// each step of the 75 rings under repair waited behind the other 225
// (about 50 s a step, docs/measurements/fleet.md, 2026-12-03). A ring now
// hears of a cluster only when the cluster concerns it (concerns), and a
// cluster that does not concern a ring is no news in its status either.
// A wake missed through a stale cache costs a ring a poll, never a wrong
// step: every pass observes afresh.

// concerns says whether anything of member cluster cluster matters to the
// ring ec: the cluster is eligible for it (listed, selected, or every
// cluster when neither is given), holds one of its members or the member
// an operation moves out of or into, or a declared client resolves the
// ring's names there. labels gives the cluster's registry labels and
// whether the hub knows them; it is asked only when the ring selects
// clusters by label, and such a ring is concerned with a cluster whose
// labels are not known. A ring that adopts a running etcd is concerned with
// every cluster (its members are where the adoption finds them). Pure.
func concerns(ec *etcdfedv1.EtcdCluster, cluster string, labels func() (map[string]string, bool)) bool {
	if ec.Spec.Adopt != nil || hasMembers(&ec.Status, cluster) {
		return true
	}
	if op := ec.Status.Operation; op != nil && (op.From != nil && op.From.Cluster == cluster || op.To != nil && op.To.Cluster == cluster) {
		return true
	}
	if slices.ContainsFunc(ec.Spec.Clients, func(c etcdfedv1.ClientSpec) bool { return c.Cluster == cluster }) {
		return true
	}
	sel, err := clusterSelector(ec)
	if err != nil {
		return true // refused at its pass; waking it costs one pass
	}
	if sel == nil || slices.Contains(ec.Spec.Topology.Clusters, cluster) {
		return eligible(ec, cluster, nil, nil)
	}
	l, known := labels()
	return !known || eligible(ec, cluster, l, sel)
}

// concernedWith says whether cluster concerns the ring of a snapshot: its
// verdict is news in the ring's status, and the end of its grace is a pass
// the ring schedules, only then.
func (s *snapshot) concernedWith(cs *clusterSnapshot) bool {
	return cs.eligible || concerns(s.ec, cs.name, func() (map[string]string, bool) { return cs.labels, cs.registered })
}

// ringsConcerned lists the rings (of the hub's cache) that cluster
// concerns and, when peers is not nil, that one of peers concerns too (a
// change of the cluster's gossip view of those peers: it matters only to
// rings that both witness with the cluster and judge one of the peers).
func (r *Reconciler) ringsConcerned(ctx context.Context, cluster string, peers []string) []mcreconcile.Request {
	rings := r.ringsReadOnly(ctx)
	labelsOf := r.registryLabels(ctx)
	out := make([]mcreconcile.Request, 0, len(rings))
	for i := range rings {
		ec := &rings[i]
		if r.Owns != nil && !r.Owns(ec) {
			continue
		}
		if !concerns(ec, cluster, func() (map[string]string, bool) { return labelsOf(cluster) }) {
			continue
		}
		if peers != nil && !slices.ContainsFunc(peers, func(p string) bool {
			return concerns(ec, p, func() (map[string]string, bool) { return labelsOf(p) })
		}) {
			continue
		}
		out = append(out, mcreconcile.Request{Request: reconcile.Request{NamespacedName: client.ObjectKeyFromObject(ec)}, ClusterName: mcmanager.LocalCluster})
	}
	metricRingWakes.WithLabelValues(wakeLabel(peers)).Add(float64(len(out)))
	return out
}

func wakeLabel(peers []string) string {
	if peers != nil {
		return "gossip-view"
	}
	return "member-cluster"
}

// registryLabels returns a lookup of registered clusters' labels, listing
// the registry at most once, on the first lookup (most rings never ask).
func (r *Reconciler) registryLabels(ctx context.Context) func(string) (map[string]string, bool) {
	var byName map[string]map[string]string
	listed := false
	return func(name string) (map[string]string, bool) {
		if !listed {
			listed = true
			if r.Registry == nil {
				return nil, false
			}
			regs, err := r.Registry.List(ctx)
			if err != nil {
				return nil, false
			}
			byName = make(map[string]map[string]string, len(regs))
			for _, mc := range regs {
				byName[mc.Name] = mc.Labels
			}
		}
		if byName == nil {
			return nil, false
		}
		return byName[name], true // not registered: no labels to select
	}
}

// gossipPeersMoved lists the peers whose entry in a spoke's gossip view
// differs between two reports (added, dropped, or changed), sorted.
func gossipPeersMoved(o, n []etcdfedv1.GossipPeerStatus) []string {
	byPeer := func(v []etcdfedv1.GossipPeerStatus) map[string]etcdfedv1.GossipPeerStatus {
		m := make(map[string]etcdfedv1.GossipPeerStatus, len(v))
		for _, g := range v {
			m[g.Cluster] = g
		}
		return m
	}
	om, nm := byPeer(o), byPeer(n)
	out := []string{}
	for c, g := range nm {
		if og, ok := om[c]; !ok || og.Alive != g.Alive || !og.Since.Equal(g.Since) {
			out = append(out, c)
		}
	}
	for c := range om {
		if _, ok := nm[c]; !ok {
			out = append(out, c)
		}
	}
	slices.Sort(out)
	return out
}
