package multicluster

import (
	"context"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"

	etcdfedv1 "github.com/etcdfed/etcdfed/api/v1alpha1"
)

// ZoneOfMultiZoneClusterKilledSpecInput is a ring over member clusters of
// several zones each, placed one member per zone.
type ZoneOfMultiZoneClusterKilledSpecInput struct {
	T        testing.TB
	Topology *Topology
	Etcd     *ManagedEtcd
	// NodeStaleAfter is the hub's --node-lease-stale-after and ZoneGrace
	// the ring's spec.failurePolicy.zoneGracePeriod: the control holds its
	// fault past both, with margin.
	NodeStaleAfter, ZoneGrace time.Duration
}

// ZoneOfMultiZoneClusterKilledSpec exercises the zone witness (the hub's
// two signals on a zone inside a visible member cluster) under a recorded
// workload, in two parts on one zone: the zone of a member cluster holding
// two members (so that the only free zone is in another cluster).
//
//  1. Control: only the zone's node Leases stop (its kubelets lost their
//     apiserver; the machines and the member run on). The hub must say
//     the zone is unknown in Degraded, and nothing may move past the node
//     staleness and the zone grace.
//  2. The zone is killed (its processes, its nodes NotReady; the cluster's
//     apiserver and spoke run on). Degraded must name the zone as failed
//     (JudgeZone's reason) with a ZoneFailed event, and after the zone
//     grace its member must be replaced under its name in the free zone
//     of the other cluster (Evacuating, MemberReplaced), the ring ending
//     with every member ready. The workload must stay linearizable with
//     no acknowledged write lost and complete watches.
func ZoneOfMultiZoneClusterKilledSpec(ctx context.Context, in ZoneOfMultiZoneClusterKilledSpecInput) {
	t := in.T
	t.Helper()
	topo := in.Topology
	if topo.FailZone == nil || topo.StopNodeLeases == nil {
		t.Skip("ZoneOfMultiZoneClusterKilledSpec: the topology cannot fail zones or stop node Leases")
	}
	hub := topo.Hub
	ec, err := in.Etcd.Get(ctx, hub)
	if err != nil {
		t.Fatal(err)
	}
	replicas := len(ec.Status.Members)
	perCluster := map[string]int{}
	for _, m := range ec.Status.Members {
		perCluster[m.Cluster]++
	}
	var victim etcdfedv1.MemberStatus
	for _, m := range ec.Status.Members {
		if perCluster[m.Cluster] > 1 && (victim.Name == "" || m.Name < victim.Name) {
			victim = m
		}
	}
	if victim.Name == "" || victim.Zone == "" {
		t.Fatalf("no member cluster holds two members in zones: %s", ec.Status.ZoneSummary)
	}
	zone := victim.Cluster + "/" + victim.Zone
	t.Logf("victim zone %s holds %s; placement %s", zone, victim.Name, ec.Status.ZoneSummary)
	w := startScenarioWorkload(ctx, t, in.Etcd, "zone-witness")

	// 1. Control: the node Leases only.
	if err := topo.StopNodeLeases(victim.Cluster, victim.Zone, true); err != nil {
		t.Fatal(err)
	}
	resumed := false
	t.Cleanup(func() {
		if !resumed {
			_ = topo.StopNodeLeases(victim.Cluster, victim.Zone, false)
		}
	})
	start := time.Now()
	if _, err := WaitForDegradedSays(ctx, hub, in.Etcd, "zone "+zone+" unknown", 2*time.Minute); err != nil {
		t.Fatal(err)
	}
	t.Logf("control: Degraded says %s is unknown %.1fs after its node Leases stopped", zone, time.Since(start).Seconds())
	hold := in.NodeStaleAfter + in.ZoneGrace + 15*time.Second
	hctx, cancel := context.WithTimeout(ctx, hold)
	moved := nothingMoves(hctx, hub, in.Etcd, incarnations(ec), nil)
	cancel()
	if moved != "" {
		t.Fatalf("control: only the node Leases of %s stopped, and the hub moved a member: %s", zone, moved)
	}
	if c, err := degraded(ctx, hub, in.Etcd); err == nil && strings.Contains(c, "zone "+zone+" failed") {
		t.Errorf("control: Degraded calls %s failed on one signal: %s", zone, c)
	}
	t.Logf("control: nothing moved for %s with the node Leases of %s stopped", hold, zone)
	resumed = true
	if err := topo.StopNodeLeases(victim.Cluster, victim.Zone, false); err != nil {
		t.Fatal(err)
	}
	err = WaitForDegradedClear(ctx, hub, in.Etcd, "zone "+zone, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	progress(ctx, t, w, 50, 30*time.Second)

	// 2. The zone killed.
	start = time.Now()
	if err := topo.FailZone(ctx, victim.Zone, "kill"); err != nil {
		t.Fatal(err)
	}
	restored := false
	t.Cleanup(func() {
		if !restored {
			_ = topo.RestoreZone(context.Background(), victim.Zone)
		}
	})
	named, err := WaitForDegradedSays(ctx, hub, in.Etcd, "zone "+zone, 2*time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	detected := time.Since(start)
	t.Logf("Degraded named %s %.1fs after the kill: %s", zone, detected.Seconds(), named)
	failed, err := WaitForDegradedSays(ctx, hub, in.Etcd, "zone "+zone+" failed", in.ZoneGrace+2*time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	graceEnd := time.Since(start)
	t.Logf("Degraded says %s failed %.1fs after the kill (zone grace %s): %s", zone, graceEnd.Seconds(), in.ZoneGrace, failed)
	if note, err := waitForHubEventNote(ctx, hub, in.Etcd, etcdfedv1.EventZoneFailed, zone); err != nil {
		t.Error(err)
	} else {
		t.Logf("event %s: %s", etcdfedv1.EventZoneFailed, note)
	}
	progress(ctx, t, w, 100, time.Minute)
	got, err := WaitForReplaced(ctx, WaitForReplacedInput{Hub: hub, Etcd: in.Etcd, Old: victim, Replicas: replicas, NotIn: victim.Cluster, Timeout: 4 * time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	replaced := time.Since(start)
	t.Logf("%s replaced in %s/%s %.1fs after the kill, %.1fs after the zone was declared failed (replacement promoted and the ring ready)",
		victim.Name, got.Cluster, got.Zone, replaced.Seconds(), (replaced - graceEnd).Seconds())
	if got.Zone == victim.Zone {
		t.Errorf("%s replaced in its failed zone %s", victim.Name, victim.Zone)
	}
	checkRecordFollows(ctx, t, topo, in.Etcd, got)
	if note, err := waitForHubEventNote(ctx, hub, in.Etcd, etcdfedv1.EventEvacuating, victim.Name, zone); err != nil {
		t.Error(err)
	} else {
		t.Logf("event %s: %s", etcdfedv1.EventEvacuating, note)
	}
	if _, err := waitForHubEventNote(ctx, hub, in.Etcd, etcdfedv1.EventMemberReplaced, victim.Name); err != nil {
		t.Error(err)
	}
	progress(ctx, t, w, 50, 30*time.Second)
	w.Stop()
	t.Logf("longest gap between acknowledged writes: %s", w.MaxWriteGap().Round(time.Millisecond))
	checkWorkload(ctx, t, w)

	restored = true
	if err := topo.RestoreZone(ctx, victim.Zone); err != nil {
		t.Fatal(err)
	}
	final, err := WaitForEtcdClusterReady(ctx, WaitForEtcdClusterInput{Hub: hub, Namespace: in.Etcd.Namespace, Name: in.Etcd.Name, Replicas: replicas, Tolerant: true, Timeout: 4 * time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("zone %s returned: every member ready, placement %s", zone, final.Status.ZoneSummary)
}

// degraded is the EtcdCluster's Degraded message ("" when not degraded).
func degraded(ctx context.Context, hub *Cluster, m *ManagedEtcd) (string, error) {
	ec, err := m.Get(ctx, hub)
	if err != nil {
		return "", err
	}
	c := meta.FindStatusCondition(ec.Status.Conditions, etcdfedv1.ConditionDegraded)
	if c == nil || c.Status != "True" {
		return "", nil
	}
	return c.Message, nil
}
