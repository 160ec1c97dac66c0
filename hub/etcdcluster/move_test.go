package etcdcluster

import (
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	etcdfedv1 "github.com/etcdfed/etcdfed/api/v1alpha1"
	"github.com/etcdfed/etcdfed/hub/liveness"
	"github.com/etcdfed/etcdfed/hub/pki"
	"github.com/etcdfed/etcdfed/hub/planner"
	"github.com/etcdfed/etcdfed/pkg/topology"
)

// withFourthCluster adds member-4 (zone-4), eligible and seen, with no
// member yet.
func withFourthCluster(s *snapshot) {
	seen := metav1.NewTime(now.Add(-time.Minute))
	cs := &clusterSnapshot{name: "member-4", engaged: true, registered: true, eligible: true, verdict: liveness.Verdict{Cluster: "member-4", State: liveness.Alive},
		spoke:   &etcdfedv1.EtcdSpoke{Status: etcdfedv1.EtcdSpokeStatus{Zones: []string{"zone-4"}, ObservedAt: &seen, DNSAddresses: []string{"127.0.4.53:53"}}},
		members: map[string]*etcdfedv1.EtcdMember{}, zones: map[string]*etcdfedv1.EtcdDNSZone{}, secrets: map[string]*corev1.Secret{}}
	s.clusters = append(s.clusters, cs)
	s.byName[cs.name] = cs
}

// aRecord is what name (one label under the ring's domain) resolves to in
// the pass's record set, "" when it has no A record.
func aRecord(t *testing.T, d *decision, name string) string {
	t.Helper()
	if d.dns.err != nil || d.dns.set == nil {
		t.Fatalf("record set: %v", d.dns.err)
	}
	for _, r := range d.dns.set.Records() {
		if r.Name == name+".main.etcd.test." && r.Type == "A" && len(r.Data) == 1 {
			return r.Data[0]
		}
	}
	return ""
}

// pass decides on s, then carries the ledger over as the next pass's
// status (as the status patch would).
func pass(s *snapshot) (*decision, etcdfedv1.EtcdClusterStatus) {
	d := decide(s)
	st := computeStatus(s, d, applyResult{}, "")
	s.ec.Status = *st.DeepCopy()
	return d, st
}

