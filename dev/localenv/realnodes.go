package localenv

import (
	"bytes"
	"context"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"

	"github.com/etcdfed/etcdfed/dev/localenv/addr"
	"github.com/etcdfed/etcdfed/dev/localenv/proc"
	"github.com/etcdfed/etcdfed/dev/localenv/realnode"
)

// Real nodes (Config.Nodes = NodesReal). Every cluster, the hub's
// included, gets:
//
//   - kube-apiserver (Node and RBAC authorization, NodeRestriction and
//     ServiceAccount admission), kube-scheduler and kube-controller-manager,
//     in the environment's network namespace (realnet.go);
//   - nodes: per node a network namespace (eth0, routed through the
//     environment's namespace), a mount namespace, and in them containerd,
//     kubelet and kube-proxy, all in one cgroup subtree (package realnode);
//   - a cloud controller in this process (realnode.Cloud): pod ranges,
//     load balancer addresses, local volumes;
//   - CoreDNS as a Deployment (addons.go), forwarding the ring's domains
//     to the spokes once they run.
//
// The hub and the spokes are then deployed from config/ with kustomize
// (deploy.go).

// realTools are the binaries real nodes need in BinDir.
var realTools = []string{"kubelet", "kube-scheduler", "kube-controller-manager", "kube-proxy", "containerd", "containerd-shim-runc-v2", "ctr", "coredns", "pause", "kubectl"}

// realCluster is a cluster's real-node parts besides its apiserver.
type realCluster struct {
	c         ClusterState
	sched     *service
	kcm       *service
	nodes     []*realNode
	cloudStop context.CancelFunc
	cloudDone chan struct{}
}

// realNode is one running (or killed) node.
type realNode struct {
	ref  nodeRef
	spec *realnode.Node

	mu     sync.Mutex
	svcs   []*service // anchor, containerd, kubelet, kube-proxy
	anchor int        // pid of the anchor of the node's namespaces
	killed bool
}

// checkRealNodes says what real nodes lack here, if anything.
func (e *Env) checkRealNodes() error {
	var missing []string
	for _, t := range realTools {
		if !executable(filepath.Join(e.bin, t)) {
			missing = append(missing, t)
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("localenv: real nodes need %s in %s: run `hack/tools.sh realnodes`", strings.Join(missing, ", "), e.bin)
	}
	for _, t := range []string{"runc", "iptables", "ip", "nsenter", "unshare"} {
		if _, err := exec.LookPath(t); err != nil {
			return fmt.Errorf("localenv: real nodes need %s: run `hack/system-deps.sh realnodes`", t)
		}
	}
	for _, p := range []string{"bridge", "host-local", "portmap"} {
		if !executable(filepath.Join(realnode.CNIBinDir, p)) {
			return fmt.Errorf("localenv: real nodes need the CNI plugin %s in %s: run `hack/system-deps.sh realnodes`", p, realnode.CNIBinDir)
		}
	}
	return nil
}

// runcPath is Debian's runc.
func runcPath() string {
	if p, err := exec.LookPath("runc"); err == nil {
		return p
	}
	return "/usr/sbin/runc"
}

// cgroupBase is the environment's cgroup, relative to every hierarchy.
func (e *Env) cgroupBase() string { return fmt.Sprintf("etcdfed-%d", e.state.Slot) }

// startRealNetwork prepares the environment's network namespace: the
// apiservers' addresses on its loopback, forwarding, no partitions.
func (e *Env) startRealNetwork() error {
	var local []netip.Addr
	p := e.plan
	for _, c := range e.state.Clusters() {
		local = append(local, p.RealAPIServer(c.Index).Addr())
	}
	if err := realnode.SetupWorld(local); err != nil {
		return err
	}
	return realnode.ApplyCuts(nil)
}

// realAPIServerArgs are the apiserver flags that differ with real nodes:
// it listens on the environment's network, real kubelets register there
// (Node authorization, NodeRestriction), and pods get ServiceAccount
// tokens.
func (e *Env) realAPIServerArgs(c ClusterState) []string {
	ip := e.plan.RealAPIServer(c.Index).Addr().String()
	return []string{
		"--bind-address=" + ip,
		"--advertise-address=" + ip,
		"--service-cluster-ip-range=" + addr.RealServiceCIDR,
		"--authorization-mode=Node,RBAC",
		"--enable-admission-plugins=NodeRestriction",
	}
}

// componentKubeconfig writes a kubeconfig for a control-plane component or
// node of cluster c with its own client certificate (CN user, O groups)
// and returns its path.
func (e *Env) componentKubeconfig(c ClusterState, file, user string, groups ...string) (string, error) {
	dir := filepath.Join(e.state.pkiDir(), "components")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", err
	}
	certFile, keyFile := filepath.Join(dir, file+".crt"), filepath.Join(dir, file+".key")
	if _, err := os.Stat(certFile); err != nil {
		if err := e.pki.issue(certFile, keyFile, &x509.Certificate{
			Subject:     pkix.Name{CommonName: user, Organization: groups},
			ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
		}); err != nil {
			return "", err
		}
	}
	path := filepath.Join(dir, file+".kubeconfig")
	data := fmt.Sprintf(`apiVersion: v1
kind: Config
clusters:
- name: %[1]s
  cluster: {server: %[2]q, certificate-authority: %[3]q}
users:
- name: %[4]s
  user: {client-certificate: %[5]q, client-key: %[6]q}
contexts:
- name: %[1]s
  context: {cluster: %[1]s, user: %[4]s}
current-context: %[1]s
`, c.Name, c.APIServer, e.pki.caFile, user, certFile, keyFile)
	return path, os.WriteFile(path, []byte(data), 0o600)
}

