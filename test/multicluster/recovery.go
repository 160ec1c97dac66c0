package multicluster

import (
	"context"
	"fmt"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdfedv1 "github.com/etcdfed/etcdfed/api/v1alpha1"
	"github.com/etcdfed/etcdfed/dev/workload"
)

// QuorumLossRecoverySpecInput is the input of QuorumLossRecoverySpec.
type QuorumLossRecoverySpecInput struct {
	T        testing.TB
	Topology *Topology
	Etcd     *ManagedEtcd
	// Etcdfed is the etcdfed CLI binary.
	Etcdfed string
	// KillHubAfterLoss kills the hub (restarted at once) right after the
	// second cluster's kill: the new hub never saw the killed clusters'
	// spokes and must still declare the loss.
	KillHubAfterLoss bool
	// Automatic sets failurePolicy.quorumLossRecovery: Automatic and runs
	// no `etcdfed recover`: the hub must recover by itself from the
	// freshest survivor once it declares the loss.
	Automatic bool
}

// QuorumLossRecoveryTimes are what QuorumLossRecoverySpec measured.
type QuorumLossRecoveryTimes struct {
	// Declared: from the second cluster's kill to Available=False
	// QuorumLost (includes the member grace the spec sets, 30 s).
	Declared time.Duration
	// Writable: from `etcdfed recover` (Automatic: from the declaration)
	// to the first write the workload had acknowledged after it.
	Writable time.Duration
	// Whole: from `etcdfed recover` (Automatic: from the declaration) to
	// three ready members.
	Whole time.Duration
}

