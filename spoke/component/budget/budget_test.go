package budget

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	etcdfedv1 "github.com/etcdfed/etcdfed/api/v1alpha1"
)

func member(allowed bool) *etcdfedv1.EtcdMember {
	m := &etcdfedv1.EtcdMember{ObjectMeta: metav1.ObjectMeta{Name: "main-1", Namespace: "ring"},
		Spec: etcdfedv1.EtcdMemberSpec{Cluster: etcdfedv1.ClusterReference{Name: "main", UID: "uid"}, Incarnation: 2}}
	if allowed {
		m.Spec.Disruption = &etcdfedv1.MemberDisruption{Allowed: true}
	}
	return m
}

func TestDecide(t *testing.T) {
	closed := Build(member(false))
	if closed.Spec.MinAvailable.IntVal != 1 || closed.Spec.MaxUnavailable != nil {
		t.Fatalf("default budget %+v, want minAvailable 1", closed.Spec)
	}
	if d := Decide(member(false), nil); d.Action != Create {
		t.Fatalf("no budget: %s", d.Action)
	}
	if d := Decide(member(false), closed); d.Action != Keep {
		t.Fatalf("current budget: %s", d.Action)
	}
	d := Decide(member(true), closed)
	if d.Action != Update || d.Object.Spec.MinAvailable.IntVal != 0 {
		t.Fatalf("granted: %s %+v", d.Action, d.Object)
	}
	// A policy set by someone else is put back, and the update is then
	// what the member wants: the next pass keeps it.
	policy := closed.DeepCopy()
	always := policyv1.AlwaysAllow
	policy.Spec.UnhealthyPodEvictionPolicy = &always
	if d := Decide(member(false), policy); d.Action != Update {
		t.Fatalf("eviction policy changed by hand: %s", d.Action)
	} else if again := Decide(member(false), d.Object); again.Action != Keep {
		t.Fatalf("after the update of the eviction policy: %s, want Keep (every pass would write it again)", again.Action)
	}
	foreign := closed.DeepCopy()
	foreign.Labels = nil
	if d := Decide(member(false), foreign); d.Action != Conflict {
		t.Fatalf("another's budget: %s", d.Action)
	}
	if ok, _ := Requested(&corev1.Node{Spec: corev1.NodeSpec{Unschedulable: true}}); !ok {
		t.Fatal("a cordoned node asks for a disruption")
	}
	if ok, _ := Requested(&corev1.Node{}); ok {
		t.Fatal("a schedulable node asks for nothing")
	}
}
