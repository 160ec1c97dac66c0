package multicluster

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdfedv1 "github.com/etcdfed/etcdfed/api/v1alpha1"
)

// BenchmarkHubScale measures the hub with many EtcdClusters: for each ring
// count N (ETCDFED_SCALE_RINGS, default 10,25,50; rings are added, never
// recreated, between sizes), the time until all are Available, the latency
// from a spec change on one ring to its EtcdMember updated in its member
// cluster while the others exist (ETCDFED_SCALE_SAMPLES changes, default
// 20, on as many rings in turn), and over a window at rest
// (ETCDFED_SCALE_REST, default 30s): the hub's reconciles per second, CPU
// seconds per second and RSS (from /proc of the hub process), requests per
// second served by each apiserver (its own apiserver_request_total, so
// every client counts), etcdfed.dev writes, and the hub's etcd clients,
// dials and TCP connections. The first three rings have three members
// (spread over the three clusters); the others one member each, in the
// member clusters in turn. After the last size it waits
// ETCDFED_SCALE_IDLE (default 150s) more and counts the etcd clients the
// hub still holds (it closes one unused for 2 minutes). It measures and
// asserts nothing about speed; the markdown table goes to the log and to
// ETCDFED_SCALE_OUT when set.
func BenchmarkHubScale(b *testing.B) {
	topo := hubTopology(b)
	ctx := context.Background()
	sizes := []int{10, 25, 50}
	if v := os.Getenv("ETCDFED_SCALE_RINGS"); v != "" {
		sizes = nil
		for _, f := range strings.Split(v, ",") {
			n, err := strconv.Atoi(strings.TrimSpace(f))
			if err != nil || n < 1 {
				b.Fatalf("ETCDFED_SCALE_RINGS=%q: want ring counts such as 10,25,50", v)
			}
			sizes = append(sizes, n)
		}
	}
	rest := 30 * time.Second
	if v := os.Getenv("ETCDFED_SCALE_REST"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil {
			b.Fatalf("ETCDFED_SCALE_REST=%q: %v", v, err)
		}
		rest = d
	}
	samples := 20
	if v := os.Getenv("ETCDFED_SCALE_SAMPLES"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			b.Fatalf("ETCDFED_SCALE_SAMPLES=%q: want a count of spec changes per ring count", v)
		}
		samples = n
	}
	// After the last size, the rings stay at rest this long more, and the
	// etcd clients the hub still holds are counted: it closes a client
	// unused for 2 minutes, on its own clock.
	idle := 150 * time.Second
	if v := os.Getenv("ETCDFED_SCALE_IDLE"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil {
			b.Fatalf("ETCDFED_SCALE_IDLE=%q: %v", v, err)
		}
		idle = d
	}
	const ns = "scale"
	if err := ensureNamespace(ctx, topo.Hub, ns); err != nil {
		b.Fatal(err)
	}
	defer deleteAllRings(ctx, b, topo, ns)
	var rows []scaleRow
	created := 0
	for _, n := range sizes {
		if n <= created {
			continue
		}
		row := scaleRow{Rings: n, Members: n + 2*min(n, 3)}
		start := time.Now()
		for i := created; i < n; i++ {
			if err := topo.Hub.Client.Create(ctx, scaleRing(topo, ns, i)); err != nil {
				b.Fatal(err)
			}
		}
		created = n
		if err := waitAllAvailable(ctx, topo.Hub, ns, n, 10*time.Minute); err != nil {
			// The machine's limit: the sizes before it are reported.
			b.Errorf("%d rings: %v", n, err)
			break
		}
		row.Available = time.Since(start)
		// Let the passes that follow forming settle before measuring.
		sleepCtx(ctx, 10*time.Second)
		row.measureRest(ctx, b, topo, rest)
		row.Latency = specChangeLatencies(ctx, b, topo, ns, n, samples)
		rows = append(rows, row)
		b.Logf("%d rings: %s", n, row.line())
		// Written after every size, so a size the machine cannot hold
		// leaves the ones before it.
		if out := os.Getenv("ETCDFED_SCALE_OUT"); out != "" {
			if err := os.WriteFile(out, []byte(scaleTable(rows)), 0o644); err != nil {
				b.Error(err)
			}
		}
	}
	idleNote := ""
	if len(rows) > 0 && idle > 0 {
		sleepCtx(ctx, idle)
		m, err := scrape(ctx, topo.HubMetricsURL)
		if err != nil {
			b.Fatal(err)
		}
		idleNote = fmt.Sprintf("\nAfter %s more at rest with %d rings: the hub held %.0f etcd clients (%.0f closed as idle so far) and %d TCP connections.\n",
			idle, rows[len(rows)-1].Rings, m.sum("etcdfed_hub_etcd_clients"), m.sum("etcdfed_hub_etcd_idle_closed_total"), procTCP(hubPID(b)))
		if out := os.Getenv("ETCDFED_SCALE_OUT"); out != "" {
			if err := os.WriteFile(out, []byte(scaleTable(rows)+idleNote), 0o644); err != nil {
				b.Error(err)
			}
		}
	}
	if len(rows) > 0 {
		b.Log("\n" + scaleTable(rows) + idleNote)
	}
	if len(rows) > 0 {
		last := rows[len(rows)-1]
		b.ReportMetric(last.ReconcilesPerSec, "reconciles/s")
		b.ReportMetric(last.CPUPerSec, "hub-cpu-s/s")
		b.ReportMetric(float64(last.RSS>>20), "hub-MiB")
	}
}

