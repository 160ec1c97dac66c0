package realnode

import (
	"encoding/json"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"text/template"

	"github.com/etcdfed/etcdfed/dev/localenv/proc"
)

// SandboxImage is the pod sandbox image containerd runs (its default for
// 2.2); the environment imports its own pause binary under this name.
const SandboxImage = "registry.k8s.io/pause:3.10.1"

// CNIBinDir is where Debian's containernetworking-plugins puts the plugins.
const CNIBinDir = "/usr/lib/cni"

// Root is where a node's processes see its directory (Node.Dir, bound
// there in the node's mount namespace): the same short path on every node,
// short enough for the unix sockets of containerd and kubelet below it
// (108 bytes at most), and no node sees another's.
const Root = "/run/etcdfed-node"

// Node is one real node: a network namespace of its own (eth0, a veth to
// the environment's network), a mount namespace of its own held by an
// anchor process, and in them containerd (its own root, state and socket),
// kubelet and kube-proxy. Everything it runs, its pods included, lives in
// one cgroup subtree (CgroupRoot), so that killing the node is killing
// that subtree.
type Node struct {
	Name    string
	Cluster string
	Zone    string
	// Labels are registered with the node (--node-labels).
	Labels map[string]string
	// Dir holds the node's state: containerd's root and state, kubelet's
	// root, pod logs, CNI and config files.
	Dir string
	// Netns is the node's named network namespace.
	Netns string
	// Link is the name of the veth's end in the environment's network.
	Link string
	// IP is the node's InternalIP, on eth0.
	IP netip.Addr
	// PodCIDR is the node's pod range (the CNI bridge's subnet).
	PodCIDR netip.Prefix
	// ClusterCIDR is the cluster's pod range (kube-proxy's local traffic).
	ClusterCIDR netip.Prefix
	// ClusterDNS and ClusterDomain are kubelet's cluster DNS.
	ClusterDNS    netip.Addr
	ClusterDomain string
	// CgroupRoot is the node's cgroup, relative to each hierarchy's root;
	// kubelet puts kubepods below it and the node's processes run in
	// CgroupRoot/system.
	CgroupRoot string
	// Cgroup2Root is the cgroup v2 mount point (/sys/fs/cgroup on v2,
	// /sys/fs/cgroup/unified on hybrid machines).
	Cgroup2Root string
	// BinDir holds kubelet, kube-proxy, containerd and its shim.
	BinDir string
	// Runc is the runc binary (Debian's).
	Runc string
	// CAFile verifies the apiserver and the clients of kubelet's API.
	CAFile string
	// KubeletKubeconfig and KubeProxyKubeconfig are the node's
	// credentials (system:node:<name> and system:kube-proxy).
	KubeletKubeconfig, KubeProxyKubeconfig string
	// ServingCert and ServingKey are kubelet's serving certificate for
	// IP, signed by the CA the apiservers trust for kubelets.
	ServingCert, ServingKey string
	// NodeLeaseSeconds is kubelet's node lease duration; 0 is 40.
	NodeLeaseSeconds int
	// PIDDir receives the pid files of the node's processes.
	PIDDir string
}

// Paths inside Node.Dir, as this process sees them.
func (n *Node) path(elem ...string) string { return filepath.Join(append([]string{n.Dir}, elem...)...) }

// Root is Root, for the templates.
func (n *Node) Root() string { return Root }

// ContainerdSocket is the node's containerd socket as the node's
// processes see it (run ctr through NodeCommand).
func (n *Node) ContainerdSocket() string { return Root + "/containerd/containerd.sock" }

// LogDir holds the node's daemons' logs.
func (n *Node) LogDir() string { return n.path("logs") }

// PodLogDir is kubelet's podLogsDir.
func (n *Node) PodLogDir() string { return n.path("pods") }

// KubeletRoot is kubelet's root directory (in the node's namespaces).
func (n *Node) KubeletRoot() string { return Root + "/kubelet" }

