package multicluster

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdfedv1 "github.com/etcdfed/etcdfed/api/v1alpha1"
	"github.com/etcdfed/etcdfed/dev/localenv"
)

// HubWithMinoritySpecInput partitions a 5-member ring placed 2/2/1 so
// that the hub is left with the cluster of one member.
type HubWithMinoritySpecInput struct {
	T        testing.TB
	Topology *Topology
	Etcd     *ManagedEtcd
	// Hold is how long the cut lasts: longer than every grace of the ring.
	Hold time.Duration
}

// HubWithMinoritySpec cuts the network between {the hub, the member
// cluster holding one member} and {the two clusters holding two each},
// with etcd's leader moved to the majority first, for Hold, under a
// recorded workload that writes through the majority's DNS names,
// resolved by the majority clusters' own DNS servers (a client inside
// them). The majority must keep serving, the hub must never force a new
// cluster (no Recover, no spec.forceNewCluster, no QuorumRecovery event,
// etcd's member list unchanged), and Degraded must say the hub sees only a
// minority. After the heal the ring must be one ring of the same five
// members (one cluster ID, the same IDs from every endpoint), ready and
// tolerant, and the workload linearizable with nothing acknowledged lost
// and every watch complete.
//
// A failure to keep the ring whole is reported (t.Error) and the scenario
// goes on to the heal and the workload's check, so that a run on a hub
// that forced shows what was lost.
func HubWithMinoritySpec(ctx context.Context, in HubWithMinoritySpecInput) {
	t := in.T
	t.Helper()
	topo, hub := in.Topology, in.Topology.Hub
	if topo.Partition == nil || topo.DNSServerOf == nil {
		t.Skip("HubWithMinoritySpec: the topology cannot partition, or does not name each cluster's DNS server")
	}
	ec, want, ids := ringBefore(ctx, t, hub, in.Etcd)
	count := membersPerCluster(ec)
	var minority string
	var majority []string
	for c, n := range count {
		if n == 1 {
			minority = c
		} else {
			majority = append(majority, c)
		}
	}
	sort.Strings(majority)
	if minority == "" || len(majority) != 2 {
		t.Fatalf("want a 2/2/1 ring over three clusters, have %v", count)
	}
	clusterID := ec.Status.ClusterID

	// A client inside the majority: its members' names, resolved by the
	// majority clusters' own DNS servers.
	inside := in.Etcd.Client
	inside.Endpoints, inside.DNSServers = nil, nil
	for _, m := range ec.Status.Members {
		if m.Cluster != minority {
			inside.Endpoints = append(inside.Endpoints, memberURLOf(in.Etcd, m.Name))
		}
	}
	for _, c := range majority {
		inside.DNSServers = append(inside.DNSServers, topo.DNSServerOf[c])
	}
	w := StartWorkload(ctx, t, StartWorkloadInput{Client: inside, Prefix: fmt.Sprintf("hub-minority-%d/", time.Now().UnixNano()), WatchEachEndpoint: true})
	progress(ctx, t, w, 50, 30*time.Second)
	ec = moveLeaderInto(ctx, t, topo, in.Etcd, ec, majority[0])

	groups := [][]string{{localenv.HubClusterName, minority}, majority}
	if err := topo.Partition(ctx, localenv.Partition{Groups: groups}); err != nil {
		t.Fatal(err)
	}
	cut := time.Now()
	healed := false
	t.Cleanup(func() {
		if !healed {
			_ = topo.HealPartition(context.Background())
		}
	})
	t.Logf("partitioned: {%s} | {%s} for %s; the leader %s is in %s", strings.Join(groups[0], ", "), strings.Join(groups[1], ", "), in.Hold, ec.Status.Leader, majority[0])

	// Through the hold: what the hub says, and whether it forces.
	hctx, cancel := context.WithTimeout(ctx, in.Hold)
	defer cancel()
	var mu sync.Mutex
	var degradedAt time.Duration
	var degraded, forced string
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for hctx.Err() == nil {
			gctx, gcancel := context.WithTimeout(hctx, 2*time.Second)
			got, err := in.Etcd.Get(gctx, hub)
			gcancel()
			if err == nil {
				mu.Lock()
				if c := meta.FindStatusCondition(got.Status.Conditions, etcdfedv1.ConditionDegraded); degraded == "" && c != nil && c.Status == metav1.ConditionTrue &&
					strings.Contains(c.Message, "sees only") && strings.Contains(c.Message, majority[0]) && strings.Contains(c.Message, majority[1]) {
					degraded, degradedAt = c.Message, time.Since(cut)
				}
				if op := got.Status.Operation; forced == "" && op != nil && op.Type == etcdfedv1.OperationRecover {
					forced = fmt.Sprintf("Recover from %s (%s) %.1fs after the cut", op.Member, op.Reason, time.Since(cut).Seconds())
				}
				mu.Unlock()
			}
			if obj := forcedObject(hctx, topo, minority, ec); obj != "" {
				mu.Lock()
				if forced == "" {
					forced = fmt.Sprintf("%s %.1fs after the cut", obj, time.Since(cut).Seconds())
				}
				mu.Unlock()
			}
			sleepCtx(hctx, 500*time.Millisecond)
		}
	}()
	// The majority keeps serving: writes acknowledged through the hold.
	ackedAtCut := w.Acked()
	_ = HoldFor(hctx, in.Hold-time.Since(cut), 5*time.Second, func(context.Context) error {
		progress(ctx, t, w, 20, 30*time.Second)
		return nil
	})
	wg.Wait()
	duringHold := w.Acked() - ackedAtCut
	gapHold, gapAt := w.MaxWriteGapAt()
	t.Logf("through the %s cut: %d writes acknowledged by the majority; longest write gap so far %s (at %s)", in.Hold, duringHold, gapHold.Round(time.Millisecond), gapAt.Format(time.TimeOnly))
	if forced != "" {
		t.Errorf("the hub with the minority forced a new cluster: %s", forced)
	}
	if notes, err := HubEventNotes(ctx, hub, in.Etcd, EventQuery{Reasons: []string{"QuorumRecovery"}}); err != nil || len(notes) > 0 {
		t.Errorf("QuorumRecovery events (the hub recovered a ring whose majority serves): %v %v", notes, err)
	}
	if degraded == "" {
		got, _ := in.Etcd.Get(ctx, hub)
		t.Errorf("Degraded never said the hub sees only a minority (naming %v): %s", majority, conditionText(got, etcdfedv1.ConditionDegraded))
	} else {
		t.Logf("Degraded %.1fs after the cut: %s", degradedAt.Seconds(), degraded)
	}
	if got, err := memberIDs(ctx, inside); err != nil || fmt.Sprint(got) != fmt.Sprint(ids) {
		t.Errorf("the majority's member list during the cut: %v (%v), was %v", got, err, ids)
	}

	if err := topo.HealPartition(ctx); err != nil {
		t.Fatal(err)
	}
	healed = true
	heal := time.Now()
	got, err := WaitForEtcdClusterReady(ctx, WaitForEtcdClusterInput{Hub: hub, Namespace: in.Etcd.Namespace, Name: in.Etcd.Name, Replicas: len(want), Tolerant: true, Timeout: 5 * time.Minute})
	if err != nil {
		t.Error(err)
	} else {
		t.Logf("after the heal: ready and tolerant in %.1fs, %s", time.Since(heal).Seconds(), got.Status.ZoneSummary)
		if got.Status.ClusterID != clusterID || fmt.Sprint(incarnations(got)) != fmt.Sprint(want) {
			t.Errorf("after the heal: cluster %s members %v, were %s %v", got.Status.ClusterID, incarnations(got), clusterID, want)
		}
	}
	if err := oneRing(ctx, in.Etcd, clusterID, nil); err != nil {
		t.Error(err)
	}
	if err := WaitForSameMembersEverywhere(ctx, in.Etcd, ids); err != nil {
		t.Error(err)
	}
	progress(ctx, t, w, 50, time.Minute)
	w.Stop()
	gap, at := w.MaxWriteGapAt()
	t.Logf("workload: %d writes acknowledged in all, longest gap %s (at %s)", w.Acked(), gap.Round(time.Millisecond), at.Format(time.TimeOnly))
	checkWorkload(ctx, t, w)
}

