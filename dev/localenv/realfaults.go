package localenv

import (
	"context"
	"errors"
	"net/netip"
	"sync"

	"github.com/etcdfed/etcdfed/dev/localenv/realnode"
)

// reconcileRealFaults moves every member cluster of real nodes from the
// faults in before to the faults now recorded.
//
// kill: the zone's nodes lose power (killNode: kubelet, containerd, kube-
// proxy and every container at once, SIGKILL); their disks stay. When
// every zone of a cluster is killed its control plane goes too (apiserver,
// etcd, scheduler, controller manager, cloud controller). Restoring starts
// the nodes again: kubelet finds its pods bound to it and starts them
// anew, on the same volumes.
//
// partition: the zone's node links (the whole cluster's, with its
// apiserver and load balancer addresses, when every zone is partitioned)
// are cut off in the environment's network: nothing crosses, kubelet's
// traffic to its apiserver included when only a zone is cut.
func (e *Env) reconcileRealFaults(ctx context.Context, before map[ZoneRef]Mode) error {
	now := e.Failed()
	var errs []error
	for _, c := range e.state.MemberClusters {
		killed := func(m map[ZoneRef]Mode) func(string) bool {
			return func(zone string) bool { return m[ZoneRef{c.Name, zone}] == ModeKill }
		}
		wasDown, isDown := clusterDown(c, before), clusterDown(c, now)
		switch {
		case !wasDown && isDown:
			errs = append(errs, e.takeRealClusterDown(c))
		case wasDown && !isDown:
			errs = append(errs, e.bringRealClusterUp(ctx, c, killed(now)))
		case !isDown:
			rc := e.realCluster(c.Name)
			if rc == nil {
				continue
			}
			var wg sync.WaitGroup
			nerrs := make([]error, len(rc.nodes))
			for i, n := range rc.nodes {
				was, is := killed(before)(n.ref.Zone.Name), killed(now)(n.ref.Zone.Name)
				switch {
				case is && !was:
					wg.Add(1)
					go func() { defer wg.Done(); e.killNode(n) }()
				case was && !is:
					wg.Add(1)
					go func() { defer wg.Done(); nerrs[i] = e.startNode(ctx, n) }()
				}
			}
			wg.Wait()
			errs = append(errs, nerrs...)
		}
	}
	errs = append(errs, realnode.ApplyCuts(e.realCuts(now)), e.applyRealPartition())
	return errors.Join(errs...)
}

// realCuts are the partitions of the environment's network for the
// faults in failed.
func (e *Env) realCuts(failed map[ZoneRef]Mode) []realnode.Cut {
	var cuts []realnode.Cut
	for _, c := range e.state.MemberClusters {
		whole := clusterPartitioned(c, failed)
		cut := realnode.Cut{Name: c.Name}
		if whole {
			cut.Local = []netip.Prefix{
				netip.PrefixFrom(e.plan.RealAPIServer(c.Index).Addr(), 32),
				e.plan.RealLBs(c.Index),
			}
		}
		for _, r := range e.state.realNodes() {
			if r.Cluster.Name != c.Name {
				continue
			}
			if whole {
				cut.Links = append(cut.Links, r.link())
			} else if failed[ZoneRef{c.Name, r.Zone.Name}] == ModePartition {
				cuts = append(cuts, realnode.Cut{Name: c.Name + "/" + r.Zone.Name, Links: []string{r.link()}})
			}
		}
		if whole {
			cuts = append(cuts, cut)
		}
	}
	return mergeZoneCuts(cuts)
}

// mergeZoneCuts joins the cuts of one zone's several nodes into one.
func mergeZoneCuts(cuts []realnode.Cut) []realnode.Cut {
	var out []realnode.Cut
	idx := map[string]int{}
	for _, c := range cuts {
		if i, ok := idx[c.Name]; ok {
			out[i].Links = append(out[i].Links, c.Links...)
			out[i].Local = append(out[i].Local, c.Local...)
			continue
		}
		idx[c.Name] = len(out)
		out = append(out, c)
	}
	return out
}

func (e *Env) realCluster(name string) *realCluster {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.real[name]
}

// takeRealClusterDown kills a member cluster: its nodes, then its control
// plane.
func (e *Env) takeRealClusterDown(c ClusterState) error {
	e.mu.Lock()
	rc := e.real[c.Name]
	delete(e.real, c.Name)
	cp := e.planes[c.Name]
	delete(e.planes, c.Name)
	e.mu.Unlock()
	if rc != nil {
		e.stopRealCluster(rc)
	}
	cp.stop(0)
	return nil
}

// bringRealClusterUp restarts a killed member cluster: apiserver,
// scheduler, controller manager, cloud controller, and the nodes of the
// zones not killed.
func (e *Env) bringRealClusterUp(ctx context.Context, c ClusterState, killed func(zone string) bool) error {
	cp, err := e.startControlPlane(ctx, c)
	if err != nil {
		return err
	}
	e.mu.Lock()
	e.planes[c.Name] = cp
	e.mu.Unlock()
	return e.startRealCluster(ctx, c, killed)
}