// scaleRing is ring i of the benchmark: three members over the three
// clusters for the first three, else one member in a cluster in turn.
func scaleRing(topo *Topology, ns string, i int) *etcdfedv1.EtcdCluster {
	name := fmt.Sprintf("ring%d", i)
	ec := &etcdfedv1.EtcdCluster{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: etcdfedv1.EtcdClusterSpec{
			Replicas: 1, Version: "3.6.16",
			DNS: etcdfedv1.DNSSpec{Domain: name + ".scale.test", TTLSeconds: ptrTo[int32](5)},
			TLS: etcdfedv1.TLSSpec{PeerSkipClientSANVerification: !topo.PeerSourceIsPodIP},
		},
	}
	if i < 3 {
		ec.Spec.Replicas = 3
	} else {
		ec.Spec.Topology.Clusters = []string{topo.Members[i%len(topo.Members)].Name}
	}
	return ec
}

func ringReady(ec *etcdfedv1.EtcdCluster) bool {
	st := ec.Status
	return meta.IsStatusConditionTrue(st.Conditions, etcdfedv1.ConditionAvailable) &&
		int(st.ReadyMembers) == int(ec.Spec.Replicas) && len(st.Members) == int(ec.Spec.Replicas) && st.Operation == nil
}

func waitAllAvailable(ctx context.Context, hub *Cluster, ns string, n int, timeout time.Duration) error {
	return poll(ctx, timeout, fmt.Sprintf("%d EtcdClusters in %s Available", n, ns), func(ctx context.Context) (string, error) {
		var list etcdfedv1.EtcdClusterList
		if err := hub.Client.List(ctx, &list, client.InNamespace(ns)); err != nil {
			return "", err
		}
		var waiting []string
		for i := range list.Items {
			if !ringReady(&list.Items[i]) {
				waiting = append(waiting, list.Items[i].Name)
			}
		}
		if len(list.Items) < n || len(waiting) > 0 {
			return fmt.Sprintf("%d of %d ready; waiting for %v", len(list.Items)-len(waiting), n, waiting), nil
		}
		return "", nil
	})
}

// deleteAllRings deletes every EtcdCluster in ns and waits until their
// EtcdMembers are gone from every member cluster.
func deleteAllRings(ctx context.Context, tb testing.TB, topo *Topology, ns string) {
	tb.Helper()
	if err := topo.Hub.Client.DeleteAllOf(ctx, &etcdfedv1.EtcdCluster{}, client.InNamespace(ns)); err != nil {
		tb.Error(err)
		return
	}
	err := poll(ctx, 10*time.Minute, "EtcdClusters of "+ns+" deleted with their members", func(ctx context.Context) (string, error) {
		var list etcdfedv1.EtcdClusterList
		if err := topo.Hub.Client.List(ctx, &list, client.InNamespace(ns)); err != nil {
			return "", err
		}
		if len(list.Items) > 0 {
			return fmt.Sprintf("%d EtcdClusters left", len(list.Items)), nil
		}
		for _, c := range topo.Members {
			var members etcdfedv1.EtcdMemberList
			if err := c.Client.List(ctx, &members, client.InNamespace(etcdfedv1.DefaultRingNamespace), client.MatchingLabels{etcdfedv1.LabelClusterNamespace: ns}); err != nil {
				return "", err
			}
			if len(members.Items) > 0 {
				return fmt.Sprintf("%d EtcdMembers left in %s", len(members.Items), c.Name), nil
			}
		}
		return "", nil
	})
	if err != nil {
		tb.Error(err)
	}
}