// memberURLOf is a member's client URL by DNS name, as in m.Client.
func memberURLOf(m *ManagedEtcd, member string) string {
	for _, ep := range m.Client.Endpoints {
		if strings.Contains(ep, "//"+member+".") {
			return ep
		}
	}
	return ""
}

// forcedObject names a member object of ec in cluster with
// spec.forceNewCluster set ("" for none), read from the cluster's own
// apiserver.
func forcedObject(ctx context.Context, topo *Topology, cluster string, ec *etcdfedv1.EtcdCluster) string {
	c := clusterNamed(topo, cluster)
	if c == nil {
		return ""
	}
	var list etcdfedv1.EtcdMemberList
	lctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	if err := c.Client.List(lctx, &list, client.InNamespace(etcdfedv1.DefaultRingNamespace), client.MatchingLabels{etcdfedv1.LabelClusterUID: string(ec.UID)}); err != nil {
		return ""
	}
	for _, o := range list.Items {
		if o.Spec.ForceNewCluster != "" {
			return fmt.Sprintf("%s in %s with spec.forceNewCluster %q", o.Name, cluster, o.Spec.ForceNewCluster)
		}
	}
	return ""
}

// WaitForSameMembersEverywhere waits up to a minute for every member
// endpoint to answer a linearizable member list, and fails at once on one
// that names other members than ids (name -> ID): a second ring, or a
// member that joined or left. A member that has just come back may take a
// moment to answer; that is not a split.
func WaitForSameMembersEverywhere(ctx context.Context, m *ManagedEtcd, ids map[string]string) error {
	var split error
	err := poll(ctx, time.Minute, "every member to answer with the same member list", func(ctx context.Context) (string, error) {
		var waiting []string
		for _, ep := range m.Client.Endpoints {
			got, err := memberIDs(ctx, m.Client.Endpoint(ep))
			if err != nil {
				waiting = append(waiting, fmt.Sprintf("%s: %v", ep, err))
				continue
			}
			if fmt.Sprint(got) != fmt.Sprint(ids) {
				split = fmt.Errorf("%s lists %v, want %v", ep, got, ids)
				return "", nil // stop: that is a failure already
			}
		}
		slices.Sort(waiting)
		return strings.Join(waiting, "; "), nil
	})
	if split != nil {
		return split
	}
	return err
}