// QuorumLossRecoverySpec kills the member clusters of two of the three
// members of a ring (one member per cluster), one after the other, under a
// recorded workload: the leader's last. It checks that `etcdfed recover`
// is refused while the ring has quorum; that the hub declares the loss
// (Available=False, QuorumLost, naming the gone members and the survivor);
// that `etcdfed recover --wait` (with Automatic: the hub by itself, with
// no request) brings the ring back from the survivor with its cluster ID
// and the survivor's member ID, and back to three ready members under the
// same names with new incarnations; and, once the killed clusters come
// back with the old members' data, that they never rejoin or split the
// ring: one cluster ID and three members from every member's endpoint, the
// old incarnations' pods gone. The workload must stay linearizable with no
// acknowledged write lost (the survivor held every commit: RPO 0), and
// every watch, opened before the loss, must have gone on past the recovery
// and seen every acknowledged put once and in order (no compaction
// allowed: that is the stronger of the two answers a resumed watch may
// get).
func QuorumLossRecoverySpec(ctx context.Context, in QuorumLossRecoverySpecInput) QuorumLossRecoveryTimes {
	var times QuorumLossRecoveryTimes
	t := in.T
	t.Helper()
	topo, hub := in.Topology, in.Topology.Hub
	must := fatalOnError(t)
	if topo.FailZone == nil {
		t.Skip("QuorumLossRecoverySpec: the topology cannot kill clusters")
	}
	recoverCmd := func(ctx context.Context, args ...string) (string, error) {
		return etcdfedRecover(ctx, in.Etcdfed, hub, in.Etcd, args...)
	}

	// Short graces (the API's minimum), so that the loss is declared
	// within the test, whatever the ring was created with: the killed
	// clusters are declared failed after the zone grace, the loss after
	// the member grace. A longer outage only grows the history the
	// linearizability check must search.
	ec, err := in.Etcd.Get(ctx, hub)
	must(err)
	before := ec.DeepCopy()
	ec.Spec.FailurePolicy.MemberGracePeriod = &metav1.Duration{Duration: 30 * time.Second}
	ec.Spec.FailurePolicy.ZoneGracePeriod = &metav1.Duration{Duration: 30 * time.Second}
	if in.Automatic {
		ec.Spec.FailurePolicy.QuorumLossRecovery = etcdfedv1.QuorumLossRecoveryAutomatic
	}
	must(hub.Client.Patch(ctx, ec, client.MergeFrom(before)))

	// Bad input: a ring with quorum is never recovered.
	out, err := recoverCmd(ctx)
	if err == nil || !strings.Contains(out, "has quorum") {
		t.Fatalf("etcdfed recover on a quorate ring: err %v, output %q; want a refusal naming the quorum", err, out)
	}
	ec, err = in.Etcd.Get(ctx, hub)
	must(err)
	if _, ok := ec.Annotations[etcdfedv1.AnnotationRecover]; ok {
		t.Fatalf("a refused recovery left the annotation %s", etcdfedv1.AnnotationRecover)
	}
	t.Logf("refused on a quorate ring: %s", strings.TrimSpace(out))

	w := StartWorkload(ctx, t, StartWorkloadInput{Client: in.Etcd.Client, Prefix: "recover/", WatchEachEndpoint: true})
	pctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	must(w.WaitForProgress(pctx, 50))
	cancel()

	// The survivor is a follower; the leader's cluster goes last.
	ec, err = in.Etcd.Get(ctx, hub)
	must(err)
	clusterID := ec.Status.ClusterID
	var survivor etcdfedv1.MemberStatus
	var victims []etcdfedv1.MemberStatus
	for _, m := range ec.Status.Members {
		if survivor.Name == "" && m.Name != ec.Status.Leader {
			survivor = m
			continue
		}
		victims = append(victims, m)
	}
	slices.SortFunc(victims, func(a, b etcdfedv1.MemberStatus) int {
		if a.Name == ec.Status.Leader {
			return 1
		}
		if b.Name == ec.Status.Leader {
			return -1
		}
		return 0
	})
	if len(victims) != 2 || survivor.Name == "" {
		t.Fatalf("want 3 members, have %v", ec.Status.Members)
	}
	goneIDs := map[string]bool{victims[0].ID: true, victims[1].ID: true}
	oldInc := map[string]int64{}
	for _, m := range ec.Status.Members {
		oldInc[m.Name] = m.Incarnation
	}
	restored := false
	t.Cleanup(func() {
		if restored {
			return
		}
		// A failed run leaves no cluster down for the scenarios after it.
		for _, v := range victims {
			_ = topo.RestoreZone(context.Background(), v.Cluster)
		}
	})
	for _, v := range victims {
		must(topo.FailZone(ctx, v.Cluster, "kill"))
		t.Logf("killed member cluster %s (member %s, leader %v)", v.Cluster, v.Name, v.Name == ec.Status.Leader)
	}
	lost := time.Now()
	acked := w.Acked()
	if in.KillHubAfterLoss {
		if topo.KillHub == nil {
			t.Skip("the topology cannot kill the hub")
		}
		must(topo.KillHub(ctx))
		t.Logf("hub killed and restarted %.1fs after the loss: the new hub never saw the killed clusters' spokes", time.Since(lost).Seconds())
	}

	// The hub declares the loss.
	declared, err := waitForQuorumLost(ctx, hub, in.Etcd)
	must(err)
	times.Declared = time.Since(lost)
	t.Logf("declared %.0fs after the loss: %s", times.Declared.Seconds(), declared.Message)
	for _, name := range []string{victims[0].Name, victims[1].Name, "freshest survivor: " + survivor.Name} {
		if !strings.Contains(declared.Message, name) {
			t.Errorf("QuorumLost message does not name %q: %s", name, declared.Message)
		}
	}
	if want := "quorumLossRecovery: Automatic"; in.Automatic != strings.Contains(declared.Message, want) {
		t.Errorf("QuorumLost message with Automatic %v: %s", in.Automatic, declared.Message)
	}

	// Recover (Automatic: the hub already does), noting the first write
	// acknowledged after it.
	start := time.Now()
	writable := make(chan time.Duration, 1)
	wctx, wcancel := context.WithCancel(ctx)
	defer wcancel()
	wdone := make(chan struct{})
	go func() {
		defer close(wdone)
		if w.WaitForProgress(wctx, 1) == nil {
			writable <- time.Since(start)
		}
	}()
	if in.Automatic {
		// The killed clusters are out of sight, not known dead: nothing is
		// forced until a fencing controller (here the test, which killed
		// them) confirms them fenced.
		if n, err := HubEventNotes(ctx, hub, in.Etcd, EventQuery{Reasons: []string{"QuorumRecovery"}}); err != nil || len(n) > 0 {
			t.Errorf("recovered before the lost members were confirmed fenced: %v %v", n, err)
		}
		must(annotateFenced(ctx, hub, in.Etcd, victims, "fencing controller (test)"))
		t.Logf("fencing of %s, %s confirmed (annotation %s) %.1fs after the declaration", victims[0].Name, victims[1].Name, etcdfedv1.AnnotationFenced, time.Since(start).Seconds())
		note, err := waitForHubEventNote(ctx, hub, in.Etcd, "QuorumRecovery", "recovering from "+survivor.Name, "automatic (failurePolicy.quorumLossRecovery: Automatic)")
		must(err)
		t.Logf("recovering by itself (%.1fs after the declaration was seen): %s", time.Since(start).Seconds(), note)
		for _, name := range []string{victims[0].Name, victims[1].Name, "freshest survivor: " + survivor.Name} {
			if !strings.Contains(note, name) {
				t.Errorf("QuorumRecovery event does not name %q: %s", name, note)
			}
		}
	} else {
		fence := confirmFenced(ctx, t, hub, in.Etcd, victims, recoverCmd)
		out, err = recoverCmd(ctx, "--from-member", survivor.Name, "--confirm-fenced", fence, "--wait", "--timeout", "10m")
		t.Logf("etcdfed recover --confirm-fenced %s --wait (%.1fs):\n%s", fence, time.Since(start).Seconds(), out)
		must(err)
	}

	got, err := WaitForEtcdClusterReady(ctx, WaitForEtcdClusterInput{Hub: hub, Namespace: in.Etcd.Namespace, Name: in.Etcd.Name, Replicas: 3, Timeout: 10 * time.Minute})
	must(err)
	times.Whole = time.Since(start)
	t.Logf("3 ready members %.1fs after %s: %s", times.Whole.Seconds(), recoverStart(in.Automatic), got.Status.ZoneSummary)
	if _, ok := got.Annotations[etcdfedv1.AnnotationRecover]; ok && in.Automatic {
		t.Errorf("annotation %s set on a ring that was to recover by itself", etcdfedv1.AnnotationRecover)
	}
	if got.Status.ClusterID != clusterID {
		t.Errorf("cluster ID %s after recovery, was %s", got.Status.ClusterID, clusterID)
	}
	for _, m := range got.Status.Members {
		switch {
		case m.Name == survivor.Name && (m.ID != survivor.ID || m.Incarnation != survivor.Incarnation):
			t.Errorf("survivor %s is now ID %s incarnation %d, was %s incarnation %d", m.Name, m.ID, m.Incarnation, survivor.ID, survivor.Incarnation)
		case m.Name != survivor.Name && m.Incarnation <= oldInc[m.Name]:
			t.Errorf("%s came back with incarnation %d, not newer than %d", m.Name, m.Incarnation, oldInc[m.Name])
		}
	}
	pctx, cancel = context.WithTimeout(ctx, time.Minute)
	must(w.WaitForProgress(pctx, 100))
	cancel()
	wcancel()
	<-wdone
	select {
	case times.Writable = <-writable:
		t.Logf("first write acknowledged %.1fs after %s", times.Writable.Seconds(), recoverStart(in.Automatic))
	default:
		t.Errorf("no write acknowledged after %s, yet the workload progressed", recoverStart(in.Automatic))
	}
	recovered, err := etcdRevision(ctx, in.Etcd.Client)
	must(err)
	t.Logf("writes go on after recovery: %d acknowledged (%d before the loss)", w.Acked(), acked)

	// The killed clusters come back with the old members' data.
	restored = true
	for _, v := range victims {
		must(topo.RestoreZone(ctx, v.Cluster))
		t.Logf("restored member cluster %s", v.Cluster)
	}
	returned := time.Now()
	must(WaitForFenced(ctx, WaitForFencedInput{T: t, Topology: topo, Victims: victims, OldIncarnations: oldInc,
		Whole: in.Etcd, ClusterID: clusterID, GoneIDs: goneIDs, Timeout: 10 * time.Minute}))
	must(oneRing(ctx, in.Etcd, clusterID, goneIDs))
	t.Logf("old incarnations fenced (objects gone, never in the member list, one cluster ID from every endpoint) and the ring whole %.1fs after the clusters returned", time.Since(returned).Seconds())
	checkVolumesKept(ctx, t, topo, hub, in.Etcd, victims, oldInc)
	pctx, cancel = context.WithTimeout(ctx, time.Minute)
	must(w.WaitForProgress(pctx, 50))
	cancel()
	w.Stop()
	res := checkWorkload(ctx, t, w)
	checkWatchesSpan(t, res, recovered)
	return times
}

