package dnszone_test

import (
	"context"
	"fmt"
	"net/netip"
	"os"
	"slices"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/miekg/dns"
	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdfedv1 "github.com/etcdfed/etcdfed/api/v1alpha1"
	"github.com/etcdfed/etcdfed/dev/testenv"
	"github.com/etcdfed/etcdfed/dnsprovider"
	"github.com/etcdfed/etcdfed/spoke/app"
	"github.com/etcdfed/etcdfed/spoke/dnszone"
	"github.com/etcdfed/etcdfed/spoke/internal/spoketest"
)

func TestMain(m *testing.M) {
	ctrl.SetLogger(logr.Discard())
	os.Exit(testenv.RunMain(m))
}

// spoke runs a spoke serving DNS on a loopback port in a fresh namespace.
func spoke(t *testing.T) (client.Client, string, string) {
	t.Helper()
	cl := testenv.Shared(t, "spoke-dns")
	ns := testenv.NamespaceT(t, cl, "dns")
	o := app.DefaultOptions()
	o.Namespace = ns
	o.DNSListen = "127.0.0.1:0"
	o.Gossip.BindAddr = ""
	o.LeaderElection = false
	s, _ := spoketest.Run(t, cl.Config, o)
	return cl.Client, ns, s.DNS.Addr().String()
}