// startSchedulerAndControllers starts kube-scheduler and
// kube-controller-manager of cluster c, each with its own identity, no
// leader election (one of each) and no serving port (several clusters
// share the network namespace).
func (e *Env) startSchedulerAndControllers(c ClusterState, rc *realCluster) error {
	dir := e.state.clusterDir(c.Name)
	cg := e.cgroupDir(c.Name, "infra")
	schedKC, err := e.componentKubeconfig(c, c.Name+"-scheduler", "system:kube-scheduler")
	if err != nil {
		return err
	}
	kcmKC, err := e.componentKubeconfig(c, c.Name+"-controller-manager", "system:kube-controller-manager")
	if err != nil {
		return err
	}
	spec := func(name, bin string, args ...string) func() proc.Spec {
		return func() proc.Spec {
			return proc.Spec{
				Name: name + "-" + c.Name, Path: filepath.Join(e.bin, bin), Args: args,
				Env: minimalEnv(), Dir: dir,
				LogPath: filepath.Join(e.state.logDir(), name+"-"+c.Name+".log"),
				PIDFile: filepath.Join(e.state.pidDir(), name+"-"+c.Name+".pid"),
				Cgroup:  cg,
			}
		}
	}
	rc.sched, err = startService("scheduler-"+c.Name, spec("scheduler", "kube-scheduler",
		"--kubeconfig="+schedKC, "--authentication-kubeconfig="+schedKC, "--authorization-kubeconfig="+schedKC,
		"--leader-elect=false", "--secure-port=0", "--v=1"), true, e.log)
	if err != nil {
		return err
	}
	// Node IPAM is off: the cloud controller gives each node the range the
	// environment routes to it. --use-service-account-credentials: each
	// controller acts as its own ServiceAccount, as kubeadm sets it up.
	rc.kcm, err = startService("controller-manager-"+c.Name, spec("controller-manager", "kube-controller-manager",
		"--kubeconfig="+kcmKC, "--authentication-kubeconfig="+kcmKC, "--authorization-kubeconfig="+kcmKC,
		"--leader-elect=false", "--secure-port=0",
		"--cluster-name="+c.Name,
		"--service-cluster-ip-range="+addr.RealServiceCIDR,
		"--allocate-node-cidrs=false", "--configure-cloud-routes=false",
		"--use-service-account-credentials=true",
		"--service-account-private-key-file="+e.pki.saKey,
		"--root-ca-file="+e.pki.caFile,
		"--controllers=*,-nodeipam",
		"--v=1"), true, e.log)
	return err
}

