package localenv

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/etcdfed/etcdfed/dev/localenv/addr"
	"github.com/etcdfed/etcdfed/dev/localenv/delayproxy"
	"github.com/etcdfed/etcdfed/dev/localenv/nodeagent"
	"github.com/etcdfed/etcdfed/dev/localenv/proc"
	"github.com/etcdfed/etcdfed/dev/localenv/realnode"
	"github.com/etcdfed/etcdfed/dev/testenv"
)

// Env is a running local environment.
type Env struct {
	cfg   Config
	state *State
	plan  addr.Plan
	slot  *addr.Slot
	bin   string
	pki   *pki
	log   logr.Logger
	t0    time.Time

	cgfs    string // cgroup v2 mount point; "" when cgroups are unavailable
	cgroot  string // this environment's cgroup
	part    *partitioner
	partErr error

	// real holds each cluster's real-node parts (Config.Nodes =
	// NodesReal); images are the images its nodes get.
	real   map[string]*realCluster
	images []builtImage
	// imageTag tags etcdfed's images in images.
	imageTag string

	mu     sync.Mutex
	planes map[string]*controlPlane
	agents map[string]*agentRun
	comps  map[string]*compRun
	// pods counts the pods each component named like a pod has had
	// (ComponentSpec.PodName): its POD_NAME is <name>-<count>.
	pods   map[string]int
	failed map[ZoneRef]Mode
	// partition is the partition into groups in place (partition.go).
	partition Partition
	// leasesCut are the zones whose nodes are cut off from their
	// apiserver (StopNodeLeases with real nodes: realleases.go).
	leasesCut map[ZoneRef]bool
	// distMu serialises distance changes; dist is the distance in place,
	// distPairs its resolved pairs, delay the proxy that makes it
	// (distance.go).
	distMu    sync.Mutex
	dist      Distance
	distPairs []distancePair
	delay     *delayproxy.Proxy
	ready     time.Time
	stopped   bool
}

type agentRun struct {
	agent  *nodeagent.Agent
	cancel context.CancelFunc
	done   chan struct{}
}

type compRun struct {
	spec ComponentSpec
	svc  *service
}

// Start starts (or restarts, on an existing state directory) an
// environment and returns once every apiserver is ready, the CRDs are
// installed, the member clusters are registered with the hub and the node
// agents run. On error everything it started is stopped again.
func Start(ctx context.Context, cfg Config) (_ *Env, err error) {
	if err := cfg.defaults(); err != nil {
		return nil, err
	}
	dir, err := filepath.Abs(cfg.StateDir)
	if err != nil {
		return nil, err
	}
	bin, err := binDir(cfg)
	if err != nil {
		return nil, err
	}
	e := &Env{cfg: cfg, bin: bin, log: cfg.Log, t0: time.Now(), real: map[string]*realCluster{},
		planes: map[string]*controlPlane{}, agents: map[string]*agentRun{}, comps: map[string]*compRun{}, failed: map[ZoneRef]Mode{}}
	if err := e.openState(dir); err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			e.progress("start failed, stopping what was started", false)
			_ = e.Stop()
		}
	}()
	if e.state.Real() {
		if err := e.startReal(ctx); err != nil {
			return nil, err
		}
		return e, nil
	}
	if err := e.prepareHost(ctx); err != nil {
		return nil, err
	}
	if err := e.startControlPlanes(ctx); err != nil {
		return nil, err
	}
	if err := e.register(ctx); err != nil {
		return nil, err
	}
	e.progress(fmt.Sprintf("installed the hub's side and joined %d member clusters (etcdfed hub install, etcdfed cluster join)", len(e.state.MemberClusters)), true)
	for _, c := range e.state.MemberClusters {
		if err := e.startAgent(c); err != nil {
			return nil, err
		}
	}
	e.progress(fmt.Sprintf("node agents running (%d nodes)", e.nodeCount()), true)
	if err := e.startComponents(); err != nil {
		return nil, err
	}
	e.mu.Lock()
	e.ready = time.Now()
	e.mu.Unlock()
	e.progress("environment ready", true)
	return e, nil
}

// binDir is the directory of the pinned tools (Config.BinDir, else the
// repository's bin/), which must hold kube-apiserver.
func binDir(cfg Config) (string, error) {
	bin := cfg.BinDir
	if bin == "" {
		var err error
		if bin, err = testenv.BinDir(); err != nil {
			return "", err
		}
	}
	if !executable(filepath.Join(bin, "kube-apiserver")) {
		return "", fmt.Errorf("localenv: kube-apiserver missing in %s: run `make tools`", bin)
	}
	return bin, nil
}