// SystemCgroup is where the node's own processes run (v2 path).
func (n *Node) SystemCgroup() string { return filepath.Join(n.Cgroup2Root, n.CgroupRoot, "system") }

// WriteConfig writes containerd's, kubelet's, kube-proxy's and the CNI
// configuration and creates the node's directories.
func (n *Node) WriteConfig() error {
	for _, d := range []string{n.path("containerd", "root"), n.path("containerd", "state"), n.path("runc"),
		n.path("cni", "net.d"), n.path("cni", "ipam"), n.path("opt"), n.path("kubelet"), n.PodLogDir(),
		n.path("var-log-containers"), n.path("run-containerd"), n.LogDir()} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return err
		}
	}
	files := map[string]string{}
	var err error
	if files[n.path("containerd.toml")], err = render(containerdTmpl, n); err != nil {
		return err
	}
	if files[n.path("kubelet.yaml")], err = render(kubeletTmpl, n); err != nil {
		return err
	}
	if files[n.path("kube-proxy.yaml")], err = render(kubeProxyTmpl, n); err != nil {
		return err
	}
	cni, err := n.cniConfig()
	if err != nil {
		return err
	}
	files[n.path("cni", "net.d", "10-etcdfed.conflist")] = cni
	for p, data := range files {
		if err := os.WriteFile(p, []byte(data), 0o644); err != nil {
			return err
		}
	}
	return nil
}

func render(t *template.Template, n *Node) (string, error) {
	var b strings.Builder
	if err := t.Execute(&b, n); err != nil {
		return "", fmt.Errorf("render %s of %s: %w", t.Name(), n.Name, err)
	}
	return b.String(), nil
}

// Paths are the node's Root. restrict_oom_score_adj: this machine's root
// lacks CAP_SYS_RESOURCE, so no process may lower its oom_score_adj (pause
// asks for -998); containerd then clamps to its own. NRI is off: its
// socket path is fixed (/var/run/nri).
var containerdTmpl = template.Must(template.New("containerd.toml").Parse(`# containerd of real node {{.Name}} (written by the local environment)
version = 3
root = '{{.Root}}/containerd/root'
state = '{{.Root}}/containerd/state'
imports = []
disabled_plugins = ['io.containerd.nri.v1.nri']
[grpc]
  address = '{{.Root}}/containerd/containerd.sock'
[ttrpc]
  address = ''
[debug]
  level = 'info'
[plugins]
  [plugins.'io.containerd.cri.v1.images']
    snapshotter = 'overlayfs'
    [plugins.'io.containerd.cri.v1.images'.pinned_images]
      sandbox = '` + SandboxImage + `'
  [plugins.'io.containerd.cri.v1.runtime']
    netns_mounts_under_state_dir = true
    restrict_oom_score_adj = true
    enable_cdi = false
    [plugins.'io.containerd.cri.v1.runtime'.containerd]
      default_runtime_name = 'runc'
      [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc]
        runtime_type = 'io.containerd.runc.v2'
        [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc.options]
          BinaryName = '{{.Runc}}'
          Root = '{{.Root}}/runc'
          SystemdCgroup = false
    [plugins.'io.containerd.cri.v1.runtime'.cni]
      bin_dirs = ['` + CNIBinDir + `']
      conf_dir = '{{.Root}}/cni/net.d'
  [plugins.'io.containerd.internal.v1.opt']
    path = '{{.Root}}/opt'
`))

