package multicluster

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"reflect"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdfedv1 "github.com/etcdfed/etcdfed/api/v1alpha1"
	"github.com/etcdfed/etcdfed/dev/testenv"
)

// apiWrites counts the write requests an apiserver has served, by
// "resource[/subresource]" of the etcdfed.dev group, from its own
// apiserver_request_total (so every client counts, none is faked).
func apiWrites(ctx context.Context, c *Cluster) (map[string]float64, error) {
	body, err := c.Clientset.Discovery().RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
	if err != nil {
		return nil, fmt.Errorf("metrics of %s: %w", c.Name, err)
	}
	out := map[string]float64{}
	sc := bufio.NewScanner(strings.NewReader(string(body)))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, "apiserver_request_total{") {
			continue
		}
		end := strings.LastIndexByte(line, '}')
		if end < 0 {
			continue
		}
		labels := parseLabels(line[len("apiserver_request_total{"):end])
		if labels["group"] != "etcdfed.dev" {
			continue
		}
		switch labels["verb"] {
		case "POST", "PUT", "PATCH", "APPLY", "DELETE", "DELETECOLLECTION":
		default:
			continue
		}
		v, err := strconv.ParseFloat(strings.TrimSpace(line[end+1:]), 64)
		if err != nil {
			return nil, fmt.Errorf("metrics of %s: %q: %w", c.Name, line, err)
		}
		key := labels["resource"]
		if s := labels["subresource"]; s != "" {
			key += "/" + s
		}
		out[key] += v
	}
	return out, sc.Err()
}

// parseLabels reads a Prometheus label set (name="value",...). Values of
// apiserver_request_total hold no escaped quotes.
func parseLabels(s string) map[string]string {
	out := map[string]string{}
	for s != "" {
		eq := strings.IndexByte(s, '=')
		if eq < 0 || eq+1 >= len(s) || s[eq+1] != '"' {
			break
		}
		name := s[:eq]
		rest := s[eq+2:]
		q := strings.IndexByte(rest, '"')
		if q < 0 {
			break
		}
		out[name] = rest[:q]
		s = strings.TrimPrefix(rest[q+1:], ",")
	}
	return out
}

// AtRestSpecInput watches a formed ring that nobody changes.
type AtRestSpecInput struct {
	T        testing.TB
	Topology *Topology
	Etcd     *ManagedEtcd
	// Window is how long the ring is watched at rest.
	Window time.Duration
}

