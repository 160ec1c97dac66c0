package localenv

import (
	"context"
	"errors"
	"fmt"
)

// Mode is how a zone fails.
type Mode string

// Failure modes.
const (
	// ModeKill kills the zone's processes (and, when the whole member
	// cluster fails, its spoke and apiserver).
	ModeKill Mode = "kill"
	// ModePartition cuts the zone's (or the whole cluster's) network off:
	// nothing inside reaches out, nothing outside reaches in. Root only.
	ModePartition Mode = "partition"
)

// FailZone fails a zone (every cluster's zone of that name) or, given a
// member cluster's name, the whole cluster. When every zone of a cluster
// is killed, the cluster is down: its spoke, node agent and apiserver stop.
func (e *Env) FailZone(ctx context.Context, name string, mode Mode) error {
	if mode != ModeKill && mode != ModePartition {
		return fmt.Errorf("localenv: unknown mode %q (kill or partition)", mode)
	}
	if mode == ModePartition && e.part == nil && !e.state.Real() {
		return fmt.Errorf("localenv: partition unavailable: %w", e.partErr)
	}
	zones, err := e.state.Resolve(name)
	if err != nil {
		return err
	}
	e.mu.Lock()
	for _, z := range zones {
		if m, ok := e.failed[z]; ok {
			e.mu.Unlock()
			return fmt.Errorf("localenv: %s already failed (%s): restore it first", z, m)
		}
	}
	before := e.snapshotFailed()
	for _, z := range zones {
		e.failed[z] = mode
	}
	e.mu.Unlock()
	e.progress(fmt.Sprintf("failing %s (%s)", name, mode), false)
	err = e.reconcileFaults(ctx, before)
	e.progress(fmt.Sprintf("failed %s (%s)", name, mode), true)
	return err
}

// RestoreZone undoes FailZone for a zone or a member cluster.
func (e *Env) RestoreZone(ctx context.Context, name string) error {
	zones, err := e.state.Resolve(name)
	if err != nil {
		return err
	}
	e.mu.Lock()
	before := e.snapshotFailed()
	n := 0
	for _, z := range zones {
		if _, ok := e.failed[z]; ok {
			delete(e.failed, z)
			n++
		}
	}
	e.mu.Unlock()
	if n == 0 {
		return fmt.Errorf("localenv: %s is not failed", name)
	}
	e.progress("restoring "+name, false)
	err = e.reconcileFaults(ctx, before)
	e.progress("restored "+name, true)
	return err
}

func (e *Env) snapshotFailed() map[ZoneRef]Mode {
	out := make(map[ZoneRef]Mode, len(e.failed))
	for k, v := range e.failed {
		out[k] = v
	}
	return out
}

// Failed returns the failed zones and how they failed.
func (e *Env) Failed() map[ZoneRef]Mode {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.snapshotFailed()
}

// clusterDown reports whether every zone of c is killed in failed.
func clusterDown(c ClusterState, failed map[ZoneRef]Mode) bool {
	for _, z := range c.Zones {
		if failed[ZoneRef{c.Name, z.Name}] != ModeKill {
			return false
		}
	}
	return true
}

func clusterPartitioned(c ClusterState, failed map[ZoneRef]Mode) bool {
	for _, z := range c.Zones {
		if failed[ZoneRef{c.Name, z.Name}] != ModePartition {
			return false
		}
	}
	return true
}

// reconcileFaults moves every member cluster from the faults in before to
// the faults now recorded.
func (e *Env) reconcileFaults(ctx context.Context, before map[ZoneRef]Mode) error {
	if e.state.Real() {
		return e.reconcileRealFaults(ctx, before)
	}
	now := e.Failed()
	var errs []error
	for _, c := range e.state.MemberClusters {
		wasDown, isDown := clusterDown(c, before), clusterDown(c, now)
		switch {
		case !wasDown && isDown:
			errs = append(errs, e.takeClusterDown(ctx, c, before))
		case wasDown && !isDown:
			errs = append(errs, e.bringClusterUp(ctx, c, now))
		case !isDown:
			for _, z := range c.Zones {
				ref := ZoneRef{c.Name, z.Name}
				was, is := before[ref] == ModeKill, now[ref] == ModeKill
				a := e.Agent(c.Name)
				if a == nil || was == is {
					continue
				}
				if is {
					errs = append(errs, a.FailZone(ctx, z.Name))
				} else {
					errs = append(errs, a.RestoreZone(ctx, z.Name))
				}
			}
		}
	}
	if e.part != nil {
		var isolated []partitionUnit
		for _, c := range e.state.MemberClusters {
			if clusterPartitioned(c, now) {
				u, _ := e.state.unit(c.Name, e.cgroot)
				isolated = append(isolated, u)
				continue
			}
			for _, z := range c.Zones {
				if now[ZoneRef{c.Name, z.Name}] == ModePartition {
					u, _ := e.state.unit(z.Name, e.cgroot)
					isolated = append(isolated, u)
				}
			}
		}
		// Checked when it was made: resolving again cannot fail.
		groups, err := e.state.resolvePartition(e.CurrentPartition(), e.cgroot)
		errs = append(errs, err, e.part.apply(partitionRules(isolated, groups)))
	}
	return errors.Join(errs...)
}

// takeClusterDown kills a member cluster: its pods (nodes marked
// unreachable while the apiserver still answers), its components, its node
// agent and its apiserver with etcd.
func (e *Env) takeClusterDown(ctx context.Context, c ClusterState, before map[ZoneRef]Mode) error {
	if a := e.Agent(c.Name); a != nil {
		for _, z := range c.Zones {
			if before[ZoneRef{c.Name, z.Name}] != ModeKill {
				_ = a.FailZone(ctx, z.Name)
			}
		}
	}
	e.mu.Lock()
	var comps []*compRun
	for _, cr := range e.comps {
		if cr.spec.Cluster == c.Name {
			comps = append(comps, cr)
		}
	}
	cp := e.planes[c.Name]
	delete(e.planes, c.Name)
	e.mu.Unlock()
	for _, cr := range comps {
		cr.svc.Stop(0)
	}
	e.stopAgent(c.Name, true)
	cp.stop(0)
	return nil
}

// bringClusterUp restarts a killed member cluster: apiserver, node agent
// (zones still killed stay failed), components.
func (e *Env) bringClusterUp(ctx context.Context, c ClusterState, now map[ZoneRef]Mode) error {
	cp, err := e.startControlPlane(ctx, c)
	if err != nil {
		return err
	}
	e.mu.Lock()
	e.planes[c.Name] = cp
	e.mu.Unlock()
	if err := e.startAgent(c); err != nil {
		return err
	}
	a := e.Agent(c.Name)
	for _, z := range c.Zones {
		if now[ZoneRef{c.Name, z.Name}] == ModeKill {
			_ = a.FailZone(ctx, z.Name)
		} else {
			_ = a.RestoreZone(ctx, z.Name) // nodes were left unreachable when it went down
		}
	}
	e.mu.Lock()
	var comps []*compRun
	for _, cr := range e.comps {
		if cr.spec.Cluster == c.Name {
			comps = append(comps, cr)
		}
	}
	e.mu.Unlock()
	var errs []error
	for _, cr := range comps {
		errs = append(errs, e.startComponent(cr.spec))
	}
	return errors.Join(errs...)
}
