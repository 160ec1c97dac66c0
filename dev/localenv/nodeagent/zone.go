package nodeagent

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"time"
)

// FailZone simulates the loss of a zone: its processes are killed at once,
// its nodes report Ready=Unknown with the unreachable taints, and nothing
// runs or is scheduled there until RestoreZone. Node updates are best
// effort (the zone's control plane may be gone too).
func (a *Agent) FailZone(ctx context.Context, zone string) error {
	var halted []*podWorker
	a.mu.Lock()
	found := false
	for _, n := range a.nodes {
		if n.Zone == zone {
			n.failed, found = true, true
		}
	}
	for uid, w := range a.workers {
		if w.node.Zone == zone {
			halted = append(halted, w)
			delete(a.workers, uid)
		}
	}
	a.mu.Unlock()
	if !found {
		return fmt.Errorf("nodeagent: no node in zone %q", zone)
	}
	a.log.Info("Failing zone", "zone", zone, "pods", len(halted))
	var wg sync.WaitGroup
	for _, w := range halted {
		wg.Add(1)
		go func() { defer wg.Done(); w.halt(0) }()
	}
	wg.Wait()
	uctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	return a.updateNodes(uctx, zone)
}

// RestoreZone brings a failed zone back: nodes Ready, taints removed, and
// the pods bound there start again (their restart counts go up, as after a
// node reboot).
func (a *Agent) RestoreZone(ctx context.Context, zone string) error {
	a.mu.Lock()
	found := false
	for _, n := range a.nodes {
		if n.Zone == zone {
			n.failed, found = false, true
		}
	}
	a.mu.Unlock()
	if !found {
		return fmt.Errorf("nodeagent: no node in zone %q", zone)
	}
	a.log.Info("Restoring zone", "zone", zone)
	err := a.updateNodes(ctx, zone)
	if a.pods != nil && a.queue != nil {
		pods, _ := a.pods.List(everything)
		for _, p := range pods {
			if n, ok := a.node(p.Spec.NodeName); ok && n.Zone == zone {
				a.queue.Add("pod/" + p.Namespace + "/" + p.Name)
			}
		}
		a.enqueuePending()
	}
	return err
}

// FailedZones lists the zones currently failed.
func (a *Agent) FailedZones() []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	set := map[string]bool{}
	for _, n := range a.nodes {
		if n.failed {
			set[n.Zone] = true
		}
	}
	out := make([]string, 0, len(set))
	for z := range set {
		out = append(out, z)
	}
	sort.Strings(out)
	return out
}