// AtRestSpec: a ring at rest costs no writes and almost no work. Over the
// window, the hub runs at most one pass per EtcdCluster it holds (the hub
// reconciles a ring on change, not on a clock), the hub
// cluster's apiserver serves no write to EtcdClusters (status included),
// and no member cluster's apiserver serves a write to EtcdMembers or
// EtcdDNSZones other than the spokes' status reports, of which there is at
// most one per member in five minutes besides reports of disk news (a WAL
// sync that stalled, late heartbeats: memberReports). Writes are counted by each apiserver itself
// (apiserver_request_total), so the hub is observed, not instrumented.
// Rings of other tests must not change meanwhile; the spec is meant for a
// test that owns the environment for its run.
func AtRestSpec(ctx context.Context, in AtRestSpecInput) {
	t := in.T
	t.Helper()
	ec, err := in.Etcd.Get(ctx, in.Topology.Hub)
	if err != nil {
		t.Fatal(err)
	}
	ready, err := WaitForEtcdClusterReady(ctx, WaitForEtcdClusterInput{Hub: in.Topology.Hub, Namespace: in.Etcd.Namespace, Name: in.Etcd.Name, Replicas: int(ec.Spec.Replicas), Timeout: 2 * time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	members := len(ready.Status.Members)
	clusters := append([]*Cluster{in.Topology.Hub}, in.Topology.Members...)
	var (
		before           map[string]map[string]float64
		disk             []string
		otherReports     []string
		passes0, passes1 metricSet
	)
	for window := 1; ; window++ {
		// The window begins once forming has settled: the spokes' last
		// reports of members that just turned ready, and the hub's passes
		// they cause, come seconds after Available (under load, more than
		// five).
		reports := watchMemberReports(ctx, t, in.Topology.Members)
		before = settle(ctx, t, in, clusters)
		reports.begin()
		// The counters are read at all: the hub's apiserver served the
		// EtcdCluster's creation.
		if before[in.Topology.Hub.Name]["etcdclusters"] == 0 {
			t.Fatalf("no etcdfed.dev write counted by the hub cluster's apiserver (%v): the metrics are not read right", before[in.Topology.Hub.Name])
		}
		state0 := restStateOf(ctx, t, in)
		if in.Topology.HubMetricsURL != "" {
			if passes0, err = scrape(ctx, in.Topology.HubMetricsURL); err != nil {
				t.Fatal(err)
			}
		}
		sleepCtx(ctx, in.Window)
		disk, otherReports = reports.end()
		if passes0 != nil {
			if passes1, err = scrape(ctx, in.Topology.HubMetricsURL); err != nil {
				t.Fatal(err)
			}
		}
		// A timing the hub changed in the window (Auto timing raised by
		// late heartbeats or a stalled disk: the machine's stalls, under
		// other tests) rolls every member, and an election etcd held on
		// its own (a leader starved of CPU or disk for an election
		// timeout) is reported by every spoke and the hub: news, not a
		// ring at rest. The window is watched again once the ring is
		// ready, at most twice; a ring that keeps changing fails below
		// with what it wrote. A leader the hub moved (leader placement's
		// move count) is the hub acting at rest, and is not forgiven.
		state1 := restStateOf(ctx, t, in)
		if state0 != state1 {
			// What the hub recorded, for a window that fails below.
			t.Logf("window %d: the ring's status began %s", window, state0)
			t.Logf("window %d: the ring's status ended %s", window, state1)
		}
		why := state0.notAtRest(state1)
		if why == "" || window == 3 {
			break
		}
		t.Logf("window %d: %s; watching again once the ring is ready", window, why)
		if _, err := WaitForEtcdClusterReady(ctx, WaitForEtcdClusterInput{Hub: in.Topology.Hub, Namespace: in.Etcd.Namespace, Name: in.Etcd.Name, Replicas: members, Timeout: 5 * time.Minute}); err != nil {
			t.Fatal(err)
		}
	}
	statusReports, spokeReports := 0.0, 0.0
	var report []string
	for _, c := range clusters {
		now, err := apiWrites(ctx, c)
		if err != nil {
			t.Fatal(err)
		}
		var keys []string
		for k := range now {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			d := now[k] - before[c.Name][k]
			if d == 0 {
				continue
			}
			report = append(report, fmt.Sprintf("%s %s: %.0f", c.Name, k, d))
			switch k {
			case "etcdmembers/status":
				statusReports += d // the spokes' own reports
			case "etcdspokes/status":
				// A spoke's own status (gossip view, zones): not the hub's.
				spokeReports += d
			default:
				t.Errorf("%s served %.0f write(s) to %s while the ring was at rest", c.Name, d, k)
			}
		}
	}
	if passes0 != nil {
		hubPassesAtRest(ctx, t, in, passes0, passes1, spokeReports, statusReports)
	}
	perMinute := statusReports / float64(members) / in.Window.Minutes()
	t.Logf("at rest for %s: writes %v; EtcdMember status reports: %.1f per member per minute", in.Window, report, perMinute)
	for _, d := range disk {
		t.Logf("at rest: a report with disk news (the machine's, not the ring's): %s", d)
	}
	// A spoke rewrites a member's status at rest once in five minutes (its
	// etcd view's counters); within a window up to five minutes, once.
	// A report of disk news is written at once and is not counted: a WAL
	// sync that stalled, on a machine busy with other tests, is news by
	// design (timingFloor Disk acts on it).
	if limit := float64(members) * math.Ceil(in.Window.Minutes()/5); statusReports-float64(len(disk)) > limit {
		t.Errorf("%.0f EtcdMember status reports (%d of them disk news) in %s for %d members at rest; want at most %.0f besides disk news (one per member in five minutes)", statusReports, len(disk), in.Window, members, limit)
		for _, o := range otherReports {
			t.Logf("at rest: a report without disk news: %s", o)
		}
	}
}

// restState is what the hub recorded of a ring, compared across a window
// at rest: its timing (the values etcd runs with), and the rest in brief
// (why that timing, leader, incarnations, operation, conditions).
type restState struct {
	timing, rest string
	// leader is the leader member; moves counts the hub's moves of
	// leadership for its placement (status.leaderPlacement.moves).
	leader string
	moves  int64
}

// notAtRest says why a window that began at s and ended at end did not
// watch a ring at rest ("" when it did): the timing changed (a roll), or
// the leader changed without a move by the hub (an election etcd held).
func (s restState) notAtRest(end restState) string {
	switch {
	case s.timing != end.timing:
		return fmt.Sprintf("the ring's timing changed (%s to %s): a roll of every member, not a ring at rest", s.timing, end.timing)
	case s.leader != end.leader && s.moves == end.moves:
		return fmt.Sprintf("etcd elected %s in place of %s without a move by the hub (the machine's stall): not a ring at rest", orNone(end.leader), orNone(s.leader))
	}
	return ""
}

func (s restState) String() string { return "timing " + s.timing + "; " + s.rest }

func restStateOf(ctx context.Context, t testing.TB, in AtRestSpecInput) restState {
	t.Helper()
	ec, err := in.Etcd.Get(ctx, in.Topology.Hub)
	if err != nil {
		t.Fatal(err)
	}
	st := &ec.Status
	out := restState{timing: "none"}
	if tm := st.Timing; tm != nil {
		out.timing = fmt.Sprintf("%d/%d %s", tm.HeartbeatIntervalMillis, tm.ElectionTimeoutMillis, tm.Source)
		out.rest = "why: " + tm.Message + "; "
	}
	var conds []string
	for _, c := range st.Conditions {
		conds = append(conds, fmt.Sprintf("%s=%s/%s", c.Type, c.Status, c.Reason))
	}
	op := "none"
	if st.Operation != nil {
		op = fmt.Sprintf("%+v", *st.Operation)
	}
	out.leader = st.Leader
	if lp := st.LeaderPlacement; lp != nil {
		out.moves = lp.Moves
	}
	out.rest += fmt.Sprintf("leader %s (hub's moves %d), last incarnation %d, operation %s, conditions %v", st.Leader, out.moves, st.LastIncarnation, op, conds)
	return out
}

// memberReports watches the EtcdMembers of the member clusters and keeps,
// between begin and end, the status reports that carried disk news: the
// WAL sync view's slowest sync moved from or to a stall (128 ms, etcd's
// bucket), late heartbeats came or went, or its window came to its full
// length. Those a spoke writes at once whatever the refresh (and a machine
// running other tests beside stalls now and then); everything else at rest
// is a refresh of counters, once in five minutes.
type memberReports struct {
	t      testing.TB
	cancel context.CancelFunc
	done   chan struct{}

	mu         sync.Mutex
	open       bool
	last       map[string]*etcdfedv1.MemberDiskView
	lastStatus map[string]map[string]any
	disk       []string
	other      []string // the other reports in the window: what in the status changed
	fails      []error
}

func watchMemberReports(ctx context.Context, t testing.TB, members []*Cluster) *memberReports {
	t.Helper()
	ctx, cancel := context.WithCancel(ctx)
	r := &memberReports{t: t, cancel: cancel, done: make(chan struct{}), last: map[string]*etcdfedv1.MemberDiskView{}, lastStatus: map[string]map[string]any{}}
	var wg sync.WaitGroup
	for _, c := range members {
		wc, err := client.NewWithWatch(c.REST, client.Options{Scheme: testenv.Scheme()})
		if err != nil {
			cancel()
			t.Fatalf("watch client of %s: %v", c.Name, err)
		}
		w, err := wc.Watch(ctx, &etcdfedv1.EtcdMemberList{})
		if err != nil {
			cancel()
			t.Fatalf("watch EtcdMembers of %s: %v", c.Name, err)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer w.Stop()
			for {
				select {
				case <-ctx.Done():
					return
				case ev, ok := <-w.ResultChan():
					if !ok {
						if ctx.Err() == nil {
							r.fail(fmt.Errorf("the watch of %s's EtcdMembers ended", c.Name))
						}
						return
					}
					if m, ok := ev.Object.(*etcdfedv1.EtcdMember); ok {
						r.observe(c.Name+"/"+m.Namespace+"/"+m.Name, ev.Type, m)
					}
				}
			}
		}()
	}
	go func() { wg.Wait(); close(r.done) }()
	return r
}

func (r *memberReports) fail(err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.fails = append(r.fails, err)
}

func (r *memberReports) observe(key string, typ watch.EventType, m *etcdfedv1.EtcdMember) {
	var cur *etcdfedv1.MemberDiskView
	if m.Status.Etcd != nil {
		cur = m.Status.Etcd.WALFsync
	}
	var status map[string]any
	if b, err := json.Marshal(m.Status); err == nil {
		_ = json.Unmarshal(b, &status)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	old, seen := r.last[key]
	oldStatus := r.lastStatus[key]
	r.last[key] = cur
	r.lastStatus[key] = status
	if !r.open || !seen || typ != watch.Modified {
		return
	}
	if why := diskNewsOf(old, cur); why != "" {
		r.disk = append(r.disk, key+": "+why)
		return
	}
	r.other = append(r.other, key+": "+strings.Join(changedPaths("status", oldStatus, status), ", "))
}

// changedPaths lists the JSON paths whose values differ between a and b,
// down to the leaves (lists compared whole), so that a failed at-rest
// check says what a report changed.
func changedPaths(prefix string, a, b any) []string {
	am, aok := a.(map[string]any)
	bm, bok := b.(map[string]any)
	if !aok || !bok {
		if reflect.DeepEqual(a, b) {
			return nil
		}
		return []string{fmt.Sprintf("%s %v -> %v", prefix, a, b)}
	}
	var keys []string
	for k := range am {
		keys = append(keys, k)
	}
	for k := range bm {
		if _, ok := am[k]; !ok {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	var out []string
	for _, k := range keys {
		out = append(out, changedPaths(prefix+"."+k, am[k], bm[k])...)
	}
	return out
}

// diskNewsOf says what in a member's WAL sync view moved that its spoke
// writes at once, or "".
func diskNewsOf(old, cur *etcdfedv1.MemberDiskView) string {
	switch {
	case old == nil || cur == nil:
		if (old == nil) != (cur == nil) {
			return "the disk view appeared or went"
		}
		return ""
	case old.MaxMillis != cur.MaxMillis && max(old.MaxMillis, cur.MaxMillis) >= 128:
		return fmt.Sprintf("slowest WAL sync %d ms -> %d ms", old.MaxMillis, cur.MaxMillis)
	case (old.LateHeartbeats > 0) != (cur.LateHeartbeats > 0):
		return fmt.Sprintf("late heartbeats %d -> %d", old.LateHeartbeats, cur.LateHeartbeats)
	case (old.WindowSeconds >= etcdfedv1.DiskWindowSeconds) != (cur.WindowSeconds >= etcdfedv1.DiskWindowSeconds):
		return fmt.Sprintf("window %d s -> %d s", old.WindowSeconds, cur.WindowSeconds)
	}
	return ""
}

// begin opens the window: reports from now on are classified.
func (r *memberReports) begin() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.open = true
}

// end stops the watches and returns the reports of disk news in the
// window, and what each other report changed.
func (r *memberReports) end() (disk, other []string) {
	r.t.Helper()
	r.cancel()
	<-r.done
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, err := range r.fails {
		r.t.Fatal(err)
	}
	return r.disk, r.other
}

// settleQuiet is how long nothing may be written (and, with the hub's
// metrics, no pass run) for forming to count as settled; settleWithin
// bounds the wait: a hub that works on a clock never settles, and the
// window that follows shows it.
const (
	settleQuiet  = 5 * time.Second
	settleWithin = 90 * time.Second
)

// settle waits until, for settleQuiet, no apiserver of the topology served
// an etcdfed.dev write and the hub ran no pass, or settleWithin passed, and
// returns the write counts it ended with.
func settle(ctx context.Context, t testing.TB, in AtRestSpecInput, clusters []*Cluster) map[string]map[string]float64 {
	t.Helper()
	read := func() (map[string]map[string]float64, float64) {
		writes := map[string]map[string]float64{}
		for _, c := range clusters {
			w, err := apiWrites(ctx, c)
			if err != nil {
				t.Fatal(err)
			}
			writes[c.Name] = w
		}
		passes := 0.0
		if in.Topology.HubMetricsURL != "" {
			m, err := scrape(ctx, in.Topology.HubMetricsURL)
			if err != nil {
				t.Fatal(err)
			}
			passes = m.sum("controller_runtime_reconcile_total", "controller", "etcdcluster")
		}
		return writes, passes
	}
	start := time.Now()
	writes, passes := read()
	quietSince := start
	for time.Since(quietSince) < settleQuiet && time.Since(start) < settleWithin {
		sleepCtx(ctx, time.Second)
		w, p := read()
		if p != passes || fmt.Sprint(w) != fmt.Sprint(writes) {
			quietSince = time.Now()
		}
		writes, passes = w, p
	}
	if time.Since(quietSince) < settleQuiet {
		t.Logf("forming did not settle within %s of Available; the window shows what keeps writing", settleWithin)
	} else {
		t.Logf("forming settled %s after Available (%s without a write or a pass)", time.Since(start).Round(100*time.Millisecond), settleQuiet)
	}
	return writes
}

// hubPassesAtRest: over the window the hub ran at most one pass per
// EtcdCluster it holds, and one more per EtcdCluster for each report a
// spoke made of its own status (a gossip view or zones that changed
// concerns every ring), and one per EtcdMember status report (one that
// carries disk news, or a tail of the WAL sync view that moved, wakes the
// ring of its member by design: timingFloor Disk reads them), counted by
// its own controller_runtime_reconcile_total. A hub that reconciles every ring on a clock of a few seconds (as it did
// before its staleness timer) runs about ten per ring in 30 s.
func hubPassesAtRest(ctx context.Context, t testing.TB, in AtRestSpecInput, before, after metricSet, spokeReports, statusReports float64) {
	t.Helper()
	var rings etcdfedv1.EtcdClusterList
	if err := in.Topology.Hub.Client.List(ctx, &rings); err != nil {
		t.Fatal(err)
	}
	const name = "controller_runtime_reconcile_total"
	if !after.has(name) {
		t.Fatalf("the hub's metrics at %s have no %s", in.Topology.HubMetricsURL, name)
	}
	passes := after.sum(name, "controller", "etcdcluster") - before.sum(name, "controller", "etcdcluster")
	limit := float64(len(rings.Items))*(1+spokeReports) + statusReports
	t.Logf("at rest for %s: %.0f hub passes over %d EtcdCluster(s), %.0f spoke status reports, %.0f EtcdMember status reports (limit %.0f)", in.Window, passes, len(rings.Items), spokeReports, statusReports, limit)
	if passes > limit {
		t.Errorf("the hub ran %.0f passes in %s at rest with %d EtcdCluster(s), %.0f spoke status reports and %.0f EtcdMember status reports; want at most %.0f (one per EtcdCluster, one more per EtcdCluster for each spoke report, and one per EtcdMember report)", passes, in.Window, len(rings.Items), spokeReports, statusReports, limit)
	}
}
