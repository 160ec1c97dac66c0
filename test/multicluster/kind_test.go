package multicluster

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"

	etcdfedv1 "github.com/etcdfed/etcdfed/api/v1alpha1"
)

// The kind tests (ETCDFED_KIND=1, make test-kind) run hack/kind's scripts
// as a user runs them, against Docker and kind on this machine: up.sh
// from nothing (four kind clusters of the node image node-image.sh built
// here), a zone's node container stopped under the recorded workload, and
// down.sh leaving nothing behind. They need root and the Docker engine
// (make kind-deps). The clusters get their own prefix, so a user's
// clusters of the default prefix are never touched.
const kindTestPrefix = "etcdfed-kindtest"

func skipUnlessKind(t *testing.T) {
	t.Helper()
	if os.Getenv("ETCDFED_KIND") == "" {
		t.Skip("kind runs with ETCDFED_KIND=1 (make test-kind): it needs root, Docker and the node image (make kind-image)")
	}
}

// kindRun runs a hack/kind script (or another command from the repository
// root) with the test's prefix, its output on the test's stderr.
func kindRun(ctx context.Context, t *testing.T, args ...string) error {
	t.Helper()
	cmd := exec.CommandContext(ctx, args[0], args[1:]...)
	cmd.Dir = repoRoot(t)
	cmd.Env = append(os.Environ(), "ETCDFED_KIND_PREFIX="+kindTestPrefix)
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	t.Logf("Running %s", strings.Join(args, " "))
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("run %s: %w", strings.Join(args, " "), err)
	}
	return nil
}

// kindOutput runs a command and returns its standard output.
func kindOutput(ctx context.Context, t *testing.T, args ...string) (string, error) {
	t.Helper()
	cmd := exec.CommandContext(ctx, args[0], args[1:]...)
	cmd.Dir = repoRoot(t)
	cmd.Env = append(os.Environ(), "ETCDFED_KIND_PREFIX="+kindTestPrefix)
	out, err := cmd.Output()
	if err != nil {
		var stderr string
		if ee := (*exec.ExitError)(nil); errors.As(err, &ee) {
			stderr = string(ee.Stderr)
		}
		return "", fmt.Errorf("run %s: %w: %s", strings.Join(args, " "), err, stderr)
	}
	return string(out), nil
}

func repoRoot(t *testing.T) string {
	t.Helper()
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	return root
}

// kindLeftovers lists what of the prefix's clusters still exists: node
// containers, kubeconfig contexts, the docker network "kind" (kind never
// deletes it; down.sh does once it is empty), and volumes beyond those in
// before.
func kindLeftovers(ctx context.Context, t *testing.T, volumesBefore map[string]bool) []string {
	t.Helper()
	var left []string
	if out, err := kindOutput(ctx, t, "docker", "ps", "-a", "--format", "{{.Names}}", "--filter", "name=^"+kindTestPrefix+"-"); err != nil {
		left = append(left, err.Error())
	} else if s := strings.TrimSpace(out); s != "" {
		left = append(left, "containers: "+strings.ReplaceAll(s, "\n", " "))
	}
	if out, err := kindOutput(ctx, t, "docker", "network", "ls", "--format", "{{.Name}}", "--filter", "name=^kind$"); err != nil {
		left = append(left, err.Error())
	} else if strings.TrimSpace(out) != "" {
		left = append(left, "docker network kind")
	}
	if out, err := kindOutput(ctx, t, "kubectl", "config", "get-contexts", "-o", "name"); err == nil {
		for _, c := range strings.Fields(out) {
			if strings.HasPrefix(c, "kind-"+kindTestPrefix+"-") {
				left = append(left, "kubeconfig context "+c)
			}
		}
	}
	if volumesBefore != nil {
		for _, v := range dockerVolumes(ctx, t) {
			if !volumesBefore[v] {
				left = append(left, "docker volume "+v)
			}
		}
	}
	return left
}

func dockerVolumes(ctx context.Context, t *testing.T) []string {
	t.Helper()
	out, err := kindOutput(ctx, t, "docker", "volume", "ls", "-q")
	if err != nil {
		t.Fatal(err)
	}
	return strings.Fields(out)
}

