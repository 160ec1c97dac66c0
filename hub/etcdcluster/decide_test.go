package etcdcluster

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	etcdfedv1 "github.com/etcdfed/etcdfed/api/v1alpha1"
	"github.com/etcdfed/etcdfed/hub/liveness"
	"github.com/etcdfed/etcdfed/hub/pki"
	"github.com/etcdfed/etcdfed/hub/planner"
	"github.com/etcdfed/etcdfed/hub/registry"
)

var now = time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)

// ring is the snapshot of a formed, healthy three-member ring: one member
// in each of three single-zone member clusters, every object on the current
// spec and acted on by its spoke, main-0 leading. TLS is off (the
// certificate cases turn it on).
func ring() *snapshot {
	ec := &etcdfedv1.EtcdCluster{ObjectMeta: metav1.ObjectMeta{Name: "main", Namespace: "default", UID: "uid-1", Generation: 2}}
	ec.Spec = etcdfedv1.EtcdClusterSpec{Replicas: 3, Version: "3.6.16", DNS: etcdfedv1.DNSSpec{Domain: "main.etcd.test"}, TLS: etcdfedv1.TLSSpec{Mode: etcdfedv1.TLSDisabled}}
	ec.Status.ClusterID, ec.Status.LastIncarnation = "c1", 3
	s := &snapshot{ec: ec, now: now, ringNamespace: etcdfedv1.DefaultRingNamespace, allowLoopback: true, byName: map[string]*clusterSnapshot{}}
	seen := metav1.NewTime(now.Add(-time.Minute))
	for i := range 3 {
		c, zone, name := fmt.Sprintf("member-%d", i+1), fmt.Sprintf("zone-%d", i+1), fmt.Sprintf("main-%d", i)
		addr := fmt.Sprintf("127.0.%d.10", i+1)
		ms := etcdfedv1.MemberStatus{Name: name, Cluster: c, Zone: zone, Incarnation: int64(i + 1), ID: hexID(uint64(i + 1)), Ready: true, Address: addr, LastTransitionTime: &seen}
		ec.Status.Members = append(ec.Status.Members, ms)
		peer, client := memberURL(ec, name, etcdfedv1.DefaultPeerPort), memberURL(ec, name, etcdfedv1.DefaultClientPort)
		s.etcd.Members = append(s.etcd.Members, planner.ListEntry{ID: uint64(i + 1), Name: name, PeerURLs: []string{peer}, ClientURLs: []string{client}, Healthy: true})
		cs := &clusterSnapshot{name: c, engaged: true, registered: true, eligible: true, verdict: liveness.Verdict{Cluster: c, State: liveness.Alive},
			spoke:   &etcdfedv1.EtcdSpoke{Status: etcdfedv1.EtcdSpokeStatus{Zones: []string{zone}, ObservedAt: &seen, DNSAddresses: []string{fmt.Sprintf("127.0.%d.53:53", i+1)}}},
			members: map[string]*etcdfedv1.EtcdMember{}, zones: map[string]*etcdfedv1.EtcdDNSZone{}, secrets: map[string]*corev1.Secret{}}
		obj := desiredMember(s, &ec.Status, &ms, nil)
		obj.Spec.Bootstrap = &etcdfedv1.BootstrapSpec{InitialCluster: "main-0=x", InitialClusterState: etcdfedv1.InitialClusterExisting, Token: "uid-1", ClusterID: "c1"}
		obj.Generation = 1
		obj.Status = etcdfedv1.EtcdMemberStatus{ObservedGeneration: 1, PeerURL: peer, ClientURL: client, Address: addr, Incarnation: int64(i + 1),
			Conditions: []metav1.Condition{
				{Type: etcdfedv1.ConditionPodReady, Status: metav1.ConditionTrue, Reason: "Ready"},
				{Type: etcdfedv1.ConditionMemberHealthy, Status: metav1.ConditionTrue, Reason: "Healthy"},
				{Type: etcdfedv1.ConditionStorageReady, Status: metav1.ConditionTrue, Reason: "Bound"},
			}}
		cs.members[name] = obj
		s.clusters = append(s.clusters, cs)
		s.byName[c] = cs
	}
	s.etcd.Reachable, s.etcd.LeaderID, s.etcd.ClusterID = true, 1, 0xc1
	return s
}