// failCgroupV1: false: kubelet 1.35 and later refuse cgroup v1 otherwise;
// this machine mounts its controllers as v1 (see docs/local-environment.md).
// The image garbage collector never runs: the nodes have no registry to
// pull a collected image from again. Evictions only when the disk is
// really full.
var kubeletTmpl = template.Must(template.New("kubelet.yaml").Parse(`# kubelet of real node {{.Name}} (written by the local environment)
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
failCgroupV1: false
cgroupDriver: cgroupfs
cgroupRoot: /{{.CgroupRoot}}
containerRuntimeEndpoint: unix://{{.Root}}/containerd/containerd.sock
address: {{.IP}}
port: 10250
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
healthzPort: 10248
authentication:
  anonymous: {enabled: false}
  webhook: {enabled: true}
  x509: {clientCAFile: {{.CAFile}}}
authorization: {mode: Webhook}
tlsCertFile: {{.ServingCert}}
tlsPrivateKeyFile: {{.ServingKey}}
clusterDNS: [{{.ClusterDNS}}]
clusterDomain: {{.ClusterDomain}}
resolvConf: ""
podLogsDir: {{.Root}}/pods
staticPodPath: ""
failSwapOn: false
{{- if .NodeLeaseSeconds}}
nodeLeaseDurationSeconds: {{.NodeLeaseSeconds}}
{{- end}}
evictionHard: {memory.available: "100Mi", nodefs.available: "1%", imagefs.available: "1%"}
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
localStorageCapacityIsolation: false
`))

// oomScoreAdj 0 and the conntrack sysctls left alone: no
// CAP_SYS_RESOURCE, and nf_conntrack_max is the machine's.
var kubeProxyTmpl = template.Must(template.New("kube-proxy.yaml").Parse(`# kube-proxy of real node {{.Name}} (written by the local environment)
apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
clientConnection: {kubeconfig: {{.KubeProxyKubeconfig}}}
hostnameOverride: {{.Name}}
bindAddress: 0.0.0.0
healthzBindAddress: 127.0.0.1:10256
metricsBindAddress: 127.0.0.1:10249
mode: iptables
clusterCIDR: {{.ClusterCIDR}}
oomScoreAdj: 0
conntrack:
  maxPerCore: 0
  min: 0
  tcpEstablishedTimeout: 0s
  tcpCloseWaitTimeout: 0s
`))

// cniConfig is a bridge network (cni0 in the node's namespace, the node's
// pod range, the bridge the pods' gateway) with host-local addresses kept
// under the node's directory. No masquerade: pods reach pods of every
// cluster from their own address, as on routable pod networks.
func (n *Node) cniConfig() (string, error) {
	conf := map[string]any{
		"cniVersion": "1.0.0",
		"name":       "etcdfed",
		"plugins": []any{
			map[string]any{
				"type": "bridge", "bridge": "cni0", "isGateway": true, "ipMasq": false, "hairpinMode": true,
				"ipam": map[string]any{
					"type":    "host-local",
					"ranges":  [][]map[string]string{{{"subnet": n.PodCIDR.String()}}},
					"routes":  []map[string]string{{"dst": "0.0.0.0/0"}},
					"dataDir": Root + "/cni/ipam",
				},
			},
			map[string]any{"type": "portmap", "capabilities": map[string]bool{"portMappings": true}},
		},
	}
	b, err := json.MarshalIndent(conf, "", "  ")
	return string(b), err
}

// nodeLabels renders --node-labels.
func (n *Node) nodeLabels() string {
	keys := make([]string, 0, len(n.Labels))
	for k := range n.Labels {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, 0, len(keys))
	for _, k := range keys {
		parts = append(parts, k+"="+n.Labels[k])
	}
	return strings.Join(parts, ",")
}

func nsenter() string {
	for _, p := range []string{"/usr/bin/nsenter", "/bin/nsenter"} {
		if _, err := os.Stat(p); err == nil {
			return p
		}
	}
	return "nsenter"
}

func hostEnv() []string {
	env := []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"}
	for _, k := range []string{"HOME", "TMPDIR", "TZ"} {
		if v, ok := os.LookupEnv(k); ok {
			env = append(env, k+"="+v)
		}
	}
	return env
}

