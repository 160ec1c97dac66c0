package etcdcluster

import (
	"context"
	"errors"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/etcdfed/etcdfed/dev/testenv"
	"github.com/etcdfed/etcdfed/hub/liveness"

	etcdfedv1 "github.com/etcdfed/etcdfed/api/v1alpha1"
	"github.com/etcdfed/etcdfed/hub/planner"
)

// rebuilt is ring() as a rebuilt hub first sees it: the same manifest
// applied again as a new EtcdCluster (UID uid-2, no status), the running
// ring's objects in the member clusters under the founding UID (uid-1),
// read as foreign by listRing.
func rebuilt() *snapshot {
	s := ring()
	s.ec.UID = "uid-2"
	s.ec.Status = etcdfedv1.EtcdClusterStatus{}
	for _, cs := range s.clusters {
		f := &foreignObjects{members: map[types.UID][]*etcdfedv1.EtcdMember{}, zones: map[types.UID][]*etcdfedv1.EtcdDNSZone{}}
		for _, o := range cs.members {
			f.members["uid-1"] = append(f.members["uid-1"], o)
		}
		f.zones["uid-1"] = []*etcdfedv1.EtcdDNSZone{{Spec: etcdfedv1.EtcdDNSZoneSpec{Domain: "main.etcd.test"}}}
		cs.foreign, cs.members = f, map[string]*etcdfedv1.EtcdMember{}
	}
	return s
}

func TestFindTakeOver(t *testing.T) {
	for _, tc := range []struct {
		name  string
		mut   func(*snapshot)
		phase etcdfedv1.TakeOverPhase
		msg   string
	}{
		{"the running ring found: taken over under its founding UID", func(*snapshot) {}, etcdfedv1.TakeOverTakingOver, "taking over the running ring default/main (EtcdCluster UID uid-1, etcd cluster c1)"},
		{"nothing found: a new ring is founded", func(s *snapshot) {
			for _, cs := range s.clusters {
				cs.foreign = nil
			}
		}, "", ""},
		{"nothing found but a cluster unread: held, nothing founded", func(s *snapshot) {
			for _, cs := range s.clusters {
				cs.foreign = nil
			}
			s.clusters[2].readErr = errors.New("timeout")
		}, etcdfedv1.TakeOverHeld, "member-3 not read yet"},
		{"a cluster unread: held", func(s *snapshot) { s.clusters[1].engaged = false }, etcdfedv1.TakeOverHeld, "member cluster(s) member-2 not read yet"},
		{"objects of two rings: held", func(s *snapshot) {
			f := s.clusters[0].foreign
			f.members["uid-0"], f.members["uid-1"] = f.members["uid-1"], nil
		}, etcdfedv1.TakeOverHeld, "objects of 2 rings"},
		{"another domain: held", func(s *snapshot) { s.ec.Spec.DNS.Domain = "other.etcd.test" }, etcdfedv1.TakeOverHeld, "serves domain \"main.etcd.test\""},
		{"two etcd cluster IDs: held", func(s *snapshot) {
			o := s.clusters[0].foreign.members["uid-1"][0]
			o.Spec.Bootstrap.ClusterID = "c2"
		}, etcdfedv1.TakeOverHeld, "name 2 etcd clusters (c1, c2)"},
		{"TLS without the ring's CA (no escrow imported): held", func(s *snapshot) { s.ec.Spec.TLS.Mode = etcdfedv1.TLSEnabled }, etcdfedv1.TakeOverHeld, "CA Secret default/main-ca is not in this hub cluster"},
		{"objects of this EtcdCluster's own UID: its own ring", func(s *snapshot) {
			s.clusters[0].members["main-0"] = s.clusters[0].foreign.members["uid-1"][0]
		}, "", ""},
		{"held before, nothing found now: a new ring", func(s *snapshot) {
			for _, cs := range s.clusters {
				cs.foreign = nil
			}
			s.ec.Status.TakeOver = &etcdfedv1.TakeOverStatus{Phase: etcdfedv1.TakeOverHeld, Message: "member cluster(s) member-3 not read yet"}
		}, "", ""},
		{"a spec.adopt ring never takes over", func(s *snapshot) { s.ec.Spec.Adopt = &etcdfedv1.AdoptSpec{Endpoints: []string{"https://x:2379"}} }, "", ""},
		{"a ring with a cluster ID never takes over", func(s *snapshot) { s.ec.Status.ClusterID = "c9" }, "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := rebuilt()
			tc.mut(s)
			f := findTakeOver(s)
			if f.phase != tc.phase || !strings.Contains(f.message, tc.msg) {
				t.Fatalf("finding %q %q, want %q containing %q", f.phase, f.message, tc.phase, tc.msg)
			}
			if f.phase == etcdfedv1.TakeOverTakingOver && f.ringUID != "uid-1" {
				t.Errorf("ringUID %q, want uid-1", f.ringUID)
			}
		})
	}
}