// recoverStart names what the recovery times count from.
func recoverStart(automatic bool) string {
	if automatic {
		return "the declaration (automatic recovery)"
	}
	return "etcdfed recover"
}

// checkWatchesSpan checks that every watcher of a passed workload check
// went on past revision after (a revision of the ring once it recovered):
// a watch opened before the loss and resumed after the recovery saw every
// later acknowledged put (checkWorkload failed it otherwise).
func checkWatchesSpan(t testing.TB, res *workload.Result, after int64) {
	t.Helper()
	for _, v := range res.Watches {
		if v.Covered <= after {
			t.Errorf("watcher %s stopped at revision %d, not past %d, the ring's revision once recovered", v.Watcher, v.Covered, after)
			continue
		}
		t.Logf("watcher %s: from before the loss to revision %d, past the recovered ring's %d: %d of %d acknowledged puts seen, %d resumes, %d compactions",
			v.Watcher, v.Covered, after, v.Seen, v.Expected, v.Resumes, len(v.Compactions))
	}
}

// etcdRevision is the ring's current revision (a linearizable read).
func etcdRevision(ctx context.Context, cfg EtcdClientConfig) (int64, error) {
	c, err := EtcdClient(cfg)
	if err != nil {
		return 0, err
	}
	defer func() { _ = c.Close() }()
	gctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	resp, err := c.Get(gctx, "etcdfed-revision-probe")
	if err != nil {
		return 0, fmt.Errorf("read the revision: %w", err)
	}
	return resp.Header.Revision, nil
}