// specChangeLatencies changes a pod template annotation on samples rings of
// one member in turn, each at rest when changed, and measures until that
// ring's EtcdMember in its member cluster carries it (polled every 10 ms).
func specChangeLatencies(ctx context.Context, b *testing.B, topo *Topology, ns string, n, samples int) []time.Duration {
	b.Helper()
	var out []time.Duration
	for k := range samples {
		i := 3 + k%max(1, n-3)
		if i >= n {
			break
		}
		name := fmt.Sprintf("ring%d", i)
		member := topo.Members[i%len(topo.Members)]
		// The ring is at rest when its spec changes: a ring revisited while
		// the roll of its previous change still runs would wait for that
		// roll, which is not the latency measured (with fewer rings than
		// samples, rings are revisited).
		ec := &etcdfedv1.EtcdCluster{}
		err := poll(ctx, 2*time.Minute, name+" at rest", func(ctx context.Context) (string, error) {
			if err := topo.Hub.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, ec); err != nil {
				return "", err
			}
			if !ringReady(ec) || ec.Status.ObservedGeneration != ec.Generation {
				return describeEtcdCluster(ec, "not at rest"), nil
			}
			return "", nil
		})
		if err != nil {
			b.Fatal(err)
		}
		mark := fmt.Sprintf("%d-%d", n, k)
		if ec.Spec.PodTemplate.Annotations == nil {
			ec.Spec.PodTemplate.Annotations = map[string]string{}
		}
		ec.Spec.PodTemplate.Annotations["bench.etcdfed.dev/mark"] = mark
		start := time.Now()
		if err := topo.Hub.Client.Update(ctx, ec); err != nil {
			b.Fatal(err)
		}
		err = pollFast(ctx, time.Minute, func(ctx context.Context) (bool, error) {
			var list etcdfedv1.EtcdMemberList
			if err := member.Client.List(ctx, &list, client.InNamespace(etcdfedv1.DefaultRingNamespace), client.MatchingLabels{etcdfedv1.LabelClusterUID: string(ec.UID)}); err != nil {
				return false, err
			}
			return len(list.Items) > 0 && list.Items[0].Spec.PodTemplate.Annotations["bench.etcdfed.dev/mark"] == mark, nil
		})
		if err != nil {
			b.Fatalf("spec change on %s: %v", name, err)
		}
		out = append(out, time.Since(start))
		b.Logf("spec change on %s at %s: its EtcdMember updated after %s", name, start.UTC().Format(time.RFC3339Nano), out[len(out)-1].Round(time.Millisecond))
	}
	// The rolls the changes started end before the next size is measured.
	if err := waitAllAvailable(ctx, topo.Hub, ns, n, 5*time.Minute); err != nil {
		b.Fatal(err)
	}
	slices.Sort(out)
	return out
}