// openState loads the state of dir, or makes a new one, and takes its
// slot (its addresses): a state directory another process runs is refused.
func (e *Env) openState(dir string) error {
	st, err := LoadState(dir)
	switch {
	case errors.Is(err, os.ErrNotExist):
		slot, err := acquireSlot(e.cfg.Slot)
		if err != nil {
			return err
		}
		e.slot = slot
		st = newState(dir, slot.Slot, e.cfg)
		where := fmt.Sprintf("addresses 127.%d.0.0/16", slot.Slot)
		if e.cfg.Nodes == NodesReal {
			where = "network namespace " + NetnsName(slot.Slot)
		}
		e.progress("new environment in "+dir+" ("+where+")", true)
	case err != nil:
		return err
	default:
		if e.slot, err = acquireSlot(st.Slot); err != nil {
			return fmt.Errorf("localenv: %s is in use (its slot %d is held by another process; is it running? `etcdfed dev down`): %w", dir, st.Slot, err)
		}
		e.progress(fmt.Sprintf("reusing the environment in %s (%d member clusters, %d zones each; topology flags apply to new state directories only)",
			dir, len(st.MemberClusters), len(st.MemberClusters[0].Zones)), true)
	}
	e.state, e.plan = st, e.slot.Plan
	if b := st.StoreBinary(); !executable(filepath.Join(e.bin, b)) {
		e.slot.Release()
		return fmt.Errorf("localenv: %s (the apiservers' store) missing in %s: run `make tools`", b, e.bin)
	}
	return nil
}

// prepareHost readies the host for process nodes: it kills what a
// crashed earlier run left behind, sets up cgroups, partitions and
// distance where the host allows them, and writes the PKI, the state and
// the kubeconfigs.
func (e *Env) prepareHost(ctx context.Context) error {
	st := e.state
	if killed, _ := proc.KillPIDFiles(st.pidDir()); len(killed) > 0 {
		e.log.Info("Killed processes left by an earlier run", "count", len(killed))
	}
	if err := e.setupCgroups(); err != nil {
		e.log.Info("Running without cgroups", "why", err.Error())
	}
	e.part, e.partErr = newPartitioner(st.Slot, e.cgfs, st.openerMarks(e.cgroot))
	if e.part == nil {
		_ = removeChainIfRoot(st.Slot)
	}
	if why := e.SharedSourceAddress(); why != "" {
		e.warn(why)
	}
	if err := e.startDistance(ctx); err != nil {
		return err
	}
	var err error
	if e.pki, err = loadOrCreatePKI(st.pkiDir()); err != nil {
		return fmt.Errorf("localenv: pki: %w", err)
	}
	if err := st.save(); err != nil {
		return err
	}
	return e.writeKubeconfigs()
}