// A rebuilt hub takes the running ring over in two passes and changes
// nothing of it: the first records the ring's founding UID and founds
// nothing; the second, reading the objects under that UID, adopts the
// formed cluster (its cluster ID from etcd, its members from their
// objects, with their etcd IDs) and writes no member object, deletes
// none, and serves the same records.
func TestTakeOverThroughDecide(t *testing.T) {
	s := rebuilt()
	d := decide(s)
	st := d.ledger
	if st.TakeOver == nil || st.TakeOver.Phase != etcdfedv1.TakeOverTakingOver || st.TakeOver.RingUID != "uid-1" || st.TakeOver.ClusterID != "c1" {
		t.Fatalf("first pass: takeOver %+v", st.TakeOver)
	}
	if d.plan.Action != planner.ActWait || len(d.step.writes) > 0 || d.dns.set != nil || d.pki.createCA || len(st.Members) > 0 {
		t.Fatalf("first pass acted: plan %s, writes %d, dns %v, createCA %v, members %v", d.plan.Action, len(d.step.writes), d.dns.set != nil, d.pki.createCA, st.Members)
	}
	out := computeStatus(s, d, applyResult{}, "")
	if c := condition(out, etcdfedv1.ConditionProgressing); c.Reason != etcdfedv1.ReasonTakingOver {
		t.Errorf("Progressing %s %q, want %s", c.Reason, c.Message, etcdfedv1.ReasonTakingOver)
	}
	if s.ec.RingUID() != "uid-2" {
		t.Errorf("RingUID before the record = %s", s.ec.RingUID())
	}

	// Second pass: the recorded status; observe lists under uid-1.
	s2 := ring()
	s2.ec.UID, s2.ec.Status = "uid-2", out
	if s2.ec.RingUID() != "uid-1" {
		t.Fatalf("RingUID after the record = %s, want uid-1", s2.ec.RingUID())
	}
	d2 := decide(s2)
	st2 := d2.ledger
	if d2.plan.Action != planner.ActFinishBootstrap || st2.ClusterID != "c1" {
		t.Fatalf("second pass: plan %s (%s), clusterID %q", d2.plan.Action, d2.plan.Reason, st2.ClusterID)
	}
	if st2.TakeOver.Phase != etcdfedv1.TakeOverComplete || len(st2.TakeOver.Members) != 3 || !strings.Contains(st2.TakeOver.Members[0], "main-0@member-1 (1)") {
		t.Errorf("takeOver %+v", st2.TakeOver)
	}
	if len(d2.step.writes) > 0 || len(d2.updates) > 0 || len(d2.sweep) > 0 {
		t.Errorf("the take-over writes member objects: step %d, updates %d, sweep %d", len(d2.step.writes), len(d2.updates), len(d2.sweep))
	}
	for _, w := range d2.updates {
		if w.want.Spec.Cluster.UID != "uid-1" || w.want.Labels[etcdfedv1.LabelClusterUID] != "uid-1" {
			t.Errorf("%s written under UID %s", w.want.Name, w.want.Spec.Cluster.UID)
		}
	}
	// The same ring's passes after: nothing to do.
	s3 := ring()
	s3.ec.UID, s3.ec.Status = "uid-2", computeStatus(s2, d2, applyResult{}, "")
	if d3 := decide(s3); d3.plan.Action != planner.ActNone || len(d3.updates) > 0 {
		t.Errorf("after the take-over: plan %s (%s), updates %d", d3.plan.Action, d3.plan.Reason, len(d3.updates))
	}
}