// withTLS turns TLS on with a CA made at caTime and every certificate
// (the hub's and each member's) issued from it at now.
func withTLS(t *testing.T, s *snapshot) *pki.CA {
	t.Helper()
	s.ec.Spec.TLS.Mode = etcdfedv1.TLSEnabled
	ca, err := pki.NewCA("test CA", now.Add(-400*24*time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	hub, err := ca.IssueClient("etcdfed-hub", now)
	if err != nil {
		t.Fatal(err)
	}
	s.pki = pkiSnapshot{ca: ca, hubClient: certSecret(s.ec.Namespace, pki.HubClientSecretName(s.ec), ownerLabels(s.ec), ca.CertPEM, hub)}
	for _, m := range s.ec.Status.Members {
		issueMemberCert(t, s, ca, m.Cluster, m.Name, now)
	}
	return ca
}

func issueMemberCert(t *testing.T, s *snapshot, ca *pki.CA, cluster, member string, at time.Time) {
	t.Helper()
	leaf, err := ca.IssueMember(pki.MemberRequest{Member: member, DNSNames: memberCertNames(s.ec, member, "")}, at)
	if err != nil {
		t.Fatal(err)
	}
	name := pki.MemberSecretName(s.cluster(cluster).members[member].Name)
	sec := certSecret(s.ringNamespace, name, memberCertLabels(s.ec, member), ca.CertPEM, leaf)
	sec.Data[etcdfedv1.RevocationListKey] = emptyList(t, ca)
	s.cluster(cluster).secrets[name] = sec
	// A ring that runs with TLS runs with its peer name required, and
	// with the ring's (empty) revocation list.
	s.cluster(cluster).members[member].Spec.TLS = etcdfedv1.MemberTLS{Mode: etcdfedv1.TLSEnabled, SecretName: name,
		PeerName: pki.PeerName(s.ec.Spec.DNS.Domain), RequirePeerName: true, RevocationList: true, PeerRevocationList: true}
}

// emptyLists are the revocation lists emptyList signed, by CA: every
// member's Secret holds the same list, as the hub writes it.
var emptyLists sync.Map

// emptyList is ca's list that revokes nothing, signed at now (number 1).
func emptyList(t *testing.T, ca *pki.CA) []byte {
	t.Helper()
	if l, ok := emptyLists.Load(ca); ok {
		return l.([]byte)
	}
	der, err := ca.RevocationList(nil, 1, now, pki.RevocationListValidity)
	if err != nil {
		t.Fatal(err)
	}
	l, _ := emptyLists.LoadOrStore(ca, der)
	return l.([]byte)
}

// inFlight records an operation in the snapshot's status.
func inFlight(s *snapshot, op etcdfedv1.MembershipOperation) {
	op.StartedAt = metav1.NewTime(now.Add(-time.Minute))
	s.ec.Status.Operation = &op
}

func condition(st etcdfedv1.EtcdClusterStatus, typ string) metav1.Condition {
	if c := meta.FindStatusCondition(st.Conditions, typ); c != nil {
		return *c
	}
	return metav1.Condition{}
}

// Table tests of one pass's decision: a snapshot in, the step, the upkeep
// and the whole status out. No API server, no etcd.
func TestDecide(t *testing.T) {
	type outcome struct {
		d  *decision
		st etcdfedv1.EtcdClusterStatus
	}
	cases := []struct {
		name   string
		given  func(t *testing.T, s *snapshot)
		result applyResult
		check  func(t *testing.T, o outcome)
	}{
		{
			name: "a steady ring: nothing to do, every condition good",
			check: func(t *testing.T, o outcome) {
				if o.d.plan.Action != planner.ActNone || len(o.d.step.writes)+len(o.d.updates)+len(o.d.sweep)+len(o.d.certs) != 0 {
					t.Errorf("plan %s (%s), %d writes, %d updates, %d sweeps, %d certs; want nothing", o.d.plan.Action, o.d.plan.Reason,
						len(o.d.step.writes), len(o.d.updates), len(o.d.sweep), len(o.d.certs))
				}
				for typ, want := range map[string]string{
					etcdfedv1.ConditionAvailable:       etcdfedv1.ReasonQuorate,
					etcdfedv1.ConditionAllMembersReady: etcdfedv1.ReasonAllReady,
					etcdfedv1.ConditionProgressing:     etcdfedv1.ReasonIdle,
					etcdfedv1.ConditionDegraded:        etcdfedv1.ReasonAsExpected,
					etcdfedv1.ConditionFailureTolerant: etcdfedv1.ReasonSurvivesZoneLoss,
				} {
					if c := condition(o.st, typ); c.Reason != want {
						t.Errorf("%s: %s %s (%s), want reason %s", typ, c.Status, c.Reason, c.Message, want)
					}
				}
				if o.st.Leader != "main-0" || o.st.MemberSummary != "3/3" || o.st.ZoneSummary != "3 (1/1/1)" || o.st.ObservedGeneration != 2 || len(o.st.Endpoints) != 3 {
					t.Errorf("leader %q, members %q, zones %q, observed generation %d, endpoints %v", o.st.Leader, o.st.MemberSummary, o.st.ZoneSummary, o.st.ObservedGeneration, o.st.Endpoints)
				}
				if o.d.dns.set == nil || !slices.ContainsFunc(o.d.dns.records, func(r etcdfedv1.DNSRecord) bool {
					return r.Name == "main-1.main.etcd.test." && r.Type == "A" && slices.Equal(r.Data, []string{"127.0.2.10"})
				}) {
					t.Errorf("records %v lack main-1's address", o.d.dns.records)
				}
			},
		},
		{
			name:  "scale 3 to 5: the Add is recorded before anything is made",
			given: func(_ *testing.T, s *snapshot) { s.ec.Spec.Replicas = 5 },
			check: func(t *testing.T, o outcome) {
				op := o.st.Operation
				if o.d.plan.Action != planner.ActBegin || op == nil || op.Type != etcdfedv1.OperationAdd || op.Member != "main-3" || op.Step != string(planner.ActCreateObjects) {
					t.Fatalf("plan %s, operation %+v; want Add main-3 recorded at CreateObjects", o.d.plan.Action, op)
				}
				if len(o.d.step.writes) != 0 {
					t.Errorf("a Begin wrote %d objects", len(o.d.step.writes))
				}
				if m := statusMember(&o.st, "main-3"); m == nil || m.Incarnation != 4 || m.Cluster == "" || o.st.LastIncarnation != 4 {
					t.Errorf("main-3 recorded as %+v, last incarnation %d; want incarnation 4 placed", m, o.st.LastIncarnation)
				}
				if c := condition(o.st, etcdfedv1.ConditionProgressing); c.Status != metav1.ConditionTrue || c.Reason != "Add" {
					t.Errorf("Progressing %s %s: %s", c.Status, c.Reason, c.Message)
				}
			},
		},
		{
			name: "an Add at CreateObjects writes the new member's object in its cluster, without bootstrap",
			given: func(_ *testing.T, s *snapshot) {
				s.ec.Spec.Replicas = 5
				s.ec.Status.Members = append(s.ec.Status.Members, etcdfedv1.MemberStatus{Name: "main-3", Cluster: "member-1", Zone: "zone-1", Incarnation: 4})
				s.ec.Status.LastIncarnation = 4
				inFlight(s, etcdfedv1.MembershipOperation{Type: etcdfedv1.OperationAdd, Member: "main-3", Incarnation: 4,
					To: &etcdfedv1.FailureDomain{Cluster: "member-1", Zone: "zone-1"}, Step: string(planner.ActCreateObjects)})
			},
			check: func(t *testing.T, o outcome) {
				if o.d.plan.Action != planner.ActCreateObjects || len(o.d.step.writes) != 1 {
					t.Fatalf("plan %s (%s) with %d writes; want CreateObjects of main-3", o.d.plan.Action, o.d.plan.Reason, len(o.d.step.writes))
				}
				w := o.d.step.writes[0]
				if w.cluster != "member-1" || w.want.Spec.MemberName != "main-3" || w.want.Spec.Incarnation != 4 || w.want.Spec.Bootstrap != nil || w.want.Spec.Image != "gcr.io/etcd-development/etcd:v3.6.16" {
					t.Errorf("writes %s in %s: %+v", w.want.Spec.MemberName, w.cluster, w.want.Spec)
				}
			},
		},
		{
			name:  "spec.version changed: the Roll of a follower is recorded, no object is touched yet",
			given: func(_ *testing.T, s *snapshot) { s.ec.Spec.Version = "3.6.15" },
			check: func(t *testing.T, o outcome) {
				op := o.st.Operation
				if o.d.plan.Action != planner.ActBegin || op == nil || op.Type != etcdfedv1.OperationRoll || op.Member != "main-1" {
					t.Fatalf("plan %s (%s), operation %+v; want a Roll of main-1 (main-0 leads: last)", o.d.plan.Action, o.d.plan.Reason, op)
				}
				if len(o.d.step.writes)+len(o.d.updates) != 0 {
					t.Errorf("%d step writes and %d updates; a change that restarts pods is written by a Roll's step only", len(o.d.step.writes), len(o.d.updates))
				}
				c := condition(o.st, etcdfedv1.ConditionProgressing)
				if c.Status != metav1.ConditionTrue || c.Reason != "Roll" || !strings.Contains(c.Message, "main-1") {
					t.Errorf("Progressing %s %s: %s; want the roll of main-1", c.Status, c.Reason, c.Message)
				}
			},
		},
		{
			name: "a Roll in flight writes the new spec to its member only",
			given: func(_ *testing.T, s *snapshot) {
				s.ec.Spec.Version = "3.6.15"
				inFlight(s, etcdfedv1.MembershipOperation{Type: etcdfedv1.OperationRoll, Member: "main-1", Reason: planner.ReasonSpecChanged, Step: string(planner.ActUpdateObject)})
			},
			check: func(t *testing.T, o outcome) {
				if o.d.plan.Action != planner.ActUpdateObject || len(o.d.step.writes) != 1 {
					t.Fatalf("plan %s (%s) with %d writes; want UpdateObject of main-1", o.d.plan.Action, o.d.plan.Reason, len(o.d.step.writes))
				}
				w := o.d.step.writes[0]
				if w.cluster != "member-2" || w.want.Spec.MemberName != "main-1" || w.want.Spec.Image != "gcr.io/etcd-development/etcd:v3.6.15" || w.want.Spec.Bootstrap == nil {
					t.Errorf("writes %s in %s: image %s, bootstrap %v; want main-1 in member-2 on v3.6.15, its bootstrap kept", w.want.Spec.MemberName, w.cluster, w.want.Spec.Image, w.want.Spec.Bootstrap)
				}
				if len(o.d.updates) != 0 {
					t.Errorf("%d other members updated during a roll", len(o.d.updates))
				}
			},
		},
		{
			name: "the leader's Roll moves leadership away first",
			given: func(_ *testing.T, s *snapshot) {
				s.ec.Spec.Image = "registry.k8s.io/etcd:3.6.16-0"
				inFlight(s, etcdfedv1.MembershipOperation{Type: etcdfedv1.OperationRoll, Member: "main-0", Reason: planner.ReasonSpecChanged, Step: string(planner.ActUpdateObject)})
			},
			check: func(t *testing.T, o outcome) {
				if o.d.plan.Action != planner.ActMoveLeader || o.d.plan.TransfereeID != 2 || len(o.d.step.writes) != 0 {
					t.Fatalf("plan %s to %x (%s), %d writes; want MoveLeader to 2 and nothing written", o.d.plan.Action, o.d.plan.TransfereeID, o.d.plan.Reason, len(o.d.step.writes))
				}
				if !slices.Equal(o.d.step.leaderURLs, []string{"http://main-0.main.etcd.test:2379"}) {
					t.Errorf("leader reached at %v", o.d.step.leaderURLs)
				}
				if o.st.Operation == nil || o.st.Operation.Step != string(planner.ActMoveLeader) {
					t.Errorf("operation %+v; want its step MoveLeader recorded", o.st.Operation)
				}
			},
		},
		{
			name: "bootstrap \"new\" left on an object after formation: switched to existing, no roll",
			given: func(_ *testing.T, s *snapshot) {
				s.cluster("member-3").members["main-2"].Spec.Bootstrap.InitialClusterState = etcdfedv1.InitialClusterNew
			},
			check: func(t *testing.T, o outcome) {
				if o.d.plan.Action != planner.ActNone || len(o.d.updates) != 1 {
					t.Fatalf("plan %s (%s), %d updates; want one update and no operation", o.d.plan.Action, o.d.plan.Reason, len(o.d.updates))
				}
				if u := o.d.updates[0]; u.want.Spec.MemberName != "main-2" || u.want.Spec.Bootstrap.InitialClusterState != etcdfedv1.InitialClusterExisting {
					t.Errorf("update %s: %+v", u.want.Spec.MemberName, u.want.Spec.Bootstrap)
				}
			},
		},
		{
			name: "an old incarnation left in a cluster that came back is swept, with its certificate, its volume kept",
			given: func(_ *testing.T, s *snapshot) {
				live := s.cluster("member-2").members["main-1"]
				live.Status.Etcd = &etcdfedv1.MemberEtcdView{ID: hexID(2)}
				old := live.DeepCopy()
				old.Namespace = "etcdfed-system"
				old.Spec.Incarnation, old.Status.Incarnation = 1, 1
				old.Spec.Storage.VolumeReclaimPolicy = etcdfedv1.VolumeDelete
				old.Status.Volume.ClaimName = "main-1-data-1"
				old.Status.Etcd = &etcdfedv1.MemberEtcdView{ID: hexID(0x11), RaftIndex: 420, Revision: 377}
				s.cluster("member-3").members["main-1"] = old
				s.cluster("member-3").secrets["main-1-tls"] = &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "main-1-tls", Labels: memberCertLabels(s.ec, "main-1")}}
			},
			check: func(t *testing.T, o outcome) {
				if !slices.Equal(o.d.sweep, []memberRef{{cluster: "member-3", member: "main-1"}}) {
					t.Errorf("sweep %v; want main-1 in member-3", o.d.sweep)
				}
				// Never a volume by itself: rewritten with Retain first,
				// and named with the revision it held.
				if len(o.d.retain) != 1 || o.d.retain[0].want == nil || o.d.retain[0].want.Spec.Storage.VolumeReclaimPolicy != etcdfedv1.VolumeRetain ||
					o.d.retain[0].want.Labels[etcdfedv1.LabelKeepVolumes] != "true" {
					t.Fatalf("retain %+v; want main-1's object rewritten with Retain and %s", o.d.retain, etcdfedv1.LabelKeepVolumes)
				}
				if note := o.d.retain[0].note; !strings.Contains(note, "main-1 incarnation 1 in member-3: PVC etcdfed-system/main-1-data-1 (revision 377, raft index 420, as [11])") {
					t.Errorf("note %q", note)
				}
			},
		},
		{
			name: "etcd answering for another cluster ID: nothing swept",
			given: func(_ *testing.T, s *snapshot) {
				old := s.cluster("member-2").members["main-1"].DeepCopy()
				old.Spec.Incarnation, old.Status.Incarnation = 1, 1
				old.Status.Etcd = &etcdfedv1.MemberEtcdView{ID: hexID(0x11)}
				s.cluster("member-3").members["main-1"] = old
				s.etcd.ClusterID = 0xbad
			},
			check: func(t *testing.T, o outcome) {
				if len(o.d.sweep) != 0 {
					t.Errorf("sweep %v on another cluster's member list", o.d.sweep)
				}
			},
		},
		{
			name: "an operation in flight: nothing is swept",
			given: func(_ *testing.T, s *snapshot) {
				s.cluster("member-3").members["main-1"] = s.cluster("member-2").members["main-1"].DeepCopy()
				s.ec.Spec.Version = "3.6.15"
				inFlight(s, etcdfedv1.MembershipOperation{Type: etcdfedv1.OperationRoll, Member: "main-1", Reason: planner.ReasonSpecChanged, Step: string(planner.ActUpdateObject)})
			},
			check: func(t *testing.T, o outcome) {
				if len(o.d.sweep) != 0 {
					t.Errorf("sweep %v with an operation in flight", o.d.sweep)
				}
			},
		},
		{
			name: "an operation in flight: an old incarnation etcd no longer lists is swept (returned after a recovery from a backup)",
			given: func(_ *testing.T, s *snapshot) {
				// main-1 and main-2 came back in new incarnations in
				// member-1 (the only cluster left) while member-2 and
				// member-3 were away; main-2's is being added. The old
				// incarnations, back with their clusters, run as members
				// of the old etcd cluster (IDs 0x12, 0x13).
				s.ec.Status.ClusterID, s.etcd.ClusterID = "d7", 0xd7
				for i, name := range []string{"main-1", "main-2"} {
					old := s.ec.Status.Members[i+1]
					obj := s.cluster(old.Cluster).members[name]
					obj.Status.Etcd = &etcdfedv1.MemberEtcdView{ID: hexID(uint64(0x12 + i))}
					s.ec.Status.Members[i+1].Cluster, s.ec.Status.Members[i+1].Zone = "member-1", "zone-1"
					s.ec.Status.Members[i+1].Incarnation, s.ec.Status.Members[i+1].ID = int64(5+i), hexID(uint64(0x22+i))
				}
				s.etcd.Members = s.etcd.Members[:1]
				s.etcd.Members = append(s.etcd.Members, planner.ListEntry{ID: 0x22, Name: "main-1", Healthy: true}, planner.ListEntry{ID: 0x23, IsLearner: true})
				inFlight(s, etcdfedv1.MembershipOperation{Type: etcdfedv1.OperationAdd, Member: "main-2", Incarnation: 6, NewMemberID: hexID(0x23), Reason: "ScaleUp", Step: string(planner.ActPromote)})
			},
			check: func(t *testing.T, o outcome) {
				want := []memberRef{{cluster: "member-2", member: "main-1"}, {cluster: "member-3", member: "main-2"}}
				if !slices.Equal(o.d.sweep, want) {
					t.Errorf("sweep %v; want %v: the old cluster's majority would serve on", o.d.sweep, want)
				}
			},
		},
		{
			name: "an operation in flight: an old incarnation etcd still lists is kept (a Replace before its Remove)",
			given: func(_ *testing.T, s *snapshot) {
				obj := s.cluster("member-2").members["main-1"]
				obj.Status.Etcd = &etcdfedv1.MemberEtcdView{ID: hexID(2)}
				s.ec.Status.Members[1].Cluster, s.ec.Status.Members[1].Zone, s.ec.Status.Members[1].Incarnation = "member-3", "zone-3", 4
				inFlight(s, etcdfedv1.MembershipOperation{Type: etcdfedv1.OperationReplace, Member: "main-1", MemberID: hexID(2), Incarnation: 4, Reason: "ZoneFailed", Step: string(planner.ActBegin)})
			},
			check: func(t *testing.T, o outcome) {
				if slices.Contains(o.d.sweep, memberRef{cluster: "member-2", member: "main-1"}) {
					t.Errorf("sweep %v: main-1's old incarnation is still a member of etcd", o.d.sweep)
				}
			},
		},
		{
			name: "a member cluster the hub is not connected to: unknown, Degraded says why, its member kept",
			given: func(_ *testing.T, s *snapshot) {
				cs := s.cluster("member-2")
				cs.engaged, cs.client = false, nil
				cs.verdict = liveness.Verdict{Cluster: "member-2", State: liveness.Unknown, Reason: "Lease stale for 20s"}
				cs.conn = &registry.ClusterState{Since: now.Add(-40 * time.Second), Problem: "dial tcp 127.0.0.2:6443: connection refused"}
			},
			check: func(t *testing.T, o outcome) {
				c := condition(o.st, etcdfedv1.ConditionDegraded)
				if c.Status != metav1.ConditionTrue || !strings.Contains(c.Message, "member cluster member-2 unknown: Lease stale for 20s; hub not connected since 2026-11-22T11:59:20Z: dial tcp") {
					t.Errorf("Degraded %s: %s", c.Status, c.Message)
				}
				if o.d.plan.Action != planner.ActNone || len(o.st.Members) != 3 {
					t.Errorf("plan %s (%s), %d members; a partial view moves nothing", o.d.plan.Action, o.d.plan.Reason, len(o.st.Members))
				}
			},
		},
		{
			name: "etcd does not answer: no step, readiness kept, Available false",
			given: func(_ *testing.T, s *snapshot) {
				s.etcd = planner.Etcd{Error: "no answer within 2s"}
			},
			check: func(t *testing.T, o outcome) {
				if o.d.plan.Action != planner.ActWait || o.st.ReadyMembers != 3 {
					t.Errorf("plan %s, %d ready; want a wait with the recorded readiness kept", o.d.plan.Action, o.st.ReadyMembers)
				}
				if c := condition(o.st, etcdfedv1.ConditionAvailable); c.Status != metav1.ConditionFalse || c.Reason != etcdfedv1.ReasonNoQuorum {
					t.Errorf("Available %s %s", c.Status, c.Reason)
				}
			},
		},
		{
			name: "TLS, no CA yet: the CA and the hub's certificate are due, nothing is written by observe",
			given: func(t *testing.T, s *snapshot) {
				withTLS(t, s)
				s.pki = pkiSnapshot{}
			},
			check: func(t *testing.T, o outcome) {
				if !o.d.pki.createCA || !o.d.pki.issueHubClient || len(o.d.certs) != 3 {
					t.Errorf("pki %+v, %d member certificates due; want the CA, the hub's and every member's", o.d.pki, len(o.d.certs))
				}
			},
		},
		{
			name: "TLS: a member certificate near expiry is renewed, the others are left",
			given: func(t *testing.T, s *snapshot) {
				ca := withTLS(t, s)
				issueMemberCert(t, s, ca, "member-2", "main-1", now.Add(-340*24*time.Hour))
			},
			check: func(t *testing.T, o outcome) {
				if o.d.pki.createCA || o.d.pki.issueHubClient || !slices.Equal(o.d.certs, []memberRef{{cluster: "member-2", member: "main-1"}}) {
					t.Errorf("pki %+v, certificates due %v; want main-1's only", o.d.pki, o.d.certs)
				}
				if o.d.plan.Action != planner.ActNone || len(o.d.updates) != 0 {
					t.Errorf("plan %s, %d updates; a renewal is upkeep, not an operation", o.d.plan.Action, len(o.d.updates))
				}
			},
		},
		{
			name:   "the step failed: Degraded says so and observedGeneration stays",
			given:  func(_ *testing.T, s *snapshot) { s.ec.Status.ObservedGeneration = 1 },
			result: applyResult{stepErr: errors.New("remove 3: etcdserver: request timed out")},
			check: func(t *testing.T, o outcome) {
				c := condition(o.st, etcdfedv1.ConditionDegraded)
				if c.Status != metav1.ConditionTrue || !strings.Contains(c.Message, "last step failed: remove 3") || o.st.ObservedGeneration != 1 {
					t.Errorf("Degraded %s: %s; observed generation %d", c.Status, c.Message, o.st.ObservedGeneration)
				}
			},
		},
		{
			name: "AddLearner: the ID etcd gave is recorded on the member and the operation",
			given: func(_ *testing.T, s *snapshot) {
				s.ec.Spec.Replicas = 5
				s.ec.Status.Members = append(s.ec.Status.Members, etcdfedv1.MemberStatus{Name: "main-3", Cluster: "member-1", Zone: "zone-1", Incarnation: 4})
				inFlight(s, etcdfedv1.MembershipOperation{Type: etcdfedv1.OperationAdd, Member: "main-3", Incarnation: 4,
					To: &etcdfedv1.FailureDomain{Cluster: "member-1", Zone: "zone-1"}, Step: string(planner.ActAddLearner)})
				obj := desiredMember(s, &s.ec.Status, statusMember(&s.ec.Status, "main-3"), nil)
				obj.Status = etcdfedv1.EtcdMemberStatus{PeerURL: "http://main-3.main.etcd.test:2380", Incarnation: 4}
				s.cluster("member-1").members["main-3"] = obj
			},
			result: applyResult{learnerID: 0x99},
			check: func(t *testing.T, o outcome) {
				if o.d.plan.Action != planner.ActAddLearner || o.d.step.peerURL != "http://main-3.main.etcd.test:2380" {
					t.Fatalf("plan %s (%s), peer URL %q", o.d.plan.Action, o.d.plan.Reason, o.d.step.peerURL)
				}
				if m := statusMember(&o.st, "main-3"); m == nil || m.ID != "99" || o.st.Operation.NewMemberID != "99" {
					t.Errorf("main-3 %+v, operation %+v; want ID 99 on both", m, o.st.Operation)
				}
			},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := ring()
			if tc.given != nil {
				tc.given(t, s)
			}
			before := s.ec.DeepCopy()
			d := decide(s)
			st := computeStatus(s, d, tc.result, "")
			if !equalObjects(before, s.ec) {
				t.Fatalf("decide changed the snapshot's EtcdCluster")
			}
			tc.check(t, outcome{d: d, st: st})
		})
	}
}

