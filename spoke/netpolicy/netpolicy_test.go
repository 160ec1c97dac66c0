package netpolicy_test

import (
	"context"
	"slices"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdfedv1 "github.com/etcdfed/etcdfed/api/v1alpha1"
	"github.com/etcdfed/etcdfed/dev/testenv"
	"github.com/etcdfed/etcdfed/spoke/app"
	"github.com/etcdfed/etcdfed/spoke/component/service"
	"github.com/etcdfed/etcdfed/spoke/internal/spoketest"
)

const domain = "main.etcd.example.com"

// rules reads a policy back as "port <- sources" strings, in order.
func rules(np *networkingv1.NetworkPolicy) map[int32][]string {
	out := map[int32][]string{}
	for _, r := range np.Spec.Ingress {
		var from []string
		for _, f := range r.From {
			switch {
			case f.IPBlock != nil:
				from = append(from, f.IPBlock.CIDR)
			case f.PodSelector != nil:
				from = append(from, "pods:"+f.PodSelector.MatchLabels[etcdfedv1.LabelClusterUID])
			}
		}
		for _, p := range r.Ports {
			out[p.Port.IntVal] = from
		}
	}
	return out
}

// TestMemberNetworkPolicy: a ring with spec.expose.networkPolicy gets, from
// the spoke running against a real apiserver, a NetworkPolicy per member
// that admits the peer port from the ring's pods, every address the
// ring's DNS zone publishes and peerSourceRanges, and the client and
// metrics ports from clientSourceRanges only; a new address in the zone
// (a new incarnation, before its etcd starts) is admitted, a zone of
// another ring is not read, and unsetting the field deletes the policy.
// Before, nothing restricted who reached a member's ports.
func TestMemberNetworkPolicy(t *testing.T) {
	cl := testenv.Shared(t, "spoke-netpolicy")
	ns := testenv.NamespaceT(t, cl, "netpol")
	o := app.DefaultOptions()
	o.Namespace = ns
	o.HelperImage = "ghcr.io/etcdfed/etcdfed:test"
	o.DNSListen = ""
	o.Gossip.BindAddr = ""
	o.LeaderElection = false
	spoketest.Run(t, cl.Config, o)
	g := NewWithT(t)
	g.SetDefaultEventuallyTimeout(30 * time.Second)
	g.SetDefaultEventuallyPollingInterval(50 * time.Millisecond)
	ctx, c := context.Background(), cl.Client
	uid := "uid-" + ns

	zone := func(name, ringUID string, addrs ...string) *etcdfedv1.EtcdDNSZone {
		return &etcdfedv1.EtcdDNSZone{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{etcdfedv1.LabelClusterUID: ringUID}},
			Spec: etcdfedv1.EtcdDNSZoneSpec{
				Cluster: etcdfedv1.ClusterReference{Name: name, Namespace: "hub", UID: ringUID},
				Domain:  domain,
				Records: []etcdfedv1.DNSRecord{
					{Name: "main-0." + domain + ".", Type: "A", TTL: 30, Data: addrs[:1]},
					{Name: "main-1." + domain + ".", Type: "A", TTL: 30, Data: addrs[1:2]},
					{Name: "main-2." + domain + ".", Type: "AAAA", TTL: 30, Data: addrs[2:]},
					{Name: "_etcd-server._tcp." + domain + ".", Type: "SRV", TTL: 30, Data: []string{"0 0 2380 main-0." + domain + "."}},
				},
			},
		}
	}
	ours := zone("main", uid, "10.1.0.10", "10.2.0.10", "fd00::10")
	g.Expect(c.Create(ctx, ours)).To(Succeed())
	g.Expect(c.Create(ctx, zone("other", "uid-other", "192.0.2.66", "192.0.2.67", "fd00::66"))).To(Succeed())

	m := &etcdfedv1.EtcdMember{
		ObjectMeta: metav1.ObjectMeta{Name: "main-0", Namespace: ns, Labels: map[string]string{etcdfedv1.LabelClusterUID: uid}},
		Spec: etcdfedv1.EtcdMemberSpec{
			Cluster:    etcdfedv1.ClusterReference{Name: "main", Namespace: "hub", UID: uid},
			MemberName: "main-0",
			Image:      "gcr.io/etcd-development/etcd:v3.6.16",
			DNSName:    "main-0." + domain,
			Zone:       "zone-a",
			TLS:        etcdfedv1.MemberTLS{Mode: etcdfedv1.TLSDisabled},
			Expose: etcdfedv1.ExposeSpec{
				Type:                     etcdfedv1.ExposeLoadBalancer,
				LoadBalancerSourceRanges: []string{"203.0.113.0/24"},
				NetworkPolicy: &etcdfedv1.MemberNetworkPolicy{
					PeerSourceRanges:   []string{"198.51.100.0/24"},
					ClientSourceRanges: []string{"10.0.0.0/8"},
				},
			},
		},
	}
	g.Expect(c.Create(ctx, m)).To(Succeed())

	key := client.ObjectKey{Namespace: ns, Name: "main-0"}
	np := &networkingv1.NetworkPolicy{}
	g.Eventually(func(g Gomega) {
		g.Expect(c.Get(ctx, key, np)).To(Succeed())
		g.Expect(rules(np)).To(Equal(map[int32][]string{
			2380: {"pods:" + uid, "10.1.0.10/32", "10.2.0.10/32", "198.51.100.0/24", "fd00::10/128"},
			2379: {"10.0.0.0/8"},
			2381: {"10.0.0.0/8"},
		}))
	}).Should(Succeed())
	g.Expect(np.Spec.PolicyTypes).To(Equal([]networkingv1.PolicyType{networkingv1.PolicyTypeIngress}))
	g.Expect(np.Spec.PodSelector.MatchLabels).To(HaveKeyWithValue(etcdfedv1.LabelMember, "main-0"))
	g.Expect(metav1.IsControlledBy(np, m)).To(BeTrue(), "the member owns its policy")

	// The member's LoadBalancer Service carries the source ranges.
	svc := &corev1.Service{}
	g.Eventually(func(g Gomega) {
		g.Expect(c.Get(ctx, client.ObjectKey{Namespace: ns, Name: "main-0"}, svc)).To(Succeed())
		g.Expect(svc.Spec.LoadBalancerSourceRanges).To(Equal([]string{"203.0.113.0/24"}))
	}).Should(Succeed())

	// A new incarnation of main-1 is published at another address: admitted.
	g.Expect(c.Get(ctx, client.ObjectKeyFromObject(ours), ours)).To(Succeed())
	ours.Spec.Records[1].Data = []string{"10.2.0.77"}
	g.Expect(c.Update(ctx, ours)).To(Succeed())
	g.Eventually(func(g Gomega) {
		g.Expect(c.Get(ctx, key, np)).To(Succeed())
		g.Expect(rules(np)[2380]).To(Equal([]string{"pods:" + uid, "10.1.0.10/32", "10.2.0.77/32", "198.51.100.0/24", "fd00::10/128"}))
	}).Should(Succeed())

	// Exposure by NodePort: no source ranges left on the Service (the
	// apiserver refuses them on a NodePort Service).
	g.Expect(c.Get(ctx, key, m)).To(Succeed())
	m.Spec.Expose.Type, m.Spec.Expose.LoadBalancerSourceRanges = etcdfedv1.ExposeNodePort, nil
	m.Spec.Expose.NetworkPolicy = nil
	g.Expect(c.Update(ctx, m)).To(Succeed())
	g.Eventually(func(g Gomega) {
		g.Expect(c.Get(ctx, key, svc)).To(Succeed())
		g.Expect(svc.Spec.Type).To(Equal(corev1.ServiceTypeNodePort))
		g.Expect(svc.Spec.LoadBalancerSourceRanges).To(BeEmpty())
		g.Expect(slices.ContainsFunc(svc.Spec.Ports, func(p corev1.ServicePort) bool { return p.Name == service.PortPeer })).To(BeTrue())
	}).Should(Succeed())
	// And the policy goes with the field.
	g.Eventually(func() bool { return apierrors.IsNotFound(c.Get(ctx, key, &networkingv1.NetworkPolicy{})) }).Should(BeTrue())
}