func kubectlJSON(ctx context.Context, t *testing.T, cluster string, into any, args ...string) error {
	t.Helper()
	out, err := kindOutput(ctx, t, append([]string{"kubectl", "--context", "kind-" + kindTestPrefix + "-" + cluster, "-o", "json"}, args...)...)
	if err != nil {
		return err
	}
	if err := json.Unmarshal([]byte(out), into); err != nil {
		return fmt.Errorf("decode kubectl %s: %w", strings.Join(args, " "), err)
	}
	return nil
}

func kindEtcdCluster(ctx context.Context, t *testing.T) (*etcdfedv1.EtcdCluster, error) {
	t.Helper()
	ec := &etcdfedv1.EtcdCluster{}
	return ec, kubectlJSON(ctx, t, "hub", ec, "-n", "default", "get", "etcdclusters.etcdfed.dev", "main")
}

// kindWaitFor polls the EtcdCluster every 5s until ok says so.
func kindWaitFor(ctx context.Context, t *testing.T, timeout time.Duration, what string, ok func(*etcdfedv1.EtcdCluster) bool) {
	t.Helper()
	start := time.Now()
	var last string
	for {
		ec, err := kindEtcdCluster(ctx, t)
		if err == nil && ok(ec) {
			t.Logf("%s after %.0fs: %s, zones %s", what, time.Since(start).Seconds(), ec.Status.MemberSummary, ec.Status.ZoneSummary)
			return
		}
		if err == nil {
			last = kindMembers(ec)
		} else {
			last = err.Error()
		}
		if time.Since(start) > timeout {
			t.Fatalf("Timed out after %s waiting for %s; last: %s", timeout, what, last)
		}
		select {
		case <-ctx.Done():
			t.Fatal(ctx.Err())
		case <-time.After(5 * time.Second):
		}
	}
}

func kindMembers(ec *etcdfedv1.EtcdCluster) string {
	var b strings.Builder
	for _, m := range ec.Status.Members {
		fmt.Fprintf(&b, "%s@%s/%s ready=%t; ", m.Name, m.Cluster, m.Zone, m.Ready)
	}
	for _, c := range ec.Status.Conditions {
		fmt.Fprintf(&b, "%s=%s(%s) ", c.Type, c.Status, c.Reason)
	}
	return b.String()
}

func kindCondition(ec *etcdfedv1.EtcdCluster, typ string) bool {
	return meta.IsStatusConditionTrue(ec.Status.Conditions, typ)
}

// kindReadyIn counts the ready members in a member cluster (every zone of
// it), and all ready members.
func kindReadyIn(ec *etcdfedv1.EtcdCluster, cluster string) (inCluster, ready int) {
	for _, m := range ec.Status.Members {
		if !m.Ready {
			continue
		}
		ready++
		if m.Cluster == cluster {
			inCluster++
		}
	}
	return inCluster, ready
}

// kindMemory sums the memory Docker reports for the prefix's node
// containers (their cgroups: the nodes' systemd, kubelet, containerd and
// every pod).
func kindMemory(ctx context.Context, t *testing.T) string {
	t.Helper()
	out, err := kindOutput(ctx, t, "docker", "stats", "--no-stream", "--format", "{{.Name}} {{.MemUsage}}")
	if err != nil {
		return err.Error()
	}
	var total float64
	var parts []string
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		f := strings.Fields(line)
		if len(f) < 2 || !strings.HasPrefix(f[0], kindTestPrefix+"-") {
			continue
		}
		var v float64
		var unit string
		if _, err := fmt.Sscanf(f[1], "%f%s", &v, &unit); err != nil {
			continue
		}
		switch unit {
		case "GiB":
			v *= 1024
		case "KiB":
			v /= 1024
		case "B":
			v /= 1024 * 1024
		}
		total += v
		parts = append(parts, fmt.Sprintf("%s %.0f MiB", strings.TrimPrefix(f[0], kindTestPrefix+"-"), v))
	}
	return fmt.Sprintf("%.0f MiB (%s)", total, strings.Join(parts, ", "))
}