// A migration's Move through decide: the member cluster of main-2 is no
// longer allowed, a fourth is. The new incarnation is written under its
// own DNS name, with a certificate for both names; the stable name keeps
// the old incarnation's address while etcd lists the old ID, the own name
// serves the new one; once the old ID is gone the stable name follows the
// new incarnation. The status counts the extra voter in failuresTolerated
// and the move in pendingMoves.
func TestMoveThroughDecide(t *testing.T) {
	s := ring()
	ca := withTLS(t, s)
	withFourthCluster(s)
	s.ec.Spec.Topology.Clusters = []string{"member-1", "member-2", "member-4"}
	s.cluster("member-3").eligible = false
	own := "main-2-i4"

	d, st := pass(s)
	op := st.Operation
	if d.plan.Action != planner.ActBegin || op == nil || op.Type != etcdfedv1.OperationMove || op.Member != "main-2" || op.MemberID != "3" || op.FromAddress != "127.0.3.10" || op.FromIncarnation != 3 {
		t.Fatalf("plan %s (%s), operation %+v; want a Move of main-2 from its live incarnation 3 [3] at 127.0.3.10", d.plan.Action, d.plan.Reason, op)
	}
	m := statusMember(&st, "main-2")
	if m.Cluster != "member-4" || m.Incarnation != 4 || m.DNSName != own+".main.etcd.test" {
		t.Fatalf("main-2 recorded as %+v, want member-4, incarnation 4, dnsName %s.main.etcd.test", m, own)
	}
	if c := condition(st, etcdfedv1.ConditionProgressing); c.Reason != string(etcdfedv1.OperationMove) {
		t.Errorf("Progressing reason %s (%s), want Move", c.Reason, c.Message)
	}
	if st.PendingMoves != 1 || st.FailuresTolerated == nil || *st.FailuresTolerated != 1 {
		t.Errorf("pendingMoves %d, failuresTolerated %v; want 1 and 1", st.PendingMoves, st.FailuresTolerated)
	}
	if got := aRecord(t, d, "main-2"); got != "127.0.3.10" {
		t.Errorf("main-2 resolves to %q at the move's start, want the old 127.0.3.10", got)
	}
	if got := aRecord(t, d, own); got != "" {
		t.Errorf("%s resolves to %q before the new incarnation has an address; the old one's would send its peers to the old member", own, got)
	}

	// Create: the new object runs under its own name; its certificate
	// carries both.
	d, _ = pass(s)
	if d.plan.Action != planner.ActCreateObjects || len(d.step.writes) != 1 {
		t.Fatalf("plan %s (%s), %d writes; want the new incarnation created", d.plan.Action, d.plan.Reason, len(d.step.writes))
	}
	w := d.step.writes[0]
	if w.cluster != "member-4" || w.want.Spec.DNSName != own+".main.etcd.test" || w.want.Spec.Incarnation != 4 || !w.cert {
		t.Fatalf("write %s %+v (cert %v), want main-2 incarnation 4 in member-4 under %s with a new certificate", w.cluster, w.want.Spec, w.cert, own)
	}
	names := memberCertNames(s.ec, "main-2", w.want.Spec.DNSName)
	if !slices.Equal(names, []string{own + ".main.etcd.test", "main-2.main.etcd.test", pki.PeerName("main.etcd.test")}) {
		t.Errorf("certificate names %v", names)
	}

	// The spoke writes the object and reports it; the hub checks the
	// reported URLs against the incarnation's own name.
	obj := w.want.DeepCopy()
	obj.Generation = 1
	// Ports of its own, as a NodePort exposure gives each incarnation
	// (the old one was exposed on the default ports): checked under a
	// ring exposed so (the object's own field counts for nothing).
	nodePort := s.ec.DeepCopy()
	nodePort.Spec.Expose.Type = etcdfedv1.ExposeNodePort
	peer, client := etcdfedv1.MemberURL(etcdfedv1.TLSEnabled, obj.Spec.DNSName, 32380), etcdfedv1.MemberURL(etcdfedv1.TLSEnabled, obj.Spec.DNSName, 32379)
	obj.Status = etcdfedv1.EtcdMemberStatus{ObservedGeneration: 1, Incarnation: 4, PeerURL: peer, ClientURL: client, Address: "127.0.4.10"}
	cs4 := s.cluster("member-4")
	cs4.members["main-2"] = obj
	leaf, err := ca.IssueMember(pki.MemberRequest{Member: "main-2", DNSNames: names}, now)
	if err != nil {
		t.Fatal(err)
	}
	sec := pki.MemberSecretName(obj.Name)
	cs4.secrets[sec] = certSecret(s.ringNamespace, sec, memberCertLabels(s.ec, "main-2"), ca.CertPEM, leaf)
	checkReports(nodePort, cs4, true)
	if len(cs4.rejected) > 0 || cs4.members["main-2"].Status.PeerURL != peer {
		t.Fatalf("own-name URLs refused: %v", cs4.rejected)
	}
	if due := certDue(s, cs4, obj); due {
		t.Errorf("a certificate with both names is due again")
	}

	// Learner added: started with an initial cluster that names the old
	// incarnation apart (one name with two URLs would be one member).
	s.etcd.Members = append(s.etcd.Members, planner.ListEntry{ID: 40, PeerURLs: []string{peer}, IsLearner: true})
	d, _ = pass(s)
	if d.plan.Action != planner.ActStartMember || len(d.step.writes) != 1 || d.step.writes[0].want.Spec.Bootstrap == nil {
		t.Fatalf("plan %s (%s), want StartMember", d.plan.Action, d.plan.Reason)
	}
	oldPeer := s.etcd.Members[2].PeerURLs[0]
	if ic := d.step.writes[0].want.Spec.Bootstrap.InitialCluster; !slices.Contains(strings.Split(ic, ","), "main-2="+peer) || !slices.Contains(strings.Split(ic, ","), "main-2-3="+oldPeer) {
		t.Errorf("initial cluster %s, want main-2=%s and the old one as main-2-3=%s", ic, peer, oldPeer)
	}
	// Started beside the old voter: both names served.
	s.etcd.Members[3] = planner.ListEntry{ID: 40, Name: "main-2", PeerURLs: []string{peer}, ClientURLs: []string{client}, IsLearner: true, Healthy: true}
	obj.Spec.Bootstrap = &etcdfedv1.BootstrapSpec{InitialClusterState: etcdfedv1.InitialClusterExisting}
	d, st = pass(s)
	if d.plan.Action != planner.ActPromote {
		t.Fatalf("plan %s (%s), want Promote", d.plan.Action, d.plan.Reason)
	}
	if c := condition(st, etcdfedv1.ConditionFailureTolerant); c.Status != metav1.ConditionTrue {
		t.Errorf("FailureTolerant %s (%s) with the old voter still in: want True", c.Status, c.Message)
	}
	if a, b := aRecord(t, d, "main-2"), aRecord(t, d, own); a != "127.0.3.10" || b != "127.0.4.10" {
		t.Errorf("main-2 -> %q, %s -> %q; want the old incarnation's 127.0.3.10 and the new one's 127.0.4.10", a, own, b)
	}
	for _, r := range d.dns.set.Records() {
		if r.Type == "SRV" && slices.ContainsFunc(r.Data, func(x string) bool { return len(x) > 0 && containsLabel(x, own) }) {
			t.Errorf("the incarnation's own name is in SRV %s: %v", r.Name, r.Data)
		}
	}
	if got := srvPorts(d, "main-2"); !slices.Equal(got, []string{"2379", "2380"}) {
		t.Errorf("main-2's SRV ports %v while the name holds the old incarnation; want the old one's 2379 and 2380 (etcd's member list), not the new one's", got)
	}

	// Promoted: four voters, the old one still there; then it is removed.
	s.etcd.Members[3].IsLearner = false
	d, st = pass(s)
	if d.plan.Action != planner.ActRemoveMember || d.plan.MemberID != 3 {
		t.Fatalf("plan %s [%x] (%s), want the old ID 3 removed", d.plan.Action, d.plan.MemberID, d.plan.Reason)
	}
	if st.FailuresTolerated == nil || *st.FailuresTolerated != 1 {
		t.Errorf("failuresTolerated %v with four healthy voters, want 1", st.FailuresTolerated)
	}
	s.etcd.Members = slices.DeleteFunc(s.etcd.Members, func(e planner.ListEntry) bool { return e.ID == 3 })
	d, _ = pass(s)
	if d.plan.Action != planner.ActDeleteObject || len(d.step.deletes) != 1 || d.step.deletes[0].cluster != "member-3" {
		t.Fatalf("plan %s (%s), deletes %v; want the old object in member-3 deleted", d.plan.Action, d.plan.Reason, d.step.deletes)
	}
	if a, b := aRecord(t, d, "main-2"), aRecord(t, d, own); a != "127.0.4.10" || b != "127.0.4.10" {
		t.Errorf("after the old ID is removed: main-2 -> %q, %s -> %q; want both at the new 127.0.4.10", a, own, b)
	}
	if got := srvPorts(d, "main-2"); !slices.Equal(got, []string{"32379", "32380"}) {
		t.Errorf("main-2's SRV ports %v after the old ID is removed; want the new incarnation's 32379 and 32380", got)
	}
	delete(s.cluster("member-3").members, "main-2")
	d, st = pass(s)
	if d.plan.Action != planner.ActFinish || st.Operation != nil || st.PendingMoves != 0 {
		t.Fatalf("plan %s (%s), operation %+v, pendingMoves %d; want the move finished", d.plan.Action, d.plan.Reason, st.Operation, st.PendingMoves)
	}
	if m := statusMember(&st, "main-2"); m.ID != hexID(40) || m.DNSName != own+".main.etcd.test" {
		t.Errorf("main-2 after the move: %+v", m)
	}
	// Later passes keep the incarnation's own name: no Roll, no restart.
	d, _ = pass(s)
	if d.plan.Action != planner.ActNone {
		t.Errorf("after the move: plan %s (%s), want nothing", d.plan.Action, d.plan.Reason)
	}
	for _, u := range d.updates {
		if u.want.Spec.DNSName != obj.Spec.DNSName || restarts(obj, u.want) {
			t.Errorf("after the move: an update of main-2 restarts it or renames it: %+v", u.want.Spec)
		}
	}

	// main-2 moved again, break before make (annotation): the incarnation
	// it retires runs under its own name, which keeps its address while
	// etcd lists it (its peers and the hub dial it there). Found by
	// TestScenarioMigrate: the name vanished at the Replace's start, and
	// the hub could no longer reach the old incarnation, the leader, to
	// move leadership away.
	s.ec.Annotations = map[string]string{etcdfedv1.AnnotationBreakBeforeMake: "true"}
	s.ec.Spec.Topology.Clusters = []string{"member-1", "member-2", "member-3"}
	s.cluster("member-3").eligible, cs4.eligible = true, false
	d, st = pass(s)
	if st.Operation == nil || st.Operation.Type != etcdfedv1.OperationReplace || st.Operation.FromDNSName != own+".main.etcd.test" {
		t.Fatalf("plan %s (%s), operation %+v; want a Replace retiring main-2's incarnation under %s", d.plan.Action, d.plan.Reason, st.Operation, own)
	}
	if got := aRecord(t, d, own); got != "127.0.4.10" {
		t.Errorf("%s resolves to %q while its incarnation is still in etcd, want 127.0.4.10", own, got)
	}
	s.etcd.Members = slices.DeleteFunc(s.etcd.Members, func(e planner.ListEntry) bool { return e.ID == 40 })
	d, _ = pass(s)
	if got := aRecord(t, d, own); got != "" {
		t.Errorf("%s still resolves to %q once its incarnation left etcd", own, got)
	}
}