// nodeSpec describes a node to package realnode.
func (e *Env) nodeSpec(r nodeRef) (*realnode.Node, error) {
	c := r.Cluster
	kubeletKC, err := e.componentKubeconfig(c, r.Node.Name+"-kubelet", "system:node:"+r.Node.Name, "system:nodes")
	if err != nil {
		return nil, err
	}
	proxyKC, err := e.componentKubeconfig(c, c.Name+"-kube-proxy", "system:kube-proxy")
	if err != nil {
		return nil, err
	}
	ip := netip.MustParseAddr(r.Node.IP)
	certFile, keyFile, err := e.pki.kubeletServingCert(r.Node.Name, []net.IP{ip.AsSlice()})
	if err != nil {
		return nil, err
	}
	cg2, err := proc.Cgroup2Root()
	if err != nil {
		return nil, fmt.Errorf("localenv: real nodes need a writable cgroup2 hierarchy: %w", err)
	}
	labels := map[string]string{corev1.LabelTopologyZone: r.Zone.Name, corev1LabelRegion: c.Name}
	return &realnode.Node{
		Name: r.Node.Name, Cluster: c.Name, Zone: r.Zone.Name, Labels: labels,
		Dir:   filepath.Join(e.state.clusterDir(c.Name), "nodes", r.Node.Name),
		Netns: nodeNetnsPrefix(e.state.Slot) + r.link(), Link: r.link(),
		IP: ip, PodCIDR: netip.MustParsePrefix(r.Node.PodCIDR), ClusterCIDR: netip.MustParsePrefix(c.PodCIDR),
		ClusterDNS: netip.MustParseAddr(addr.RealClusterDNS), ClusterDomain: "cluster.local",
		CgroupRoot: filepath.Join(e.cgroupBase(), c.Name, "nodes", r.Node.Name), Cgroup2Root: cg2,
		BinDir: e.bin, Runc: runcPath(), CAFile: e.pki.caFile,
		KubeletKubeconfig: kubeletKC, KubeProxyKubeconfig: proxyKC,
		ServingCert: certFile, ServingKey: keyFile,
		NodeLeaseSeconds: int(e.cfg.NodeLeaseDuration / time.Second),
		PIDDir:           e.state.pidDir(),
	}, nil
}