// conditionText is a condition as "Status Reason: Message".
func conditionText(ec *etcdfedv1.EtcdCluster, typ string) string {
	if ec == nil {
		return "(no EtcdCluster)"
	}
	c := meta.FindStatusCondition(ec.Status.Conditions, typ)
	if c == nil {
		return "(no " + typ + ")"
	}
	return fmt.Sprintf("%s %s: %s", c.Status, c.Reason, c.Message)
}

// GossipBrokenSpecInput breaks one spoke's gossip and cuts the hub off
// from the ring's other cluster.
type GossipBrokenSpecInput struct {
	T        testing.TB
	Topology *Topology
	// Etcd is a ring placed on two member clusters only
	// (spec.topology.clusters), two members in one, one in the other.
	Etcd *ManagedEtcd
	// Hold is how long the cut lasts: longer than every grace.
	Hold time.Duration
}

// GossipBrokenSpec restarts the spoke of the cluster holding two of the
// ring's three members with a gossip Secret that does not exist (the key
// missing: its gossip does not start), then cuts the network between {the
// hub, that cluster} and {the ring's other cluster, the third member
// cluster, outside the ring}, for Hold, under a recorded workload. The
// spoke must say GossipHealthy=False, and the hub must count it as
// abstaining: the other cluster is unknown, not failed, and nothing is
// evacuated (no operation, etcd's member list unchanged), while Degraded
// names the abstaining spoke. (A spoke without its key used to report
// every peer dead, and with the hub seeing only that spoke it was the
// majority of the witnesses: the other cluster was declared failed and
// its member evacuated.) After the heal and the key's return the ring is
// ready with the same members, and the workload linearizable.
func GossipBrokenSpec(ctx context.Context, in GossipBrokenSpecInput) {
	t := in.T
	t.Helper()
	topo, hub := in.Topology, in.Topology.Hub
	if topo.Partition == nil || topo.RestartSpokeWith == nil {
		t.Skip("GossipBrokenSpec: the topology cannot partition or restart a spoke with other flags")
	}
	ec, want, ids := ringBefore(ctx, t, hub, in.Etcd)
	count := membersPerCluster(ec)
	var broken, other string
	for c, n := range count {
		if n == 2 {
			broken = c
		} else {
			other = c
		}
	}
	if broken == "" || other == "" || len(count) != 2 {
		t.Fatalf("want a ring of 3 over two clusters (2/1), have %v", count)
	}
	var outside []string
	for _, c := range topo.Members {
		if c.Name != broken && c.Name != other {
			outside = append(outside, c.Name)
		}
	}
	w := startScenarioWorkload(ctx, t, in.Etcd, "gossip-broken")

	// The spoke's gossip key Secret is missing: its gossip does not start.
	if err := topo.RestartSpokeWith(ctx, broken, "--gossip-secret=etcdfed-gossip-missing"); err != nil {
		t.Fatal(err)
	}
	restored := false
	defer func() {
		if !restored {
			_ = topo.RestartSpokeWith(context.Background(), broken)
		}
	}()
	var why string
	if err := WaitForSpoke(ctx, clusterNamed(topo, broken), "GossipHealthy=False "+etcdfedv1.ReasonGossipNotRunning+" and no gossip view", 2*time.Minute, func(sp *etcdfedv1.EtcdSpoke) string {
		c := meta.FindStatusCondition(sp.Status.Conditions, etcdfedv1.ConditionGossipHealthy)
		if c == nil || c.Status != metav1.ConditionFalse || c.Reason != etcdfedv1.ReasonGossipNotRunning || len(sp.Status.GossipView) > 0 {
			return fmt.Sprintf("GossipHealthy %v, view %v", c, sp.Status.GossipView)
		}
		why = c.Message
		return ""
	}); err != nil {
		t.Fatal(err)
	}
	t.Logf("the spoke of %s, restarted with a gossip Secret that does not exist: GossipHealthy=False: %s", broken, why)

	groups := [][]string{{localenv.HubClusterName, broken}, append([]string{other}, outside...)}
	if err := topo.Partition(ctx, localenv.Partition{Groups: groups}); err != nil {
		t.Fatal(err)
	}
	cut := time.Now()
	healed := false
	defer func() {
		if !healed {
			_ = topo.HealPartition(context.Background())
		}
	}()
	t.Logf("partitioned: {%s} | {%s} for %s", strings.Join(groups[0], ", "), strings.Join(groups[1], ", "), in.Hold)
	hctx, cancel := context.WithTimeout(ctx, in.Hold)
	defer cancel()
	named := WatchForCondition(hctx, WaitForConditionInput{Hub: hub, Etcd: in.Etcd, Type: etcdfedv1.ConditionDegraded, Status: metav1.ConditionTrue,
		MessageHas: []string{"the spoke of " + broken + " abstains", "member cluster " + other + " unknown"}, Timeout: in.Hold})
	// etcd's member list through the hub's side (the broken cluster holds
	// the quorum): nothing may change.
	moved := nothingMoves(hctx, hub, in.Etcd, want, ids)
	cancel()
	degraded := (<-named).Since(cut, "the cut")
	if moved != "" {
		t.Errorf("the hub moved a member on a broken spoke's word: %s", moved)
	}
	if n, err := HubEventNotes(ctx, hub, in.Etcd, EventQuery{Reasons: []string{etcdfedv1.EventZoneFailed}}); err != nil || len(n) > 0 {
		t.Errorf("ZoneFailed told on a broken spoke's word: %v %v", n, err)
	}
	if degraded == "" {
		got, _ := in.Etcd.Get(ctx, hub)
		t.Errorf("Degraded never named the abstaining spoke of %s and %s unknown: %s", broken, other, conditionText(got, etcdfedv1.ConditionDegraded))
	} else {
		t.Logf("Degraded %s", degraded)
	}
	progress(ctx, t, w, 50, 30*time.Second)

	if err := topo.HealPartition(ctx); err != nil {
		t.Fatal(err)
	}
	healed = true
	if err := topo.RestartSpokeWith(ctx, broken); err != nil {
		t.Fatal(err)
	}
	restored = true
	got, err := WaitForEtcdClusterReady(ctx, WaitForEtcdClusterInput{Hub: hub, Namespace: in.Etcd.Namespace, Name: in.Etcd.Name, Replicas: len(want), Timeout: 5 * time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(incarnations(got)) != fmt.Sprint(want) {
		t.Errorf("members changed: %v, were %v", incarnations(got), want)
	}
	// Once gossip runs again the spoke witnesses again.
	if err := WaitForSpoke(ctx, clusterNamed(topo, broken), "GossipHealthy=True", time.Minute, func(sp *etcdfedv1.EtcdSpoke) string {
		if c := meta.FindStatusCondition(sp.Status.Conditions, etcdfedv1.ConditionGossipHealthy); c == nil || c.Status != metav1.ConditionTrue {
			return fmt.Sprintf("GossipHealthy %v", c)
		}
		return ""
	}); err != nil {
		t.Error(err)
	}
	t.Logf("nothing moved in %s; after the heal the same members, ready", in.Hold)
	progress(ctx, t, w, 50, 30*time.Second)
	w.Stop()
	t.Logf("workload: %d writes acknowledged, longest gap %s", w.Acked(), w.MaxWriteGap().Round(time.Millisecond))
	checkWorkload(ctx, t, w)
}

// ringBefore reads the ring before a disruption: the EtcdCluster, each
// member's cluster, incarnation and ID (incarnations), and etcd's member
// list (name -> ID).
func ringBefore(ctx context.Context, t testing.TB, hub *Cluster, m *ManagedEtcd) (*etcdfedv1.EtcdCluster, map[string]string, map[string]string) {
	t.Helper()
	ec, err := m.Get(ctx, hub)
	if err != nil {
		t.Fatal(err)
	}
	ids, err := memberIDs(ctx, m.Client)
	if err != nil {
		t.Fatal(err)
	}
	return ec, incarnations(ec), ids
}

// membersPerCluster counts ec's members in each member cluster.
func membersPerCluster(ec *etcdfedv1.EtcdCluster) map[string]int {
	count := map[string]int{}
	for _, m := range ec.Status.Members {
		count[m.Cluster]++
	}
	return count
}

// patchSpec edits an EtcdCluster's spec with change and patches it.
func patchSpec(ctx context.Context, hub *Cluster, m *ManagedEtcd, change func(*etcdfedv1.EtcdClusterSpec)) error {
	ec, err := m.Get(ctx, hub)
	if err != nil {
		return err
	}
	before := ec.DeepCopy()
	change(&ec.Spec)
	return hub.Client.Patch(ctx, ec, client.MergeFrom(before))
}

// RegistryDroppedSpecInput deletes a member cluster's kubeconfig Secret.
type RegistryDroppedSpecInput struct {
	T        testing.TB
	Topology *Topology
	Etcd     *ManagedEtcd
	// Cluster's kubeconfig Secret is deleted for Hold (longer than every
	// grace), then created again.
	Cluster string
	Hold    time.Duration
}

// RegistryDroppedSpec (issue 24, related path) deletes the kubeconfig
// Secret that registers Cluster with the hub, under a recorded workload,
// for Hold: the cluster and its member run on, and the other spokes still
// see it over gossip. The hub must keep the member where it is (no
// operation, etcd's member list unchanged) and say why in Degraded. Before,
// the hub evacuated a cluster that left the registry at once. With the
// Secret back, the ring is ready with the same members.
func RegistryDroppedSpec(ctx context.Context, in RegistryDroppedSpecInput) {
	t := in.T
	t.Helper()
	topo, hub := in.Topology, in.Topology.Hub
	if topo.HubNamespace == "" {
		t.Skip("RegistryDroppedSpec: the topology does not say where the kubeconfig Secrets are")
	}
	_, want, ids := ringBefore(ctx, t, hub, in.Etcd)
	sec, err := memberKubeconfigSecret(ctx, topo, in.Cluster)
	if err != nil {
		t.Fatal(err)
	}
	w := startScenarioWorkload(ctx, t, in.Etcd, "registry-dropped")
	if err := hub.Client.Delete(ctx, sec); err != nil {
		t.Fatal(err)
	}
	deleted := time.Now()
	back := false
	recreate := func(ctx context.Context) error {
		again := sec.DeepCopy()
		again.ResourceVersion, again.UID, again.CreationTimestamp = "", "", metav1.Time{}
		return hub.Client.Create(ctx, again)
	}
	defer func() {
		if !back {
			_ = recreate(context.Background())
		}
	}()
	t.Logf("deleted the kubeconfig Secret registering %s, for %s", in.Cluster, in.Hold)
	hctx, cancel := context.WithTimeout(ctx, in.Hold)
	named := WatchForCondition(hctx, WaitForConditionInput{Hub: hub, Etcd: in.Etcd, Type: etcdfedv1.ConditionDegraded,
		MessageHas: []string{in.Cluster + " holds", "no longer registered"}, Timeout: in.Hold})
	moved := nothingMoves(hctx, hub, in.Etcd, want, ids)
	cancel()
	degraded := (<-named).Since(deleted, "the deletion")
	if moved != "" {
		t.Errorf("the hub moved a member of a cluster that only left its registry: %s", moved)
	}
	if degraded == "" {
		got, _ := in.Etcd.Get(ctx, hub)
		t.Errorf("Degraded never said why %s's member stays: %s", in.Cluster, conditionText(got, etcdfedv1.ConditionDegraded))
	} else {
		t.Logf("Degraded %s", degraded)
	}
	if err := recreate(ctx); err != nil {
		t.Fatal(err)
	}
	back = true
	got, err := WaitForEtcdClusterReady(ctx, WaitForEtcdClusterInput{Hub: hub, Namespace: in.Etcd.Namespace, Name: in.Etcd.Name, Replicas: len(want), Tolerant: true, Timeout: 3 * time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(incarnations(got)) != fmt.Sprint(want) {
		t.Errorf("members changed: %v, were %v", incarnations(got), want)
	}
	t.Logf("the Secret back: ready with the same members %.1fs after the deletion", time.Since(deleted).Seconds())
	w.Stop()
	checkWorkload(ctx, t, w)
}

// PartitionHealSpecInput cuts one member cluster off, with the hub, from
// the ring's majority, at a distance, and heals the cut.
type PartitionHealSpecInput struct {
	T        testing.TB
	Topology *Topology
	// Etcd is a ring of three, one member in each member cluster.
	Etcd *ManagedEtcd
	// Distance is put between the units before the cut and stays through
	// the heal (the zero Distance: none).
	Distance localenv.Distance
	// Cut is the member cluster cut off with the hub.
	Cut string
	// Hold is how long the cut lasts: longer than the member grace, so
	// that the cut-off member is past its grace when the cut heals.
	Hold time.Duration
}

// PartitionHealSpec (issue 35, "heal to tolerant fast"): a ring of three
// (one member per member cluster), etcd's leader in the majority, a
// distance between the units, the network cut between {the hub, Cut}
// and {the other two member clusters} for Hold (longer than the member
// grace), under a recorded workload that writes through the majority's
// DNS names resolved by the majority clusters' own DNS servers. The cut
// heals; from then on no member may be replaced (no operation, the same
// incarnations and etcd member IDs: the cut-off member's data is intact,
// it was only cut off), and the ring must be ready and FailureTolerant
// again; the time from the heal to FailureTolerant is logged (the goal,
// 15 s, is a measurement's, not this test's). The workload is
// linearizable, nothing acknowledged is lost, every watch complete.
func PartitionHealSpec(ctx context.Context, in PartitionHealSpecInput) {
	t := in.T
	t.Helper()
	topo, hub := in.Topology, in.Topology.Hub
	if topo.Partition == nil || topo.DNSServerOf == nil {
		t.Skip("PartitionHealSpec: the topology cannot partition, or does not name each cluster's DNS server")
	}
	if !in.Distance.IsZero() {
		if topo.SetDistance == nil {
			t.Skip("PartitionHealSpec: the topology cannot set a distance")
		}
		if err := topo.SetDistance(ctx, in.Distance); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = topo.SetDistance(context.Background(), topo.BaseDistance) })
		t.Logf("distance: %s", in.Distance)
	}
	ec, want, ids := ringBefore(ctx, t, hub, in.Etcd)
	count := membersPerCluster(ec)
	var majority []string
	for c, n := range count {
		if n != 1 {
			t.Fatalf("want one member per member cluster, have %v", count)
		}
		if c != in.Cut {
			majority = append(majority, c)
		}
	}
	sort.Strings(majority)
	if count[in.Cut] != 1 || len(majority) != 2 {
		t.Fatalf("want a ring 1/1/1 with a member in %s, have %v", in.Cut, count)
	}
	clusterID := ec.Status.ClusterID

	inside := in.Etcd.Client
	inside.Endpoints, inside.DNSServers = nil, nil
	var cutMember string
	for _, m := range ec.Status.Members {
		if m.Cluster != in.Cut {
			inside.Endpoints = append(inside.Endpoints, memberURLOf(in.Etcd, m.Name))
		} else {
			cutMember = m.Name
		}
	}
	for _, c := range majority {
		inside.DNSServers = append(inside.DNSServers, topo.DNSServerOf[c])
	}
	w := StartWorkload(ctx, t, StartWorkloadInput{Client: inside, Prefix: fmt.Sprintf("partition-heal-%d/", time.Now().UnixNano()), WatchEachEndpoint: true})
	progress(ctx, t, w, 50, 30*time.Second)
	ec = moveLeaderInto(ctx, t, topo, in.Etcd, ec, majority[0])

	groups := [][]string{{localenv.HubClusterName, in.Cut}, majority}
	if err := topo.Partition(ctx, localenv.Partition{Groups: groups}); err != nil {
		t.Fatal(err)
	}
	healed := false
	t.Cleanup(func() {
		if !healed {
			_ = topo.HealPartition(context.Background())
		}
	})
	t.Logf("partitioned: {%s} | {%s} for %s; the leader %s is in %s", strings.Join(groups[0], ", "), strings.Join(groups[1], ", "), in.Hold, ec.Status.Leader, majority[0])
	ackedAtCut := w.Acked()
	hctx, cancel := context.WithTimeout(ctx, in.Hold)
	_ = HoldFor(hctx, in.Hold, 5*time.Second, func(context.Context) error {
		progress(ctx, t, w, 20, 30*time.Second)
		return nil
	})
	cancel()
	t.Logf("through the %s cut: %d writes acknowledged by the majority", in.Hold, w.Acked()-ackedAtCut)

	if err := topo.HealPartition(ctx); err != nil {
		t.Fatal(err)
	}
	healed = true
	heal := time.Now()
	// When the cut-off member hears a leader again, as etcd itself says
	// (its status, asked at its own endpoint every 200 ms).
	rejoinedc := make(chan time.Duration, 1)
	go func() { rejoinedc <- hearsLeader(ctx, in.Etcd, cutMember, heal) }()
	// From the heal on: nothing moves (watched until the ring is
	// tolerant, and a grace beyond).
	mctx, mcancel := context.WithCancel(ctx)
	movedc := make(chan string, 1)
	go func() { movedc <- nothingMoves(mctx, hub, in.Etcd, want, ids) }()
	got, err := WaitForEtcdClusterReady(ctx, WaitForEtcdClusterInput{Hub: hub, Namespace: in.Etcd.Namespace, Name: in.Etcd.Name, Replicas: len(want), Tolerant: true, Timeout: 3 * time.Minute})
	tolerantIn := time.Since(heal)
	if err != nil {
		t.Error(err)
	} else {
		t.Logf("heal -> ready and FailureTolerant in %.1fs: %s", tolerantIn.Seconds(), got.Status.ZoneSummary)
	}
	if d := <-rejoinedc; d > 0 {
		t.Logf("heal -> %s (%s's member) names a leader in its status: %.1fs", cutMember, in.Cut, d.Seconds())
	} else {
		t.Logf("%s (%s's member) named no leader in its status after the heal", cutMember, in.Cut)
	}
	if evs, err := ListHubEvents(ctx, hub, in.Etcd, EventQuery{Reasons: []string{etcdfedv1.EventMemberRejoinRestart}, RecordedSince: heal}); err == nil {
		for _, e := range evs {
			t.Logf("%.1fs after the heal: %s: %s", e.First.Sub(heal).Seconds(), e.Reason, e.Note)
		}
	}
	sleepCtx(ctx, 10*time.Second)
	mcancel()
	if moved := <-movedc; moved != "" {
		t.Errorf("after the heal the hub moved a member whose data was intact: %s", moved)
	}
	if n, err := HubEventNotes(ctx, hub, in.Etcd, EventQuery{Reasons: []string{etcdfedv1.EventMemberReplaced}}); err != nil || len(n) > 0 {
		t.Errorf("MemberReplaced after a partition healed: %v %v", n, err)
	}
	if got, err := in.Etcd.Get(ctx, hub); err == nil && (got.Status.ClusterID != clusterID || fmt.Sprint(incarnations(got)) != fmt.Sprint(want)) {
		t.Errorf("after the heal: cluster %s members %v, were %s %v", got.Status.ClusterID, incarnations(got), clusterID, want)
	}
	if err := WaitForSameMembersEverywhere(ctx, in.Etcd, ids); err != nil {
		t.Error(err)
	}
	progress(ctx, t, w, 50, time.Minute)
	w.Stop()
	gap, at := w.MaxWriteGapAt()
	t.Logf("workload: %d writes acknowledged in all, longest gap %s (at %s)", w.Acked(), gap.Round(time.Millisecond), at.Format(time.TimeOnly))
	checkWorkload(ctx, t, w)
}

// hearsLeader asks member's own endpoint for its status every 200 ms, up
// to three minutes, and returns how long after from it first named a
// leader (0 if it did not).
func hearsLeader(ctx context.Context, m *ManagedEtcd, member string, from time.Time) time.Duration {
	ep := memberURLOf(m, member)
	c, err := EtcdClient(m.Client.Endpoint(ep))
	if err != nil {
		return 0
	}
	defer func() { _ = c.Close() }()
	for time.Since(from) < 3*time.Minute && ctx.Err() == nil {
		sctx, cancel := context.WithTimeout(ctx, time.Second)
		st, err := c.Status(sctx, ep)
		cancel()
		if err == nil && st.Leader != 0 {
			return time.Since(from)
		}
		sleepCtx(ctx, 200*time.Millisecond)
	}
	return 0
}