// startControlPlanes starts every cluster's etcd and apiserver, in
// parallel, and waits until each is ready.
func (e *Env) startControlPlanes(ctx context.Context) error {
	var wg sync.WaitGroup
	clusters := e.state.Clusters()
	errs := make([]error, len(clusters))
	for i, c := range clusters {
		wg.Add(1)
		go func() {
			defer wg.Done()
			e.progress("starting apiserver "+c.Name+" at "+c.APIServer, false)
			cp, err := e.startControlPlane(ctx, c)
			if err != nil {
				errs[i] = err
				return
			}
			e.mu.Lock()
			e.planes[c.Name] = cp
			e.mu.Unlock()
			e.progress("apiserver "+c.Name+" ready", true)
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

// startComponents starts the hub and the spokes (Config.Components),
// unless Config.NoComponents.
func (e *Env) startComponents() error {
	if e.cfg.NoComponents {
		return nil
	}
	comps := DefaultComponents
	if e.cfg.Components != nil {
		comps = e.cfg.Components
	}
	for _, spec := range comps(e.state, e.bin) {
		if err := e.startComponent(spec); err != nil {
			return err
		}
		e.progress("started "+spec.Name, true)
	}
	return nil
}

func (e *Env) progress(what string, done bool) {
	e.emit(Event{Elapsed: time.Since(e.t0), What: what, Done: done})
}

// warn reports something the environment cannot do, and what it does
// instead, as a progress event of its own.
func (e *Env) warn(what string) {
	e.emit(Event{Elapsed: time.Since(e.t0), What: what, Warning: true})
}

func (e *Env) emit(ev Event) {
	e.log.Info(ev.What, "elapsed", ev.Elapsed.Round(time.Millisecond).String())
	if e.cfg.Progress != nil {
		e.cfg.Progress(ev)
	}
}

func (e *Env) nodeCount() int {
	n := 0
	for _, c := range e.state.MemberClusters {
		for _, z := range c.Zones {
			n += len(z.Nodes)
		}
	}
	return n
}

// Stop stops every process of the environment and releases its addresses.
// The state directory stays; the next Start reuses it.
func (e *Env) Stop() error {
	e.mu.Lock()
	if e.stopped {
		e.mu.Unlock()
		return nil
	}
	e.stopped = true
	comps := make([]*compRun, 0, len(e.comps))
	for _, c := range e.comps {
		comps = append(comps, c)
	}
	agents := make([]string, 0, len(e.agents))
	for n := range e.agents {
		agents = append(agents, n)
	}
	planes := make([]*controlPlane, 0, len(e.planes))
	for _, p := range e.planes {
		planes = append(planes, p)
	}
	e.mu.Unlock()

	var wg sync.WaitGroup
	for _, c := range comps {
		wg.Add(1)
		go func() { defer wg.Done(); c.svc.Stop(10 * time.Second) }()
	}
	for _, n := range agents {
		wg.Add(1)
		go func() { defer wg.Done(); e.stopAgent(n, false) }()
	}
	wg.Wait()
	var errs []error
	if e.state != nil && e.state.Real() {
		errs = append(errs, e.stopReal())
	}
	for _, p := range planes {
		wg.Add(1)
		go func() { defer wg.Done(); p.stop(10 * time.Second) }()
	}
	wg.Wait()
	if e.part != nil {
		errs = append(errs, e.part.remove())
	}
	if e.delay != nil {
		e.delay.Close()
	}
	if e.state != nil {
		if _, err := proc.KillPIDFiles(e.state.pidDir()); err != nil {
			errs = append(errs, err)
		}
	}
	if e.cgroot != "" {
		errs = append(errs, proc.RemoveCgroupTree(e.cgroot))
	}
	if e.state != nil && e.state.Real() {
		// Every hierarchy (the nodes' pods live in the v1 controllers too).
		errs = append(errs, realnode.RemoveCgroup(e.cgroupBase()))
	}
	e.slot.Release()
	if e.state != nil {
		e.progress("environment stopped", true)
	}
	return errors.Join(errs...)
}

// State returns the environment's state (topology and addresses).
func (e *Env) State() *State { return e.state }

// Kubeconfig returns the path of a cluster's admin kubeconfig.
func (e *Env) Kubeconfig(cluster string) string { return e.state.KubeconfigPath(cluster) }

// RESTConfig returns an admin rest config for a cluster.
func (e *Env) RESTConfig(cluster string) (*rest.Config, error) {
	c, ok := e.state.Cluster(cluster)
	if !ok {
		return nil, fmt.Errorf("localenv: no cluster %q", cluster)
	}
	return e.pki.restConfig(c.APIServer), nil
}

// Clientset returns an admin clientset for a cluster.
func (e *Env) Clientset(cluster string) (kubernetes.Interface, error) {
	rc, err := e.RESTConfig(cluster)
	if err != nil {
		return nil, err
	}
	return kubernetes.NewForConfig(rc)
}

// Agent returns the node agent of a member cluster (nil while the cluster
// is down).
func (e *Env) Agent(cluster string) *nodeagent.Agent {
	e.mu.Lock()
	defer e.mu.Unlock()
	if r := e.agents[cluster]; r != nil {
		return r.agent
	}
	return nil
}

// Cleanup removes whatever an environment left behind without a process
// to stop it: processes named by pid files (whole process groups), its
// partition rules and its cgroups. `etcdfed dev down` calls it after the
// supervisor is gone, or instead of it when the supervisor died.
func Cleanup(stateDir string) ([]proc.PIDRecord, error) {
	st, err := LoadState(stateDir)
	if err != nil {
		return nil, err
	}
	killed, err := proc.KillPIDFiles(st.pidDir())
	errs := []error{err}
	if addr.Held(st.Slot) {
		// Another environment uses the addresses now: its rules and
		// cgroups are not ours to remove.
		return killed, errors.Join(errs...)
	}
	errs = append(errs, removeChainIfRoot(st.Slot))
	if fs, cerr := proc.Cgroup2Root(); cerr == nil {
		errs = append(errs, proc.RemoveCgroupTree(filepath.Join(fs, fmt.Sprintf("etcdfed-%d", st.Slot))))
	}
	if st.Real() {
		errs = append(errs, cleanupReal(st))
	}
	return killed, errors.Join(errs...)
}
