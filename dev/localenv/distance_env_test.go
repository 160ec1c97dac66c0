package localenv_test

import (
	"context"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr/testr"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/etcdfed/etcdfed/dev/localenv"
	"github.com/etcdfed/etcdfed/dev/localenv/nodeagent"
	"github.com/etcdfed/etcdfed/dev/testenv"
)

// probeBinDir is a bin directory with the environment's binaries and
// this test binary as "distprobe", which pods run as their probe.
func probeBinDir(t *testing.T) string {
	t.Helper()
	bin, err := testenv.BinDir()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	entries, err := os.ReadDir(bin)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if err := os.Symlink(filepath.Join(bin, e.Name()), filepath.Join(dir, e.Name())); err != nil {
			t.Fatal(err)
		}
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(self, filepath.Join(dir, "distprobe")); err != nil {
		t.Fatal(err)
	}
	return dir
}

func probePod(name, zone string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"},
		Spec: corev1.PodSpec{
			NodeSelector: map[string]string{nodeagent.ZoneLabel: zone},
			Containers: []corev1.Container{{
				Name: "probe", Image: "distprobe", Command: []string{"distprobe"},
				Env: []corev1.EnvVar{
					{Name: "POD_IP", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "status.podIP"}}},
					{Name: probeEnv, Value: "1"},
				},
			}},
		},
	}
}

func median(ds []time.Duration) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[len(s)/2]
}