// startRealCluster starts cluster c's scheduler, controller manager, cloud
// controller and nodes (its apiserver runs already); the nodes of zones
// killed (nil: none) are connected but not started.
func (e *Env) startRealCluster(ctx context.Context, c ClusterState, killed func(zone string) bool) error {
	rc := &realCluster{c: c}
	e.mu.Lock()
	e.real[c.Name] = rc
	e.mu.Unlock()
	if err := e.startSchedulerAndControllers(c, rc); err != nil {
		return err
	}
	cs, err := kubernetes.NewForConfig(e.pki.restConfig(c.APIServer))
	if err != nil {
		return err
	}
	cloud := &realnode.Cloud{Cluster: c.Name, Client: cs, Nodes: map[string]realnode.CloudNode{}, Log: e.log.WithName("cloud").WithValues("cluster", c.Name)}
	for i := 0; i < addr.RealLBCount; i++ {
		cloud.LBs = append(cloud.LBs, e.plan.RealLB(c.Index, i))
	}
	for _, r := range e.state.realNodes() {
		if r.Cluster.Name != c.Name {
			continue
		}
		spec, err := e.nodeSpec(r)
		if err != nil {
			return err
		}
		rc.nodes = append(rc.nodes, &realNode{ref: r, spec: spec})
		cloud.Nodes[spec.Name] = realnode.CloudNode{IP: spec.IP, Link: spec.Link, PodCIDR: spec.PodCIDR, VolumeDir: filepath.Join(spec.Dir, "volumes")}
	}
	cctx, cancel := context.WithCancel(context.Background())
	rc.cloudStop, rc.cloudDone = cancel, make(chan struct{})
	go func() { defer close(rc.cloudDone); cloud.Run(cctx) }()
	var wg sync.WaitGroup
	errs := make([]error, len(rc.nodes))
	for i, n := range rc.nodes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if errs[i] = n.spec.Attach(); errs[i] != nil {
				return
			}
			if killed != nil && killed(n.ref.Zone.Name) {
				n.killed = true
				return
			}
			errs[i] = e.startNode(ctx, n)
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

// startNode starts a node's processes: the anchor of its namespaces,
// containerd (then the images it needs, imported once), kubelet and
// kube-proxy.
func (e *Env) startNode(ctx context.Context, n *realNode) error {
	s := n.spec
	if err := s.WriteConfig(); err != nil {
		return err
	}
	// A node starting again finds every address of its last life free:
	// its pods are gone.
	_ = os.RemoveAll(filepath.Join(s.Dir, "cni", "ipam"))
	if err := os.MkdirAll(filepath.Join(s.Dir, "cni", "ipam"), 0o755); err != nil {
		return err
	}
	// Fresh cgroups, never those of the node's last life (killed with
	// cgroup.kill: see realnode.ResetCgroup).
	if err := realnode.ResetCgroup(s.CgroupRoot, "system"); err != nil {
		return fmt.Errorf("cgroups of %s: %w", s.Name, err)
	}
	anchor, err := startService(s.Name+"-anchor", s.AnchorSpec, false, e.log)
	if err != nil {
		return err
	}
	n.mu.Lock()
	n.svcs, n.killed = []*service{anchor}, false
	n.mu.Unlock()
	pid, _, _ := anchor.Info()
	n.mu.Lock()
	n.anchor = pid
	n.mu.Unlock()
	if err := waitFor(ctx, 10*time.Second, "the namespaces of "+s.Name, func() (bool, error) {
		comm, err := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid))
		if err != nil {
			_, _, exit := anchor.Info()
			return false, fmt.Errorf("anchor of %s (pid %d) exited (%s): %s", s.Name, pid, exit, tail(filepath.Join(s.LogDir(), "anchor.log"), 5))
		}
		return strings.TrimSpace(string(comm)) == "sleep", nil
	}); err != nil {
		return err
	}
	steps := []struct {
		name string
		spec func(int) proc.Spec
		then func() error
	}{
		{"containerd", s.ContainerdSpec, func() error { return e.loadImages(ctx, s, pid) }},
		{"kubelet", s.KubeletSpec, nil},
		{"kube-proxy", s.KubeProxySpec, nil},
	}
	for _, st := range steps {
		svc, err := startService(s.Name+"-"+st.name, func() proc.Spec { return st.spec(pid) }, true, e.log)
		if err != nil {
			return err
		}
		n.mu.Lock()
		n.svcs = append(n.svcs, svc)
		n.mu.Unlock()
		if st.then != nil {
			if err := st.then(); err != nil {
				return err
			}
		}
	}
	return nil
}

// killNode kills every process of a node at once, its pods included, as
// a machine losing power: nothing stops cleanly. Its disk (state
// directory, volumes, containerd's images) stays.
func (e *Env) killNode(n *realNode) {
	n.mu.Lock()
	svcs := n.svcs
	n.svcs, n.killed = nil, true
	n.mu.Unlock()
	for _, s := range svcs {
		s.halt()
	}
	if err := realnode.KillCgroup(n.spec.CgroupRoot); err != nil {
		e.log.Error(err, "Killing a node's processes", "node", n.spec.Name)
	}
	for _, s := range svcs {
		<-s.Exited()
	}
}

