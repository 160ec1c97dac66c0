package multicluster

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdfedv1 "github.com/etcdfed/etcdfed/api/v1alpha1"
)

// RollSpecInput changes an EtcdCluster's spec in a way that restarts every
// member's pod.
type RollSpecInput struct {
	T        testing.TB
	Topology *Topology
	Etcd     *ManagedEtcd
	// Change edits the spec (for example a new image or version); Image is
	// the image every member's object must end with.
	Change func(*etcdfedv1.EtcdClusterSpec)
	Image  string
	// Timeout bounds the whole rollout; default 5m.
	Timeout time.Duration
	// BeforeFirst, when set, runs once the spec is changed, before the
	// rollout is waited for, with the time of the change and a look at
	// the members' objects: the place to check what must be done before
	// the first member restarts.
	BeforeFirst func(ctx context.Context, changed time.Time, look func(context.Context) (rollSample, error))
}

// RollResult is what RollSpecSpec measured.
type RollResult struct {
	// Changed is when the spec was changed; FirstOnNew when a member's
	// object was first seen with the new image (sampled every 100 ms).
	Changed, FirstOnNew time.Time
	// Took is from the change to every member ready on the new spec.
	Took time.Duration
	// Order is the order members took the new image in; PerMember the
	// time of each, from its object's new spec to its pod ready on it.
	Order     []string
	PerMember string
	// MaxWriteGap is the longest gap between acknowledged writes.
	MaxWriteGap time.Duration
}

// rollSample is what one look at the hub and the member clusters saw.
type rollSample struct {
	at time.Time
	// unsettled: members whose pod is not ready on their object's latest
	// generation.
	unsettled []string
	// onNew: members whose object has the new image.
	onNew []string
	// progressing: the member a Progressing=True/Roll condition names.
	progressing string
	leader      string
}