func equalObjects(a, b *etcdfedv1.EtcdCluster) bool { return equality.Semantic.DeepEqual(a, b) }

// A spec.version change walked through decide pass after pass, with the
// status patched and the spokes' and etcd's answers simulated: one member's
// object at a time gets the new image, each after the previous is back,
// followers first, the leader last and never while it leads; Progressing
// shows each roll, and the ring ends idle on the new spec.
func TestRolloutThroughDecide(t *testing.T) {
	s := ring()
	s.ec.Spec.Version = "3.6.15"
	newImage := Image(s.ec)
	leader := "main-0"
	var order []string
	restarting := ""
	for pass := 0; pass < 100; pass++ {
		s.now = s.now.Add(time.Second)
		d := decide(s)
		st := computeStatus(s, d, applyResult{}, "")
		s.ec.Status = st
		if op := st.Operation; op != nil {
			if c := condition(st, etcdfedv1.ConditionProgressing); c.Status != metav1.ConditionTrue || c.Reason != "Roll" || !strings.Contains(c.Message, op.Member) {
				t.Fatalf("pass %d: Progressing %s %s: %s during the roll of %s", pass, c.Status, c.Reason, c.Message, op.Member)
			}
		}
		// The spoke of a member written last pass has restarted its pod.
		if restarting != "" {
			podRestarted(s, &st, restarting)
			restarting = ""
		}
		switch d.plan.Action {
		case planner.ActNone:
			t.Logf("rolled in %d passes: %v", pass, order)
			if len(order) != 3 || order[2] != leader {
				t.Fatalf("rolled %v; want every member once, the leader %s last", order, leader)
			}
			for _, cs := range s.clusters {
				for _, obj := range cs.members {
					if obj.Spec.Image != newImage {
						t.Errorf("%s still runs %s", obj.Name, obj.Spec.Image)
					}
				}
			}
			if c := condition(st, etcdfedv1.ConditionProgressing); c.Reason != etcdfedv1.ReasonIdle {
				t.Errorf("Progressing %s after the rollout", c.Reason)
			}
			return
		case planner.ActMoveLeader:
			s.etcd.LeaderID = d.plan.TransfereeID
		case planner.ActUpdateObject:
			if len(d.step.writes) != 1 {
				t.Fatalf("pass %d: %d objects written at once", pass, len(d.step.writes))
			}
			w := d.step.writes[0]
			if m := statusMember(&st, w.want.Spec.MemberName); parseID(m.ID) == s.etcd.LeaderID {
				t.Fatalf("pass %d: %s restarted while it leads", pass, m.Name)
			}
			obj := s.cluster(w.cluster).members[w.want.Spec.MemberName]
			obj.Spec = w.want.Spec
			obj.Generation++
			meta.SetStatusCondition(&obj.Status.Conditions, metav1.Condition{Type: etcdfedv1.ConditionPodReady, Status: metav1.ConditionFalse, Reason: "PodReplaced"})
			for i := range s.etcd.Members {
				if s.etcd.Members[i].Name == w.want.Spec.MemberName {
					s.etcd.Members[i].Healthy = false
				}
			}
			order = append(order, w.want.Spec.MemberName)
			restarting = w.want.Spec.MemberName
		}
	}
	t.Fatalf("the rollout did not end: rolled %v", order)
}

