package realnode

import (
	"encoding/json"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

func testNode(t *testing.T) *Node {
	// A state directory as deep as a test's: the node's sockets must not
	// depend on its length (a unix socket path holds 108 bytes at most;
	// containerd refuses more than 104).
	dir := filepath.Join(t.TempDir(), "realnodes-1234567890", "clusters", "member-1", "nodes", "member-1-zone-1-node-0")
	return &Node{
		Name: "member-1-zone-1-node-0", Cluster: "member-1", Zone: "zone-1",
		Labels: map[string]string{"topology.kubernetes.io/zone": "zone-1", "topology.kubernetes.io/region": "member-1"},
		Dir:    dir, Netns: "etcdfed-3-en1-1-0", Link: "en1-1-0",
		IP: netip.MustParseAddr("172.20.9.1"), PodCIDR: netip.MustParsePrefix("10.101.16.0/24"), ClusterCIDR: netip.MustParsePrefix("10.101.0.0/16"),
		ClusterDNS: netip.MustParseAddr("10.0.0.10"), ClusterDomain: "cluster.local",
		CgroupRoot: "etcdfed-3/member-1/nodes/member-1-zone-1-node-0", Cgroup2Root: "/sys/fs/cgroup/unified",
		BinDir: "/repo/bin", Runc: "/usr/sbin/runc", CAFile: "/state/pki/ca.crt",
		KubeletKubeconfig: "/state/pki/k.kubeconfig", KubeProxyKubeconfig: "/state/pki/p.kubeconfig",
		ServingCert: "/state/pki/s.crt", ServingKey: "/state/pki/s.key", NodeLeaseSeconds: 20, PIDDir: "/state/run/pids",
	}
}

// TestNodeConfig: the files WriteConfig writes say what the node needs on
// this machine, and name the node's directory through Root only, so every
// unix socket below it stays short whatever the state directory.
func TestNodeConfig(t *testing.T) {
	n := testNode(t)
	if err := n.WriteConfig(); err != nil {
		t.Fatal(err)
	}
	read := func(name string) string {
		data, err := os.ReadFile(filepath.Join(n.Dir, name))
		if err != nil {
			t.Fatal(err)
		}
		return string(data)
	}
	var kubelet map[string]any
	if err := yaml.Unmarshal([]byte(read("kubelet.yaml")), &kubelet); err != nil {
		t.Fatal(err)
	}
	for k, want := range map[string]any{
		"failCgroupV1": false, "cgroupDriver": "cgroupfs", "cgroupRoot": "/" + n.CgroupRoot,
		"containerRuntimeEndpoint": "unix://" + Root + "/containerd/containerd.sock",
		"address":                  "172.20.9.1", "podLogsDir": Root + "/pods", "nodeLeaseDurationSeconds": float64(20),
		"imageGCHighThresholdPercent": float64(100),
	} {
		if kubelet[k] != want {
			t.Errorf("kubelet %s = %v, want %v", k, kubelet[k], want)
		}
	}
	var proxy map[string]any
	if err := yaml.Unmarshal([]byte(read("kube-proxy.yaml")), &proxy); err != nil {
		t.Fatal(err)
	}
	if proxy["clusterCIDR"] != "10.101.0.0/16" || proxy["hostnameOverride"] != n.Name || proxy["oomScoreAdj"] != float64(0) {
		t.Errorf("kube-proxy: %v", proxy)
	}
	ctd := read("containerd.toml")
	for _, want := range []string{"root = '" + Root + "/containerd/root'", "address = '" + Root + "/containerd/containerd.sock'",
		"restrict_oom_score_adj = true", "disabled_plugins = ['io.containerd.nri.v1.nri']", "BinaryName = '/usr/sbin/runc'", "SystemdCgroup = false",
		"sandbox = '" + SandboxImage + "'", "bin_dirs = ['" + CNIBinDir + "']"} {
		if !strings.Contains(ctd, want) {
			t.Errorf("containerd.toml lacks %q", want)
		}
	}
	for _, f := range []string{"containerd.toml", "kubelet.yaml", "kube-proxy.yaml"} {
		if strings.Contains(read(f), n.Dir) {
			t.Errorf("%s names the node's directory as this process sees it, not as %s", f, Root)
		}
	}
	if l := len(Root + "/containerd/containerd.sock.ttrpc"); l > 104 {
		t.Errorf("containerd's ttrpc socket path is %d bytes", l)
	}
	var cni struct {
		Plugins []struct {
			Type string `json:"type"`
			IPAM struct {
				Ranges  [][]map[string]string `json:"ranges"`
				DataDir string                `json:"dataDir"`
			} `json:"ipam"`
			IPMasq bool `json:"ipMasq"`
		} `json:"plugins"`
	}
	if err := json.Unmarshal([]byte(read("cni/net.d/10-etcdfed.conflist")), &cni); err != nil {
		t.Fatal(err)
	}
	if len(cni.Plugins) == 0 || cni.Plugins[0].Type != "bridge" || cni.Plugins[0].IPMasq || cni.Plugins[0].IPAM.Ranges[0][0]["subnet"] != "10.101.16.0/24" ||
		cni.Plugins[0].IPAM.DataDir != Root+"/cni/ipam" {
		t.Errorf("CNI: %+v", cni)
	}
}

// TestNodeProcesses: the anchor binds the node's directory at Root and
// the shared fixed paths over directories of its own, in the node's
// network namespace; the others join the anchor's namespaces and run in
// the node's cgroup.
func TestNodeProcesses(t *testing.T) {
	n := testNode(t)
	a := n.AnchorSpec()
	args := strings.Join(a.Args, " ")
	for _, want := range []string{"--net=/run/netns/etcdfed-3-en1-1-0", "unshare --mount --propagation private",
		"mount --bind " + n.Dir + " " + Root, "mount --bind " + n.Dir + "/run-containerd /run/containerd",
		"mount --bind " + n.Dir + "/var-log-containers /var/log/containers", "exec sleep infinity"} {
		if !strings.Contains(args, want) {
			t.Errorf("anchor %q lacks %q", args, want)
		}
	}
	k := n.KubeletSpec(4242)
	if got := strings.Join(k.Args, " "); !strings.HasPrefix(got, "--target 4242 --mount --net -- /repo/bin/kubelet --config "+Root+"/kubelet.yaml") ||
		!strings.Contains(got, "--node-labels topology.kubernetes.io/region=member-1,topology.kubernetes.io/zone=zone-1") {
		t.Errorf("kubelet: %s", got)
	}
	for _, s := range []string{a.Cgroup, k.Cgroup, n.ContainerdSpec(1).Cgroup, n.KubeProxySpec(1).Cgroup} {
		if s != "/sys/fs/cgroup/unified/etcdfed-3/member-1/nodes/member-1-zone-1-node-0/system" {
			t.Errorf("cgroup %s", s)
		}
	}
}
