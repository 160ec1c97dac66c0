package app_test

import (
	"context"
	"net/netip"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/go-logr/logr/funcr"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdfedv1 "github.com/etcdfed/etcdfed/api/v1alpha1"
	"github.com/etcdfed/etcdfed/dev/localenv/addr"
	"github.com/etcdfed/etcdfed/dev/localenv/nodeagent"
	"github.com/etcdfed/etcdfed/dev/testenv"
	"github.com/etcdfed/etcdfed/dnsprovider"
	"github.com/etcdfed/etcdfed/spoke/app"
	"github.com/etcdfed/etcdfed/spoke/internal/testcerts"
)

// binDir returns a directory with bin/etcd and the etcdfed-init helper
// built from this checkout (the wait-dns init container runs it).
func binDir(t *testing.T) string {
	t.Helper()
	bin, err := testenv.BinDir()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := os.Symlink(filepath.Join(bin, "etcd"), filepath.Join(dir, "etcd")); err != nil {
		t.Fatal(err)
	}
	if err := testenv.BuildOurs(dir, "etcdfed-init"); err != nil {
		t.Fatal(err)
	}
	return dir
}

// TestMemberOnLocalNode runs a member end to end the way the hub drives it,
// on the local environment's node agent (the kubelet stand-in): the spoke
// prepares the volume and reports the peer URL, the "hub" sets bootstrap,
// the pod starts and its wait-dns init container waits until the "hub"
// publishes the member's record in the EtcdDNSZone, which the same spoke
// serves; then the real etcd starts with TLS, resolving its own name
// through the spoke's DNS, becomes ready, and the spoke reads its status
// over TLS. Logged: the times of each stage.
func TestMemberOnLocalNode(t *testing.T) {
	testenv.SkipIfShort(t, "kube-apiserver, etcd and the node agent")
	bin := binDir(t)
	cl := testenv.StartT(t, "spoke-local")[0]
	slot, err := addr.Acquire(0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(slot.Release)
	p := slot.Plan
	dnsAddr := p.DNS(1).String()
	ctx := context.Background()
	g := NewWithT(t)
	g.SetDefaultEventuallyTimeout(2 * time.Minute)
	g.SetDefaultEventuallyPollingInterval(50 * time.Millisecond)
	c := cl.Client
	ns := testenv.NamespaceT(t, cl, "ring")

	zr := p.Zone(1, 1).Addr().As4()
	agent, err := nodeagent.New(nodeagent.Config{
		ClusterName: "local", REST: cl.Config, BinDir: bin, StateDir: t.TempDir(),
		Nodes: []nodeagent.Node{{
			Name: "node-a", Zone: "zone-a", IP: p.Node(1, 1, 0),
			PodIPs: nodeagent.IPRange{
				First: netip.AddrFrom4([4]byte{zr[0], zr[1], zr[2], addr.FirstPodHost}),
				Last:  netip.AddrFrom4([4]byte{zr[0], zr[1], zr[2], addr.LastPodHost}),
			},
		}},
		DNSServers:  []string{dnsAddr},
		BackoffBase: time.Second, BackoffMax: 4 * time.Second, HeartbeatInterval: 2 * time.Second, ShutdownGrace: 5 * time.Second,
		Log: funcr.New(func(prefix, args string) { t.Log(prefix, args) }, funcr.Options{}),
	})
	g.Expect(err).NotTo(HaveOccurred())
	actx, stopAgent := context.WithCancel(context.Background())
	agentDone := make(chan struct{})
	go func() { defer close(agentDone); _ = agent.Run(actx) }()
	t.Cleanup(func() { stopAgent(); <-agentDone })

	o := app.DefaultOptions()
	o.Namespace = ns
	o.DNSListen = dnsAddr
	o.Gossip.BindAddr = ""
	o.LeaderElection = false
	o.MemberStatusInterval = time.Second
	run(t, cl.Config, o)

	const domain = "etcd.test"
	m := &etcdfedv1.EtcdMember{
		ObjectMeta: metav1.ObjectMeta{Name: "main-0", Namespace: ns},
		Spec: etcdfedv1.EtcdMemberSpec{
			Cluster:    etcdfedv1.ClusterReference{Name: "main", Namespace: "hub", UID: "uid-local"},
			MemberName: "main-0", Incarnation: 3, Image: "gcr.io/etcd-development/etcd:v3.6.16",
			DNSName: "main-0." + domain, Zone: "zone-a",
			TLS: etcdfedv1.MemberTLS{SecretName: "main-0-tls", PeerSkipClientSANVerification: true},
		},
	}
	pair := testcerts.NewCA(t).Issue(t, "main-0", []string{m.Spec.DNSName})
	g.Expect(c.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "main-0-tls", Namespace: ns}, Data: pair.SecretData()})).To(Succeed())
	g.Expect(c.Create(ctx, m)).To(Succeed())
	get := func(g Gomega) *etcdfedv1.EtcdMember {
		cur := &etcdfedv1.EtcdMember{}
		g.Expect(c.Get(ctx, client.ObjectKeyFromObject(m), cur)).To(Succeed())
		return cur
	}
	var peerURL string
	g.Eventually(func(g Gomega) { peerURL = get(g).Status.PeerURL; g.Expect(peerURL).NotTo(BeEmpty()) }).Should(Succeed())

	// The hub: bootstrap once the member may start.
	g.Eventually(func(g Gomega) {
		cur := get(g)
		cur.Spec.Bootstrap = &etcdfedv1.BootstrapSpec{InitialCluster: "main-0=" + peerURL, InitialClusterState: etcdfedv1.InitialClusterNew, Token: "local"}
		g.Expect(c.Update(ctx, cur)).To(Succeed())
	}).Should(Succeed())
	bootstrapped := time.Now()

	// The pod is scheduled, gets its IP and waits for DNS.
	var address string
	g.Eventually(func(g Gomega) {
		cur := get(g)
		address = cur.Status.Address
		g.Expect(address).NotTo(BeEmpty())
		c := meta.FindStatusCondition(cur.Status.Conditions, etcdfedv1.ConditionPodReady)
		g.Expect(c.Reason).To(Equal("WaitingForDNS"), c.Message)
	}).Should(Succeed())
	addressKnown := time.Since(bootstrapped)

	// The hub publishes the record.
	set, err := dnsprovider.Build(dnsprovider.Spec{Domain: domain, TTL: 5, Owner: "uid-local", TLS: true,
		Members:     []dnsprovider.Member{{Name: "main-0", Addresses: []netip.Addr{netip.MustParseAddr(address)}}},
		NameServers: []dnsprovider.NameServer{{Name: "ns1." + domain + ".", Addresses: []netip.Addr{p.Agent(1)}}}})
	g.Expect(err).NotTo(HaveOccurred())
	z := &etcdfedv1.EtcdDNSZone{ObjectMeta: metav1.ObjectMeta{Name: "main", Namespace: ns},
		Spec: etcdfedv1.EtcdDNSZoneSpec{Cluster: m.Spec.Cluster, Domain: domain}}
	for _, r := range set.Records() {
		z.Spec.Records = append(z.Spec.Records, etcdfedv1.DNSRecord{Name: r.Name, Type: r.Type, TTL: r.TTL, Data: r.Data})
	}
	g.Expect(c.Create(ctx, z)).To(Succeed())
	published := time.Now()

	var final *etcdfedv1.EtcdMember
	g.Eventually(func(g Gomega) {
		final = get(g)
		for _, ct := range []string{etcdfedv1.ConditionPodReady, etcdfedv1.ConditionMemberHealthy, etcdfedv1.ConditionExposed} {
			c := meta.FindStatusCondition(final.Status.Conditions, ct)
			g.Expect(c).NotTo(BeNil())
			g.Expect(c.Status).To(Equal(metav1.ConditionTrue), "%s: %s %s", ct, c.Reason, c.Message)
		}
		g.Expect(final.Status.Etcd).NotTo(BeNil())
		g.Expect(final.Status.Etcd.LeaderID).To(Equal(final.Status.Etcd.ID))
	}).Should(Succeed())
	t.Logf("bootstrap -> address reported: %v; record published -> pod ready and member healthy: %v; total %v",
		addressKnown.Round(time.Millisecond), time.Since(published).Round(time.Millisecond), time.Since(bootstrapped).Round(time.Millisecond))
	t.Logf("status: pod %s ip %s node %s zone %s volume %s; etcd id %s version %s",
		final.Status.PodName, final.Status.PodIP, final.Status.NodeName, final.Status.Zone, final.Status.Volume.ClaimName, final.Status.Etcd.ID, final.Status.Etcd.Version)
	g.Expect(final.Status.Zone).To(Equal("zone-a"))
	g.Expect(final.Status.Volume.ClaimName).To(Equal("main-0-data-3"))
	g.Expect(final.Status.Address).To(Equal(final.Status.PodIP))

	pod := &corev1.Pod{}
	g.Expect(c.Get(ctx, types.NamespacedName{Namespace: ns, Name: "main-0"}, pod)).To(Succeed())
	// wait-dns, then install-helper (the preStop hook's etcdfed-init).
	g.Expect(pod.Status.InitContainerStatuses).To(HaveLen(2))
	for _, st := range pod.Status.InitContainerStatuses {
		g.Expect(st.State.Terminated).NotTo(BeNil(), st.Name)
		g.Expect(st.State.Terminated.ExitCode).To(BeZero(), st.Name)
	}
}