// records builds the zone the way the hub does.
func records(t *testing.T, domain string, addr string) []etcdfedv1.DNSRecord {
	t.Helper()
	set, err := dnsprovider.Build(dnsprovider.Spec{
		Domain: domain, TTL: 5, Owner: "uid-1", TLS: true,
		Members: []dnsprovider.Member{
			{Name: "main-0", Addresses: []netip.Addr{netip.MustParseAddr(addr)}},
			{Name: "main-1", Addresses: []netip.Addr{netip.MustParseAddr("10.0.0.2")}},
		},
		NameServers: []dnsprovider.NameServer{{Name: "ns1." + domain + ".", Addresses: []netip.Addr{netip.MustParseAddr("127.0.0.1")}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	var out []etcdfedv1.DNSRecord
	for _, r := range set.Records() {
		out = append(out, etcdfedv1.DNSRecord{Name: r.Name, Type: r.Type, TTL: r.TTL, Data: r.Data})
	}
	return out
}

// query asks the server for name's A records over UDP.
func query(server, name string) (int, []string, error) {
	m := new(dns.Msg)
	m.SetQuestion(dns.Fqdn(name), dns.TypeA)
	c := &dns.Client{Timeout: time.Second}
	r, _, err := c.Exchange(m, server)
	if err != nil {
		return 0, nil, err
	}
	var out []string
	for _, rr := range r.Answer {
		if a, ok := rr.(*dns.A); ok {
			out = append(out, a.A.String())
		}
	}
	return r.Rcode, out, nil
}

func served(g Gomega, z *etcdfedv1.EtcdDNSZone, status metav1.ConditionStatus, reason string) {
	c := meta.FindStatusCondition(z.Status.Conditions, etcdfedv1.ConditionServed)
	g.Expect(c).NotTo(BeNil())
	g.Expect(c.Status).To(Equal(status), c.Message)
	g.Expect(c.Reason).To(Equal(reason), c.Message)
}

// TestZoneFollowsTheObject writes the ring's zone into the cluster, checks
// that the spoke serves it over real DNS, and measures how long a changed
// record takes to be answered: from the update call to the first UDP
// answer carrying the new address (logged, not asserted).
func TestZoneFollowsTheObject(t *testing.T) {
	c, ns, server := spoke(t)
	g := NewWithT(t)
	g.SetDefaultEventuallyTimeout(30 * time.Second)
	g.SetDefaultEventuallyPollingInterval(20 * time.Millisecond)
	ctx := context.Background()
	const domain = "main.etcd.test"
	z := &etcdfedv1.EtcdDNSZone{
		ObjectMeta: metav1.ObjectMeta{Name: "main", Namespace: ns},
		Spec: etcdfedv1.EtcdDNSZoneSpec{
			Cluster: etcdfedv1.ClusterReference{Name: "main", Namespace: "hub", UID: "uid-1"},
			Domain:  domain,
			Records: records(t, domain, "10.0.0.1"),
		},
	}
	g.Expect(c.Create(ctx, z)).To(Succeed())
	g.Eventually(func(g Gomega) {
		rc, addrs, err := query(server, "main-0."+domain)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(rc).To(Equal(dns.RcodeSuccess))
		g.Expect(addrs).To(Equal([]string{"10.0.0.1"}))
	}).Should(Succeed())
	g.Eventually(func(g Gomega) {
		g.Expect(c.Get(ctx, client.ObjectKeyFromObject(z), z)).To(Succeed())
		served(g, z, metav1.ConditionTrue, dnszone.ReasonServed)
		g.Expect(z.Status.ObservedGeneration).To(Equal(z.Generation))
		g.Expect(z.Status.Serial).NotTo(BeZero())
	}).Should(Succeed())

	// Change-to-answer, measured over several changes.
	const changes = 20
	var lat []time.Duration
	for i := range changes {
		addr := fmt.Sprintf("10.0.1.%d", i+1)
		var start time.Time
		g.Expect(retry.RetryOnConflict(retry.DefaultRetry, func() error {
			if err := c.Get(ctx, client.ObjectKeyFromObject(z), z); err != nil {
				return err
			}
			z.Spec.Records = records(t, domain, addr)
			start = time.Now()
			return c.Update(ctx, z)
		})).To(Succeed())
		for {
			_, addrs, err := query(server, "main-0."+domain)
			if err == nil && slices.Equal(addrs, []string{addr}) {
				lat = append(lat, time.Since(start))
				break
			}
			if time.Since(start) > 30*time.Second {
				t.Fatalf("change %d not answered after 30s", i)
			}
			time.Sleep(time.Millisecond)
		}
	}
	slices.Sort(lat)
	t.Logf("change-to-answer over %d zone updates (update call to first UDP answer with the new A record): min %v, p50 %v, p90 %v, max %v",
		changes, lat[0].Round(time.Microsecond), lat[changes/2].Round(time.Microsecond), lat[changes*9/10].Round(time.Microsecond), lat[changes-1].Round(time.Microsecond))

	// An invalid record set is refused; the last valid one stays served.
	// The answers above come before the status patch: wait for the status
	// of the last valid generation before reading its serial.
	g.Eventually(func(g Gomega) {
		g.Expect(c.Get(ctx, client.ObjectKeyFromObject(z), z)).To(Succeed())
		g.Expect(z.Status.ObservedGeneration).To(Equal(z.Generation))
		served(g, z, metav1.ConditionTrue, dnszone.ReasonServed)
	}).Should(Succeed())
	var last int64
	g.Expect(retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if err := c.Get(ctx, client.ObjectKeyFromObject(z), z); err != nil {
			return err
		}
		last = z.Status.Serial
		z.Spec.Records = append(z.Spec.Records, etcdfedv1.DNSRecord{Name: "x.elsewhere.test.", Type: "A", TTL: 5, Data: []string{"10.9.9.9"}})
		return c.Update(ctx, z)
	})).To(Succeed())
	g.Eventually(func(g Gomega) {
		g.Expect(c.Get(ctx, client.ObjectKeyFromObject(z), z)).To(Succeed())
		served(g, z, metav1.ConditionFalse, dnszone.ReasonInvalidRecords)
		g.Expect(meta.FindStatusCondition(z.Status.Conditions, etcdfedv1.ConditionServed).Message).To(ContainSubstring("still serving serial"))
	}).Should(Succeed())
	g.Expect(z.Status.Serial).To(Equal(last))
	_, addrs, err := query(server, "main-0."+domain)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(addrs).To(Equal([]string{fmt.Sprintf("10.0.1.%d", changes)}))

	// A second object for the same domain loses to the older one.
	dup := &etcdfedv1.EtcdDNSZone{
		ObjectMeta: metav1.ObjectMeta{Name: "main-dup", Namespace: ns},
		Spec: etcdfedv1.EtcdDNSZoneSpec{
			Cluster: etcdfedv1.ClusterReference{Name: "main", Namespace: "hub2", UID: "uid-2"},
			Domain:  domain + ".",
			Records: records(t, domain, "10.6.6.6"),
		},
	}
	g.Expect(c.Create(ctx, dup)).To(Succeed())
	g.Eventually(func(g Gomega) {
		g.Expect(c.Get(ctx, client.ObjectKeyFromObject(dup), dup)).To(Succeed())
		served(g, dup, metav1.ConditionFalse, dnszone.ReasonDomainConflict)
	}).Should(Succeed())
	_, addrs, _ = query(server, "main-0."+domain)
	g.Expect(addrs).NotTo(ContainElement("10.6.6.6"))

	// The older one goes: the other one is served.
	g.Expect(c.Delete(ctx, z)).To(Succeed())
	g.Eventually(func(g Gomega) {
		_, addrs, err := query(server, "main-0."+domain)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(addrs).To(Equal([]string{"10.6.6.6"}))
	}).Should(Succeed())

	// Deleted: the server no longer answers for the zone.
	g.Expect(c.Delete(ctx, dup)).To(Succeed())
	g.Eventually(func(g Gomega) {
		rc, _, err := query(server, "main-0."+domain)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(rc).To(Equal(dns.RcodeRefused))
	}).Should(Succeed())
}

func TestRecordSetNeedsSOAAndNS(t *testing.T) {
	z := &etcdfedv1.EtcdDNSZone{Spec: etcdfedv1.EtcdDNSZoneSpec{Domain: "x.test", Records: []etcdfedv1.DNSRecord{
		{Name: "a.x.test.", Type: "A", TTL: 5, Data: []string{"10.0.0.1"}},
	}}}
	if _, err := dnszone.RecordSet(z); err == nil {
		t.Error("a zone without SOA and NS was accepted")
	}
	z.Spec.Records = records(t, "x.test", "10.0.0.1")
	set, err := dnszone.RecordSet(z)
	if err != nil {
		t.Fatal(err)
	}
	if set.Origin() != "x.test." || set.Serial() == 0 {
		t.Errorf("set %s serial %d", set.Origin(), set.Serial())
	}
}