// WaitForFencedInput names the members of a quorum loss whose clusters
// came back, and, with Whole, the ring they must not rejoin.
type WaitForFencedInput struct {
	T        testing.TB
	Topology *Topology
	// Victims are the lost members, OldIncarnations their incarnations
	// before the loss.
	Victims         []etcdfedv1.MemberStatus
	OldIncarnations map[string]int64
	// Whole, when set: the ring must also be whole again (AllMembersReady,
	// no operation in flight) with one cluster ID (ClusterID) from every
	// endpoint and none of GoneIDs in any member list (oneRing).
	Whole     *ManagedEtcd
	ClusterID string
	GoneIDs   map[string]bool
	// Timeout: 5 minutes when zero.
	Timeout time.Duration
}

// WaitForFenced waits until the old incarnations' objects and pods are
// gone from the returned clusters (oldIncarnationsLeft) and, with Whole,
// the ring is whole.
func WaitForFenced(ctx context.Context, in WaitForFencedInput) error {
	what := "the old incarnations fenced"
	if in.Whole != nil {
		what += " and the ring whole"
	}
	return poll(ctx, orDefault(in.Timeout, 5*time.Minute), what, func(ctx context.Context) (string, error) {
		if in.Whole != nil {
			if err := oneRing(ctx, in.Whole, in.ClusterID, in.GoneIDs); err != nil {
				return "", err // a split or a rejoin is a failure at once
			}
		}
		if left := oldIncarnationsLeft(ctx, in.T, in.Topology, in.Victims, in.OldIncarnations); left != "" || in.Whole == nil {
			return left, nil
		}
		ec, err := in.Whole.Get(ctx, in.Topology.Hub)
		if err != nil {
			return "", err
		}
		if !meta.IsStatusConditionTrue(ec.Status.Conditions, etcdfedv1.ConditionAllMembersReady) || ec.Status.Operation != nil {
			return "members " + ec.Status.MemberSummary + " " + ec.Status.ZoneSummary, nil
		}
		return "", nil
	})
}