// srvPorts are the ports the SRV records give member (one label), sorted.
func srvPorts(d *decision, member string) []string {
	var out []string
	for _, r := range d.dns.set.Records() {
		if r.Type != "SRV" {
			continue
		}
		for _, x := range r.Data {
			// priority weight port target
			if f := strings.Fields(x); len(f) == 4 && strings.HasPrefix(f[3], member+".") {
				out = append(out, f[2])
			}
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

func containsLabel(rdata, label string) bool {
	for i := 0; i+len(label) <= len(rdata); i++ {
		if rdata[i:i+len(label)] == label && (i == 0 || rdata[i-1] == ' ') && i+len(label) < len(rdata) && rdata[i+len(label)] == '.' {
			return true
		}
	}
	return false
}

// A Move given up (the new incarnation could not start) hands the member
// back to its old incarnation, which never left etcd: domain,
// incarnation, ID, address and the name it runs under.
func TestMoveGivenUpRecordsTheOldIncarnationAgain(t *testing.T) {
	s := ring()
	withFourthCluster(s)
	st := s.ec.Status.DeepCopy()
	from := etcdfedv1.FailureDomain{Cluster: "member-3", Zone: "zone-3"}
	st.Operation = &etcdfedv1.MembershipOperation{Type: etcdfedv1.OperationMove, Member: "main-2", MemberID: "3", Incarnation: 4, FromIncarnation: 3,
		FromAddress: "127.0.3.10", From: &from, To: &etcdfedv1.FailureDomain{Cluster: "member-4", Zone: "zone-4"}}
	m := statusMember(st, "main-2")
	m.Cluster, m.Zone, m.Incarnation, m.ID, m.Address, m.DNSName = "member-4", "zone-4", 4, "", "127.0.4.10", "main-2-i4.main.etcd.test"
	recordStep(s, st, planner.Decision{Action: planner.ActFinish, Member: "main-2", MemberID: 3, GaveUp: true,
		Assign: []planner.Assignment{{Member: "main-2", Domain: topology.Domain{Cluster: "member-3", Zone: topoZone("member-3", "zone-3")}, Incarnation: 3, ID: 3}}})
	m = statusMember(st, "main-2")
	if st.Operation != nil || m.Cluster != "member-3" || m.Zone != "zone-3" || m.Incarnation != 3 || m.ID != "3" || m.Address != "127.0.3.10" || m.DNSName != "" {
		t.Errorf("after the move was given up: operation %+v, main-2 %+v; want it back in member-3 as incarnation 3 [3] at 127.0.3.10 under the stable name", st.Operation, m)
	}
}

// The hub takes from a spoke only the URLs of the member's stable name
// or of the object's incarnation's own name: not another incarnation's,
// not any other name the object's spec may carry.
func TestReportedDNSName(t *testing.T) {
	ec := ring().ec
	obj := &etcdfedv1.EtcdMember{Spec: etcdfedv1.EtcdMemberSpec{Incarnation: 7}}
	for _, tc := range []struct{ spec, want string }{
		{"main-1.main.etcd.test", "main-1.main.etcd.test"},
		{"main-1-i7.main.etcd.test", "main-1-i7.main.etcd.test"},
		{"main-1-i6.main.etcd.test", "main-1.main.etcd.test"},
		{"evil.example.com", "main-1.main.etcd.test"},
	} {
		obj.Spec.DNSName = tc.spec
		if got := reportedDNSName(ec, obj, "main-1"); got != tc.want {
			t.Errorf("spec dnsName %s: expected %s, want %s", tc.spec, got, tc.want)
		}
	}
}

// withSecondZone gives member-3 a second zone, zone-3b, free: a move of
// main-2 out of zone-3 stays inside member-3.
func withSecondZone(s *snapshot) {
	cs := s.cluster("member-3")
	cs.spoke.Status.Zones = []string{"zone-3", "zone-3b"}
	cs.nodes = map[string]nodeSeen{"node-3": {zone: "zone-3", lastSeen: now.Add(-time.Second)}, "node-3b": {zone: "zone-3b", lastSeen: now.Add(-time.Second)}}
}

// spokeWrites carries a write of main-2's new incarnation out as the spoke
// would: the object stored beside the old one, reported with its own
// name's URLs and address, its certificate Secret next to it.
func spokeWrites(t *testing.T, s *snapshot, ca *pki.CA, w memberWrite, addr string) (*etcdfedv1.EtcdMember, string) {
	t.Helper()
	cs := s.cluster(w.cluster)
	obj := w.want.DeepCopy()
	obj.Generation = 1
	peer, client := etcdfedv1.MemberURL(etcdfedv1.TLSEnabled, obj.Spec.DNSName, 2380), etcdfedv1.MemberURL(etcdfedv1.TLSEnabled, obj.Spec.DNSName, 2379)
	obj.Status = etcdfedv1.EtcdMemberStatus{ObservedGeneration: 1, Incarnation: obj.Spec.Incarnation, PeerURL: peer, ClientURL: client, Address: addr, Zone: obj.Spec.Zone,
		Conditions: []metav1.Condition{
			{Type: etcdfedv1.ConditionPodReady, Status: metav1.ConditionTrue, Reason: "Ready"},
			{Type: etcdfedv1.ConditionMemberHealthy, Status: metav1.ConditionTrue, Reason: "Healthy"},
		}}
	cs.add(obj)
	cs.settle(&s.ec.Status)
	leaf, err := ca.IssueMember(pki.MemberRequest{Member: obj.Spec.MemberName, DNSNames: memberCertNames(s.ec, obj.Spec.MemberName, obj.Spec.DNSName)}, now)
	if err != nil {
		t.Fatal(err)
	}
	sec := pki.MemberSecretName(obj.Name)
	cs.secrets[sec] = certSecret(s.ringNamespace, sec, memberCertLabels(s.ec, obj.Spec.MemberName), ca.CertPEM, leaf)
	return obj, peer
}

// A Move between two zones of one member cluster through decide (issue
// 30: every move of a live member make before break). The new incarnation
// gets an EtcdMember of its own beside the old one's (the spoke names the
// pod, PVC, Service and the hub the certificate Secret after it); every
// step writes the new object, never the old; after the old ID is removed
// the old object and its Secret alone are deleted; the member is served by
// the new object from then on, and a later move inside the cluster takes
// the scheme's name again.
func TestMoveInsideOneClusterThroughDecide(t *testing.T) {
	s := ring()
	ca := withTLS(t, s)
	withSecondZone(s)
	cs := s.cluster("member-3")
	old := cs.members["main-2"]
	oldName, oldSecret := old.Name, pki.MemberSecretName(old.Name)
	old.Status.Etcd = &etcdfedv1.MemberEtcdView{ID: hexID(3)}
	s.ec.Spec.Topology.CordonedZones = []string{"member-3/zone-3"}
	own := "main-2-i4"

	if st := s.ec.Status.DeepCopy(); func() bool { recordObservations(s, st); return statusMember(st, "main-2").Object != oldName }() {
		t.Errorf("status main-2 does not name its object %s", oldName)
	}
	d, st := pass(s)
	op := st.Operation
	if d.plan.Action != planner.ActBegin || op == nil || op.Type != etcdfedv1.OperationMove || op.Member != "main-2" || op.MemberID != "3" || op.FromIncarnation != 3 ||
		op.From.Cluster != "member-3" || op.To.Cluster != "member-3" || op.To.Zone != "zone-3b" {
		t.Fatalf("plan %s (%s), operation %+v; want a Move of main-2 from member-3/zone-3 to member-3/zone-3b", d.plan.Action, d.plan.Reason, op)
	}

	// Create: an object of its own, beside the old one, under its own DNS
	// name, with its own certificate; the old one is not written.
	d, _ = pass(s)
	if d.plan.Action != planner.ActCreateObjects || len(d.step.writes) != 1 {
		t.Fatalf("plan %s (%s), %d writes; want the new incarnation created", d.plan.Action, d.plan.Reason, len(d.step.writes))
	}
	w := d.step.writes[0]
	wantName := etcdfedv1.IncarnationObjectName("default", "main", "main-2", 4)
	if w.cluster != "member-3" || w.want.Name != wantName || w.want.Spec.Incarnation != 4 || w.want.Spec.Zone != "zone-3b" || w.want.Spec.DNSName != own+".main.etcd.test" || !w.cert {
		t.Fatalf("write %s %s %+v (cert %v); want main-2 incarnation 4 in member-3/zone-3b as %s under %s, with a certificate", w.cluster, w.want.Name, w.want.Spec, w.cert, wantName, own)
	}
	if w.want.Spec.TLS.SecretName != pki.MemberSecretName(wantName) {
		t.Errorf("new object's Secret %s, want its own %s", w.want.Spec.TLS.SecretName, pki.MemberSecretName(wantName))
	}
	if due := certDue(s, cs, old); due {
		t.Errorf("the old incarnation's certificate is due (the new one's names must not go into its Secret)")
	}
	obj, peer := spokeWrites(t, s, ca, w, "127.0.3.20")
	if cs.members["main-2"] != obj || len(cs.objectsOf("main-2")) != 2 {
		t.Fatalf("member-3 holds %d objects of main-2, current %s; want the new one current, the old beside it", len(cs.objectsOf("main-2")), cs.members["main-2"].Name)
	}

	// Learner, start: the new object is the one written.
	s.etcd.Members = append(s.etcd.Members, planner.ListEntry{ID: 40, PeerURLs: []string{peer}, IsLearner: true})
	d, _ = pass(s)
	if d.plan.Action != planner.ActStartMember || len(d.step.writes) != 1 || d.step.writes[0].want.Name != wantName {
		t.Fatalf("plan %s (%s), writes %d; want StartMember on %s", d.plan.Action, d.plan.Reason, len(d.step.writes), wantName)
	}
	obj.Spec.Bootstrap = d.step.writes[0].want.Spec.Bootstrap
	s.etcd.Members[3] = planner.ListEntry{ID: 40, Name: "main-2", PeerURLs: []string{peer}, ClientURLs: []string{obj.Status.ClientURL}, IsLearner: true, Healthy: true}
	obj.Status.Etcd = &etcdfedv1.MemberEtcdView{ID: hexID(40)}
	d, st = pass(s)
	if d.plan.Action != planner.ActPromote {
		t.Fatalf("plan %s (%s), want Promote", d.plan.Action, d.plan.Reason)
	}
	noOldWrite := func(d *decision) {
		t.Helper()
		for _, u := range append(append([]memberWrite{}, d.updates...), d.step.writes...) {
			if u.want.Name == oldName {
				t.Errorf("the old incarnation's object %s is written: %+v", oldName, u.want.Spec)
			}
		}
		for _, c := range d.certs {
			if c.member == "main-2" && cs.refObject(c) == old {
				t.Errorf("the old incarnation's certificate is renewed during the move")
			}
		}
	}
	noOldWrite(d)
	if len(d.sweep) != 0 {
		t.Errorf("sweep %v while etcd lists both incarnations", d.sweep)
	}
	if a, b := aRecord(t, d, "main-2"), aRecord(t, d, own); a != "127.0.3.10" || b != "127.0.3.20" {
		t.Errorf("main-2 -> %q, %s -> %q; want the old incarnation's 127.0.3.10 and the new one's 127.0.3.20", a, own, b)
	}
	if m := statusMember(&st, "main-2"); m.Zone != "zone-3b" || m.Address != "127.0.3.20" || m.Object != wantName {
		t.Errorf("status main-2 %+v, want zone-3b at the new object's address, object %s", m, wantName)
	}

	// Promoted: the old ID goes; its object stays until then.
	s.etcd.Members[3].IsLearner = false
	d, st = pass(s)
	if d.plan.Action != planner.ActRemoveMember || d.plan.MemberID != 3 {
		t.Fatalf("plan %s [%x] (%s), want the old ID 3 removed", d.plan.Action, d.plan.MemberID, d.plan.Reason)
	}
	if st.FailuresTolerated == nil || *st.FailuresTolerated != 1 {
		t.Errorf("failuresTolerated %v with four healthy voters, want 1", st.FailuresTolerated)
	}
	noOldWrite(d)
	if len(d.sweep) != 0 || len(d.step.deletes) != 0 {
		t.Errorf("sweep %v, deletes %v before the old ID is removed", d.sweep, d.step.deletes)
	}

	// Old ID removed: the old object, and its Secret alone, are deleted.
	s.etcd.Members = slices.DeleteFunc(s.etcd.Members, func(e planner.ListEntry) bool { return e.ID == 3 })
	d, _ = pass(s)
	if d.plan.Action != planner.ActDeleteObject || len(d.step.deletes) != 1 || d.step.deletes[0] != (memberRef{cluster: "member-3", member: "main-2", object: oldName}) {
		t.Fatalf("plan %s (%s), deletes %v; want the old object %s deleted", d.plan.Action, d.plan.Reason, d.step.deletes, oldName)
	}
	for _, ref := range append(append([]memberRef{}, d.step.deletes...), d.sweep...) {
		for _, o := range memberObjects(cs, ref) {
			if n := o.GetName(); n != oldName && n != oldSecret {
				t.Errorf("deleting %v deletes %s %s; only the old incarnation's object and Secret may go", ref, kindOf(o), n)
			}
		}
	}
	if got := memberObjects(cs, d.step.deletes[0]); len(got) != 2 {
		t.Errorf("deleting the old object deletes %d objects, want it and its Secret", len(got))
	}
	cs.others["main-2"] = nil
	delete(cs.secrets, oldSecret)
	d, st = pass(s)
	if d.plan.Action != planner.ActFinish || st.Operation != nil {
		t.Fatalf("plan %s (%s), operation %+v; want the move finished", d.plan.Action, d.plan.Reason, st.Operation)
	}
	if m := statusMember(&st, "main-2"); m.ID != hexID(40) || m.Cluster != "member-3" || m.Zone != "zone-3b" || m.Incarnation != 4 || m.DNSName != own+".main.etcd.test" || m.Object != wantName {
		t.Errorf("main-2 after the move: %+v", m)
	}
	d, _ = pass(s)
	if d.plan.Action != planner.ActNone || len(d.sweep) != 0 {
		t.Errorf("after the move: plan %s (%s), sweep %v; want nothing", d.plan.Action, d.plan.Reason, d.sweep)
	}
	for _, u := range d.updates {
		if u.want.Name != wantName || restarts(obj, u.want) {
			t.Errorf("after the move: an update %s restarts or renames main-2: %+v", u.want.Name, u.want.Spec)
		}
	}

	// Moved back inside the cluster: the third incarnation takes the
	// scheme's name again (free now), beside the i4 object.
	s.ec.Spec.Topology.CordonedZones = []string{"member-3/zone-3b"}
	d, _ = pass(s)
	if d.plan.Action != planner.ActBegin || s.ec.Status.Operation == nil || s.ec.Status.Operation.Type != etcdfedv1.OperationMove {
		t.Fatalf("plan %s (%s); want a Move back to zone-3", d.plan.Action, d.plan.Reason)
	}
	d, _ = pass(s)
	if d.plan.Action != planner.ActCreateObjects || len(d.step.writes) != 1 || d.step.writes[0].want.Name != oldName || d.step.writes[0].want.Spec.Incarnation != 5 {
		t.Fatalf("plan %s (%s), writes %v; want incarnation 5 created as %s", d.plan.Action, d.plan.Reason, d.step.writes, oldName)
	}
}

// A Move inside one member cluster given up (its new incarnation could
// not start): the member is its old incarnation again, whose object is the
// member's current one though the new one's is of a later incarnation;
// the new one is swept once the operation is over, never the old one.
func TestMoveInsideOneClusterGivenUpKeepsTheOldObject(t *testing.T) {
	s := ring()
	withSecondZone(s)
	cs := s.cluster("member-3")
	old := cs.members["main-2"]
	old.Status.Etcd = &etcdfedv1.MemberEtcdView{ID: hexID(3)}
	m := statusMember(&s.ec.Status, "main-2")
	gone := *m
	gone.Zone, gone.Incarnation, gone.DNSName = "zone-3b", 4, "main-2-i4.main.etcd.test"
	s.ec.Status.LastIncarnation = 4
	fresh := desiredMember(s, &s.ec.Status, &gone, nil)
	fresh.Status.Incarnation = 4
	fresh.Status.Etcd = &etcdfedv1.MemberEtcdView{ID: hexID(40)} // its learner, removed
	if fresh.Name == old.Name {
		t.Fatalf("the new incarnation's object is named like the old one's, %s", old.Name)
	}
	cs.add(fresh)
	cs.settle(&s.ec.Status)
	if cs.members["main-2"] != old {
		t.Fatalf("current object of main-2 is %s (incarnation %d), want the old one the ledger records", cs.members["main-2"].Name, cs.members["main-2"].Spec.Incarnation)
	}
	d, st := pass(s)
	if d.plan.Action != planner.ActNone {
		t.Errorf("plan %s (%s), want nothing", d.plan.Action, d.plan.Reason)
	}
	if len(d.sweep) != 1 || d.sweep[0] != (memberRef{cluster: "member-3", member: "main-2", object: fresh.Name}) {
		t.Errorf("sweep %v, want the given-up object %s alone", d.sweep, fresh.Name)
	}
	if m := statusMember(&st, "main-2"); m.Zone != "zone-3" || m.Incarnation != 3 || m.Address != "127.0.3.10" {
		t.Errorf("status main-2 %+v, want its old incarnation", m)
	}
	// With an operation in flight, the old incarnation etcd lists is never
	// swept, the given-up one not before the operation ends.
	busy := s.ec.Status.DeepCopy()
	busy.Operation = &etcdfedv1.MembershipOperation{Type: etcdfedv1.OperationRoll, Member: "main-0", MemberID: "1"}
	if sweep, _ := leftBehind(s, busy); len(sweep) != 0 {
		t.Errorf("sweep %v with an operation in flight", sweep)
	}
}