// etcd answering with another cluster ID than the ring's objects carry
// stops the take-over before the planner adopts it.
func TestTakeOverClusterIDMismatch(t *testing.T) {
	s := rebuilt()
	d := decide(s)
	s2 := ring()
	s2.ec.UID, s2.ec.Status = "uid-2", computeStatus(s, d, applyResult{}, "")
	s2.etcd.ClusterID = 0xc2
	d2 := decide(s2)
	if d2.plan.Action != planner.ActWait || !strings.Contains(d2.plan.Reason, "cluster ID c2") || d2.ledger.ClusterID != "" {
		t.Fatalf("plan %s (%s), clusterID %q", d2.plan.Action, d2.plan.Reason, d2.ledger.ClusterID)
	}
}

// A new ring held once (a member cluster not read yet at the hub's
// start) founds itself once every cluster is read and nothing is found:
// the hold is cleared and the CA created.
func TestTakeOverHeldThenNewRing(t *testing.T) {
	s := rebuilt()
	s.ec.Spec.TLS.Mode = etcdfedv1.TLSEnabled
	for _, cs := range s.clusters {
		cs.foreign = nil
	}
	s.clusters[2].engaged = false
	d := decide(s)
	if d.ledger.TakeOver == nil || d.ledger.TakeOver.Phase != etcdfedv1.TakeOverHeld || d.pki.createCA || d.plan.Action != planner.ActWait {
		t.Fatalf("a cluster not read: takeOver %+v, createCA %v, plan %s", d.ledger.TakeOver, d.pki.createCA, d.plan.Action)
	}
	s.ec.Status = *d.ledger
	s.clusters[2].engaged = true
	d = decide(s)
	if d.ledger.TakeOver != nil || !d.pki.createCA {
		t.Fatalf("every cluster read, nothing found: takeOver %+v, createCA %v, plan %s (%s)", d.ledger.TakeOver, d.pki.createCA, d.plan.Action, d.plan.Reason)
	}
}

// The pass between the record and the adoption, with TLS: the hub has no
// client certificate yet (it was lost with the hub cluster), so etcd is
// not reached; the pass issues the certificate from the imported CA and
// writes nothing of the ring (no member object, no sweep, no CA).
func TestTakeOverBeforeEtcdAnswers(t *testing.T) {
	s := rebuilt()
	tls := ring()
	withTLS(t, tls)
	s.ec.Spec.TLS.Mode, s.pki = etcdfedv1.TLSEnabled, tls.pki
	s.pki.hubClient = nil
	d := decide(s)
	if d.ledger.TakeOver == nil || d.ledger.TakeOver.Phase != etcdfedv1.TakeOverTakingOver || len(d.ledger.TakeOver.Reissued) != 1 {
		t.Fatalf("takeOver %+v", d.ledger.TakeOver)
	}
	s2 := ring()
	withTLS(t, s2)
	s2.ec.UID, s2.ec.Status = "uid-2", computeStatus(s, d, applyResult{}, "")
	s2.pki.hubClient = nil
	s2.etcd = planner.Etcd{Error: "the hub has no client certificate from the CA yet"}
	d2 := decide(s2)
	if d2.plan.Action != planner.ActWait || d2.ledger.ClusterID != "" || !d2.pki.issueHubClient || d2.pki.createCA {
		t.Fatalf("plan %s (%s), clusterID %q, pki %+v", d2.plan.Action, d2.plan.Reason, d2.ledger.ClusterID, d2.pki)
	}
	if len(d2.step.writes) > 0 || len(d2.updates) > 0 || len(d2.sweep) > 0 || len(d2.certs) > 0 {
		t.Errorf("writes before etcd answers: step %d, updates %d, sweep %d, certs %d", len(d2.step.writes), len(d2.updates), len(d2.sweep), len(d2.certs))
	}
	if len(d2.ledger.Members) != 3 {
		t.Errorf("members read back: %+v", d2.ledger.Members)
	}
}

