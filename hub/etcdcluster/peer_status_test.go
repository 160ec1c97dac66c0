package etcdcluster

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	etcdfedv1 "github.com/etcdfed/etcdfed/api/v1alpha1"
	"github.com/etcdfed/etcdfed/hub/liveness"
	"github.com/etcdfed/etcdfed/hub/planner"
)

func withPeerCondition(s *snapshot, cluster, member string, status metav1.ConditionStatus, reason, msg string) {
	o := s.cluster(cluster).members[member]
	meta.SetStatusCondition(&o.Status.Conditions, metav1.Condition{Type: etcdfedv1.ConditionPeerConnections, Status: status, Reason: reason, Message: msg})
}

// A ring that cannot form explains itself: the causes the spokes found in
// etcd's logs lead Degraded (its reason is the most fundamental one) and
// are named in Progressing, grouped by cause with the members that show it.
func TestStatusNamesPeerConnectionCauses(t *testing.T) {
	s := ring()
	withPeerCondition(s, "member-1", "main-0", metav1.ConditionFalse, etcdfedv1.ReasonPeerCertificateNameMismatch, "san cause. Fix: skip it.")
	withPeerCondition(s, "member-2", "main-1", metav1.ConditionFalse, etcdfedv1.ReasonPeerCertificateNameMismatch, "second san message")
	withPeerCondition(s, "member-3", "main-2", metav1.ConditionFalse, etcdfedv1.ReasonClusterIDMismatch, "other cluster. Fix: new incarnation.")
	s.etcd = planner.Etcd{Error: "no answer within 2s"} // the members cannot reach each other
	st := computeStatus(s, decide(s), applyResult{}, "")

	deg := meta.FindStatusCondition(st.Conditions, etcdfedv1.ConditionDegraded)
	if deg == nil || deg.Status != metav1.ConditionTrue || deg.Reason != etcdfedv1.ReasonClusterIDMismatch {
		t.Fatalf("Degraded %+v, want True with reason %s", deg, etcdfedv1.ReasonClusterIDMismatch)
	}
	want := "ClusterIDMismatch on main-2 (member-3): other cluster. Fix: new incarnation.; PeerCertificateNameMismatch on main-0 (member-1), main-1 (member-2): san cause. Fix: skip it."
	if !strings.HasPrefix(deg.Message, want) {
		t.Errorf("Degraded message\n%s\nwant it to start with\n%s", deg.Message, want)
	}
	prog := meta.FindStatusCondition(st.Conditions, etcdfedv1.ConditionProgressing)
	if prog == nil || !strings.Contains(prog.Message, "; blocked: ClusterIDMismatch on main-2") {
		t.Errorf("Progressing %+v does not name the cause", prog)
	}

	// A cluster the hub cannot see is not believed; True conditions are
	// not problems.
	s = ring()
	withPeerCondition(s, "member-1", "main-0", metav1.ConditionTrue, etcdfedv1.ReasonPeersReady, "ready")
	withPeerCondition(s, "member-2", "main-1", metav1.ConditionFalse, etcdfedv1.ReasonPeerNameUnresolved, "dns")
	s.cluster("member-2").verdict.State = liveness.Unknown
	if reason, problems := peerConnectionProblems(s); reason != "" || len(problems) != 0 {
		t.Errorf("peer problems %q %v, want none", reason, problems)
	}
}