// oldIncarnationsLeft says which object or pod of an old incarnation
// (at or below oldInc) of the victims is still in the victims' clusters,
// "" when none is: the hub deletes their objects once it sees the
// clusters again, and the spokes their pods.
func oldIncarnationsLeft(ctx context.Context, t testing.TB, topo *Topology, victims []etcdfedv1.MemberStatus, oldInc map[string]int64) string {
	for _, v := range victims {
		c := memberCluster(t, topo, v.Cluster)
		var objs etcdfedv1.EtcdMemberList
		if err := c.Client.List(ctx, &objs, client.InNamespace(etcdfedv1.DefaultRingNamespace)); err != nil {
			return fmt.Sprintf("list in %s: %v", v.Cluster, err)
		}
		for _, o := range objs.Items {
			if o.Spec.MemberName == v.Name && o.Spec.Incarnation <= oldInc[v.Name] {
				return fmt.Sprintf("%s's object of incarnation %d still in %s", v.Name, o.Spec.Incarnation, v.Cluster)
			}
		}
		var pods corev1.PodList
		if err := c.Client.List(ctx, &pods, client.InNamespace(etcdfedv1.DefaultRingNamespace), client.MatchingLabels{etcdfedv1.LabelMember: v.Name}); err != nil {
			return fmt.Sprintf("list pods in %s: %v", v.Cluster, err)
		}
		for _, p := range pods.Items {
			if inc, err := strconv.ParseInt(p.Labels[etcdfedv1.LabelIncarnation], 10, 64); err == nil && inc <= oldInc[v.Name] {
				return fmt.Sprintf("%s's pod %s of incarnation %d still in %s (%s)", v.Name, p.Name, inc, v.Cluster, p.Status.Phase)
			}
		}
	}
	return ""
}

// oneRing checks that every member endpoint that answers a linearizable
// member list (it has a quorum) belongs to the one cluster clusterID and
// lists none of the gone members' IDs: an old member that rejoined, or old
// members that formed a quorum of their own, would.
func oneRing(ctx context.Context, m *ManagedEtcd, clusterID string, goneIDs map[string]bool) error {
	for _, ep := range m.Client.Endpoints {
		cfg := m.Client
		cfg.Endpoints = []string{ep}
		c, err := EtcdClient(cfg)
		if err != nil {
			return err
		}
		cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		resp, err := c.MemberList(cctx)
		cancel()
		_ = c.Close()
		if err != nil {
			continue // not answering is not a split
		}
		if id := fmt.Sprintf("%x", resp.Header.ClusterId); id != clusterID {
			return fmt.Errorf("%s answers for cluster %s, not %s: a second cluster", ep, id, clusterID)
		}
		for _, mm := range resp.Members {
			if id := fmt.Sprintf("%x", mm.ID); goneIDs[id] {
				return fmt.Errorf("%s answers with a quorum that lists %s [%s], a member removed by the recovery", ep, mm.Name, id)
			}
		}
	}
	return nil
}

// etcdfedRecover runs `etcdfed recover` on m with args.
func etcdfedRecover(ctx context.Context, bin string, hub *Cluster, m *ManagedEtcd, args ...string) (string, error) {
	base := []string{"recover", m.Name, "-n", m.Namespace, "--kubeconfig", hub.Kubeconfig}
	out, err := exec.CommandContext(ctx, bin, append(base, args...)...).CombinedOutput()
	return string(out), err
}