func pollFast(ctx context.Context, timeout time.Duration, cond func(context.Context) (bool, error)) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	for {
		ok, err := cond(ctx)
		if ok {
			return nil
		}
		if ctx.Err() != nil {
			return fmt.Errorf("not within %s (last error: %w)", timeout, err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

type scaleRow struct {
	Rings     int
	Members   int // etcd members over all rings
	Available time.Duration
	Latency   []time.Duration
	Rest      time.Duration
	// At rest, per second unless said otherwise.
	ReconcilesPerSec float64
	CPUPerSec        float64
	RSS              uint64
	HubAPIPerSec     float64
	MemberAPIPerSec  []float64
	HubWrites        float64 // etcdfed.dev writes to the hub cluster over the window
	MemberWrites     float64 // etcdfed.dev writes to member clusters other than spoke status reports
	StatusReports    float64 // EtcdMember status patches over the window
	EtcdClients      string  // open etcd clients (hub metric), "n/a" when the hub has none
	EtcdDials        string  // etcd dials during the window (hub metric)
	TCPConns         int     // established TCP connections of the hub process
}

func (r *scaleRow) measureRest(ctx context.Context, b *testing.B, topo *Topology, window time.Duration) {
	b.Helper()
	pid := hubPID(b)
	clusters := append([]*Cluster{topo.Hub}, topo.Members...)
	reqs := func() []apiCounts {
		out := make([]apiCounts, len(clusters))
		for i, c := range clusters {
			var err error
			if out[i], err = apiRequestCounts(ctx, c); err != nil {
				b.Fatal(err)
			}
		}
		return out
	}
	hub0, err := scrape(ctx, topo.HubMetricsURL)
	if err != nil {
		b.Fatal(err)
	}
	cpu0 := procCPU(pid)
	req0 := reqs()
	start := time.Now()
	sleepCtx(ctx, window)
	req1 := reqs()
	cpu1 := procCPU(pid)
	elapsed := time.Since(start)
	hub1, err := scrape(ctx, topo.HubMetricsURL)
	if err != nil {
		b.Fatal(err)
	}
	if pid2 := hubPID(b); pid2 != pid {
		b.Fatalf("the hub restarted during the window (pid %d, then %d)", pid, pid2)
	}
	r.Rest = window
	s := elapsed.Seconds()
	r.ReconcilesPerSec = (hub1.sum("controller_runtime_reconcile_total", "controller", "etcdcluster") - hub0.sum("controller_runtime_reconcile_total", "controller", "etcdcluster")) / s
	r.CPUPerSec = (cpu1 - cpu0) / s
	r.RSS = procRSS(pid)
	for i := range clusters {
		total := (req1[i].total - req0[i].total) / s
		if i == 0 {
			r.HubAPIPerSec = total
			r.HubWrites = req1[i].writes - req0[i].writes
			continue
		}
		r.MemberAPIPerSec = append(r.MemberAPIPerSec, total)
		r.StatusReports += req1[i].statusReports - req0[i].statusReports
		r.MemberWrites += (req1[i].writes - req0[i].writes) - (req1[i].statusReports - req0[i].statusReports) - (req1[i].spokeStatus - req0[i].spokeStatus)
	}
	r.EtcdClients, r.EtcdDials = "n/a", "n/a"
	if hub1.has("etcdfed_hub_etcd_clients") {
		r.EtcdClients = fmt.Sprintf("%.0f", hub1.sum("etcdfed_hub_etcd_clients"))
	}
	if hub1.has("etcdfed_hub_etcd_dials_total") {
		r.EtcdDials = fmt.Sprintf("%.0f", hub1.sum("etcdfed_hub_etcd_dials_total")-hub0.sum("etcdfed_hub_etcd_dials_total"))
	}
	r.TCPConns = procTCP(pid)
}

func (r scaleRow) line() string {
	return strings.Join(r.cells(), " | ")
}

func (r scaleRow) cells() []string {
	p := func(q float64) string {
		if len(r.Latency) == 0 {
			return "n/a"
		}
		i := min(len(r.Latency)-1, int(q*float64(len(r.Latency))))
		return fmt.Sprintf("%.0f ms", float64(r.Latency[i].Microseconds())/1000)
	}
	var members []string
	for _, v := range r.MemberAPIPerSec {
		members = append(members, fmt.Sprintf("%.1f", v))
	}
	return []string{
		strconv.Itoa(r.Rings),
		fmt.Sprintf("%.0f s", r.Available.Seconds()),
		p(0.5), p(0.99),
		fmt.Sprintf("%.2f", r.ReconcilesPerSec),
		fmt.Sprintf("%.3f", r.CPUPerSec),
		fmt.Sprintf("%d", r.RSS>>20),
		fmt.Sprintf("%.1f", r.HubAPIPerSec),
		strings.Join(members, " / "),
		fmt.Sprintf("%.0f", r.HubWrites),
		fmt.Sprintf("%.0f", r.MemberWrites),
		fmt.Sprintf("%.2f", r.StatusReports/float64(r.Members)/r.Rest.Minutes()),
		r.EtcdClients, r.EtcdDials, strconv.Itoa(r.TCPConns),
	}
}

func scaleTable(rows []scaleRow) string {
	var sb strings.Builder
	window := time.Duration(0)
	if len(rows) > 0 {
		window = rows[0].Rest
	}
	fmt.Fprintf(&sb, "At rest = a %s window after all rings are Available; latency = spec change on one ring to its EtcdMember updated (%d samples per row).\n\n", window, len(rows[0].Latency))
	sb.WriteString("| rings | all Available | spec→EtcdMember p50 | p99 | reconciles/s | hub CPU s/s | hub RSS MiB | hub API req/s | member API req/s | hub etcdfed writes | member etcdfed writes (hub) | EtcdMember status /member/min | etcd clients | etcd dials | hub TCP conns |\n")
	sb.WriteString("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n")
	for _, r := range rows {
		sb.WriteString("| " + strings.Join(r.cells(), " | ") + " |\n")
	}
	return sb.String()
}

// apiCounts are an apiserver's own request counters.
type apiCounts struct {
	total, writes, statusReports, spokeStatus float64
	// byKind: every request by "VERB resource[/subresource]".
	byKind map[string]float64
}

// apiRequestCounts reads apiserver_request_total: every request, the
// etcdfed.dev writes, and of those the EtcdMember and EtcdSpoke status
// writes (the spokes' own reports).
func apiRequestCounts(ctx context.Context, c *Cluster) (apiCounts, error) {
	body, err := c.Clientset.Discovery().RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
	if err != nil {
		return apiCounts{}, fmt.Errorf("metrics of %s: %w", c.Name, err)
	}
	m := parseMetrics(string(body))
	out := apiCounts{byKind: map[string]float64{}}
	for _, s := range m["apiserver_request_total"] {
		out.total += s.value
		kind := s.labels["verb"] + " " + s.labels["resource"]
		if sub := s.labels["subresource"]; sub != "" {
			kind += "/" + sub
		}
		out.byKind[kind] += s.value
		if s.labels["group"] != "etcdfed.dev" {
			continue
		}
		switch s.labels["verb"] {
		case "POST", "PUT", "PATCH", "APPLY", "DELETE", "DELETECOLLECTION":
		default:
			continue
		}
		out.writes += s.value
		if s.labels["subresource"] == "status" {
			switch s.labels["resource"] {
			case "etcdmembers":
				out.statusReports += s.value
			case "etcdspokes":
				out.spokeStatus += s.value
			}
		}
	}
	return out, nil
}

// hubPID is the pid of the hub process of the local environment.
func hubPID(tb testing.TB) int {
	tb.Helper()
	for _, c := range hubFx.env.Status().Components {
		if c.Name == "hub" && c.PID != 0 {
			return c.PID
		}
	}
	tb.Fatal("the local environment runs no hub process")
	return 0
}

// procCPU is the process's user+system CPU seconds (clock ticks of 1/100 s).
func procCPU(pid int) float64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+2:])
	// After the command: state is field 3; utime 14 and stime 15.
	if len(f) < 13 {
		return 0
	}
	u, _ := strconv.ParseFloat(f[11], 64)
	st, _ := strconv.ParseFloat(f[12], 64)
	return (u + st) / 100
}

// procRSS is the process's resident set in bytes.
func procRSS(pid int) uint64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "VmRSS:"); ok {
			kb, _ := strconv.ParseUint(strings.Fields(v)[0], 10, 64)
			return kb << 10
		}
	}
	return 0
}

// procTCP counts the process's established TCP sockets.
func procTCP(pid int) int {
	inodes := map[string]bool{}
	fds, _ := filepath.Glob(fmt.Sprintf("/proc/%d/fd/*", pid))
	for _, fd := range fds {
		if l, err := os.Readlink(fd); err == nil && strings.HasPrefix(l, "socket:[") {
			inodes[strings.TrimSuffix(strings.TrimPrefix(l, "socket:["), "]")] = true
		}
	}
	n := 0
	for _, f := range []string{"tcp", "tcp6"} {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/net/%s", pid, f))
		if err != nil {
			continue
		}
		for _, l := range strings.Split(string(b), "\n")[1:] {
			fs := strings.Fields(l)
			// st 01 is ESTABLISHED; the inode is field 10.
			if len(fs) > 9 && fs[3] == "01" && inodes[fs[9]] {
				n++
			}
		}
	}
	return n
}