// AnchorSpec is the process that holds the node's mount namespace: it
// enters the node's network namespace, unshares a private mount namespace,
// binds the node's directory at Root, and directories of its own over the
// fixed paths containerd and kubelet share between nodes otherwise
// (/run/containerd, where shims put their sockets; /var/log/containers,
// where kubelet links every container's log), and sleeps. The node's other
// processes join its namespaces.
func (n *Node) AnchorSpec() proc.Spec {
	var script strings.Builder
	for _, b := range [][2]string{{n.Dir, Root}, {n.path("run-containerd"), "/run/containerd"}, {n.path("var-log-containers"), "/var/log/containers"}} {
		fmt.Fprintf(&script, "mkdir -p %[2]s && mount --bind %[1]s %[2]s && ", b[0], b[1])
	}
	script.WriteString("exec sleep infinity")
	return proc.Spec{
		Name: n.Name + "-anchor", Path: nsenter(),
		Args: []string{"--net=" + NetnsPath(n.Netns), "--", "unshare", "--mount", "--propagation", "private", "--", "sh", "-c", script.String()},
		Env:  hostEnv(), Dir: n.Dir,
		LogPath: filepath.Join(n.LogDir(), "anchor.log"),
		PIDFile: filepath.Join(n.PIDDir, n.Name+"-anchor.pid"),
		Cgroup:  n.SystemCgroup(),
	}
}

// LeanGOGC is the Go collector's setting (GOGC) of the processes only
// real nodes run (kubelet, kube-proxy, containerd and its shims, the
// scheduler, the controller manager, CoreDNS): a heap that may grow half
// its live size between collections instead of all of it. Mostly idle here, they pay
// little CPU for it, and a dozen of them per environment hold the most
// of what real nodes cost beyond process nodes (docs/measurements/
// realnodes.md).
const LeanGOGC = "50"

// LeanGC is LeanGOGC as an environment variable.
const LeanGC = "GOGC=" + LeanGOGC

// inNode is a process of the node: run through nsenter in the anchor's
// mount and network namespaces.
func (n *Node) inNode(anchor int, name, bin string, args ...string) proc.Spec {
	return proc.Spec{
		Name: n.Name + "-" + name, Path: nsenter(),
		Args: append([]string{"--target", itoa(anchor), "--mount", "--net", "--", bin}, args...),
		Env:  append(hostEnv(), LeanGC), Dir: n.Dir,
		LogPath: filepath.Join(n.LogDir(), name+".log"),
		PIDFile: filepath.Join(n.PIDDir, n.Name+"-"+name+".pid"),
		Cgroup:  n.SystemCgroup(),
	}
}

// NodeCommand runs argv in the node's mount and network namespaces.
func (n *Node) NodeCommand(anchor int, argv ...string) (string, []string) {
	return nsenter(), append([]string{"--target", itoa(anchor), "--mount", "--net", "--"}, argv...)
}

// ContainerdSpec runs the node's containerd.
func (n *Node) ContainerdSpec(anchor int) proc.Spec {
	s := n.inNode(anchor, "containerd", filepath.Join(n.BinDir, "containerd"), "--config", Root+"/containerd.toml")
	// The shim is found on PATH: bin/ first.
	s.Env[0] = "PATH=" + n.BinDir + ":/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
	return s
}

// KubeletSpec runs the node's kubelet.
func (n *Node) KubeletSpec(anchor int) proc.Spec {
	return n.inNode(anchor, "kubelet", filepath.Join(n.BinDir, "kubelet"),
		"--config", Root+"/kubelet.yaml",
		"--kubeconfig", n.KubeletKubeconfig,
		"--root-dir", n.KubeletRoot(),
		"--hostname-override", n.Name,
		"--node-ip", n.IP.String(),
		"--node-labels", n.nodeLabels(),
		"--v=1")
}

// KubeProxySpec runs the node's kube-proxy.
func (n *Node) KubeProxySpec(anchor int) proc.Spec {
	return n.inNode(anchor, "kube-proxy", filepath.Join(n.BinDir, "kube-proxy"), "--config", Root+"/kube-proxy.yaml", "--v=1")
}