// waitFor polls cond every 100 ms until it holds, fails, or timeout.
func waitFor(ctx context.Context, timeout time.Duration, what string, cond func() (bool, error)) error {
	var last error
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, timeout, true, func(context.Context) (bool, error) {
		ok, err := cond()
		last = err
		return ok, err
	})
	if err != nil && last == nil {
		return fmt.Errorf("waiting for %s: %w", what, err)
	}
	return err
}

// ctr runs ctr against a node's containerd in the CRI namespace, in the
// node's namespaces (anchor is its anchor's pid).
func (e *Env) ctr(ctx context.Context, s *realnode.Node, anchor int, args ...string) (string, error) {
	path, argv := s.NodeCommand(anchor, append([]string{filepath.Join(e.bin, "ctr"), "--address", s.ContainerdSocket(), "--namespace", "k8s.io"}, args...)...)
	cmd := exec.CommandContext(ctx, path, argv...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	return out.String(), err
}

// loadImages waits for the node's containerd and imports every image the
// environment built that it does not have yet.
func (e *Env) loadImages(ctx context.Context, s *realnode.Node, anchor int) error {
	if err := waitFor(ctx, time.Minute, "containerd of "+s.Name, func() (bool, error) {
		_, err := e.ctr(ctx, s, anchor, "version")
		return err == nil, nil
	}); err != nil {
		return fmt.Errorf("%w: %s", err, tail(filepath.Join(s.LogDir(), "containerd.log"), 10))
	}
	// The archives this containerd imported already, by digest.
	record := filepath.Join(s.Dir, "imported-images")
	have, _ := os.ReadFile(record)
	for _, img := range e.images {
		key := img.Digest + " " + img.Ref
		if strings.Contains("\n"+string(have), "\n"+key+"\n") {
			continue
		}
		if out, err := e.ctr(ctx, s, anchor, "images", "import", "--local", img.Archive); err != nil {
			return fmt.Errorf("import %s into %s: %w: %s", img.Ref, s.Name, err, out)
		}
		have = append(have, []byte(key+"\n")...)
		if err := os.WriteFile(record, have, 0o644); err != nil {
			return err
		}
	}
	return nil
}

// waitNodesReady waits until every node of the environment that is not
// killed is Ready.
func (e *Env) waitNodesReady(ctx context.Context, timeout time.Duration) error {
	for _, c := range e.state.Clusters() {
		cs, err := kubernetes.NewForConfig(e.pki.restConfig(c.APIServer))
		if err != nil {
			return err
		}
		var want []string
		for _, z := range c.Zones {
			for _, n := range z.Nodes {
				want = append(want, n.Name)
			}
		}
		last := ""
		if err := waitFor(ctx, timeout, "nodes of "+c.Name, func() (bool, error) {
			for _, name := range want {
				n, err := cs.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
				if err != nil {
					last = err.Error()
					return false, nil
				}
				ready := false
				for _, cond := range n.Status.Conditions {
					if cond.Type == corev1.NodeReady {
						ready, last = cond.Status == corev1.ConditionTrue, name+": "+cond.Message
					}
				}
				if !ready || n.Spec.PodCIDR == "" {
					return false, nil
				}
			}
			return true, nil
		}); err != nil {
			return fmt.Errorf("%w (last: %s)", err, last)
		}
	}
	return nil
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

// realStatus lists a real cluster's processes: scheduler and controller
// manager, each node's own processes (anchor, containerd, kubelet,
// kube-proxy), and every other process in a node's cgroup (shims, pause,
// the containers' processes) as pods, named by their command.
func (e *Env) realStatus(rc *realCluster) (procs, pods []ProcessStatus) {
	for _, s := range []*service{rc.sched, rc.kcm} {
		if s != nil {
			pid, r, le := s.Info()
			procs = append(procs, ProcessStatus{Name: s.name, PID: pid, Restarts: r, LastExit: le})
		}
	}
	for _, n := range rc.nodes {
		n.mu.Lock()
		svcs, killed := n.svcs, n.killed
		n.mu.Unlock()
		own := map[int]bool{}
		for _, s := range svcs {
			pid, r, le := s.Info()
			own[pid] = true
			procs = append(procs, ProcessStatus{Name: s.name, PID: pid, Restarts: r, LastExit: le, Detail: n.spec.Zone})
		}
		if killed {
			procs = append(procs, ProcessStatus{Name: n.spec.Name, Detail: "killed"})
			continue
		}
		for _, pid := range realnode.CgroupPIDs(n.spec.CgroupRoot) {
			if own[pid] {
				continue
			}
			comm, _ := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid))
			pods = append(pods, ProcessStatus{Name: strings.TrimSpace(string(comm)), PID: pid, Detail: n.spec.Name})
		}
	}
	return procs, pods
}