// A pass whose upkeep writes something (a CA, a certificate, records) is
// not followed at once by a pass on the same observation: that pass would
// write it again, and the CA's second creation fails (the scale
// benchmark's hub log showed "create CA Secret ...: already exists" once
// for every new ring). A pass that only records an operation's start is.
func TestUpkeepIdle(t *testing.T) {
	serving := func(s *snapshot) {
		d := decide(s)
		for _, cs := range s.clusters {
			want := desiredZone(s, cs, d.dns.records)
			cs.zones[want.Name] = want
		}
	}
	for _, tc := range []struct {
		name  string
		setup func(t *testing.T, s *snapshot)
		idle  bool
	}{
		{"every record served, nothing due", func(_ *testing.T, s *snapshot) { serving(s) }, true},
		{"records not yet served", func(*testing.T, *snapshot) {}, false},
		{"a cluster serving an old record set", func(_ *testing.T, s *snapshot) {
			serving(s)
			for _, z := range s.clusters[1].zones {
				z.Spec.Records = z.Spec.Records[1:]
			}
		}, false},
		{"no CA yet", func(_ *testing.T, s *snapshot) {
			s.ec.Spec.TLS.Mode = etcdfedv1.TLSEnabled
			serving(s)
		}, false},
		{"TLS on, every certificate current", func(t *testing.T, s *snapshot) {
			withTLS(t, s)
			serving(s)
		}, true},
		// Issue 37, "every member cluster answers for every ring": a
		// cluster hosting none of the ring's members, and not named for
		// it, gets no zone, and one it holds is deleted.
		{"a cluster hosting no member has no zone", func(_ *testing.T, s *snapshot) {
			serving(s)
			withFourthCluster(s)
		}, true},
		{"a cluster hosting no member holds the zone", func(_ *testing.T, s *snapshot) {
			withFourthCluster(s)
			serving(s)
		}, false},
		{"a cluster named in spec.topology.clusters without the zone", func(_ *testing.T, s *snapshot) {
			serving(s)
			withFourthCluster(s)
			s.ec.Spec.Topology.Clusters = []string{"member-1", "member-2", "member-3", "member-4"}
		}, false},
		{"a cluster holding an object of the ring it made itself, no ledger member: no zone", func(_ *testing.T, s *snapshot) {
			serving(s)
			withFourthCluster(s)
			s.byName["member-4"].others = map[string][]*etcdfedv1.EtcdMember{"main-0": {s.clusters[0].members["main-0"].DeepCopy()}}
		}, true},
		{"a member certificate missing", func(t *testing.T, s *snapshot) {
			withTLS(t, s)
			serving(s)
			delete(s.clusters[2].secrets, pki.MemberSecretName(s.clusters[2].members["main-2"].Name))
		}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := ring()
			tc.setup(t, s)
			if got := decide(s).upkeepIdle(s); got != tc.idle {
				d := decide(s)
				t.Errorf("upkeep idle %v, want %v (pki %+v, %d certs, %d updates, %d sweeps)", got, tc.idle, d.pki, len(d.certs), len(d.updates), len(d.sweep))
			}
		})
	}
}

// podRestarted is the spoke of member having restarted its pod on the spec
// last written to it: the object observed, the pod ready, etcd's member
// healthy.
func podRestarted(s *snapshot, st *etcdfedv1.EtcdClusterStatus, member string) {
	obj := s.cluster(statusMember(st, member).Cluster).members[member]
	obj.Status.ObservedGeneration = obj.Generation
	meta.SetStatusCondition(&obj.Status.Conditions, metav1.Condition{Type: etcdfedv1.ConditionPodReady, Status: metav1.ConditionTrue, Reason: "Ready"})
	for i := range s.etcd.Members {
		if s.etcd.Members[i].Name == member {
			s.etcd.Members[i].Healthy = true
		}
	}
}
