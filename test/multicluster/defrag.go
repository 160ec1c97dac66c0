package multicluster

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdfedv1 "github.com/etcdfed/etcdfed/api/v1alpha1"
	"github.com/etcdfed/etcdfed/hub/planner"
)

// DefragSpecInput configures DefragSpec.
type DefragSpecInput struct {
	T        testing.TB
	Topology *Topology
	Etcd     *ManagedEtcd
	// FillMiB is how much is written (1 MiB values) and deleted to leave
	// every member's file fragmented.
	FillMiB int
}

// defragSample is one look at the EtcdCluster while defragmentation runs.
type defragSample struct {
	at time.Time
	// member the Defrag operation in flight names, "" when none.
	member, step string
	// progressing: Progressing=True with reason Defrag.
	progressing bool
	leader      string
	notReady    []string
}

// DefragSpec makes every member's database fragmented under the recorded
// workload, with automatic defragmentation on (the default thresholds, 45%
// and 100 MiB): FillMiB written and deleted, then compacted, the moment the
// in-use sizes drop (the size change). The hub must notice by itself: no
// spec change wakes it (the spoke writes a move of the sizes at once, and
// that wakes the hub; before, the sizes were rewritten every 5 minutes and
// the hub looked once per resync). It requires: every member defragmented
// once, one at a time (one Defrag operation after another), the leader of
// the start last after the hub moved leadership away (a LeaderMoved
// event), Progressing=True with reason Defrag naming each, each member's
// file under half its size before. It logs the time from the compaction to
// the first Defrag operation, each member's defragmentation time (etcd's
// call, MemberDefragmented event), its operation's time, and the longest
// gap between acknowledged writes while it ran. The history must be
// linearizable, with no acknowledged write lost and every watcher
// complete.
func DefragSpec(ctx context.Context, in DefragSpecInput) {
	t := in.T
	t.Helper()
	hub := in.Topology.Hub
	setDefragAutomatic(ctx, t, hub, in.Etcd, true)

	c, err := EtcdClient(in.Etcd.Client)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = c.Close() }()
	fillStart := time.Now()
	value := strings.Repeat("f", 1<<20)
	for i := range in.FillMiB {
		if err := putRetry(ctx, c, fmt.Sprintf("defrag-fill/%05d", i), value); err != nil {
			t.Fatal(err)
		}
	}
	fillTook := time.Since(fillStart)
	dctx, cancel := context.WithTimeout(ctx, time.Minute)
	del, err := c.Delete(dctx, "defrag-fill/", clientv3.WithPrefix())
	cancel()
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("wrote %d MiB in %.1fs, deleted %d keys at revision %d", in.FillMiB, fillTook.Seconds(), del.Deleted, del.Header.Revision)

	// Each member's file as etcd reports it before the compaction, and the
	// leader: the one to go last.
	before := map[string]etcdfedv1.MemberStatus{}
	var leader string
	statuses, err := WaitForEveryMemberStatus(ctx, in.Etcd, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	for name, st := range statuses {
		if st.Leader == st.Header.MemberId {
			leader = name
		}
		before[name] = etcdfedv1.MemberStatus{Name: name, DBSize: st.DbSize, DBSizeInUse: st.DbSizeInUse}
	}
	if leader == "" {
		t.Fatal("no leader reported by etcd")
	}
	for _, m := range mapsKeys(before) {
		t.Logf("before: %s file %s, %s in use", m, planner.Bytes(before[m].DBSize), planner.Bytes(before[m].DBSizeInUse))
	}

	w := StartWorkload(ctx, t, StartWorkloadInput{Client: in.Etcd.Client, Prefix: "defrag/", WatchEachEndpoint: true})
	waitForWorkloadProgress(ctx, t, w)

	sctx, stop := context.WithCancel(ctx)
	acks := trackAcks(sctx, w)
	var mu sync.Mutex
	var samples []defragSample
	var sampling sync.WaitGroup
	sampling.Add(1)
	go func() {
		defer sampling.Done()
		for sctx.Err() == nil {
			if ec, err := in.Etcd.Get(sctx, hub); err == nil {
				s := defragSample{at: time.Now(), leader: ec.Status.Leader}
				if op := ec.Status.Operation; op != nil && op.Type == etcdfedv1.OperationDefrag {
					s.member, s.step = op.Member, op.Step
				}
				if c := meta.FindStatusCondition(ec.Status.Conditions, etcdfedv1.ConditionProgressing); c != nil && c.Status == metav1.ConditionTrue && c.Reason == string(etcdfedv1.OperationDefrag) {
					s.progressing = true
				}
				for _, m := range ec.Status.Members {
					if !m.Ready {
						s.notReady = append(s.notReady, m.Name)
					}
				}
				mu.Lock()
				samples = append(samples, s)
				mu.Unlock()
			}
			sleepCtx(sctx, 100*time.Millisecond)
		}
	}()

	// The size change: compacted, every member's in-use size drops as it
	// frees the pages at the workload's next writes.
	cctx, cancel := context.WithTimeout(ctx, time.Minute)
	_, err = c.Compact(cctx, del.Header.Revision, clientv3.WithCompactPhysical())
	cancel()
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	t.Logf("compacted to revision %d", del.Header.Revision)
	// Done when etcd (not the hub's status, which is as of its last pass)
	// reports every member's file under half its size before, and the
	// ring is ready.
	after, err := WaitForDefragmented(ctx, hub, in.Etcd, before, 10*time.Minute)
	took := time.Since(start)
	stop()
	sampling.Wait()
	if err != nil {
		t.Fatal(err)
	}
	pctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	if err := w.WaitForProgress(pctx, 20); err != nil {
		t.Fatal(err)
	}
	cancel()

	// The order of the operations, their windows, and what was seen.
	for _, s := range samples {
		if s.member != "" {
			t.Logf("the first defragmentation (%s) began %.1fs after the compaction (the size change); the hub's operation seen %s",
				s.member, s.at.Sub(start).Seconds(), s.at.Format(time.RFC3339Nano))
			break
		}
	}
	var order []string
	windows := map[string][2]time.Time{}
	progressing := map[string]bool{}
	twoDown := 0
	for _, s := range samples {
		if len(s.notReady) > 1 {
			// Operations are one at a time by construction; a second
			// member not ready is the hub's 2s status request timing
			// out on a loaded machine, not a second defragmentation.
			twoDown++
			t.Logf("%s: %v not ready at once (Defrag of %q in flight)", s.at.Format(time.RFC3339Nano), s.notReady, s.member)
		}
		if s.member == "" {
			continue
		}
		if len(order) == 0 || order[len(order)-1] != s.member {
			if slices.Contains(order, s.member) {
				t.Errorf("%s defragmented twice (order so far %v)", s.member, order)
			}
			order = append(order, s.member)
			windows[s.member] = [2]time.Time{s.at, s.at}
		}
		win := windows[s.member]
		win[1] = s.at
		windows[s.member] = win
		progressing[s.member] = progressing[s.member] || s.progressing
	}
	if len(order) != len(before) || order[len(order)-1] != leader {
		t.Errorf("defragmentation order %v; want every member once and the leader of the start, %s, last", order, leader)
	}
	events, err := defragEvents(ctx, hub, in.Etcd, start)
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range order {
		if !progressing[m] {
			t.Errorf("Progressing never showed the defragmentation of %s", m)
		}
		win := windows[m]
		gap := acks.longestGap(win[0], win[1])
		a := after[m]
		t.Logf("defragmented %s: etcd took %s, the operation about %.1fs; file %s -> %s (%s in use); longest gap between acknowledged writes meanwhile %s",
			m, orText(events[m], "?"), win[1].Sub(win[0]).Seconds(), planner.Bytes(before[m].DBSize), planner.Bytes(a.DBSize), planner.Bytes(a.DBSizeInUse), gap.Round(time.Millisecond))
		if events[m] == "" {
			t.Errorf("no MemberDefragmented event for %s", m)
		}
	}
	t.Logf("%d of %d samples saw more than one member not ready", twoDown, len(samples))
	gap, gapAt := w.MaxWriteGapAt()
	t.Logf("all %d members defragmented %.1fs after the compaction (order %v, leader at the start %s); longest gap between acknowledged writes over the run %s (began %.1fs after the compaction)",
		len(order), took.Seconds(), order, leader, gap.Round(time.Millisecond), gapAt.Sub(start).Seconds())
	if err := waitForLeaderMovedEvent(ctx, hub, in.Etcd, leader, start); err != nil {
		t.Error(err)
	}
	checkWorkload(ctx, t, w)
}