// RollSpecSpec changes the spec while a recorded workload runs and requires
// a rollout of Roll operations: every member's object gets the new image
// and its pod is restarted on the same volume (same etcd ID, no new
// incarnation); never two members restarting at once; the leader of the
// start rolled last, after the hub moved leadership away from it (a
// LeaderMoved event); Progressing=True with reason Roll naming each member
// while it rolls. The history must be linearizable with no acknowledged
// write lost.
func RollSpecSpec(ctx context.Context, in RollSpecInput) RollResult {
	t := in.T
	t.Helper()
	hub := in.Topology.Hub
	// The status names the leader the hub last saw: between an election
	// and the hub's next look it is empty (make test under load once read
	// it so), so it is read until it names one.
	var ec *etcdfedv1.EtcdCluster
	if err := poll(ctx, time.Minute, "a leader in the ring's status before the rollout", func(ctx context.Context) (string, error) {
		got, err := in.Etcd.Get(ctx, hub)
		if err != nil {
			return "", err
		}
		ec = got
		if got.Status.Leader == "" {
			return describeEtcdCluster(got, "no leader"), nil
		}
		return "", nil
	}); err != nil {
		t.Fatal(err)
	}
	leader := ec.Status.Leader
	idsBefore, err := memberIDs(ctx, in.Etcd.Client)
	if err != nil {
		t.Fatal(err)
	}
	podsBefore := map[string]types.UID{}
	for _, m := range ec.Status.Members {
		p, err := memberCluster(t, in.Topology, m.Cluster).Clientset.CoreV1().Pods(etcdfedv1.DefaultRingNamespace).Get(ctx, in.Etcd.ObjectName(m.Name), metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		podsBefore[m.Name] = p.UID
	}

	w := StartWorkload(ctx, t, StartWorkloadInput{Client: in.Etcd.Client, Prefix: "roll/", WatchEachEndpoint: true})
	waitForWorkloadProgress(ctx, t, w)

	// Sample the hub's status and the member objects every 100 ms, once
	// the restart watch has seen every member's pod ready (so that a
	// member briefly not ready later is known for a pod that was ready).
	restarts := newRestartWatch()
	if err := WaitForRollSettled(ctx, in, ec.UID, restarts, 2*time.Minute); err != nil {
		t.Fatal(err)
	}
	sctx, stopSampling := context.WithCancel(ctx)
	var mu sync.Mutex
	var samples []rollSample
	var sampling sync.WaitGroup
	sampling.Add(1)
	go func() {
		defer sampling.Done()
		for sctx.Err() == nil {
			if s, err := sampleRoll(sctx, in, ec.UID, restarts); err == nil {
				mu.Lock()
				samples = append(samples, s)
				mu.Unlock()
			}
			sleepCtx(sctx, 100*time.Millisecond)
		}
	}()

	chainedBefore := hubChainedPasses(ctx, t, in.Topology)
	start := time.Now()
	before := ec.DeepCopy()
	in.Change(&ec.Spec)
	if err := hub.Client.Patch(ctx, ec, client.MergeFrom(before)); err != nil {
		t.Fatal(err)
	}
	if in.BeforeFirst != nil {
		in.BeforeFirst(ctx, start, func(ctx context.Context) (rollSample, error) { return sampleRoll(ctx, in, ec.UID, nil) })
	}
	if in.Timeout == 0 {
		in.Timeout = 5 * time.Minute
	}
	after, err := WaitForRolled(ctx, WaitForRolledInput{Roll: in, UID: ec.UID, Replicas: len(before.Status.Members), Timeout: in.Timeout})
	stopSampling()
	sampling.Wait()
	if err != nil {
		t.Fatal(err)
	}
	res := RollResult{Changed: start, Took: time.Since(start)}
	t.Logf("rolled %d members to %s in %.1fs", len(after.Status.Members), in.Image, res.Took.Seconds())
	// Each member's roll is an operation whose start the hub records and
	// whose first step follows in the same pass, on the same observation.
	if in.Topology.HubMetricsURL != "" {
		if chained := hubChainedPasses(ctx, t, in.Topology) - chainedBefore; chained < float64(len(after.Status.Members)) {
			t.Errorf("%v passes went on from an operation's start to its first step, want at least one per member rolled (%d)", chained, len(after.Status.Members))
		}
	}
	pctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	if err := w.WaitForProgress(pctx, 20); err != nil {
		t.Fatal(err)
	}
	cancel()

	// The order members took the new image in, and what was seen meanwhile.
	var order []string
	progressing := map[string]bool{}
	most := 0
	for _, s := range samples {
		if len(s.onNew) > 0 && res.FirstOnNew.IsZero() {
			res.FirstOnNew = s.at
		}
		for _, m := range s.onNew {
			if !slices.Contains(order, m) {
				order = append(order, m)
			}
		}
		if s.progressing != "" {
			progressing[s.progressing] = true
		}
		if len(s.unsettled) > most {
			most = len(s.unsettled)
		}
		if len(s.unsettled) > 1 {
			t.Errorf("%s: %v restarting at once", s.at.Format(time.RFC3339Nano), s.unsettled)
		}
	}
	t.Logf("rollout order %v (leader at the start: %s); at most %d member(s) restarting at once over %d samples; longest gap between acknowledged writes %s",
		order, leader, most, len(samples), w.MaxWriteGap().Round(time.Millisecond))
	res.Order, res.PerMember = order, rollTimes(samples)
	t.Logf("time per member, from its object's new spec to its pod ready on it: %s", res.PerMember)
	gap, gapAt := w.MaxWriteGapAt()
	res.MaxWriteGap = gap
	t.Logf("the longest gap between acknowledged writes (%s) began %.1fs after the change, %s", gap.Round(time.Millisecond), gapAt.Sub(start).Seconds(), restartingAt(samples, gapAt, gapAt.Add(gap)))
	if len(order) != len(after.Status.Members) || order[len(order)-1] != leader {
		t.Errorf("rollout order %v; want every member once and the leader of the start, %s, last", order, leader)
	}
	for _, m := range after.Status.Members {
		if !progressing[m.Name] {
			t.Errorf("Progressing never showed the roll of %s (saw %v)", m.Name, progressing)
		}
		p, err := memberCluster(t, in.Topology, m.Cluster).Clientset.CoreV1().Pods(etcdfedv1.DefaultRingNamespace).Get(ctx, in.Etcd.ObjectName(m.Name), metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if p.UID == podsBefore[m.Name] {
			t.Errorf("the pod of %s was not restarted", m.Name)
		}
	}
	if after.Status.LastIncarnation != before.Status.LastIncarnation {
		t.Errorf("a rollout made new incarnations (%d -> %d)", before.Status.LastIncarnation, after.Status.LastIncarnation)
	}
	idsAfter, err := memberIDs(ctx, in.Etcd.Client)
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(idsAfter) != fmt.Sprint(idsBefore) {
		t.Errorf("member list changed: before %v, after %v", idsBefore, idsAfter)
	}
	// The hub moves leadership away from the member whose turn it is. On a
	// loaded machine an election can take it away first (make test once
	// saw one while a follower restarted): then there is nothing to move,
	// and the status the samples read says who led instead.
	if other := leaderAtTurn(samples, leader); other != leader && other != "" {
		t.Logf("%s no longer led when its turn came (%s did: an election, not the hub's move); no LeaderMoved expected", leader, other)
	} else if err := waitForLeaderMovedEvent(ctx, hub, in.Etcd, leader, start); err != nil {
		t.Error(err)
	}
	checkWorkload(ctx, t, w)
	return res
}

// leaderAtTurn is the leader the hub's status named in the last sample
// before member's object took the new spec ("" when no sample shows one).
func leaderAtTurn(samples []rollSample, member string) string {
	leader := ""
	for _, s := range samples {
		if slices.Contains(s.onNew, member) {
			break
		}
		if s.leader != "" {
			leader = s.leader
		}
	}
	return leader
}

// restartingAt says which members the samples saw restarting between
// from and to.
func restartingAt(samples []rollSample, from, to time.Time) string {
	var seen []string
	for _, s := range samples {
		if s.at.Before(from.Add(-100*time.Millisecond)) || s.at.After(to.Add(100*time.Millisecond)) {
			continue
		}
		for _, m := range s.unsettled {
			if !slices.Contains(seen, m) {
				seen = append(seen, m)
			}
		}
	}
	if len(seen) == 0 {
		return "while no member was seen restarting"
	}
	return fmt.Sprintf("while %v restarted", seen)
}

// WaitForRollSettled waits until every member of the roll's ring runs
// ready on its spec (no member unsettled in sampleRoll; restarts, when
// given, sees every pod ready; timeout: 2 minutes when zero).
func WaitForRollSettled(ctx context.Context, in RollSpecInput, uid types.UID, restarts *restartWatch, timeout time.Duration) error {
	return poll(ctx, orDefault(timeout, 2*time.Minute), "every member's pod ready", func(ctx context.Context) (string, error) {
		s, err := sampleRoll(ctx, in, uid, restarts)
		if err != nil {
			return err.Error(), nil
		}
		if len(s.unsettled) > 0 {
			return fmt.Sprintf("unsettled: %v", s.unsettled), nil
		}
		return "", nil
	})
}

// WaitForRolledInput says what a finished roll looks like.
type WaitForRolledInput struct {
	// Roll names the ring and the image every member must run on.
	Roll RollSpecInput
	UID  types.UID
	// Replicas, when set: the hub must report the ring ready with that
	// many members (WaitForEtcdClusterReady) at each look.
	Replicas int
	// NoOperation: no operation in flight either.
	NoOperation bool
	// Timeout: 5 minutes when zero.
	Timeout time.Duration
}

// WaitForRolled waits until every member of the ring runs on the image,
// none unsettled (sampleRoll), and returns the EtcdCluster then.
func WaitForRolled(ctx context.Context, in WaitForRolledInput) (*etcdfedv1.EtcdCluster, error) {
	hub, m := in.Roll.Topology.Hub, in.Roll.Etcd
	var after *etcdfedv1.EtcdCluster
	err := poll(ctx, orDefault(in.Timeout, 5*time.Minute), "every member rolled to "+in.Roll.Image, func(ctx context.Context) (string, error) {
		var got *etcdfedv1.EtcdCluster
		if in.Replicas > 0 {
			ready, err := WaitForEtcdClusterReady(ctx, WaitForEtcdClusterInput{Hub: hub, Namespace: m.Namespace, Name: m.Name, Replicas: in.Replicas, Timeout: 5 * time.Second})
			if err != nil {
				return err.Error(), nil
			}
			got = ready
		}
		s, err := sampleRoll(ctx, in.Roll, in.UID, nil)
		if err != nil {
			return "", err
		}
		if got == nil {
			if got, err = m.Get(ctx, hub); err != nil {
				return "", err
			}
		}
		if len(s.onNew) != len(got.Status.Members) || len(s.unsettled) > 0 || in.NoOperation && got.Status.Operation != nil {
			return fmt.Sprintf("on the new image: %v; unsettled: %v; operation %+v", s.onNew, s.unsettled, got.Status.Operation), nil
		}
		after = got
		return "", nil
	})
	return after, err
}

// sampleRoll looks at the hub's status and the members' objects once;
// restarts (nil: none) tells members briefly not ready in a pod that was
// ready from members restarting.
func sampleRoll(ctx context.Context, in RollSpecInput, uid types.UID, restarts *restartWatch) (rollSample, error) {
	s := rollSample{at: time.Now()}
	ec, err := in.Etcd.Get(ctx, in.Topology.Hub)
	if err != nil {
		return s, err
	}
	s.leader = ec.Status.Leader
	if c := meta.FindStatusCondition(ec.Status.Conditions, etcdfedv1.ConditionProgressing); c != nil && c.Status == metav1.ConditionTrue &&
		(c.Reason == string(etcdfedv1.OperationRoll) || c.Reason == etcdfedv1.ReasonUpgrading || c.Reason == etcdfedv1.ReasonDowngrading) && ec.Status.Operation != nil && strings.Contains(c.Message, ec.Status.Operation.Member) {
		s.progressing = ec.Status.Operation.Member
	}
	for _, c := range in.Topology.Members {
		var list etcdfedv1.EtcdMemberList
		if err := c.Client.List(ctx, &list, client.InNamespace(etcdfedv1.DefaultRingNamespace), client.MatchingLabels{etcdfedv1.LabelClusterUID: string(uid)}); err != nil {
			return s, err
		}
		for _, m := range list.Items {
			// The object's name carries the ring's namespace and name;
			// the member's is in its spec.
			member := m.Spec.MemberName
			if !slices.ContainsFunc(ec.Status.Members, func(ms etcdfedv1.MemberStatus) bool { return ms.Name == member && ms.Cluster == c.Name }) {
				continue
			}
			if m.Spec.Image == in.Image {
				s.onNew = append(s.onNew, member)
			}
			if why, blip := restarts.observe(ctx, c, &m); why != "" && !blip {
				s.unsettled = append(s.unsettled, member)
			}
		}
	}
	slices.Sort(s.onNew)
	return s, nil
}

// waitForLeaderMovedEvent waits for the hub's LeaderMoved event about
// member, recorded on the EtcdCluster since start.
func waitForLeaderMovedEvent(ctx context.Context, hub *Cluster, m *ManagedEtcd, member string, start time.Time) error {
	_, err := WaitForHubEvent(ctx, WaitForHubEventInput{Hub: hub, Etcd: m, Timeout: 30 * time.Second,
		Query: EventQuery{Reasons: []string{"LeaderMoved"}, NotePrefix: "Moved leadership from " + member + " ", Since: start}})
	return err
}

func memberCluster(t testing.TB, topo *Topology, name string) *Cluster {
	t.Helper()
	for _, c := range topo.Members {
		if c.Name == name {
			return c
		}
	}
	t.Fatalf("member cluster %q is not in the topology", name)
	return nil
}

// hubChainedPasses reads etcdfed_hub_passes_chained_total from the hub's
// metrics (0 when the topology has no hub metrics to read).
func hubChainedPasses(ctx context.Context, t testing.TB, topo *Topology) float64 {
	t.Helper()
	if topo.HubMetricsURL == "" {
		return 0
	}
	m, err := scrape(ctx, topo.HubMetricsURL)
	if err != nil {
		t.Fatalf("hub metrics: %v", err)
	}
	if !m.has("etcdfed_hub_passes_chained_total") {
		t.Fatal("the hub's metrics have no etcdfed_hub_passes_chained_total")
	}
	return m.sum("etcdfed_hub_passes_chained_total")
}
