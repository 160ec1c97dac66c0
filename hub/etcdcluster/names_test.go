package etcdcluster

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	etcdfedv1 "github.com/etcdfed/etcdfed/api/v1alpha1"
	"github.com/etcdfed/etcdfed/hub/pki"
	"github.com/etcdfed/etcdfed/hub/planner"
)

// legacyRing is ring() as a hub before the naming scheme wrote it: every
// EtcdMember named after its member, its certificate Secret "<member>-tls",
// the EtcdDNSZone named after the ring and serving the current records.
func legacyRing(t *testing.T) *snapshot {
	t.Helper()
	s := ring()
	for _, cs := range s.clusters {
		for name, obj := range cs.members {
			obj.Name = name
		}
	}
	withTLS(t, s)
	for _, cs := range s.clusters {
		for name, obj := range cs.members {
			obj.Spec = desiredMember(s, &s.ec.Status, statusMember(&s.ec.Status, name), obj).Spec
			obj.Spec.Bootstrap = &etcdfedv1.BootstrapSpec{InitialCluster: "main-0=x", InitialClusterState: etcdfedv1.InitialClusterExisting, Token: "uid-1", ClusterID: "c1"}
		}
	}
	d := decide(s)
	for _, cs := range s.clusters {
		z := desiredZone(s, cs, d.dns.records)
		z.Name = s.ec.Name
		cs.zones[z.Name] = z
	}
	return s
}

// TestObjectsOfSameNamedRingsDiffer: two EtcdClusters named alike in two
// namespaces write no object of the same name in a member cluster (before
// the scheme, both wrote EtcdMember main-0, Secret main-0-tls and
// EtcdDNSZone main, and the second never formed).
func TestObjectsOfSameNamedRingsDiffer(t *testing.T) {
	a, b := ring(), ring()
	b.ec.Namespace, b.ec.UID = "team-b", "uid-2"
	names := func(s *snapshot) []string {
		cs := s.clusters[0]
		m := desiredMember(s, &s.ec.Status, statusMember(&s.ec.Status, "main-0"), nil)
		return []string{m.Name, m.Spec.TLS.SecretName, pki.MemberSecretName(memberObjectName(s.ec, nil, "main-0")),
			StoreCredentialsSecretName(memberObjectName(s.ec, nil, "main-0")), desiredZone(s, &clusterSnapshot{name: cs.name}, nil).Name}
	}
	withTLS(t, a)
	withTLS(t, b)
	seen := map[string]bool{}
	for _, n := range names(a) {
		seen[n] = true
	}
	for _, n := range names(b) {
		if seen[n] {
			t.Errorf("default/main and team-b/main both write %q", n)
		}
	}
	if got, want := names(a)[0], etcdfedv1.MemberObjectName("default", "main", "main-0"); got != want {
		t.Errorf("EtcdMember of default/main main-0 named %q, want %q", got, want)
	}
}

// TestRingWrittenBeforeTheSchemeIsKeptAsItIs: a ring whose objects are
// named the old way is adopted by its labels; a pass at rest writes
// nothing (a renamed EtcdMember, or another certificate Secret name in its
// spec, would restart its member), and only a new object takes the new
// name.
func TestRingWrittenBeforeTheSchemeIsKeptAsItIs(t *testing.T) {
	s := legacyRing(t)
	d := decide(s)
	if d.plan.Action != planner.ActNone || len(d.step.writes)+len(d.updates)+len(d.sweep)+len(d.certs) != 0 || !d.upkeepIdle(s) {
		t.Fatalf("plan %s (%s), %d writes, %d updates, %d sweeps, %d certs, upkeep idle %v; want nothing written",
			d.plan.Action, d.plan.Reason, len(d.step.writes), len(d.updates), len(d.sweep), len(d.certs), d.upkeepIdle(s))
	}
	for _, cs := range s.clusters {
		for name, obj := range cs.members {
			want := desiredMember(s, d.ledger, statusMember(d.ledger, name), obj)
			if want.Name != name || want.Spec.TLS.SecretName != name+"-tls" {
				t.Errorf("%s: rendered as %s with Secret %s; want the old names kept", name, want.Name, want.Spec.TLS.SecretName)
			}
			if restarts(obj, want) {
				t.Errorf("%s: the rendered object would restart the member", name)
			}
		}
		if z := desiredZone(s, cs, d.dns.records); z.Name != "main" {
			t.Errorf("zone in %s rendered as %s, want the old main kept", cs.name, z.Name)
		}
	}

	// A member added to the ring gets the scheme's names, beside the old.
	s.ec.Spec.Replicas = 5
	s.ec.Status.Members = append(s.ec.Status.Members, etcdfedv1.MemberStatus{Name: "main-3", Cluster: "member-1", Zone: "zone-1", Incarnation: 4})
	s.ec.Status.LastIncarnation = 4
	op := etcdfedv1.MembershipOperation{Type: etcdfedv1.OperationAdd, Member: "main-3", Incarnation: 4,
		To: &etcdfedv1.FailureDomain{Cluster: "member-1", Zone: "zone-1"}, Step: string(planner.ActCreateObjects), StartedAt: metav1.NewTime(now)}
	s.ec.Status.Operation = &op
	d = decide(s)
	if len(d.step.writes) != 1 {
		t.Fatalf("plan %s (%s): %d writes, want main-3's object", d.plan.Action, d.plan.Reason, len(d.step.writes))
	}
	w := d.step.writes[0]
	scoped := etcdfedv1.MemberObjectName("default", "main", "main-3")
	if w.want.Name != scoped || w.want.Spec.TLS.SecretName != scoped+"-tls" || !w.cert {
		t.Errorf("main-3 written as %s with Secret %s (certificate first: %v); want %s", w.want.Name, w.want.Spec.TLS.SecretName, w.cert, scoped)
	}
}