// NoSpaceSpecInput configures NoSpaceSpec.
type NoSpaceSpecInput struct {
	T        testing.TB
	Topology *Topology
	Etcd     *ManagedEtcd
	// Flags the etcd container of every member must have (the spec's quota
	// and auto-compaction settings, applied).
	Flags []string
}

// NoSpaceSpec fills the ring (whose quota is small) until etcd raises
// NOSPACE, under the recorded workload, and requires the hub to show it
// (NoSpaceAlarm=True naming the member, status.alarms) and to clear it by
// itself: compaction, every member defragmented, the alarm disarmed
// (Compacted, MemberDefragmented and AlarmDisarmed events), after which
// the workload's writes are acknowledged again. The filled key keeps its
// last acknowledged value or one of the fill's writes whose outcome is
// unknown after it: the one etcd refused with NOSPACE (etcd applies the
// write that crosses the quota before it answers NOSPACE) and any that
// timed out. The history must be linearizable, with no acknowledged write
// lost and every watcher complete.
func NoSpaceSpec(ctx context.Context, in NoSpaceSpecInput) {
	t := in.T
	t.Helper()
	hub := in.Topology.Hub
	ec, err := in.Etcd.Get(ctx, hub)
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range ec.Status.Members {
		p, err := memberCluster(t, in.Topology, m.Cluster).Clientset.CoreV1().Pods(etcdfedv1.DefaultRingNamespace).Get(ctx, in.Etcd.ObjectName(m.Name), metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		var cmd []string
		for _, c := range p.Spec.Containers {
			cmd = append(append(cmd, c.Command...), c.Args...)
		}
		for _, f := range in.Flags {
			if !slices.Contains(cmd, f) {
				t.Errorf("%s's pod runs without %s: %v", m.Name, f, cmd)
			}
		}
	}

	w := StartWorkload(ctx, t, StartWorkloadInput{Client: in.Etcd.Client, Prefix: "nospace/", WatchEachEndpoint: true})
	waitForWorkloadProgress(ctx, t, w)

	c, err := EtcdClient(in.Etcd.Client)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = c.Close() }()
	value := strings.Repeat("n", 512<<10)
	// After the recovery the key holds the last acknowledged value or one
	// written after it whose outcome the client does not know: etcd
	// applies the write that takes the file past the quota and answers it
	// with NOSPACE, and a put that timed out may have been applied.
	var last string
	var unknown []string
	raised := time.Time{}
	for i := 0; i < 2000 && raised.IsZero(); i++ {
		v := fmt.Sprintf("%06d:%s", i, value)
		pctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		_, err := c.Put(pctx, "nospace-fill", v)
		cancel()
		switch {
		case err == nil:
			last, unknown = v[:6], nil
		case strings.Contains(err.Error(), "database space exceeded"):
			raised, unknown = time.Now(), append(unknown, v[:6])
		default:
			unknown = append(unknown, v[:6])
			t.Logf("fill put %d: %v (outcome unknown; retrying)", i, err)
		}
	}
	if raised.IsZero() {
		t.Fatal("the fill never exceeded the quota")
	}
	t.Logf("NOSPACE raised after the fill's put of value %s (outcome unknown of %v)", last, unknown)
	var seen time.Time
	err = WaitForStatus(ctx, WaitForStatusInput{Hub: hub, Etcd: in.Etcd, What: "NoSpaceAlarm=True naming a member", Timeout: time.Minute, Until: func(ec *etcdfedv1.EtcdCluster) string {
		c := meta.FindStatusCondition(ec.Status.Conditions, etcdfedv1.ConditionNoSpaceAlarm)
		if c == nil || c.Status != metav1.ConditionTrue || len(ec.Status.Alarms) == 0 || ec.Status.Alarms[0].Member == "" {
			return fmt.Sprintf("NoSpaceAlarm %+v, alarms %+v", c, ec.Status.Alarms)
		}
		seen = time.Now()
		t.Logf("shown %.1fs after the first refused write: NoSpaceAlarm %s: %s", seen.Sub(raised).Seconds(), c.Reason, c.Message)
		return ""
	}})
	if err != nil {
		t.Fatal(err)
	}
	err = WaitForStatus(ctx, WaitForStatusInput{Hub: hub, Etcd: in.Etcd, What: "NOSPACE cleared by the hub", Timeout: 5 * time.Minute, Until: func(ec *etcdfedv1.EtcdCluster) string {
		c := meta.FindStatusCondition(ec.Status.Conditions, etcdfedv1.ConditionNoSpaceAlarm)
		if c == nil || c.Status != metav1.ConditionFalse || len(ec.Status.Alarms) > 0 || ec.Status.Operation != nil {
			return describeEtcdCluster(ec, fmt.Sprintf("alarms %+v", ec.Status.Alarms))
		}
		return ""
	}})
	if err != nil {
		t.Fatal(err)
	}
	cleared := time.Now()
	pctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	if err := w.WaitForProgress(pctx, 50); err != nil {
		t.Fatal(err)
	}
	cancel()
	gctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	got, err := c.Get(gctx, "nospace-fill")
	cancel()
	switch {
	case err != nil:
		t.Errorf("read the filled key after the recovery: %v", err)
	case len(got.Kvs) != 1:
		t.Errorf("the filled key after the recovery: %d values; want the last acknowledged value %s or one of %v", len(got.Kvs), last, unknown)
	case string(got.Kvs[0].Value[:6]) != last && !slices.Contains(unknown, string(got.Kvs[0].Value[:6])):
		t.Errorf("the filled key after the recovery holds value %s; want the last acknowledged value %s or one of %v (outcome unknown)", got.Kvs[0].Value[:6], last, unknown)
	default:
		t.Logf("the filled key holds value %s after the recovery (last acknowledged %s, outcome unknown %v)", got.Kvs[0].Value[:6], last, unknown)
	}
	evs, err := ListHubEvents(ctx, hub, in.Etcd, EventQuery{Since: raised})
	if err != nil {
		t.Fatal(err)
	}
	events := eventsByReason(evs)
	for _, want := range []string{"Compacted", "MemberDefragmented", "AlarmDisarmed", "AlarmRaised", "AlarmCleared"} {
		if len(events[want]) == 0 {
			t.Errorf("no %s event (events seen: %v)", want, mapsKeys(events))
		}
	}
	t.Logf("NOSPACE cleared %.1fs after the first refused write (%.1fs after the hub showed it): %d member(s) defragmented: %v",
		cleared.Sub(raised).Seconds(), cleared.Sub(seen).Seconds(), len(events["MemberDefragmented"]), events["MemberDefragmented"])
	t.Logf("longest gap between acknowledged writes %s (writes are refused while NOSPACE is raised)", w.MaxWriteGap().Round(time.Millisecond))
	checkWorkload(ctx, t, w)
}