// TestKindZoneFailure is make test-kind: hack/kind/up.sh from nothing
// brings up a hub and three member clusters on kind and the sample's
// 5-member ring; etcdctl.sh writes and reads; then, under the recorded
// workload, fail-zone.sh fails the member cluster holding two members
// (--stop stops its node container; ETCDFED_KIND_FAIL picks pause or a
// network cut instead; with ETCDFED_KIND_TWO_ZONES=N member cluster N
// spans two zones, up.sh --two-zones), the hub evacuates them into the other
// zones, restore-zone.sh starts it again and the ring becomes failure
// tolerant again. The workload must be linearizable with nothing
// acknowledged lost and every watch complete; down.sh must leave no
// container, network, volume, kubeconfig context, host bridge or iptables
// rule of the kind network behind.
func TestKindZoneFailure(t *testing.T) {
	skipUnlessKind(t)
	ctx, cancel := context.WithTimeout(context.Background(), 65*time.Minute)
	defer cancel()
	root := repoRoot(t)

	// From nothing: whatever an earlier run left goes first.
	if err := kindRun(ctx, t, "hack/kind/down.sh"); err != nil {
		t.Fatal(err)
	}
	if left := kindLeftovers(ctx, t, nil); len(left) > 0 {
		t.Fatalf("Not starting from nothing after down.sh: %v", left)
	}
	volumes := map[string]bool{}
	for _, v := range dockerVolumes(ctx, t) {
		volumes[v] = true
	}
	downed := false
	t.Cleanup(func() {
		if downed || os.Getenv("ETCDFED_KIND_KEEP") != "" {
			return
		}
		cctx, ccancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer ccancel()
		_ = kindRun(cctx, t, "hack/kind/down.sh")
	})

	start := time.Now()
	up := []string{"hack/kind/up.sh"}
	twoZones := os.Getenv("ETCDFED_KIND_TWO_ZONES")
	if twoZones != "" {
		up = append(up, "--two-zones", twoZones)
	}
	workers := 0
	if w := os.Getenv("ETCDFED_KIND_WORKERS"); w != "" {
		n, err := strconv.Atoi(w)
		if err != nil || n < 0 {
			t.Fatalf("ETCDFED_KIND_WORKERS=%q: want a number of worker nodes per member cluster (0 or more)", w)
		}
		workers = n
		up = append(up, "--workers", w)
	}
	if err := kindRun(ctx, t, up...); err != nil {
		t.Fatal(err)
	}
	t.Logf("up.sh: four kind clusters and the ring Available in %.0fs", time.Since(start).Seconds())
	ec, err := kindEtcdCluster(ctx, t)
	if err != nil {
		t.Fatal(err)
	}
	if !kindCondition(ec, etcdfedv1.ConditionAvailable) || len(ec.Status.Members) != 5 {
		t.Fatalf("After up.sh: %s", kindMembers(ec))
	}
	t.Logf("Memory of the four clusters with the ring: %s", kindMemory(ctx, t))
	kindNet := kindNetworkOf(ctx, t)

	// etcdctl.sh, as docs/kind.md shows it.
	if err := kindRun(ctx, t, "hack/kind/etcdctl.sh", "put", "kind-test", "written-by-etcdctl.sh"); err != nil {
		t.Fatal(err)
	}
	out, err := kindOutput(ctx, t, "hack/kind/etcdctl.sh", "get", "kind-test", "--print-value-only")
	if err != nil || strings.TrimSpace(out) != "written-by-etcdctl.sh" {
		t.Fatalf("etcdctl.sh get: %q, %v", out, err)
	}

	// The workload's client: the members' names resolved by the spokes'
	// DNS on their node addresses (the docker network kind), a client
	// certificate from etcdfed client-cert.
	var dns []string
	for _, m := range []string{"member-1", "member-2", "member-3"} {
		var spoke etcdfedv1.EtcdSpoke
		if err := kubectlJSON(ctx, t, m, &spoke, "-n", "etcdfed-system", "get", "etcdspokes.etcdfed.dev", "spoke"); err != nil {
			t.Fatal(err)
		}
		dns = append(dns, spoke.Status.DNSAddresses...)
		// up.sh --two-zones N: member N's spoke reports both zones, each
		// with a node that takes pods.
		want := []string{"zone-" + strings.TrimPrefix(m, "member-")}
		if twoZones == strings.TrimPrefix(m, "member-") {
			want = []string{want[0] + "a", want[0] + "b"}
		}
		if !slices.Equal(spoke.Status.Zones, want) || len(spoke.Status.UnschedulableZones) > 0 {
			t.Fatalf("%s: the spoke reports zones %v (unschedulable %v), want %v", m, spoke.Status.Zones, spoke.Status.UnschedulableZones, want)
		}
	}
	t.Logf("Members at the start: %s", kindMembers(ec))
	if workers > 0 {
		kindMembersOnWorkers(ctx, t, workers, twoZones)
	}
	certs := t.TempDir()
	if err := kindRun(ctx, t, filepath.Join(root, "bin", "etcdfed"), "client-cert", "main", "-n", "default",
		"--context", "kind-"+kindTestPrefix+"-hub", "--out", certs); err != nil {
		t.Fatal(err)
	}
	tlsCfg := kindClientTLS(t, certs)
	// No watcher per endpoint: on kind a member is exposed on a NodePort
	// of its node, and a member replaced into another cluster gets that
	// cluster's next free NodePort, so its endpoint of the start
	// (main-N.etcd.kind.local:<old port>) never answers again (the first
	// run here: three of five endpoints changed ports, and their watchers
	// stopped there). The watcher over all endpoints must still see every
	// acknowledged put, in order.
	w := StartWorkload(ctx, t, StartWorkloadInput{
		Client: EtcdClientConfig{Endpoints: ec.Status.Endpoints, DNSServers: dns, TLS: tlsCfg},
		Prefix: "/kind-zone-failure/",
	})
	waitForWorkloadProgress(ctx, t, w)

	// The zone holding the most members loses its node.
	counts := map[string]int{}
	for _, m := range ec.Status.Members {
		counts[m.Cluster]++
	}
	failed := ""
	for c, n := range counts {
		if failed == "" || n > counts[failed] || (n == counts[failed] && c < failed) {
			failed = c
		}
	}
	// Its zones: one, or two with up.sh --two-zones, failed together (a
	// kind cluster's nodes stop and are cut together). After the restore
	// the hub may bring a member back into either.
	var zones []string
	for _, m := range ec.Status.Members {
		if m.Cluster == failed && !slices.Contains(zones, m.Zone) {
			zones = append(zones, m.Zone)
		}
	}
	slices.Sort(zones)
	zone := strings.Join(zones, ", ")
	mode, err := kindFailMode()
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("Failing the zone of %s (zone %s, %d members): fail-zone.sh %s", failed, zone, counts[failed], mode)
	failStart := time.Now()
	args := []string{"hack/kind/fail-zone.sh", failed}
	if mode != "pause" {
		args = append(args, "--"+mode)
	}
	if err := kindRun(ctx, t, args...); err != nil {
		t.Fatal(err)
	}
	kindWaitFor(ctx, t, 20*time.Minute, "the failed zone's members evacuated (5 ready outside "+zone+")", func(ec *etcdfedv1.EtcdCluster) bool {
		in, ready := kindReadyIn(ec, failed)
		return in == 0 && ready == 5 && kindCondition(ec, etcdfedv1.ConditionAvailable)
	})
	t.Logf("Evacuated %.0fs after the zone failed (%s)", time.Since(failStart).Seconds(), mode)

	if err := kindRun(ctx, t, "hack/kind/restore-zone.sh", failed); err != nil {
		t.Fatal(err)
	}
	kindWaitFor(ctx, t, 20*time.Minute, "the ring failure tolerant again with members back in "+zone, func(ec *etcdfedv1.EtcdCluster) bool {
		in, ready := kindReadyIn(ec, failed)
		return in > 0 && ready == 5 && kindCondition(ec, etcdfedv1.ConditionAvailable) &&
			kindCondition(ec, etcdfedv1.ConditionFailureTolerant)
	})
	checkWorkload(ctx, t, w)
	if end, err := kindEtcdCluster(ctx, t); err == nil {
		t.Logf("Endpoints at the start %v, at the end %v", ec.Status.Endpoints, end.Status.Endpoints)
	}

	downStart := time.Now()
	if err := kindRun(ctx, t, "hack/kind/down.sh"); err != nil {
		t.Fatal(err)
	}
	downed = true
	t.Logf("down.sh in %.0fs", time.Since(downStart).Seconds())
	left := kindLeftovers(ctx, t, volumes)
	left = append(left, kindNet.leftovers(ctx, t)...)
	if len(left) > 0 {
		t.Fatalf("down.sh left behind: %v", left)
	}
}