// realVolumeDir is the directory of a local volume, read from its PV.
func (e *Env) realVolumeDir(cluster, pvName string) string {
	c, ok := e.state.Cluster(cluster)
	if !ok {
		return ""
	}
	cs, err := kubernetes.NewForConfig(e.pki.restConfig(c.APIServer))
	if err != nil {
		return ""
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	pv, err := cs.CoreV1().PersistentVolumes().Get(ctx, pvName, metav1.GetOptions{})
	if err != nil || pv.Spec.Local == nil {
		return ""
	}
	return pv.Spec.Local.Path
}

// KillHubPods deletes the in-cluster hub's pods at once (grace 0), as a
// node losing it would; its Deployment starts a new one.
func (e *Env) KillHubPods(ctx context.Context) error {
	cs, err := kubernetes.NewForConfig(e.pki.restConfig(e.state.Hub.APIServer))
	if err != nil {
		return err
	}
	return cs.CoreV1().Pods(RingNamespace).DeleteCollection(ctx, metav1.DeleteOptions{GracePeriodSeconds: ptrTo[int64](0)},
		metav1.ListOptions{LabelSelector: "app.kubernetes.io/name=etcdfed-hub"})
}

// ScaleHub sets the in-cluster hub's replicas (0 stops it, as a user
// scales it down) and, for 1, waits until it is available again.
func (e *Env) ScaleHub(ctx context.Context, replicas int) error {
	if _, err := e.kubectl(ctx, HubClusterName, nil, "-n", RingNamespace, "scale", "deployment/etcdfed-hub", fmt.Sprintf("--replicas=%d", replicas)); err != nil {
		return err
	}
	if replicas == 0 {
		cs, err := kubernetes.NewForConfig(e.pki.restConfig(e.state.Hub.APIServer))
		if err != nil {
			return err
		}
		return waitFor(ctx, 2*time.Minute, "the hub's pods gone", func() (bool, error) {
			pods, err := cs.CoreV1().Pods(RingNamespace).List(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/name=etcdfed-hub"})
			return err == nil && len(pods.Items) == 0, nil
		})
	}
	return e.waitDeployment(ctx, e.state.Hub, RingNamespace, "etcdfed-hub", 3*time.Minute)
}

func ptrTo[T any](v T) *T { return &v }

// ServiceAddress returns address i of the environment's own services
// (real nodes only): put on the environment's network, reachable from
// every pod of every cluster and from this process, for a server a test
// runs beside the clusters (an S3 store).
func (e *Env) ServiceAddress(i int) (netip.Addr, error) {
	if !e.state.Real() {
		return netip.Addr{}, errors.New("localenv: service addresses exist with real nodes only")
	}
	a := e.plan.RealService(i)
	return a, realnode.AddLocalAddr(a)
}