// setDefragAutomatic sets spec.defragmentation.automatic.
func setDefragAutomatic(ctx context.Context, t testing.TB, hub *Cluster, m *ManagedEtcd, on bool) {
	t.Helper()
	ec, err := m.Get(ctx, hub)
	if err != nil {
		t.Fatal(err)
	}
	before := ec.DeepCopy()
	ec.Spec.Defragmentation.Automatic = ptrTo(on)
	if err := hub.Client.Patch(ctx, ec, client.MergeFrom(before)); err != nil {
		t.Fatal(err)
	}
}

// WaitForDefragmented waits until the ring is ready with as many members
// as before and etcd (not the hub's status, which is as of its last pass)
// reports every member's file under half its size in before, and returns
// the members' files then (timeout: 10 minutes when zero).
func WaitForDefragmented(ctx context.Context, hub *Cluster, m *ManagedEtcd, before map[string]etcdfedv1.MemberStatus, timeout time.Duration) (map[string]etcdfedv1.MemberStatus, error) {
	after := map[string]etcdfedv1.MemberStatus{}
	err := poll(ctx, orDefault(timeout, 10*time.Minute), "every member defragmented", func(ctx context.Context) (string, error) {
		if _, err := WaitForEtcdClusterReady(ctx, WaitForEtcdClusterInput{Hub: hub, Namespace: m.Namespace, Name: m.Name, Replicas: len(before), Timeout: 5 * time.Second}); err != nil {
			return err.Error(), nil
		}
		var left []string
		err := eachMemberStatus(ctx, m, nil, func(name string, st *clientv3.StatusResponse, err error) {
			switch {
			case err != nil:
				left = append(left, fmt.Sprintf("%s: %v", name, err))
			case st.DbSize*2 > before[name].DBSize:
				left = append(left, fmt.Sprintf("%s: file %s", name, planner.Bytes(st.DbSize)))
			default:
				after[name] = etcdfedv1.MemberStatus{Name: name, DBSize: st.DbSize, DBSizeInUse: st.DbSizeInUse}
			}
		})
		if err != nil {
			return err.Error(), nil
		}
		if len(left) > 0 {
			return "not yet under half their size (etcd): " + strings.Join(left, ", "), nil
		}
		return "", nil
	})
	return after, err
}