// kindFailMode is how TestKindZoneFailure fails the zone, fail-zone.sh's
// modes: stop (the default: the node container stopped), pause, or cut
// (the node disconnected from the docker network kind). ETCDFED_KIND_FAIL
// picks one (make test-kind KIND_FAIL=cut).
func kindFailMode() (string, error) {
	switch m := os.Getenv("ETCDFED_KIND_FAIL"); m {
	case "":
		return "stop", nil
	case "stop", "pause", "cut":
		return m, nil
	default:
		return "", fmt.Errorf("ETCDFED_KIND_FAIL=%q: want stop, pause or cut (hack/kind/fail-zone.sh's modes)", m)
	}
}

// kindNetwork is the docker network "kind" as up.sh left it: its bridge
// on the host and its subnets, which Docker's iptables rules name.
type kindNetwork struct {
	bridge  string
	subnets []string
}

func kindNetworkOf(ctx context.Context, t *testing.T) kindNetwork {
	t.Helper()
	out, err := kindOutput(ctx, t, "docker", "network", "inspect", "-f", "{{.Id}}{{range .IPAM.Config}} {{.Subnet}}{{end}}", "kind")
	if err != nil {
		t.Fatal(err)
	}
	f := strings.Fields(out)
	if len(f) < 2 || len(f[0]) < 12 {
		t.Fatalf("docker network inspect kind: %q", out)
	}
	n := kindNetwork{bridge: "br-" + f[0][:12], subnets: f[1:]}
	t.Logf("The docker network kind: bridge %s, subnets %v", n.bridge, n.subnets)
	return n
}

