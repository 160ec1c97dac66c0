package localenv

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/etcdfed/etcdfed/dev/localenv/addr"
	"github.com/etcdfed/etcdfed/dev/localenv/proc"
	"github.com/etcdfed/etcdfed/dev/localenv/realnode"
)

// acquireSlot holds slot (0: the lowest free one), or takes over the slot
// EnterOwnNetwork held for this program: in the environment's own network
// namespace a slot can only be held from outside it.
func acquireSlot(slot int) (*addr.Slot, error) {
	s, err := inheritedSlot()
	if err != nil {
		return nil, err
	}
	if s == nil {
		return addr.Acquire(slot)
	}
	if slot != 0 && slot != s.Slot {
		return nil, fmt.Errorf("localenv: this program entered the network of slot %d, the state directory is on slot %d", s.Slot, slot)
	}
	return s, nil
}

// startReal starts an environment of real nodes (see realnodes.go), after
// Start has loaded or created its state and holds its slot.
func (e *Env) startReal(ctx context.Context) error {
	st := e.state
	if _, err := ownNetwork(st.Slot); err != nil {
		return err
	}
	if err := e.checkRealNodes(); err != nil {
		return err
	}
	e.progress(fmt.Sprintf("real nodes: kubelet, containerd and runc in network namespace %s (cgroups %s)", NetnsName(st.Slot), realnode.CgroupMode()), true)
	// What a crashed run left: processes and cgroups of every hierarchy.
	if killed, _ := proc.KillPIDFiles(st.pidDir()); len(killed) > 0 {
		e.log.Info("Killed processes left by an earlier run", "count", len(killed))
	}
	if err := realnode.RemoveCgroup(e.cgroupBase()); err != nil {
		return err
	}
	if err := e.setupCgroups(); err != nil {
		return fmt.Errorf("localenv: real nodes need cgroup v2 for their processes: %w", err)
	}
	var err error
	if e.pki, err = loadOrCreatePKI(st.pkiDir()); err != nil {
		return fmt.Errorf("localenv: pki: %w", err)
	}
	if err := st.save(); err != nil {
		return err
	}
	if err := e.writeKubeconfigs(); err != nil {
		return err
	}
	if err := e.startRealNetwork(); err != nil {
		return err
	}
	if err := e.startDistance(ctx); err != nil {
		return err
	}
	if err := e.buildImages(ctx); err != nil {
		return err
	}
	e.progress(fmt.Sprintf("%d images for the nodes (etcdfed's tagged %s)", len(e.images), e.imageTag), true)

	var wg sync.WaitGroup
	errs := make([]error, len(st.Clusters()))
	for i, c := range st.Clusters() {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = e.startRealClusterAll(ctx, c)
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return err
	}
	if err := e.waitNodesReady(ctx, 3*time.Minute); err != nil {
		return err
	}
	e.progress(fmt.Sprintf("%d real nodes ready", len(st.realNodes())), true)
	for _, c := range st.Clusters() {
		if err := e.waitDeployment(ctx, c, "kube-system", "coredns", 3*time.Minute); err != nil {
			return err
		}
	}
	e.progress("CoreDNS ready in every cluster", true)
	if e.cfg.NoComponents {
		// No hub or spokes: the CRDs, namespaces and registrations only,
		// as process mode installs them.
		if err := e.register(ctx); err != nil {
			return err
		}
	} else if err := e.deployInCluster(ctx); err != nil {
		return err
	}
	e.mu.Lock()
	e.ready = time.Now()
	e.mu.Unlock()
	e.progress("environment ready", true)
	return nil
}

// startRealClusterAll starts one cluster: apiserver, CRDs and the ring
// namespace, scheduler, controller manager, nodes and addons.
func (e *Env) startRealClusterAll(ctx context.Context, c ClusterState) error {
	e.progress("starting apiserver "+c.Name+" at "+c.APIServer, false)
	cp, err := e.startControlPlane(ctx, c)
	if err != nil {
		return err
	}
	e.mu.Lock()
	e.planes[c.Name] = cp
	e.mu.Unlock()
	e.progress("apiserver "+c.Name+" ready", true)
	if err := e.startRealCluster(ctx, c, nil); err != nil {
		return err
	}
	e.progress(c.Name+": scheduler, controller manager and nodes started", true)
	return e.installAddons(ctx, c)
}

// stopRealCluster stops a cluster's nodes, cloud controller, scheduler and
// controller manager (its apiserver is the caller's).
func (e *Env) stopRealCluster(rc *realCluster) {
	var wg sync.WaitGroup
	for _, n := range rc.nodes {
		wg.Add(1)
		go func() { defer wg.Done(); e.killNode(n) }()
	}
	wg.Wait()
	if rc.cloudStop != nil {
		rc.cloudStop()
		<-rc.cloudDone
	}
	for _, s := range []*service{rc.sched, rc.kcm} {
		if s != nil {
			s.Stop(5 * time.Second)
		}
	}
}

// stopReal stops everything real nodes added and removes the node
// namespaces and the environment's cgroups.
func (e *Env) stopReal() error {
	e.mu.Lock()
	rcs := make([]*realCluster, 0, len(e.real))
	for _, rc := range e.real {
		rcs = append(rcs, rc)
	}
	e.real = map[string]*realCluster{}
	e.mu.Unlock()
	var wg sync.WaitGroup
	for _, rc := range rcs {
		wg.Add(1)
		go func() { defer wg.Done(); e.stopRealCluster(rc) }()
	}
	wg.Wait()
	var errs []error
	for _, r := range e.state.realNodes() {
		errs = append(errs, realnode.DeleteNetns(nodeNetnsPrefix(e.state.Slot)+r.link()))
	}
	// The environment's own namespace: its name goes, the namespace itself
	// with the last process in it.
	errs = append(errs, realnode.DeleteNetns(NetnsName(e.state.Slot)))
	return errors.Join(errs...)
}
