package multicluster

import (
	"context"
	"fmt"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	etcdfedv1 "github.com/etcdfed/etcdfed/api/v1alpha1"
)

// LeaderPlacementSpecInput is a ring whose spec.leader prefers the zone
// of PreferredCluster (a single-zone member cluster, Zone).
type LeaderPlacementSpecInput struct {
	T                testing.TB
	Topology         *Topology
	Etcd             *ManagedEtcd
	PreferredCluster string
	Zone             string
	// WantZones is the placement once the zone is back.
	WantZones string
}

// LeaderPlacementSpec: under the recorded workload, the placement keeps
// two voters in the preferred zone; leadership moved out of it is moved
// back by the hub (a MoveLeader operation, event LeaderPlaced); the
// preferred zone killed (a failover, then its members evacuated) and
// restored -> the leader is back there; nothing acknowledged is lost.
func LeaderPlacementSpec(ctx context.Context, in LeaderPlacementSpecInput) {
	t := in.T
	t.Helper()
	topo, hub := in.Topology, in.Topology.Hub
	if topo.FailZone == nil {
		t.Skip("LeaderPlacementSpec: the topology cannot fail zones")
	}
	ec, err := in.Etcd.Get(ctx, hub)
	if err != nil {
		t.Fatal(err)
	}
	replicas := len(ec.Status.Members)
	if n := membersIn(ec, in.PreferredCluster); n != 2 {
		t.Errorf("the preferred zone %s holds %d members (%s), want 2 of the 2/2/1", in.Zone, n, ec.Status.ZoneSummary)
	}
	inPreferred := func(ec *etcdfedv1.EtcdCluster) string {
		lp := ec.Status.LeaderPlacement
		switch {
		case lp == nil:
			return "no status.leaderPlacement"
		case lp.Cluster != in.PreferredCluster || lp.Zone != in.Zone || !lp.InPlace:
			return fmt.Sprintf("leader %s in %s/%s, in place %v: %s: %s", lp.Leader, lp.Cluster, lp.Zone, lp.InPlace, lp.Reason, lp.Message)
		case ec.Status.Leader != lp.Leader:
			return fmt.Sprintf("status.leader %s, leaderPlacement.leader %s", ec.Status.Leader, lp.Leader)
		}
		return ""
	}
	w := startScenarioWorkload(ctx, t, in.Etcd, "leader-placement")

	// Leadership out of the preferred zone: the hub brings it back.
	other := ""
	for _, m := range ec.Status.Members {
		if m.Cluster != in.PreferredCluster && (other == "" || m.Cluster < other) {
			other = m.Cluster
		}
	}
	start := time.Now()
	ec = moveLeaderInto(ctx, t, topo, in.Etcd, ec, other)
	t.Logf("moved leadership by hand to %s in %s", ec.Status.Leader, other)
	if err := WaitForStatus(ctx, WaitForStatusInput{Hub: hub, Etcd: in.Etcd, What: "the leader back in " + in.Zone, Timeout: 2 * time.Minute, Until: inPreferred}); err != nil {
		t.Fatal(err)
	}
	note, err := waitForHubEventNote(ctx, hub, in.Etcd, etcdfedv1.EventLeaderPlaced)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("leader back in %s %.1fs after it was moved out: %s", in.Zone, time.Since(start).Seconds(), note)
	progress(ctx, t, w, 50, 30*time.Second)

	// A planned stop of the leader (its pod deleted: SIGTERM with the
	// pod's grace): the write gap it costs, and leadership back in the
	// preferred zone afterwards.
	leaderPodDeleted(ctx, t, in, inPreferred)

	// The preferred zone killed: a failover elsewhere, its members
	// evacuated; nothing may lead there meanwhile.
	start = time.Now()
	if err := topo.FailZone(ctx, in.PreferredCluster, "kill"); err != nil {
		t.Fatal(err)
	}
	restored := false
	t.Cleanup(func() {
		if !restored {
			_ = topo.RestoreZone(context.Background(), in.PreferredCluster)
		}
	})
	progress(ctx, t, w, 100, time.Minute)
	err = WaitForStatus(ctx, WaitForStatusInput{Hub: hub, Etcd: in.Etcd, What: "every member moved out of " + in.PreferredCluster, Timeout: 6 * time.Minute, Until: func(ec *etcdfedv1.EtcdCluster) string {
		return evacuated(ec, in.PreferredCluster, replicas, func(m etcdfedv1.MemberStatus) bool { return m.Cluster == in.PreferredCluster })
	}})
	if err != nil {
		t.Fatal(err)
	}
	ec, _ = in.Etcd.Get(ctx, hub)
	t.Logf("%s evacuated %.1fs after the kill: placement %s, leader %s; leader placement: %+v", in.PreferredCluster, time.Since(start).Seconds(), ec.Status.ZoneSummary, ec.Status.Leader, ec.Status.LeaderPlacement)
	if lp := ec.Status.LeaderPlacement; lp == nil || lp.Reason != etcdfedv1.LeaderReasonNoCandidate {
		t.Errorf("leader placement with the preferred zone gone: %+v, want %s", lp, etcdfedv1.LeaderReasonNoCandidate)
	}
	progress(ctx, t, w, 50, 30*time.Second)

	// Restored: members move back, then the leader.
	start = time.Now()
	restored = true
	if err := topo.RestoreZone(ctx, in.PreferredCluster); err != nil {
		t.Fatal(err)
	}
	got, err := WaitForEtcdClusterReady(ctx, WaitForEtcdClusterInput{Hub: hub, Namespace: in.Etcd.Namespace, Name: in.Etcd.Name, Replicas: replicas, Tolerant: true, Timeout: 6 * time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%s returned: tolerant again after %.1fs, placement %s", in.PreferredCluster, time.Since(start).Seconds(), got.Status.ZoneSummary)
	if z := ZoneCounts(got); z != in.WantZones {
		t.Errorf("placement after the return %s, want %s", z, in.WantZones)
	}
	if err := WaitForStatus(ctx, WaitForStatusInput{Hub: hub, Etcd: in.Etcd, What: "the leader back in " + in.Zone + " after its return", Timeout: 2 * time.Minute, Until: inPreferred}); err != nil {
		t.Fatal(err)
	}
	got, _ = in.Etcd.Get(ctx, hub)
	t.Logf("leader %s back in %s %.1fs after the return; %d moves for spec.leader", got.Status.Leader, in.Zone, time.Since(start).Seconds(), got.Status.LeaderPlacement.Moves)
	progress(ctx, t, w, 50, 30*time.Second)
	w.Stop()
	gap, at := w.MaxWriteGapAt()
	t.Logf("longest gap between acknowledged writes: %s at %s", gap.Round(time.Millisecond), at.Format(time.TimeOnly))
	checkWorkload(ctx, t, w)
}

func membersIn(ec *etcdfedv1.EtcdCluster, cluster string) int {
	n := 0
	for _, m := range ec.Status.Members {
		if m.Cluster == cluster {
			n++
		}
	}
	return n
}

// leaderPodDeleted deletes the leader's pod under a workload of its own
// and logs the longest write gap around it; the leader must be back in
// the preferred zone once the pod is back.
func leaderPodDeleted(ctx context.Context, t testing.TB, in LeaderPlacementSpecInput, inPreferred func(*etcdfedv1.EtcdCluster) string) {
	t.Helper()
	hub := in.Topology.Hub
	ec, err := in.Etcd.Get(ctx, hub)
	if err != nil {
		t.Fatal(err)
	}
	leader := ec.Status.Leader
	var cl *Cluster
	for _, m := range ec.Status.Members {
		for _, c := range in.Topology.Members {
			if m.Name == leader && c.Name == m.Cluster {
				cl = c
			}
		}
	}
	if cl == nil {
		t.Fatalf("leader %q in no member cluster of the topology", leader)
	}
	w := startScenarioWorkload(ctx, t, in.Etcd, "leader-pod-deleted")
	podName := in.Etcd.ObjectName(leader)
	pods := cl.Clientset.CoreV1().Pods(etcdfedv1.DefaultRingNamespace)
	pod, err := pods.Get(ctx, podName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if err := pods.Delete(ctx, podName, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	// etcd's own shutdown (SIGTERM) hands leadership to the voter it is
	// best connected to; the hub reports whom.
	err = WaitForStatus(ctx, WaitForStatusInput{Hub: hub, Etcd: in.Etcd, What: "a leader other than " + leader, Timeout: time.Minute, Until: func(ec *etcdfedv1.EtcdCluster) string {
		if ec.Status.Leader == leader || ec.Status.Leader == "" {
			return "leader " + orNone(ec.Status.Leader)
		}
		return ""
	}})
	if err != nil {
		t.Fatal(err)
	}
	if ec, err := in.Etcd.Get(ctx, hub); err == nil {
		t.Logf("%s's pod deleted: %s leads %.1fs later (as the hub saw it)", leader, ec.Status.Leader, time.Since(start).Seconds())
	}
	if _, err := WaitForPodReplaced(ctx, WaitForPodInput{Cluster: cl, Namespace: etcdfedv1.DefaultRingNamespace, Name: podName}, pod.UID); err != nil {
		t.Fatal(err)
	}
	if err := WaitForStatus(ctx, WaitForStatusInput{Hub: hub, Etcd: in.Etcd, What: "the leader in " + in.Zone + " after its pod was deleted", Timeout: 2 * time.Minute, Until: inPreferred}); err != nil {
		t.Fatal(err)
	}
	got, _ := in.Etcd.Get(ctx, hub)
	progress(ctx, t, w, 50, 30*time.Second)
	w.Stop()
	gap, at := w.MaxWriteGapAt()
	t.Logf("leader %s's pod deleted: pod back and %s leading in %s %.1fs later; longest write gap %s, began %.2fs after the deletion",
		leader, got.Status.Leader, in.Zone, time.Since(start).Seconds(), gap.Round(time.Millisecond), at.Sub(start).Seconds())
	for _, f := range w.Failures() {
		t.Logf("failed %.2fs after the deletion: %s", f.Call.Sub(start).Seconds(), f)
	}
	checkWorkload(ctx, t, w)
}

func orNone(s string) string {
	if s == "" {
		return "(none)"
	}
	return s
}