// Against a real apiserver: a rebuilt hub's EtcdCluster (a new UID) finds
// the running ring's objects by namespace and name (listRing), not
// another ring's, records the founding UID, and then lists them under it.
func TestListRingAgainstAnAPIServer(t *testing.T) {
	c := testenv.StartT(t, "member")[0].Client
	ctx := context.Background()
	ns := "etcdfed-system"
	if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		t.Fatal(err)
	}
	founder := ring()
	founder.ringNamespace = ns
	other := ring()
	other.ringNamespace, other.ec.UID, other.ec.Namespace = ns, "uid-9", "other"
	for _, s := range []*snapshot{founder, other} {
		for _, m := range s.ec.Status.Members {
			obj := desiredMember(s, &s.ec.Status, &m, nil)
			obj.Spec.Bootstrap = &etcdfedv1.BootstrapSpec{InitialCluster: "main-0=x", InitialClusterState: etcdfedv1.InitialClusterExisting, Token: string(s.ec.UID), ClusterID: "c1"}
			if err := writeOwned(ctx, c, s.ec.UID, "member", nil, obj); err != nil {
				t.Fatal(err)
			}
		}
		if err := writeOwned(ctx, c, s.ec.UID, "member", nil, desiredZone(s, nil, nil)); err != nil {
			t.Fatal(err)
		}
	}
	rebuiltEC := founder.ec.DeepCopy()
	rebuiltEC.UID, rebuiltEC.Status = "uid-2", etcdfedv1.EtcdClusterStatus{}
	list := func(ec *etcdfedv1.EtcdCluster) *clusterSnapshot {
		t.Helper()
		cs := &clusterSnapshot{name: "member-1", engaged: true, registered: true, eligible: true, verdict: liveness.Verdict{Cluster: "member-1", State: liveness.Alive},
			members: map[string]*etcdfedv1.EtcdMember{}, zones: map[string]*etcdfedv1.EtcdDNSZone{}, secrets: map[string]*corev1.Secret{}}
		var err error
		if seeksTakeOver(ec) {
			err = listRing(ctx, c, ns, ec, cs)
		} else {
			err = listOwned(ctx, c, ns, ec.RingUID(), cs)
		}
		if err != nil {
			t.Fatal(err)
		}
		return cs
	}
	cs := list(rebuiltEC)
	if len(cs.members) != 0 || cs.foreign == nil || len(cs.foreign.members["uid-1"]) != 3 || len(cs.foreign.zones["uid-1"]) != 1 || len(cs.foreign.uids()) != 1 {
		t.Fatalf("listRing: own %d, foreign %v", len(cs.members), cs.foreign.uids())
	}
	s := &snapshot{ec: rebuiltEC, now: now, ringNamespace: ns, clusters: []*clusterSnapshot{cs}, byName: map[string]*clusterSnapshot{"member-1": cs}}
	f := findTakeOver(s)
	if f.phase != etcdfedv1.TakeOverTakingOver || f.ringUID != "uid-1" || f.clusterID != "c1" {
		t.Fatalf("finding %+v", f)
	}
	recordTakeOver(s, &rebuiltEC.Status, f)
	cs = list(rebuiltEC)
	if len(cs.members) != 3 || len(cs.zones) != 1 || cs.foreign != nil {
		t.Errorf("under the ring's UID: %d members, %d zones, foreign %v", len(cs.members), len(cs.zones), cs.foreign.uids())
	}
}