// leftovers lists the host's bridge of the network and every iptables
// rule (filter and nat; IPv4, and IPv6 when ip6tables-save runs) that
// names the bridge or a subnet of it.
func (n kindNetwork) leftovers(ctx context.Context, t *testing.T) []string {
	t.Helper()
	var left []string
	if _, err := kindOutput(ctx, t, "ip", "link", "show", n.bridge); err == nil {
		left = append(left, "host interface "+n.bridge)
	}
	for _, save := range []string{"iptables-save", "ip6tables-save"} {
		out, err := kindOutput(ctx, t, save)
		if err != nil {
			if save == "iptables-save" {
				left = append(left, err.Error())
			}
			continue
		}
		for _, line := range strings.Split(out, "\n") {
			if strings.HasPrefix(line, "#") {
				continue
			}
			if strings.Contains(line, n.bridge) {
				left = append(left, save+": "+line)
				continue
			}
			for _, s := range n.subnets {
				if strings.Contains(line, s) {
					left = append(left, save+": "+line)
					break
				}
			}
		}
	}
	return left
}

func kindClientTLS(t *testing.T, dir string) *tls.Config {
	t.Helper()
	cert, err := tls.LoadX509KeyPair(filepath.Join(dir, "client.crt"), filepath.Join(dir, "client.key"))
	if err != nil {
		t.Fatal(err)
	}
	ca, err := os.ReadFile(filepath.Join(dir, "ca.crt"))
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(ca) {
		t.Fatalf("no certificate in %s/ca.crt", dir)
	}
	return &tls.Config{Certificates: []tls.Certificate{cert}, RootCAs: pool, MinVersion: tls.VersionTLS12}
}

// kindMembersOnWorkers checks up.sh --workers N: each member cluster has
// its control plane and N workers Ready (a two-zone cluster at least one
// worker), and in a one-zone cluster, whose control plane keeps its
// taint, every etcd member runs on a worker.
func kindMembersOnWorkers(ctx context.Context, t *testing.T, workers int, twoZones string) {
	t.Helper()
	for _, m := range []string{"member-1", "member-2", "member-3"} {
		var nodes corev1.NodeList
		if err := kubectlJSON(ctx, t, m, &nodes, "get", "nodes"); err != nil {
			t.Fatal(err)
		}
		want := 1 + workers
		ready := 0
		for _, n := range nodes.Items {
			for _, c := range n.Status.Conditions {
				if c.Type == corev1.NodeReady && c.Status == corev1.ConditionTrue {
					ready++
				}
			}
		}
		if len(nodes.Items) != want || ready != want {
			t.Fatalf("%s: %d nodes, %d Ready; want %d (up.sh --workers %d)", m, len(nodes.Items), ready, want, workers)
		}
		if twoZones == strings.TrimPrefix(m, "member-") {
			continue
		}
		var ems etcdfedv1.EtcdMemberList
		if err := kubectlJSON(ctx, t, m, &ems, "get", "etcdmembers.etcdfed.dev", "-A"); err != nil {
			t.Fatal(err)
		}
		for _, em := range ems.Items {
			if node := em.Status.NodeName; node == "" || node == kindTestPrefix+"-"+m+"-control-plane" {
				t.Fatalf("%s: member %s runs on node %q, want a worker (the control plane keeps its taint)", m, em.Name, node)
			}
			t.Logf("%s: member %s on node %s", m, em.Name, em.Status.NodeName)
		}
	}
}