func putRetry(ctx context.Context, c *clientv3.Client, key, value string) error {
	var errs []error
	for range 5 {
		pctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		_, err := c.Put(pctx, key, value)
		cancel()
		if err == nil {
			return nil
		}
		errs = append(errs, err)
		sleepCtx(ctx, time.Second)
	}
	return fmt.Errorf("put %s: %w", key, errors.Join(errs...))
}

// ackTimes are the times the workload's acknowledged puts moved on,
// sampled every 5 ms.
type ackTimes struct {
	mu    sync.Mutex
	times []time.Time
}

func trackAcks(ctx context.Context, w *Workload) *ackTimes {
	a := &ackTimes{}
	go func() {
		last := w.Acked()
		for ctx.Err() == nil {
			if n := w.Acked(); n != last {
				last = n
				a.mu.Lock()
				a.times = append(a.times, time.Now())
				a.mu.Unlock()
			}
			sleepCtx(ctx, 5*time.Millisecond)
		}
	}()
	return a
}

// longestGap is the longest time without an acknowledged put that
// overlaps [from, to].
func (a *ackTimes) longestGap(from, to time.Time) time.Duration {
	a.mu.Lock()
	defer a.mu.Unlock()
	var longest time.Duration
	for i := 1; i < len(a.times); i++ {
		if a.times[i].Before(from) || a.times[i-1].After(to) {
			continue
		}
		longest = max(longest, a.times[i].Sub(a.times[i-1]))
	}
	return longest
}

var defragNote = regexp.MustCompile(`^Defragmented (\S+) in (\S+);`)

// defragEvents maps each member to the time etcd took to defragment it,
// from the hub's MemberDefragmented events since start.
func defragEvents(ctx context.Context, hub *Cluster, m *ManagedEtcd, start time.Time) (map[string]string, error) {
	notes, err := HubEventNotes(ctx, hub, m, EventQuery{Reasons: []string{"MemberDefragmented"}, Since: start})
	if err != nil {
		return nil, err
	}
	out := map[string]string{}
	for _, note := range notes {
		if sm := defragNote.FindStringSubmatch(note); sm != nil {
			out[sm[1]] = sm[2]
		}
	}
	return out, nil
}

func mapsKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

func orText(s, or string) string {
	if s == "" {
		return or
	}
	return s
}