// checkVolumesKept checks that the old incarnations' volumes are still
// there in the victims' clusters after their objects were swept, whatever
// the reclaim policy, and that the VolumesRetained event names each with
// the revision it held.
func checkVolumesKept(ctx context.Context, t testing.TB, topo *Topology, hub *Cluster, m *ManagedEtcd, victims []etcdfedv1.MemberStatus, oldInc map[string]int64) {
	t.Helper()
	for _, v := range victims {
		claim := fmt.Sprintf("%s-data-%d", m.ObjectName(v.Name), oldInc[v.Name])
		pvc := &corev1.PersistentVolumeClaim{}
		if err := memberCluster(t, topo, v.Cluster).Client.Get(ctx, client.ObjectKey{Namespace: etcdfedv1.DefaultRingNamespace, Name: claim}, pvc); err != nil || pvc.DeletionTimestamp != nil {
			t.Errorf("the volume %s of %s's old incarnation in %s: %v (deleting %v); want it kept", claim, v.Name, v.Cluster, err, pvc.DeletionTimestamp != nil)
		}
		note, err := waitForHubEventNote(ctx, hub, m, "VolumesRetained", v.Name+" incarnation "+fmt.Sprint(oldInc[v.Name])+" in "+v.Cluster, claim, "revision ")
		if err != nil {
			t.Error(err)
			continue
		}
		t.Logf("VolumesRetained: %s", note)
	}
}

// confirmFenced checks that `etcdfed recover` (run with recover) without
// --confirm-fenced is refused and names every victim as a member to fence,
// and returns the victims' names for --confirm-fenced.
func confirmFenced(ctx context.Context, t testing.TB, hub *Cluster, m *ManagedEtcd, victims []etcdfedv1.MemberStatus, recover func(context.Context, ...string) (string, error)) string {
	t.Helper()
	var names []string
	for _, v := range victims {
		names = append(names, v.Name)
	}
	slices.Sort(names) // as status.quorumLoss lists them
	out, err := recover(ctx)
	if err == nil || !strings.Contains(out, "must be fenced") || !strings.Contains(out, "--confirm-fenced "+strings.Join(names, ",")) {
		t.Fatalf("etcdfed recover without --confirm-fenced: err %v, output %q; want a refusal naming %v", err, out, names)
	}
	for _, n := range names {
		if !strings.Contains(out, n+" [") {
			t.Errorf("the refusal does not name %s: %s", n, out)
		}
	}
	if ec, err := m.Get(ctx, hub); err == nil {
		if _, ok := ec.Annotations[etcdfedv1.AnnotationRecover]; ok && ec.Status.LastRecoveryRequest == nil {
			t.Errorf("a refused recovery left the annotation %s", etcdfedv1.AnnotationRecover)
		}
	}
	t.Logf("refused without fencing: %s", strings.TrimSpace(out))
	return strings.Join(names, ",")
}

// annotateFenced confirms the victims fenced, as a fencing controller
// would: the annotation etcdfed.dev/fenced naming them with their IDs.
func annotateFenced(ctx context.Context, hub *Cluster, m *ManagedEtcd, victims []etcdfedv1.MemberStatus, by string) error {
	ec, err := m.Get(ctx, hub)
	if err != nil {
		return err
	}
	f := etcdfedv1.FencingConfirmation{ConfirmedAt: time.Now().UTC(), By: by}
	for _, v := range victims {
		f.Members = append(f.Members, etcdfedv1.FencedMember{Name: v.Name, ID: v.ID})
	}
	before := ec.DeepCopy()
	if ec.Annotations == nil {
		ec.Annotations = map[string]string{}
	}
	ec.Annotations[etcdfedv1.AnnotationFenced] = f.String()
	return hub.Client.Patch(ctx, ec, client.MergeFrom(before))
}

// waitForQuorumLost waits up to 5 minutes for the hub to declare m's
// quorum lost (Available=False, QuorumLost) and returns the condition.
func waitForQuorumLost(ctx context.Context, hub *Cluster, m *ManagedEtcd) (*metav1.Condition, error) {
	var declared *metav1.Condition
	err := WaitForStatus(ctx, WaitForStatusInput{Hub: hub, Etcd: m, What: "Available=False QuorumLost", Timeout: 5 * time.Minute, Until: func(ec *etcdfedv1.EtcdCluster) string {
		c := meta.FindStatusCondition(ec.Status.Conditions, etcdfedv1.ConditionAvailable)
		if c == nil || c.Reason != etcdfedv1.ReasonQuorumLost {
			return fmt.Sprintf("Available %v", c)
		}
		declared = c
		return ""
	}})
	return declared, err
}
