package dnszone_test

import (
	"context"
	"testing"
	"time"

	"github.com/miekg/dns"
	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdfedv1 "github.com/etcdfed/etcdfed/api/v1alpha1"
	"github.com/etcdfed/etcdfed/dev/testenv"
	"github.com/etcdfed/etcdfed/spoke/app"
	"github.com/etcdfed/etcdfed/spoke/dnszone"
	"github.com/etcdfed/etcdfed/spoke/internal/spoketest"
)

// TestReplicaAnswersOnlyFromLoadedZones runs two replicas of the spoke
// with leader election in one namespace, as the Deployment does. The
// second replica, started while the zone exists, answers no query before
// it has rebuilt the zone from the EtcdDNSZone object: every answer it
// gives is the zone's (never REFUSED for a zone it is about to serve). When
// the leader stops, the other replica keeps answering throughout, and once
// elected writes the zone's status for a change made after.
func TestReplicaAnswersOnlyFromLoadedZones(t *testing.T) {
	cl := testenv.Shared(t, "spoke-dns")
	c := cl.Client
	ns := testenv.NamespaceT(t, cl, "replicas")
	ctx := context.Background()
	g := NewWithT(t)
	g.SetDefaultEventuallyTimeout(60 * time.Second)
	g.SetDefaultEventuallyPollingInterval(20 * time.Millisecond)

	replica := func(id string) app.Options {
		o := app.DefaultOptions()
		o.Namespace = ns
		o.DNSListen = "127.0.0.1:0"
		o.Gossip.BindAddr = ""
		o.LeaderElection = true
		o.Identity = id
		return o
	}
	a, stopA := spoketest.Run(t, cl.Config, replica("replica-a"))
	const domain = "replicas.etcd.test"
	z := &etcdfedv1.EtcdDNSZone{
		ObjectMeta: metav1.ObjectMeta{Name: "replicas", Namespace: ns},
		Spec: etcdfedv1.EtcdDNSZoneSpec{Domain: domain, Records: records(t, domain, "10.0.0.1"),
			Cluster: etcdfedv1.ClusterReference{Name: "replicas", Namespace: "hub", UID: "uid-r"}},
	}
	g.Expect(c.Create(ctx, z)).To(Succeed())
	g.Eventually(func(g Gomega) {
		got := &etcdfedv1.EtcdDNSZone{}
		g.Expect(c.Get(ctx, client.ObjectKeyFromObject(z), got)).To(Succeed())
		served(g, got, metav1.ConditionTrue, dnszone.ReasonServed)
		rcode, addrs, err := query(a.DNS.Addr().String(), "main-0."+domain)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(rcode).To(Equal(dns.RcodeSuccess))
		g.Expect(addrs).To(Equal([]string{"10.0.0.1"}))
	}).Should(Succeed())

	// The second replica: queried from the moment its socket is bound.
	b, _ := spoketest.Run(t, cl.Config, replica("replica-b"))
	bAddr := b.DNS.Addr().String()
	var unanswered int
	for answered := 0; answered < 20; {
		m := new(dns.Msg).SetQuestion("main-0."+domain+".", dns.TypeA)
		r, _, err := (&dns.Client{Timeout: 200 * time.Millisecond}).Exchange(m, bAddr)
		if err != nil {
			unanswered++ // held while loading: a resolver asks the other replica
			g.Expect(unanswered).To(BeNumerically("<", 300), "replica b never answered")
			continue
		}
		answered++
		g.Expect(dns.RcodeToString[r.Rcode]).To(Equal("NOERROR"), "replica b answered before it loaded the zone")
		g.Expect(r.Answer).To(HaveLen(1))
	}
	t.Logf("replica b: %d queries unanswered while it loaded, then 20 answered from the zone", unanswered)

	// The leader stops: b answers throughout, takes the Lease, and writes
	// the status of a change made after.
	stopA()
	g.Eventually(func(g Gomega) {
		got := &etcdfedv1.EtcdDNSZone{}
		g.Expect(c.Get(ctx, client.ObjectKeyFromObject(z), got)).To(Succeed())
		before := got.DeepCopy()
		got.Spec.Records = records(t, domain, "10.0.0.9")
		g.Expect(c.Patch(ctx, got, client.MergeFrom(before))).To(Succeed())
	}).Should(Succeed())
	g.Eventually(func(g Gomega) {
		rcode, addrs, err := query(bAddr, "main-0."+domain)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(rcode).To(Equal(dns.RcodeSuccess))
		g.Expect(addrs).To(Equal([]string{"10.0.0.9"}))
		got := &etcdfedv1.EtcdDNSZone{}
		g.Expect(c.Get(ctx, client.ObjectKeyFromObject(z), got)).To(Succeed())
		g.Expect(got.Status.ObservedGeneration).To(Equal(got.Generation), "the new leader writes status")
		served(g, got, metav1.ConditionTrue, dnszone.ReasonServed)
	}).Should(Succeed())
}
