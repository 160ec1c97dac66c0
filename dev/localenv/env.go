package localenv

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"sort"
	"strings"
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
	failed map[ZoneRef]Mode
	// partition is the partition into groups in place (partition.go).
	partition Partition
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
	bin := cfg.BinDir
	if bin == "" {
		if bin, err = testenv.BinDir(); err != nil {
			return nil, err
		}
	}
	if !executable(filepath.Join(bin, "kube-apiserver")) {
		return nil, fmt.Errorf("localenv: kube-apiserver missing in %s: run `make tools`", bin)
	}
	e := &Env{cfg: cfg, bin: bin, log: cfg.Log, t0: time.Now(), real: map[string]*realCluster{},
		planes: map[string]*controlPlane{}, agents: map[string]*agentRun{}, comps: map[string]*compRun{}, failed: map[ZoneRef]Mode{}}

	st, err := LoadState(dir)
	switch {
	case errors.Is(err, os.ErrNotExist):
		slot, err := acquireSlot(cfg.Slot)
		if err != nil {
			return nil, err
		}
		e.slot = slot
		st = newState(dir, slot.Slot, cfg)
		where := fmt.Sprintf("addresses 127.%d.0.0/16", slot.Slot)
		if cfg.Nodes == NodesReal {
			where = "network namespace " + NetnsName(slot.Slot)
		}
		e.progress("new environment in "+dir+" ("+where+")", true)
	case err != nil:
		return nil, err
	default:
		if e.slot, err = acquireSlot(st.Slot); err != nil {
			return nil, fmt.Errorf("localenv: %s is in use (its slot %d is held by another process; is it running? `etcdfed dev down`): %w", dir, st.Slot, err)
		}
		e.progress(fmt.Sprintf("reusing the environment in %s (%d member clusters, %d zones each; topology flags apply to new state directories only)",
			dir, len(st.MemberClusters), len(st.MemberClusters[0].Zones)), true)
	}
	e.state, e.plan = st, e.slot.Plan
	if b := st.StoreBinary(); !executable(filepath.Join(bin, b)) {
		e.slot.Release()
		return nil, fmt.Errorf("localenv: %s (the apiservers' store) missing in %s: run `make tools`", b, bin)
	}
	defer func() {
		if err != nil {
			e.progress("start failed, stopping what was started", false)
			_ = e.Stop()
		}
	}()
	if st.Real() {
		if err := e.startReal(ctx); err != nil {
			return nil, err
		}
		return e, nil
	}

	// Whatever a crashed earlier run left behind goes first.
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
		return nil, err
	}
	if e.pki, err = loadOrCreatePKI(st.pkiDir()); err != nil {
		return nil, fmt.Errorf("localenv: pki: %w", err)
	}
	if err := st.save(); err != nil {
		return nil, err
	}
	if err := e.writeKubeconfigs(); err != nil {
		return nil, err
	}

	// Control planes, in parallel.
	var wg sync.WaitGroup
	errs := make([]error, len(st.Clusters()))
	for i, c := range st.Clusters() {
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
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	if err := e.register(ctx); err != nil {
		return nil, err
	}
	e.progress(fmt.Sprintf("installed the hub's side and joined %d member clusters (etcdfed hub install, etcdfed cluster join)", len(st.MemberClusters)), true)

	for _, c := range st.MemberClusters {
		if err := e.startAgent(c); err != nil {
			return nil, err
		}
	}
	e.progress(fmt.Sprintf("node agents running (%d nodes)", e.nodeCount()), true)

	if !cfg.NoComponents {
		comps := DefaultComponents
		if cfg.Components != nil {
			comps = cfg.Components
		}
		for _, spec := range comps(st, bin) {
			if err := e.startComponent(spec); err != nil {
				return nil, err
			}
			e.progress("started "+spec.Name, true)
		}
	}
	e.mu.Lock()
	e.ready = time.Now()
	e.mu.Unlock()
	e.progress("environment ready", true)
	return e, nil
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

// setupCgroups creates the environment's cgroup tree:
// etcdfed-<slot>/<cluster>/{infra,<zone>...}.
func (e *Env) setupCgroups() error {
	fs, err := proc.Cgroup2Root()
	if err != nil {
		return err
	}
	root := filepath.Join(fs, fmt.Sprintf("etcdfed-%d", e.state.Slot))
	if err := proc.RemoveCgroupTree(root); err != nil {
		return err
	}
	for _, c := range e.state.Clusters() {
		if err := proc.EnsureCgroup(filepath.Join(root, c.Name, "infra")); err != nil {
			return err
		}
		for _, z := range c.Zones {
			if err := proc.EnsureCgroup(filepath.Join(root, c.Name, z.Name)); err != nil {
				return err
			}
		}
	}
	e.cgfs, e.cgroot = fs, root
	return nil
}

// cgroupDir is the cgroup of a cluster's part ("infra" or a zone), or ""
// without cgroups.
func (e *Env) cgroupDir(cluster, part string) string {
	if e.cgroot == "" {
		return ""
	}
	return filepath.Join(e.cgroot, cluster, part)
}

func (e *Env) startAgent(c ClusterState) error {
	var nodes []nodeagent.Node
	var nodeIPs []net.IP
	for _, z := range c.Zones {
		for _, n := range z.Nodes {
			nodeIPs = append(nodeIPs, net.ParseIP(n.IP))
			nodes = append(nodes, nodeagent.Node{
				Name: n.Name, Zone: z.Name, IP: netip.MustParseAddr(n.IP),
				PodIPs: nodeagent.IPRange{First: netip.MustParseAddr(n.PodIPFirst), Last: netip.MustParseAddr(n.PodIPLast)},
				Labels: map[string]string{corev1LabelRegion: c.Name},
			})
		}
	}
	var mark uint32
	var network nodeagent.PodNetwork
	if e.part != nil {
		mark = e.part.mark
		if !e.cfg.SharedSourceAddress {
			network = e.part
		}
	}
	kubelet, err := e.kubeletServing(c.Name, nodeIPs)
	if err != nil {
		return err
	}
	a, err := nodeagent.New(nodeagent.Config{
		ClusterName: c.Name,
		REST:        e.pki.restConfig(c.APIServer),
		Nodes:       nodes,
		BinDir:      e.bin,
		StateDir:    filepath.Join(e.state.clusterDir(c.Name), "node"),
		PIDDir:      e.state.pidDir(),
		DNSServers:  e.state.dnsServersFor(c),
		Cgroup: func(zone string) string {
			return e.cgroupDir(c.Name, zone)
		},
		Mark:        mark,
		Network:     network,
		BackoffBase: e.cfg.BackoffBase,
		BackoffMax:  e.cfg.BackoffMax,
		Kubelet:     kubelet,
		// Zero is kubelet's default.
		NodeLeaseDuration: e.cfg.NodeLeaseDuration,
		Log:               e.log.WithName("nodeagent").WithValues("cluster", c.Name),
	})
	if err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(context.Background())
	run := &agentRun{agent: a, cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(run.done)
		if err := a.Run(ctx); err != nil {
			e.log.Error(err, "Node agent stopped", "cluster", c.Name)
		}
	}()
	e.mu.Lock()
	e.agents[c.Name] = run
	e.mu.Unlock()
	return nil
}

// kubeletServing is what a member cluster's node agent serves pods/log
// with: a certificate for its node IPs, and the environment's CA for the
// apiserver's client certificate.
func (e *Env) kubeletServing(cluster string, nodeIPs []net.IP) (*nodeagent.KubeletServing, error) {
	certFile, keyFile, err := e.pki.kubeletServingCert(cluster, nodeIPs)
	if err != nil {
		return nil, fmt.Errorf("localenv: kubelet certificate of %s: %w", cluster, err)
	}
	cert, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		return nil, fmt.Errorf("localenv: kubelet certificate of %s: %w", cluster, err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(e.pki.caPEM)
	return &nodeagent.KubeletServing{Port: addr.KubeletPort, Certificate: cert, ClientCAs: pool}, nil
}

// corev1LabelRegion is topology.kubernetes.io/region: a member cluster is
// a region of its own.
const corev1LabelRegion = "topology.kubernetes.io/region"

func (e *Env) stopAgent(name string, crash bool) {
	e.mu.Lock()
	run := e.agents[name]
	delete(e.agents, name)
	e.mu.Unlock()
	if run == nil {
		return
	}
	if crash {
		run.agent.Crash()
	}
	run.cancel()
	<-run.done
}

func (e *Env) startComponent(spec ComponentSpec) error {
	svc, err := startService(spec.Name, func() proc.Spec {
		return proc.Spec{
			Name: spec.Name, Path: spec.Path, Args: spec.Args,
			Env:     append(minimalEnv(), spec.Env...),
			Dir:     e.state.Dir,
			LogPath: filepath.Join(e.state.logDir(), spec.Name+".log"),
			PIDFile: filepath.Join(e.state.pidDir(), spec.Name+".pid"),
			Cgroup:  e.cgroupDir(spec.Cluster, "infra"),
		}
	}, true, e.log)
	if err != nil {
		return err
	}
	e.mu.Lock()
	e.comps[spec.Name] = &compRun{spec: spec, svc: svc}
	e.mu.Unlock()
	return nil
}

// KillComponent SIGKILLs a component (for example "hub"). With restartNow
// false that is a crash, and the component is restarted after its back-off
// (doubling while it keeps dying within a minute of starting); with
// restartNow true it is a pod deleted and replaced, restarted at once. It
// returns the pid killed.
func (e *Env) KillComponent(name string, restartNow bool) (int, error) {
	e.mu.Lock()
	run, ok := e.comps[name]
	e.mu.Unlock()
	if !ok {
		return 0, fmt.Errorf("no component %q", name)
	}
	pid := run.svc.Kill(restartNow)
	if pid == 0 {
		return 0, fmt.Errorf("component %q is not running", name)
	}
	return pid, nil
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

// CanPartition returns nil when ModePartition works here, else why not.
func (e *Env) CanPartition() error { return e.partErr }

// UnitCgroup returns the cgroup v2 directory and the address block of a
// unit (a member cluster or a zone; partition.go): a process started in a
// cgroup below the directory, listening on an address of the block, is
// inside the unit for partitions and distances, as the unit's pods are
// (benchmarks run plain etcd processes there as a baseline). Process
// nodes with cgroups only.
func (e *Env) UnitCgroup(name string) (dir, cidr string, err error) {
	if e.cgroot == "" {
		return "", "", fmt.Errorf("localenv: no cgroups here: %w", e.partErr)
	}
	u, ok := e.state.unit(name, e.cgroot)
	if !ok || name == HubClusterName {
		return "", "", fmt.Errorf("localenv: no member cluster or zone %q (units: %s)", name, strings.Join(e.state.unitNames(), ", "))
	}
	return u.Cgroup, u.CIDR, nil
}

// SharedSourceAddress returns "" when every pod connects to its peers
// from its own pod IP, as on a real node. Otherwise every pod's
// connections come from 127.0.0.1, and it returns one line saying why and
// what that means: etcd peers that check a client certificate against the
// connection's source address reject each other, so EtcdClusters here
// need spec.tls.peerSkipClientSANVerification.
func (e *Env) SharedSourceAddress() string {
	const instead = "pods connect to each other from 127.0.0.1, so etcd's check of a peer's address against its certificate cannot pass: EtcdClusters here need spec.tls.peerSkipClientSANVerification: true"
	switch {
	case e.cfg.SharedSourceAddress:
		return "pods share one source address as configured (shared source address mode): " + instead
	case e.partErr != nil:
		return fmt.Sprintf("cannot give pods their own source address (%v): %s; zones fail by killing processes only (--mode kill)", e.partErr, instead)
	}
	return ""
}

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

// Status is a snapshot of a running environment.
type Status struct {
	StateDir   string          `json:"stateDir"`
	Slot       int             `json:"slot"`
	Started    time.Time       `json:"started"`
	Ready      time.Time       `json:"ready"`
	Clusters   []ClusterStatus `json:"clusters"`
	Components []ProcessStatus `json:"components"`
	Failed     []FailedZone    `json:"failed,omitempty"`
	// Partition is the partition into groups in place, if any.
	Partition *Partition `json:"partition,omitempty"`
	// Distance is the distance between units in place, if any
	// (distance.go).
	Distance *DistanceStatus `json:"distance,omitempty"`
	// Partitions is "" when ModePartition is available, else why not.
	Partitions string `json:"partitions,omitempty"`
	// SharedSourceAddress is "" when pods connect from their own address,
	// else why not (Env.SharedSourceAddress).
	SharedSourceAddress string `json:"sharedSourceAddress,omitempty"`
	// Supervisor is the process running the environment.
	Supervisor ProcessStatus `json:"supervisor"`
	// TotalPSS sums the proportional set size of every process.
	TotalPSS uint64 `json:"totalPSS"`
	// TotalRSS sums their resident set sizes (shared pages counted once
	// per process).
	TotalRSS uint64 `json:"totalRSS"`
}

// ClusterStatus is one cluster in Status.
type ClusterStatus struct {
	Name       string          `json:"name"`
	APIServer  string          `json:"apiServer"`
	Kubeconfig string          `json:"kubeconfig"`
	Up         bool            `json:"up"`
	DNS        string          `json:"dns,omitempty"`
	Processes  []ProcessStatus `json:"processes"`
	Pods       []ProcessStatus `json:"pods,omitempty"`
}

// ProcessStatus is one process.
type ProcessStatus struct {
	Name     string `json:"name"`
	PID      int    `json:"pid"`
	Restarts int    `json:"restarts,omitempty"`
	LastExit string `json:"lastExit,omitempty"`
	RSS      uint64 `json:"rss"`
	PSS      uint64 `json:"pss"`
	// Detail is e.g. a pod's IP and zone.
	Detail string `json:"detail,omitempty"`
}

// FailedZone is one failed zone in Status.
type FailedZone struct {
	ZoneRef
	Mode Mode `json:"mode"`
}

// Status returns what runs now, with memory per process.
func (e *Env) Status() Status {
	e.mu.Lock()
	s := Status{StateDir: e.state.Dir, Slot: e.state.Slot, Started: e.t0, Ready: e.ready}
	planes := map[string]*controlPlane{}
	for k, v := range e.planes {
		planes[k] = v
	}
	comps := make([]*compRun, 0, len(e.comps))
	for _, c := range e.comps {
		comps = append(comps, c)
	}
	for z, m := range e.failed {
		s.Failed = append(s.Failed, FailedZone{ZoneRef: z, Mode: m})
	}
	if !e.partition.IsZero() {
		p := e.partition
		s.Partition = &p
	}
	e.mu.Unlock()
	sort.Slice(s.Failed, func(i, j int) bool { return s.Failed[i].String() < s.Failed[j].String() })
	if e.partErr != nil {
		s.Partitions = e.partErr.Error()
	}
	s.SharedSourceAddress = e.SharedSourceAddress()
	s.Distance = e.distanceStatus()
	ps := func(name string, pid, restarts int, lastExit, detail string) ProcessStatus {
		p := ProcessStatus{Name: name, PID: pid, Restarts: restarts, LastExit: lastExit, Detail: detail}
		if pid != 0 {
			p.RSS, p.PSS = proc.Memory(pid)
		}
		s.TotalPSS += p.PSS
		s.TotalRSS += p.RSS
		return p
	}
	s.Supervisor = ps("supervisor", os.Getpid(), 0, "", "")
	for _, c := range e.state.Clusters() {
		cs := ClusterStatus{Name: c.Name, APIServer: c.APIServer, Kubeconfig: e.state.KubeconfigPath(c.Name), DNS: c.DNS}
		if cp := planes[c.Name]; cp != nil {
			cs.Up = true
			for _, svc := range []*service{cp.etcd, cp.apiserver} {
				pid, r, le := svc.Info()
				cs.Processes = append(cs.Processes, ps(svc.name, pid, r, le, ""))
			}
		}
		if a := e.Agent(c.Name); a != nil {
			for _, p := range a.Processes() {
				cs.Pods = append(cs.Pods, ps(p.Namespace+"/"+p.Pod+"/"+p.Container, p.PID, 0, "", p.PodIP+" "+p.Zone))
			}
		}
		if rc := e.realCluster(c.Name); rc != nil {
			procs, pods := e.realStatus(rc)
			for _, p := range procs {
				cs.Processes = append(cs.Processes, ps(p.Name, p.PID, p.Restarts, p.LastExit, p.Detail))
			}
			for _, p := range pods {
				cs.Pods = append(cs.Pods, ps(p.Name, p.PID, 0, "", p.Detail))
			}
		}
		s.Clusters = append(s.Clusters, cs)
	}
	sort.Slice(comps, func(i, j int) bool { return comps[i].spec.Name < comps[j].spec.Name })
	for _, c := range comps {
		pid, r, le := c.svc.Info()
		s.Components = append(s.Components, ps(c.spec.Name, pid, r, le, c.spec.Cluster))
	}
	return s
}

// removeChainIfRoot removes a partition chain a crashed run may have left.
func removeChainIfRoot(slot int) error {
	if os.Geteuid() != 0 {
		return nil
	}
	if _, err := iptablesPath(); err != nil {
		return nil //nolint:nilerr // no iptables: no chain
	}
	return errors.Join(removeChain("filter", "OUTPUT", fmt.Sprintf("ETCDFED-%d", slot)), removeChain("nat", "POSTROUTING", snatChain(slot)),
		removeChain("nat", "OUTPUT", delayChain(slot)), removeChain("filter", "INPUT", inputChain(slot)))
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

// StopNodeLeases stops (stop true) or resumes the renewal of the node
// Leases of one zone of a member cluster while everything else runs on:
// what the hub sees when a zone's kubelets lose their apiserver while the
// machines and their pods are fine.
func (e *Env) StopNodeLeases(cluster, zone string, stop bool) error {
	a := e.Agent(cluster)
	if a == nil {
		return fmt.Errorf("localenv: member cluster %q has no running node agent", cluster)
	}
	return a.StopNodeLeases(zone, stop)
}

// StopAPIServer kills a member cluster's apiserver and its etcd as a crash
// would. Pods, the node agent and the cluster's components keep running
// (and keep retrying the apiserver), as in a real control-plane outage.
func (e *Env) StopAPIServer(name string) error {
	if _, ok := e.state.Cluster(name); !ok || name == HubClusterName {
		return fmt.Errorf("localenv: no member cluster %q", name)
	}
	e.mu.Lock()
	cp := e.planes[name]
	delete(e.planes, name)
	e.mu.Unlock()
	if cp == nil {
		return fmt.Errorf("localenv: the apiserver of %s is not running", name)
	}
	cp.stop(0)
	return nil
}

// StartAPIServer starts a member cluster's apiserver stopped by
// StopAPIServer again, on the same address and data, and waits until it is
// ready.
func (e *Env) StartAPIServer(ctx context.Context, name string) error {
	c, ok := e.state.Cluster(name)
	if !ok || name == HubClusterName {
		return fmt.Errorf("localenv: no member cluster %q", name)
	}
	e.mu.Lock()
	running := e.planes[name] != nil
	e.mu.Unlock()
	if running {
		return fmt.Errorf("localenv: the apiserver of %s is running", name)
	}
	cp, err := e.startControlPlane(ctx, c)
	if err != nil {
		return err
	}
	e.mu.Lock()
	e.planes[name] = cp
	e.mu.Unlock()
	return nil
}
