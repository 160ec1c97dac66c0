package etcdcluster

import (
	"context"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdfedv1 "github.com/etcdfed/etcdfed/api/v1alpha1"
	"github.com/etcdfed/etcdfed/dev/testenv"
	"github.com/etcdfed/etcdfed/hub/liveness"
	"github.com/etcdfed/etcdfed/hub/planner"
)

// reportFixture puts member-2 of s on a real apiserver: its EtcdSpoke and
// its member's EtcdMember as s holds them, then status as report sets it
// (what the member cluster writes), and reads the cluster back the way a
// pass does (readCluster).
func reportFixture(t *testing.T, s *snapshot, report func(m *etcdfedv1.EtcdMemberStatus, sp *etcdfedv1.EtcdSpokeStatus)) {
	t.Helper()
	api := testenv.Shared(t, "member-reports")
	ns := testenv.NamespaceT(t, api, "ring")
	ctx := context.Background()
	cs := s.cluster("member-2")
	obj := cs.members["main-1"].DeepCopy()
	obj.Namespace, obj.ResourceVersion = ns, ""
	spoke := &etcdfedv1.EtcdSpoke{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: etcdfedv1.SpokeObjectName}}
	st := obj.Status
	spokeSt := *cs.spoke.Status.DeepCopy()
	spokeSt.DNSAddresses = []string{"10.0.2.53:53"}
	for i := range st.Conditions {
		st.Conditions[i].LastTransitionTime = metav1.NewTime(now)
	}
	report(&st, &spokeSt)
	for _, o := range []client.Object{obj, spoke} {
		if err := api.Client.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	obj.Status, spoke.Status = st, spokeSt
	for _, o := range []client.Object{obj, spoke} {
		if err := api.Client.Status().Update(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	r := &Reconciler{Tracker: liveness.NewTracker(nil), RingNamespace: ns}
	cs.client, cs.spoke = api.Client, nil
	cs.members, cs.zones, cs.secrets = map[string]*etcdfedv1.EtcdMember{}, map[string]*etcdfedv1.EtcdDNSZone{}, map[string]*corev1.Secret{}
	if err := r.readCluster(ctx, s.ec, cs); err != nil {
		t.Fatal(err)
	}
	if cs.members["main-1"] == nil || cs.spoke == nil {
		t.Fatalf("read back members %v, spoke %v", keys(cs.members), cs.spoke)
	}
}

// A member cluster that reports, for its member, a peer URL outside that
// member's DNS name (a compromised cluster injecting a voter of its own at
// bootstrap) and a DNS server on the link-local metadata address: neither
// reaches the founding members' --initial-cluster nor the ring's records;
// Degraded names the cluster, the object and the fields; the founding
// waits for a good report. Before, the URL went into every founding
// member's initial cluster.
func TestBadPeerURLNeverReachesInitialCluster(t *testing.T) {
	s := ring()
	unformed(s)
	if d := decide(s); d.plan.Action != planner.ActStartBootstrap {
		t.Fatalf("with good reports: plan %s (%s), want StartBootstrap", d.plan.Action, d.plan.Reason)
	}
	const evil = "https://evil.example.com:2380"
	reportFixture(t, s, func(m *etcdfedv1.EtcdMemberStatus, sp *etcdfedv1.EtcdSpokeStatus) {
		m.PeerURL = evil
		sp.DNSAddresses = []string{"169.254.169.254:53", "10.0.2.53:53"}
	})
	d := decide(s)
	for _, w := range d.step.writes {
		if b := w.want.Spec.Bootstrap; b != nil && strings.Contains(b.InitialCluster, "evil") {
			t.Fatalf("%s founded with initial cluster %s", w.want.Spec.MemberName, b.InitialCluster)
		}
	}
	if d.plan.Action == planner.ActStartBootstrap {
		t.Errorf("plan %s (%s): founded without main-1's peer URL", d.plan.Action, d.plan.Reason)
	}
	for _, r := range d.dns.records {
		if strings.Contains(strings.Join(r.Data, " "), "169.254.169.254") {
			t.Errorf("record %s %s carries the refused DNS address", r.Name, r.Type)
		}
	}
	st := computeStatus(s, d, applyResult{}, "")
	c := meta.FindStatusCondition(st.Conditions, etcdfedv1.ConditionDegraded)
	if c == nil || c.Status != metav1.ConditionTrue || c.Reason != "ReportRejected" ||
		!strings.Contains(c.Message, "member cluster member-2 reported for EtcdMember") || !strings.Contains(c.Message, "status.peerURL \""+evil+"\"") ||
		!strings.Contains(c.Message, "status.dnsAddresses[0]") {
		t.Errorf("Degraded %+v; want ReportRejected naming member-2, status.peerURL and status.dnsAddresses[0]", c)
	}
}

// One member's address that does not parse stops nobody else's record:
// the ring's record set is still built, with the member's last recorded
// address. Before, the whole set failed to build and no record of the
// ring was updated any more.
func TestBadAddressStopsNoOtherRecord(t *testing.T) {
	s := ring()
	reportFixture(t, s, func(m *etcdfedv1.EtcdMemberStatus, _ *etcdfedv1.EtcdSpokeStatus) { m.Address = "not an address!" })
	s.ec.Status.Members[0].Address = "10.0.1.10" // main-0 moved: its record must follow
	s.cluster("member-1").members["main-0"].Status.Address = "10.0.1.10"
	d := decide(s)
	if d.dns.err != nil || d.dns.set == nil {
		t.Fatalf("record set not built: %v", d.dns.err)
	}
	want := map[string]string{"main-0.main.etcd.test.": "10.0.1.10", "main-1.main.etcd.test.": "127.0.2.10", "main-2.main.etcd.test.": "127.0.3.10"}
	for _, r := range d.dns.records {
		if a, ok := want[r.Name]; ok && r.Type == "A" {
			if strings.Join(r.Data, ",") != a {
				t.Errorf("%s A %v, want %s", r.Name, r.Data, a)
			}
			delete(want, r.Name)
		}
	}
	if len(want) > 0 {
		t.Errorf("no A record for %v", want)
	}
}

// A member cluster that rewrites its own EtcdMember's spec.expose to
// NodePort or LoadBalancer, on a ring exposed by pod IP, gains nothing:
// its member's URLs on ports of its choosing and an address that is a
// hostname are refused, because the expectations come from the
// EtcdCluster. Only while a Roll is in flight (an exposure change reaches
// the members one at a time) does the object's own type count. Before,
// the object's type always widened the check.
func TestReportChecksIgnoreMemberClusterExposure(t *testing.T) {
	s := ring()
	cs := s.cluster("member-2")
	obj := cs.members["main-1"]
	obj.Spec.Expose.Type = etcdfedv1.ExposeNodePort
	obj.Status.PeerURL = memberURL(s.ec, "main-1", 31380)
	checkReports(s.ec, cs, true)
	if obj.Status.PeerURL != "" || len(cs.rejected) != 1 || !strings.Contains(cs.rejected[0], "status.peerURL") {
		t.Errorf("a node port under the object's own NodePort: peer URL %q, rejected %v; want it refused", obj.Status.PeerURL, cs.rejected)
	}

	cs.rejected = nil
	obj.Spec.Expose.Type = etcdfedv1.ExposeLoadBalancer
	obj.Status.PeerURL, obj.Status.Address = memberURL(s.ec, "main-1", etcdfedv1.DefaultPeerPort), "metadata.google.internal"
	checkReports(s.ec, cs, true)
	if obj.Status.Address != "" || len(cs.rejected) != 1 || !strings.Contains(cs.rejected[0], "status.address") {
		t.Errorf("a hostname under the object's own LoadBalancer: address %q, rejected %v; want it refused", obj.Status.Address, cs.rejected)
	}

	// An exposure change being rolled: a member not rolled yet reports
	// under the type the hub wrote before.
	cs.rejected = nil
	inFlight(s, etcdfedv1.MembershipOperation{Type: etcdfedv1.OperationRoll, Member: "main-0"})
	obj.Spec.Expose.Type = etcdfedv1.ExposeNodePort
	obj.Status.PeerURL, obj.Status.Address = memberURL(s.ec, "main-1", 31380), "127.0.2.10"
	checkReports(s.ec, cs, true)
	if obj.Status.PeerURL == "" || len(cs.rejected) != 0 {
		t.Errorf("during a Roll, a member on its former NodePort exposure refused: %v", cs.rejected)
	}
}

// TestReportedZonesOutsideRegistration (issue 37, low: reported zones
// steering placement unchecked): member-2 is registered with zone-2
// (registration label zone.etcdfed.dev/zone-2); its spoke reports two more
// zones, and one of them as unschedulable. The extra zones are refused
// (ReportRejected) and are no failure domains of the placement: a cluster
// that invents zones would otherwise draw more members of a ring into
// itself than its real zones spread. Before, every zone a spoke reported
// was a domain.
func TestReportedZonesOutsideRegistration(t *testing.T) {
	s := ring()
	cs := s.cluster("member-2")
	cs.labels = map[string]string{etcdfedv1.LabelRegisteredZonePrefix + "zone-2": "", "env": "prod"}
	cs.spoke.Status.Zones = []string{"zone-2", "zone-2b", "zone-2c"}
	cs.spoke.Status.UnschedulableZones = []string{"zone-2c"}
	checkReports(s.ec, cs, true)
	if got := cs.spoke.Status.Zones; len(got) != 1 || got[0] != "zone-2" || len(cs.spoke.Status.UnschedulableZones) != 0 {
		t.Errorf("zones %v, unschedulable %v after the check; want [zone-2] and none", got, cs.spoke.Status.UnschedulableZones)
	}
	if len(cs.rejected) != 3 || !strings.Contains(strings.Join(cs.rejected, "\n"), `status.zones[1] "zone-2b": not a zone the cluster is registered with (zone-2)`) {
		t.Errorf("rejected %v; want zone-2b, zone-2c and the unschedulable zone-2c named", cs.rejected)
	}
	for _, d := range placementInput(s, &s.ec.Status).Domains {
		if d.Cluster == "member-2" && d.Zone != "zone-2" {
			t.Errorf("placement domain %s/%s of a zone member-2 is not registered with", d.Cluster, d.Zone)
		}
	}

	// A cluster that registers no zone reports what its nodes carry.
	s = ring()
	cs = s.cluster("member-2")
	cs.spoke.Status.Zones = []string{"zone-2", "zone-2b"}
	checkReports(s.ec, cs, true)
	if len(cs.spoke.Status.Zones) != 2 || len(cs.rejected) != 0 {
		t.Errorf("no zone registered: zones %v, rejected %v; want both, none refused", cs.spoke.Status.Zones, cs.rejected)
	}
}
