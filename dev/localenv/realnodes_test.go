package localenv

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestRealState: the layout of an environment of real nodes, from addr's
// real plan: apiservers and nodes on the environment's network, a node in
// the hub cluster (zone "hub", its name without the zone), every member
// cluster's spoke reached on its first load balancer address.
func TestRealState(t *testing.T) {
	cfg := Config{StateDir: t.TempDir(), Clusters: 2, ZonesPerCluster: 2, NodesPerZone: 2, Nodes: NodesReal}
	if err := cfg.defaults(); err != nil {
		t.Fatal(err)
	}
	st := newState(cfg.StateDir, 5, cfg)
	if !st.Real() || st.Hub.APIServer != "https://172.20.0.1:6443" || st.Hub.PodCIDR != "10.100.0.0/16" {
		t.Fatalf("hub: %+v", st.Hub)
	}
	if len(st.Hub.Zones) != 1 || st.Hub.Zones[0].Name != HubZoneName || st.Hub.Zones[0].Nodes[0].Name != "hub-node-0" {
		t.Fatalf("hub zones: %+v", st.Hub.Zones)
	}
	m := st.MemberClusters[1]
	if m.APIServer != "https://172.20.16.1:6443" || m.DNS != "172.20.16.128:53" || m.Gossip != "172.20.16.129:7946" || m.AgentAddress != "172.20.16.128" {
		t.Fatalf("member-2: %+v", m)
	}
	n := m.Zones[1].Nodes[1]
	if m.Zones[1].Name != "zone-2b" || n.Name != "member-2-zone-2b-node-1" || n.IP != "172.20.18.2" || n.PodCIDR != "10.102.33.0/24" {
		t.Fatalf("member-2 zone-2b node 1: %s %+v", m.Zones[1].Name, n)
	}
	if got := strings.Join(st.DNSServers(), ","); got != "172.20.8.128:53,172.20.16.128:53" {
		t.Errorf("DNS servers %s", got)
	}
	refs := st.realNodes()
	if len(refs) != 1+2*2*2 || refs[0].link() != "en0-1-0" || refs[len(refs)-1].link() != "en2-2-1" {
		t.Errorf("%d nodes, links %s ... %s", len(refs), refs[0].link(), refs[len(refs)-1].link())
	}
	for _, r := range refs {
		if len(r.link()) > 15 || len(nodeNetnsPrefix(250)+r.link()) > 32 {
			t.Errorf("link name %q too long", r.link())
		}
	}
}

func TestOverrideFlags(t *testing.T) {
	got := overrideFlags([]string{"--bind-address=127.1.0.1", "--authorization-mode=RBAC", "--disable-admission-plugins=ServiceAccount", "--v=0"},
		[]string{"--bind-address=172.20.0.1", "--authorization-mode=Node,RBAC", "--enable-admission-plugins=NodeRestriction"})
	want := "--v=0 --bind-address=172.20.0.1 --authorization-mode=Node,RBAC --enable-admission-plugins=NodeRestriction"
	if strings.Join(got, " ") != want {
		t.Errorf("got  %s\nwant %s", strings.Join(got, " "), want)
	}
}

// TestCorefile: the ring's domains are forwarded, between the markers
// hack/kind/up.sh uses, only once there are spokes to forward to.
func TestCorefile(t *testing.T) {
	base := corefile([]string{"etcd.test"}, nil, "")
	if strings.Contains(base, "etcdfed BEGIN") || !strings.Contains(base, "kubernetes cluster.local in-addr.arpa ip6.arpa") {
		t.Errorf("without spokes:\n%s", base)
	}
	full := corefile([]string{"etcd.test", "etcdfed.test."}, []string{"10.0.0.57:53", "172.20.16.128:53"}, "sequential")
	for _, want := range []string{"# etcdfed BEGIN", "etcd.test:53 etcdfed.test:53 {", "forward . 10.0.0.57:53 172.20.16.128:53 {", "policy sequential", "# etcdfed END"} {
		if !strings.Contains(full, want) {
			t.Errorf("lacks %q:\n%s", want, full)
		}
	}
	if !strings.HasPrefix(full, base) {
		t.Error("the forward block must come after the cluster's own server block")
	}
}

// TestReadImageList: images.txt as `make images` writes it (paths relative
// to the repository, or absolute), and a directory moved elsewhere: the
// tarballs are then found beside images.txt.
func TestReadImageList(t *testing.T) {
	dir := t.TempDir()
	for _, f := range []string{"hub.tar", "etcd-3.6.tar"} {
		if err := os.WriteFile(filepath.Join(dir, f), []byte(f), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	list := "hub ghcr.io/etcdfed/hub:v1.2.3 out/images/hub.tar\n" +
		"etcd-3.6 gcr.io/etcd-development/etcd:v3.6.16 " + filepath.Join(dir, "etcd-3.6.tar") + "\n\n"
	if err := os.WriteFile(filepath.Join(dir, "images.txt"), []byte(list), 0o644); err != nil {
		t.Fatal(err)
	}
	got, err := readImageList(dir)
	if err != nil {
		t.Fatal(err)
	}
	want := []builtImage{
		{Ref: "ghcr.io/etcdfed/hub:v1.2.3", Archive: filepath.Join(dir, "hub.tar")},
		{Ref: "gcr.io/etcd-development/etcd:v3.6.16", Archive: filepath.Join(dir, "etcd-3.6.tar")},
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("got %v, want %v", got, want)
	}
	if _, err := readImageList(t.TempDir()); err == nil || !strings.Contains(err.Error(), "make images") {
		t.Fatalf("no images.txt: %v, want an error naming make images", err)
	}
}

// TestRealToolsAreBuiltForEveryRealPurpose: every binary checkRealNodes
// asks for is built by hack/tools.sh for `make demo NODES=real` (realdemo)
// and for the real-node tests (realnodes), so neither stops at "real nodes
// need X" after its cold build.
func TestRealToolsAreBuiltForEveryRealPurpose(t *testing.T) {
	b, err := os.ReadFile("../../hack/tools.sh")
	if err != nil {
		t.Fatal(err)
	}
	// The tools.sh names whose build writes other binaries too.
	writes := map[string][]string{"containerd": {"containerd", "containerd-shim-runc-v2", "ctr"}}
	for _, purpose := range []string{"realdemo", "realnodes"} {
		var list string
		for _, line := range strings.Split(string(b), "\n") {
			if rest, ok := strings.CutPrefix(strings.TrimSpace(line), "["+purpose+"]=\""); ok {
				list = strings.TrimSuffix(rest, "\"")
			}
		}
		if list == "" {
			t.Errorf("hack/tools.sh has no [%s] purpose", purpose)
			continue
		}
		built := map[string]bool{}
		for _, tool := range strings.Fields(list) {
			built[tool] = true
			for _, w := range writes[tool] {
				built[w] = true
			}
		}
		for _, tool := range realTools {
			if !built[tool] {
				t.Errorf("hack/tools.sh --for %s does not build %s, which real nodes run", purpose, tool)
			}
		}
	}
}