// Distance between two member clusters of two zones each, on pods that
// are probes: a TCP round trip across the clusters takes at least the
// set round trip and one inside a zone about nothing; UDP to a spoke's
// DNS address is delayed too; the peer sees the sender's pod address,
// not the proxy's; a partition still cuts a pair at a distance; a new
// distance takes effect at once (a pair of zones winning over their
// clusters'); none removes every rule; and a restart keeps the distance
// state.json recorded.
func TestDistance(t *testing.T) {
	testenv.SkipIfShort(t, "kube-apiserver, etcd and the node agents")
	if os.Geteuid() != 0 {
		t.Skip("distance needs root (iptables rules and cgroups)")
	}
	g := NewWithT(t)
	ctx := context.Background()
	dir := t.TempDir()
	d20, err := localenv.ParseDistance("member-1:member-2=20ms")
	g.Expect(err).NotTo(HaveOccurred())
	cfg := localenv.Config{StateDir: dir, Clusters: 2, ZonesPerCluster: 2, NoComponents: true, BinDir: probeBinDir(t),
		Distance: &d20, Log: testr.NewWithOptions(t, testr.Options{Verbosity: 0})}
	env, err := localenv.Start(ctx, cfg)
	g.Expect(err).NotTo(HaveOccurred())
	stopped := false
	t.Cleanup(func() {
		if !stopped {
			_ = env.Stop()
		}
	})
	st := env.State()
	chain := "ETCDFED-DELAY-" + strconv.Itoa(st.Slot)

	clients := map[string]kubernetes.Interface{}
	for _, c := range []string{"member-1", "member-2"} {
		cs, err := env.Clientset(c)
		g.Expect(err).NotTo(HaveOccurred())
		clients[c] = cs
	}
	pods := map[string][2]string{"pa": {"member-1", "zone-1a"}, "pa2": {"member-1", "zone-1a"}, "pc": {"member-2", "zone-2a"}}
	for name, where := range pods {
		_, err := clients[where[0]].CoreV1().Pods("default").Create(ctx, probePod(name, where[1]), metav1.CreateOptions{})
		g.Expect(err).NotTo(HaveOccurred())
	}
	ips := map[string]string{}
	g.Eventually(func(g Gomega) {
		for name, where := range pods {
			p, err := clients[where[0]].CoreV1().Pods("default").Get(ctx, name, metav1.GetOptions{})
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(p.Status.PodIP).NotTo(BeEmpty(), name)
			_, err = ask(net.JoinHostPort(p.Status.PodIP, strconv.Itoa(probePort)), "WHO")
			g.Expect(err).NotTo(HaveOccurred(), "probe %s", name)
			ips[name] = p.Status.PodIP
		}
	}).WithTimeout(90 * time.Second).WithPolling(250 * time.Millisecond).Should(Succeed())
	at := func(pod string) string { return net.JoinHostPort(ips[pod], strconv.Itoa(probePort)) }
	// pings asks from to ping to n times over one new TCP connection.
	pings := func(g Gomega, from, to string, n int) []time.Duration {
		ans, err := ask(at(from), "TCP "+at(to)+" "+strconv.Itoa(n))
		g.Expect(err).NotTo(HaveOccurred(), "%s to %s", from, to)
		ds, err := rtts(ans)
		g.Expect(err).NotTo(HaveOccurred())
		return ds
	}
	show := func(ds []time.Duration) string {
		s := slices.Clone(ds)
		slices.Sort(s)
		return "min " + s[0].String() + " median " + median(s).String() + " max " + s[len(s)-1].String()
	}

	// Across the clusters: at least 20ms; inside a zone: about nothing.
	across := pings(g, "pa", "pc", 20)
	t.Logf("TCP round trips at 20ms, zone-1a to zone-2a: %s", show(across))
	g.Expect(slices.Min(across)).To(BeNumerically(">=", 20*time.Millisecond))
	back := pings(g, "pc", "pa", 5)
	g.Expect(slices.Min(back)).To(BeNumerically(">=", 20*time.Millisecond), "member-2 to member-1")
	inside := pings(g, "pa", "pa2", 20)
	t.Logf("TCP round trips inside zone-1a: %s", show(inside))
	// Undelayed means under half the delay a rule would add: a loaded
	// machine (make test runs three test binaries at once) turns loopback's
	// fraction of a millisecond into several (a median of 6.8 ms seen).
	g.Expect(median(inside)).To(BeNumerically("<", 10*time.Millisecond), "inside a zone, against 20ms across")

	// The peer sees the sender's pod address, both ways.
	who, err := ask(at("pa"), "WHOAT "+at("pc"))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(who).To(Equal(ips["pa"]), "pc saw pa's connection come from")
	who, err = ask(at("pc"), "WHOAT "+at("pa"))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(who).To(Equal(ips["pc"]), "pa saw pc's connection come from")

	// UDP to member-2's spoke DNS address (played here by an echo) is
	// delayed too, and comes from the sender's address.
	m2, _ := st.Cluster("member-2")
	dns, err := net.ListenPacket("udp4", m2.DNS)
	g.Expect(err).NotTo(HaveOccurred())
	defer dns.Close()
	sources := make(chan string, 64)
	go func() {
		buf := make([]byte, 512)
		for {
			n, from, err := dns.ReadFrom(buf)
			if err != nil {
				return
			}
			select {
			case sources <- from.(*net.UDPAddr).IP.String():
			default:
			}
			_, _ = dns.WriteTo(buf[:n], from)
		}
	}()
	ans, err := ask(at("pa"), "UDP "+m2.DNS+" 5")
	g.Expect(err).NotTo(HaveOccurred())
	udp, err := rtts(ans)
	g.Expect(err).NotTo(HaveOccurred())
	t.Logf("UDP round trips at 20ms to member-2's DNS address: %s", show(udp))
	g.Expect(slices.Min(udp)).To(BeNumerically(">=", 20*time.Millisecond))
	g.Expect(<-sources).To(Equal(ips["pa"]))

	// A partition still cuts a pair at a distance, and healing it
	// restores the pair at its distance.
	g.Expect(env.Partition(ctx, localenv.Partition{Groups: [][]string{{"member-1"}, {"member-2"}}})).To(Succeed())
	_, err = ask(at("pa"), "TCP "+at("pc")+" 1")
	g.Expect(err).To(HaveOccurred(), "pa reached pc through the partition")
	_, err = ask(at("pa"), "UDP "+m2.DNS+" 1")
	g.Expect(err).To(HaveOccurred(), "pa's datagram crossed the partition")
	g.Expect(pings(g, "pa", "pa2", 1)).To(HaveLen(1), "inside a group")
	// A one-way cut stops one direction only, replies included.
	g.Expect(env.Partition(ctx, localenv.Partition{OneWay: []localenv.Cut{{From: "member-2", To: "member-1"}}})).To(Succeed())
	_, err = ask(at("pc"), "TCP "+at("pa")+" 1")
	g.Expect(err).To(HaveOccurred(), "pc reached pa through the one-way cut")
	g.Expect(slices.Min(pings(g, "pa", "pc", 3))).To(BeNumerically(">=", 20*time.Millisecond), "pa to pc, its replies crossing the one-way cut")
	g.Expect(env.HealPartition(ctx)).To(Succeed())
	g.Expect(slices.Min(pings(g, "pa", "pc", 3))).To(BeNumerically(">=", 20*time.Millisecond))
	g.Expect(slices.Min(pings(g, "pc", "pa", 3))).To(BeNumerically(">=", 20*time.Millisecond))
	// And FailZone's isolation too.
	g.Expect(env.FailZone(ctx, "zone-2a", localenv.ModePartition)).To(Succeed())
	_, err = ask(at("pa"), "TCP "+at("pc")+" 1")
	g.Expect(err).To(HaveOccurred(), "pa reached pc in its isolated zone")
	g.Expect(env.RestoreZone(ctx, "zone-2a")).To(Succeed())

	// A new distance takes effect at once and is recorded.
	d60, err := localenv.ParseDistance("member-1:member-2=60ms/10ms")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(env.SetDistance(ctx, d60)).To(Succeed())
	across = pings(g, "pa", "pc", 10)
	t.Logf("TCP round trips at 60ms ± 10ms: %s", show(across))
	g.Expect(slices.Min(across)).To(BeNumerically(">=", 50*time.Millisecond))
	saved, err := localenv.LoadState(dir)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(saved.Distance).NotTo(BeNil())
	g.Expect(saved.Distance.String()).To(Equal("member-1:member-2=60ms/10ms"))
	// The pair of zones wins over their clusters'.
	near, err := localenv.ParseDistance("member-1:member-2=60ms,zone-1a:zone-2a=0s")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(env.SetDistance(ctx, near)).To(Succeed())
	g.Expect(median(pings(g, "pa", "pc", 10))).To(BeNumerically("<", 30*time.Millisecond), "zone-1a:zone-2a=0s, against member-1:member-2=60ms")
	g.Expect(env.Status().Distance.Links).To(ContainElements("zone-1a:zone-2a=0s", "member-1:member-2=60ms"))
	g.Expect(env.SetDistance(ctx, localenv.Distance{Preset: "four-regions"})).To(MatchError(localenv.ErrBadDistance))
	bad, _ := localenv.ParseDistance("zone-1a:zone-9=5ms")
	g.Expect(env.SetDistance(ctx, bad)).To(MatchError(ContainSubstring(`no unit "zone-9"`)))

	// None removes every rule.
	g.Expect(env.SetDistance(ctx, localenv.Distance{})).To(Succeed())
	out, err := exec.Command("iptables", "-w", "5", "-t", "nat", "-S", chain).CombinedOutput()
	g.Expect(err).NotTo(HaveOccurred(), "%s", out)
	g.Expect(strings.TrimSpace(string(out))).To(Equal("-N "+chain), "rules left in %s", chain)
	g.Expect(median(pings(g, "pa", "pc", 10))).To(BeNumerically("<", 30*time.Millisecond), "no rule, against the 60ms before")
	g.Expect(env.Status().Distance.Spec).To(Equal("none"))

	// A restart keeps the distance recorded last.
	g.Expect(env.SetDistance(ctx, d20)).To(Succeed())
	g.Expect(env.Stop()).To(Succeed())
	stopped = true
	out, err = exec.Command("iptables", "-w", "5", "-t", "nat", "-S").CombinedOutput()
	g.Expect(err).NotTo(HaveOccurred(), "%s", out)
	g.Expect(string(out)).NotTo(ContainSubstring(chain), "Stop removes the chain and its jump")
	cfg.Distance = nil
	env2, err := localenv.Start(ctx, cfg)
	g.Expect(err).NotTo(HaveOccurred())
	t.Cleanup(func() { _ = env2.Stop() })
	g.Expect(env2.Distance().String()).To(Equal("member-1:member-2=20ms"))
	out, err = exec.Command("iptables", "-w", "5", "-t", "nat", "-S", chain).CombinedOutput()
	g.Expect(err).NotTo(HaveOccurred(), "%s", out)
	g.Expect(string(out)).To(ContainSubstring("REDIRECT"))
}
