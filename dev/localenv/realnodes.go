package localenv

import (
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
				Env: append(minimalEnv(), realnode.LeanGC), Dir: dir,
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
		"--controllers="+kcmControllers,
		"--v=1"), true, e.log)
	return err
}

// kcmControllers are the controller manager's controllers: every one on
// by default but those nothing in the environment uses (no Job, CronJob,
// HPA, ReplicationController, ResourceQuota, CSR, dynamic resource or
// storage-version object is ever made here), each of which would hold
// its informers and workers for nothing; and node IPAM, which the cloud
// controller replaces. Kept beside what etcdfed needs (deployments and
// replica sets, the garbage collector for owner references, namespaces,
// service accounts and their tokens, endpoints, node lifecycle and taint
// eviction, volumes, disruption budgets for drains): StatefulSets and
// DaemonSets, which a user of the environment may well deploy.
var kcmControllers = "*,-" + strings.Join([]string{
	"node-ipam-controller",
	"horizontal-pod-autoscaler-controller", "replicationcontroller-controller",
	"cronjob-controller", "job-controller", "ttl-after-finished-controller", "ttl-controller",
	"resourcequota-controller",
	"certificatesigningrequest-approving-controller", "certificatesigningrequest-cleaner-controller", "certificatesigningrequest-signing-controller",
	"podcertificaterequest-cleaner-controller", "kube-apiserver-serving-clustertrustbundle-publisher-controller",
	"resourceclaim-controller", "resourcepoolstatusrequest-controller", "device-taint-eviction-controller", "podgroup-protection-controller",
	"storage-version-migrator-controller", "storageversion-garbage-collector-controller", "validatingadmissionpolicy-status-controller",
	"endpointslice-mirroring-controller", "ephemeral-volume-controller", "persistentvolume-expander-controller", "volumeattributesclass-protection-controller",
	"legacy-serviceaccount-token-cleaner-controller", "service-cidr-controller",
}, ",-")

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
