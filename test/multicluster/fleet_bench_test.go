package multicluster

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"maps"
	"math"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdfedv1 "github.com/etcdfed/etcdfed/api/v1alpha1"
	"github.com/etcdfed/etcdfed/dev/etcdtest"
	"github.com/etcdfed/etcdfed/dev/localenv"
	"github.com/etcdfed/etcdfed/dev/localenv/addr"
	"github.com/etcdfed/etcdfed/hub/shard"
)

// BenchmarkFleet measures one real hub over a fleet of simulated member
// clusters (dev/simcluster: real apiservers and the real spoke's EtcdSpoke,
// Lease, gossip and DNS, etcd members simulated by dev/etcdsim):
// FLEET_RINGS rings (default 100), alternately of 3 and 5 members, over
// FLEET_CLUSTERS member clusters (default 10; ring i may use the k+1
// clusters from i modulo the count, k its size, so that a lost cluster
// can be replaced), FLEET_ZONES zones each (default: enough addresses).
//
//   - the time until every ring is Available (and failure tolerant);
//   - at rest (FLEET_REST, default 30s, after every spoke published its
//     round trip to every peer and 10s of settling): the hub's
//     reconciles, CPU and RSS, requests per second served by the hub
//     cluster and the member clusters, etcdfed.dev writes to the hub cluster
//     and (other than the spokes' status reports) to member clusters;
//     FLEET_REST_ONLY=1 stops there (the report holds what was measured
//     so far); FLEET_PPROF=DIR writes a 30 s CPU profile of the hub's
//     bootstrap to DIR;
//   - spec change to EtcdMember latency at rest (FLEET_SAMPLES, default
//     20, on as many rings in turn, each once the fleet is at rest: the
//     roll the sample before began is over);
//   - the hub killed and restarted: the time until every ring was
//     reconciled once (the new process's etcdcluster reconciles reach the
//     ring count with its queue empty), twice: a crash (SIGKILL, the
//     process restarted in its pod, under the pod's name in the Lease),
//     then its pod replaced (SIGKILL, a new pod: a new name, which waits
//     for the Lease the killed process held to expire);
//   - with FLEET_LIMIT=n the hub runs with --max-fleet-disruptions=n,
//     and the loss below reports the most rings seen with a limited
//     operation in flight at once;
//   - with FLEET_SHARDS=2 two hubs share the rings (hub/shard: the first
//     with --shard=a, a second with --shard=b --fleet-duties=false, rings
//     0, 1, 4, 5, ... labelled a, the others b; each with the fleet limit
//     given); the hub figures add up both (CPU, reconciles, queue; RSS is
//     the larger), and the restart kills shard a's hub and waits for its
//     own rings;
//   - a version roll of every ring (phase roll: the rings are created on
//     etcd 3.6.15, and spec.version of each is set to 3.6.16, every ring
//     asked within a few seconds): for each ring the time from its ask
//     until every member reports 3.6.16 and the ring is at rest again
//     (p50, p99, max), and meanwhile the hub's CPU, RSS and queue and the
//     rings with a limited operation in flight (below);
//   - a CA rotation of every ring (phase carotate: the annotation
//     `etcdfed rotate-ca` writes, on every ring within a few seconds): for
//     each ring the time from its ask until status.caRotation says
//     Completed for that request and the ring is at rest again, with the
//     same figures;
//   - one member cluster lost, the one hosting members of the share of
//     rings nearest FLEET_LOSS_SHARE (default 0.3): for each ring it hosted,
//     the time until the ring is failure tolerant again with no member
//     there (p50, p99, max), and meanwhile the hub's CPU, RSS and queue.
//
// FLEET_PHASES chooses the phases after the rest window, a comma list of
// spec (the spec changes), restart, roll, carotate and loss (default
// spec,restart,loss); they run in that order whatever the list's. During
// roll, carotate and loss the benchmark lists the rings every 500 ms and
// counts those whose status records a limited operation (Replace, Move,
// Roll, Disrupt, Defrag): with FLEET_LIMIT set, a list holding more than
// the limit fails the benchmark (the limit is a correctness property),
// naming the rings and their operations.
//
// It asserts nothing about speed; the markdown report goes to the log and
// to FLEET_OUT when set.
func BenchmarkFleet(b *testing.B) {
	rings := envIntB(b, "FLEET_RINGS", 100)
	clusters := envIntB(b, "FLEET_CLUSTERS", 10)
	samples := envIntB(b, "FLEET_SAMPLES", 20)
	share := 0.3
	if v := os.Getenv("FLEET_LOSS_SHARE"); v != "" {
		var err error
		if share, err = strconv.ParseFloat(v, 64); err != nil {
			b.Fatalf("FLEET_LOSS_SHARE=%q: %v", v, err)
		}
	}
	rest := envDurB(b, "FLEET_REST", 30*time.Second)
	// 245 member addresses per zone; the busiest cluster holds about
	// (k+1)/clusters of the rings' members.
	perCluster := rings * 5 / clusters
	zones := envIntB(b, "FLEET_ZONES", max(1, int(math.Ceil(float64(perCluster)/200))))
	if rings > 1 && clusters < 6 {
		// Ring i may use the k+1 clusters from i: a ring of 5 needs 6
		// distinct ones (with fewer, its topology names a cluster twice
		// and the apiserver refuses it).
		b.Fatalf("FLEET_CLUSTERS=%d: the rings of 5 members need at least 6 member clusters", clusters)
	}
	if clusters > addr.MaxMemberClusters {
		b.Fatalf("FLEET_CLUSTERS=%d: the local environment holds at most %d member clusters", clusters, addr.MaxMemberClusters)
	}
	if zones > addr.MaxZones {
		b.Fatalf("FLEET_ZONES=%d: the local environment holds at most %d zones per cluster (%d rings over %d clusters need more clusters)", zones, addr.MaxZones, rings, clusters)
	}
	limit := 0
	if os.Getenv("FLEET_LIMIT") != "" {
		limit = envIntB(b, "FLEET_LIMIT", 0)
	}
	shards := envIntB(b, "FLEET_SHARDS", 1)
	if shards > 2 {
		b.Fatalf("FLEET_SHARDS=%d: 1 or 2", shards)
	}
	phases, err := fleetPhases(os.Getenv("FLEET_PHASES"))
	if err != nil {
		b.Fatal(err)
	}
	for range b.N {
		runFleet(b, rings, clusters, zones, samples, share, rest, limit, shards, phases)
	}
}

// fleetPhaseOrder are the phases after the rest window, in the order they
// run (the loss last: it takes a member cluster away for good).
var fleetPhaseOrder = []string{"spec", "restart", "roll", "carotate", "loss"}

// fleetPhases reads FLEET_PHASES: a comma list of fleetPhaseOrder's names
// (empty: spec, restart and loss, the benchmark before the roll phases).
func fleetPhases(v string) (map[string]bool, error) {
	if strings.TrimSpace(v) == "" {
		v = "spec,restart,loss"
	}
	out := map[string]bool{}
	for _, p := range strings.Split(v, ",") {
		p = strings.TrimSpace(p)
		if !slices.Contains(fleetPhaseOrder, p) {
			return nil, fmt.Errorf("FLEET_PHASES=%q: unknown phase %q (phases: %s)", v, p, strings.Join(fleetPhaseOrder, ", "))
		}
		out[p] = true
	}
	return out, nil
}

// The version roll's releases: both 3.6 patches etcdfed runs, so the
// roll is a patch step (etcd's cluster version stays 3.6.0, as the
// simulation keeps it).
const (
	fleetRollFrom = "3.6.15"
	fleetRollTo   = "3.6.16"
)

type fleetReport struct {
	rings, clusters, zones, members int
	shards                          int
	// restartRings: the rings of the restarted hub (its shard's).
	restartRings int
	available    time.Duration
	// engageFailures: the hubs' failed attempts to engage a member
	// cluster (a cache not synced in time among them) until all were
	// Available.
	engageFailures float64
	// roundTrips: from the rings' creation until every spoke published
	// its round trip to every peer (the rest window starts 10 s later).
	roundTrips time.Duration
	// bootstrap: the hubs' peaks from the rings' creation until every
	// round trip was published (the goal's hub memory covers the
	// bootstrap, not only the rest).
	bootstrap hubPeaks
	rest      fleetRest
	latency   []time.Duration
	// specWrites: the bench's own update of each sample's EtcdCluster, a
	// write to the hub cluster's apiserver from another process in the
	// same moments: the baseline the spec change's latency is read
	// against (a slow apiserver slows both).
	specWrites []time.Duration
	// specLoad: where the machine's CPU and the apiservers' requests went
	// over the spec phase.
	specLoad          fleetLoad
	restart           time.Duration
	restartReconciles float64
	// restartSpokeWrites, restartHubWrites: EtcdSpoke status writes by
	// the spokes, etcdfed.dev writes to the hub cluster, from the kill
	// until every ring was reconciled once.
	restartSpokeWrites, restartHubWrites float64
	// restartReplaced, restartReplacedReconciles: the same, the hub's pod
	// replaced rather than its process restarted in it.
	restartReplaced           time.Duration
	restartReplacedReconciles float64
	lost                      string
	lostRings                 int
	loss                      fleetLossResult
	limit                     int
	// restOnly: FLEET_REST_ONLY=1, the run stopped after the rest window.
	restOnly bool
	phases   map[string]bool
	// roll, caRotation: the version roll and the CA rotation of every
	// ring (nil when not run).
	roll, caRotation *fleetRollout
}

type fleetRest struct {
	window                    time.Duration
	reconcilesPerSec, cpu     float64
	rss                       uint64
	hubReqs                   float64
	memberReqs                []float64
	hubWrites, memberWrites   float64
	statusReports, spokeStats float64
}

func runFleet(b *testing.B, rings, clusters, zones, samples int, share float64, rest time.Duration, limit, shards int, phases map[string]bool) {
	var hubArgs []string
	if limit > 0 {
		hubArgs = append(hubArgs, fmt.Sprintf("--max-fleet-disruptions=%d", limit))
	}
	if shards == 2 {
		hubArgs = append(hubArgs, "--shard=a")
	}
	// FLEET_PPROF=DIR: the hub serves Go's profiles on a free loopback
	// port, and a CPU profile of 30 s of its bootstrap (from a minute
	// after the rings' creation) is written to DIR (go tool pprof
	// DIR/hub-cpu-bootstrap.pprof).
	pprofDir, pprofAddr := os.Getenv("FLEET_PPROF"), ""
	if pprofDir != "" {
		pprofAddr = fmt.Sprintf("127.0.0.1:%d", etcdtest.FreePort(b))
		hubArgs = append(hubArgs, "--pprof-bind-address="+pprofAddr)
		if err := os.MkdirAll(pprofDir, 0o755); err != nil {
			b.Fatal(err)
		}
	}
	f := startSimFleet(b, clusters, zones, 0, hubArgs...)
	ctx := context.Background()
	f.hubs = []fleetHub{{component: "hub", metrics: f.Topo.HubMetricsURL}}
	if shards == 2 {
		f.hubs = append(f.hubs, addFleetShardHub(ctx, b, f, "hub-shard-b", 3, "--shard=b", "--fleet-duties=false"))
	}
	const ns = "fleet"
	if err := ensureNamespace(ctx, f.Topo.Hub, ns); err != nil {
		b.Fatal(err)
	}
	rep := fleetReport{rings: rings, clusters: clusters, zones: zones, limit: limit, shards: shards, phases: phases}
	names := make([]string, 0, clusters)
	for _, c := range f.Topo.Members {
		names = append(names, c.Name)
	}
	slices.Sort(names)
	start := time.Now()
	bootSampler := startHubSampler(ctx, b, f)
	b.Cleanup(func() { bootSampler.finish() }) // a bench that fails before the rest
	for i := range rings {
		k := 3 + 2*(i%2)
		var eligible []string
		for j := range k + 1 {
			eligible = append(eligible, localenv.MemberClusterName(1+(i+j)%clusters))
		}
		rep.members += k
		ec := simRing(ns, fmt.Sprintf("ring%d", i), int32(k), eligible)
		if phases["roll"] {
			ec.Spec.Version = fleetRollFrom
		}
		if shards == 2 {
			ec.Labels = map[string]string{shard.Label: "b"}
			if (i/2)%2 == 0 {
				ec.Labels[shard.Label] = "a"
			}
		}
		if shards == 1 || ec.Labels[shard.Label] == "a" {
			rep.restartRings++
		}
		if err := f.Topo.Hub.Client.Create(ctx, ec); err != nil {
			b.Fatal(err)
		}
	}
	// Without FLEET_PPROF nothing waits for the profile's minute.
	profiled := make(chan struct{})
	if pprofAddr == "" {
		close(profiled)
	} else {
		go func() {
			defer close(profiled)
			time.Sleep(time.Minute)
			path := filepath.Join(pprofDir, "hub-cpu-bootstrap.pprof")
			if err := saveCPUProfile(ctx, pprofAddr, 30*time.Second, path); err != nil {
				b.Logf("CPU profile of the hub: %v", err)
				return
			}
			b.Logf("CPU profile of the hub (30 s) in %s", path)
		}()
	}
	// FLEET_AVAILABLE_TIMEOUT: past 300 rings on two cores the bootstrap
	// takes longer than the default allows.
	if err := waitFleet(ctx, f, ns, rings, envDurB(b, "FLEET_AVAILABLE_TIMEOUT", 30*time.Minute), ""); err != nil {
		b.Fatal(err)
	}
	rep.available = time.Since(start)
	<-profiled
	b.Logf("%d rings Available and failure tolerant after %s", rings, rep.available.Round(time.Second))
	if n, err := fleetHubsMetric(ctx, f, "etcdfed_hub_member_cluster_engage_failures_total"); err == nil {
		rep.engageFailures = n
	}
	// The fleet at rest is one whose spokes measured their round trips:
	// memberlist probes one peer a second, so with twenty clusters a
	// spoke's first round trip to each peer (MinRoundTripSamples probes)
	// comes about 3 minutes after it started, and the hub records each
	// in every ring spanning the pair. Measured before, the rest window
	// and the restart fell into that first wave.
	if err := waitRoundTrips(ctx, f, 15*time.Minute); err != nil {
		b.Fatal(err)
	}
	rep.roundTrips = time.Since(start)
	rep.bootstrap = bootSampler.finish()
	b.Logf("every spoke published its round trip to every peer %s after the rings were created", rep.roundTrips.Round(time.Second))
	sleepCtx(ctx, 10*time.Second)
	rep.rest = measureFleetRest(ctx, b, f, rest)
	b.Logf("at rest: %+v", rep.rest)
	if os.Getenv("FLEET_REST_ONLY") == "1" {
		rep.restOnly = true
		rep.write(b)
		return
	}
	if phases["spec"] {
		load := startFleetLoad(ctx, b, f)
		rep.latency, rep.specWrites = fleetSpecChanges(ctx, b, f, ns, rings, samples)
		rep.specLoad = load.end(ctx, b)
		b.Logf("spec phase: %s", rep.specLoad)
		if err := waitFleet(ctx, f, ns, rings, 10*time.Minute, ""); err != nil {
			b.Fatal(err)
		}
	}

	// The hub restarted.
	if phases["restart"] {
		rep.restart, rep.restartReconciles, rep.restartSpokeWrites, rep.restartHubWrites = fleetHubRestart(ctx, b, f, rep.restartRings, false)
		b.Logf("hub crashed, restarted in its pod: every ring reconciled once after %s (%0.f reconciles, %.0f spoke status writes, %.0f hub writes)", rep.restart.Round(time.Millisecond), rep.restartReconciles, rep.restartSpokeWrites, rep.restartHubWrites)
		if err := waitFleet(ctx, f, ns, rings, 10*time.Minute, ""); err != nil {
			b.Fatal(err)
		}
		rep.restartReplaced, rep.restartReplacedReconciles, _, _ = fleetHubRestart(ctx, b, f, rep.restartRings, true)
		b.Logf("hub's pod replaced: every ring reconciled once after %s (%0.f reconciles)", rep.restartReplaced.Round(time.Millisecond), rep.restartReplacedReconciles)
		if err := waitFleet(ctx, f, ns, rings, 10*time.Minute, ""); err != nil {
			b.Fatal(err)
		}
	}

	// A version roll and a CA rotation of every ring.
	timeout := envDurB(b, "FLEET_ROLLOUT_TIMEOUT", 60*time.Minute)
	if phases["roll"] {
		rep.roll = fleetRolloutAll(ctx, b, f, ns, limit, timeout, versionRoll(fleetRollTo))
		rep.write(b)
		if rep.roll.unfinished > 0 {
			// The rings still roll: a CA rotation now would measure both.
			b.Fatalf("version roll: %d rings not rolled within FLEET_ROLLOUT_TIMEOUT=%s (first: %s); the report holds what finished", rep.roll.unfinished, timeout, rep.roll.firstUnfinished)
		}
	}
	if phases["carotate"] {
		rep.caRotation = fleetRolloutAll(ctx, b, f, ns, limit, timeout, caRotation())
		rep.write(b)
		if rep.caRotation.unfinished > 0 {
			b.Fatalf("CA rotation: %d rings not rotated within FLEET_ROLLOUT_TIMEOUT=%s (first: %s); the report holds what finished", rep.caRotation.unfinished, timeout, rep.caRotation.firstUnfinished)
		}
	}
	if !phases["loss"] {
		rep.write(b)
		return
	}

	// One member cluster lost.
	var list etcdfedv1.EtcdClusterList
	if err := f.Topo.Hub.Client.List(ctx, &list, client.InNamespace(ns)); err != nil {
		b.Fatal(err)
	}
	hosts := map[string][]string{}
	for _, ec := range list.Items {
		seen := map[string]bool{}
		for _, m := range ec.Status.Members {
			if !seen[m.Cluster] {
				seen[m.Cluster] = true
				hosts[m.Cluster] = append(hosts[m.Cluster], ec.Name)
			}
		}
	}
	best := ""
	for _, n := range names {
		if best == "" || math.Abs(float64(len(hosts[n]))/float64(rings)-share) < math.Abs(float64(len(hosts[best]))/float64(rings)-share) {
			best = n
		}
	}
	rep.lost, rep.lostRings = best, len(hosts[best])
	rep.loss = fleetLoss(ctx, b, f, ns, best, hosts[best], limit)
	rep.write(b)
	if rep.loss.unrepaired > 0 {
		b.Errorf("%d rings not failure tolerant again", rep.loss.unrepaired)
	}
}

// waitRoundTrips waits until every member cluster's EtcdSpoke reports a
// round trip to every other member cluster.
func waitRoundTrips(ctx context.Context, f *SimFleet, timeout time.Duration) error {
	n := len(f.Topo.Members)
	return poll(ctx, timeout, "every spoke's round trips to every peer", func(ctx context.Context) (string, error) {
		missing := 0
		for _, c := range f.Topo.Members {
			var sp etcdfedv1.EtcdSpoke
			if err := c.Client.Get(ctx, client.ObjectKey{Namespace: etcdfedv1.DefaultRingNamespace, Name: etcdfedv1.SpokeObjectName}, &sp); err != nil {
				return err.Error(), nil
			}
			missing += max(0, n-1-len(sp.Status.RoundTrips))
		}
		if missing > 0 {
			return fmt.Sprintf("%d round trips not published yet", missing), nil
		}
		return "", nil
	})
}

// fleetLoad is where CPU and API requests went over a phase: the CPU
// seconds of the environment's processes by kind (the hub, the
// apiservers, their etcds) and of the bench's own process, which runs the
// simulated spokes and etcd members, and every apiserver's requests by
// kind. Read against the phase's latency: a saturated machine slows the
// hub and the apiservers alike.
type fleetLoad struct {
	seconds                       float64
	hub, apiservers, etcds, bench float64
	hubReqs, memberReqs           float64
	top                           []string
}

type fleetLoadStart struct {
	f     *SimFleet
	at    time.Time
	cpu   map[string]float64
	calls map[string]apiCounts
}

func fleetCPU(f *SimFleet) map[string]float64 {
	out := map[string]float64{"bench": procCPU(os.Getpid())}
	st := f.Env.Status()
	procs := st.Components
	for _, c := range st.Clusters {
		procs = append(procs, c.Processes...)
	}
	for _, c := range procs {
		if c.PID == 0 {
			continue
		}
		kind := c.Name
		switch {
		case strings.HasPrefix(c.Name, "apiserver-"):
			kind = "apiservers"
		case strings.HasPrefix(c.Name, "etcd-"):
			kind = "etcds"
		case strings.HasPrefix(c.Name, "hub"):
			kind = "hub"
		}
		out[kind] += procCPU(c.PID)
	}
	return out
}

func fleetCalls(ctx context.Context, tb testing.TB, f *SimFleet) map[string]apiCounts {
	tb.Helper()
	out := map[string]apiCounts{}
	for _, c := range append([]*Cluster{f.Topo.Hub}, f.Topo.Members...) {
		a, err := apiRequestCounts(ctx, c)
		if err != nil {
			tb.Fatal(err)
		}
		out[c.Name] = a
	}
	return out
}

func startFleetLoad(ctx context.Context, tb testing.TB, f *SimFleet) *fleetLoadStart {
	tb.Helper()
	return &fleetLoadStart{f: f, at: time.Now(), cpu: fleetCPU(f), calls: fleetCalls(ctx, tb, f)}
}

func (s *fleetLoadStart) end(ctx context.Context, tb testing.TB) fleetLoad {
	tb.Helper()
	cpu, calls := fleetCPU(s.f), fleetCalls(ctx, tb, s.f)
	out := fleetLoad{seconds: time.Since(s.at).Seconds()}
	out.hub, out.apiservers = cpu["hub"]-s.cpu["hub"], cpu["apiservers"]-s.cpu["apiservers"]
	out.etcds, out.bench = cpu["etcds"]-s.cpu["etcds"], cpu["bench"]-s.cpu["bench"]
	kinds := map[string]float64{}
	for name, a := range calls {
		d := a.total - s.calls[name].total
		if name == s.f.Topo.Hub.Name {
			out.hubReqs += d
		} else {
			out.memberReqs += d
		}
		for k, v := range a.byKind {
			kinds[k] += v - s.calls[name].byKind[k]
		}
	}
	keys := slices.Collect(maps.Keys(kinds))
	slices.SortFunc(keys, func(a, b string) int { return cmp.Or(cmp.Compare(kinds[b], kinds[a]), strings.Compare(a, b)) })
	for _, k := range keys[:min(5, len(keys))] {
		out.top = append(out.top, fmt.Sprintf("%s %.1f/s", k, kinds[k]/out.seconds))
	}
	return out
}

func (l fleetLoad) cores() string {
	if l.seconds == 0 {
		return "-"
	}
	return fmt.Sprintf("%.2f / %.2f / %.2f / %.2f over %.0f s", l.hub/l.seconds, l.apiservers/l.seconds, l.etcds/l.seconds, l.bench/l.seconds, l.seconds)
}

func (l fleetLoad) requests() string {
	if l.seconds == 0 {
		return "-"
	}
	return fmt.Sprintf("%.1f / %.1f; %s", l.hubReqs/l.seconds, l.memberReqs/l.seconds, strings.Join(l.top, ", "))
}

func (l fleetLoad) String() string { return "CPU cores " + l.cores() + "; requests/s " + l.requests() }

// waitFleet waits until n rings of ns are ready and failure tolerant with
// no member in away.
func waitFleet(ctx context.Context, f *SimFleet, ns string, n int, timeout time.Duration, away string) error {
	last := time.Time{}
	return poll(ctx, timeout, fmt.Sprintf("%d rings ready", n), func(ctx context.Context) (string, error) {
		var list etcdfedv1.EtcdClusterList
		if err := f.Topo.Hub.Client.List(ctx, &list, client.InNamespace(ns)); err != nil {
			return "", err
		}
		var waiting []string
		for i := range list.Items {
			if !tolerantAway(&list.Items[i], away) {
				waiting = append(waiting, list.Items[i].Name)
			}
		}
		if len(list.Items) < n || len(waiting) > 0 {
			msg := fmt.Sprintf("%d of %d ready", len(list.Items)-len(waiting), n)
			if time.Since(last) > 30*time.Second {
				last = time.Now()
				fmt.Fprintf(os.Stderr, "%s %s; first waiting: %v\n", time.Now().UTC().Format(time.TimeOnly), msg, waiting[:min(5, len(waiting))])
			}
			return msg, nil
		}
		return "", nil
	})
}

func fleetHubPID(tb testing.TB, f *SimFleet) int {
	tb.Helper()
	return fleetComponentPID(tb, f, "hub")
}

func fleetComponentPID(tb testing.TB, f *SimFleet, name string) int {
	tb.Helper()
	for _, c := range f.Env.Status().Components {
		if c.Name == name && c.PID != 0 {
			return c.PID
		}
	}
	tb.Fatalf("no %s process", name)
	return 0
}

// fleetHub is one hub process of the benchmark: its localenv component
// and metrics URL.
type fleetHub struct{ component, metrics string }

// fleetHubsCPU is the CPU seconds of every hub process; fleetHubsRSS the
// largest RSS; fleetHubsMetric the sum of a metric over the hubs.
func fleetHubsCPU(tb testing.TB, f *SimFleet) float64 {
	var sum float64
	for _, h := range f.hubs {
		sum += procCPU(fleetComponentPID(tb, f, h.component))
	}
	return sum
}

func fleetHubsRSS(tb testing.TB, f *SimFleet) uint64 {
	var m uint64
	for _, h := range f.hubs {
		m = max(m, procRSS(fleetComponentPID(tb, f, h.component)))
	}
	return m
}

func fleetHubsMetric(ctx context.Context, f *SimFleet, name string, labels ...string) (float64, error) {
	var sum float64
	for _, h := range f.hubs {
		m, err := scrape(ctx, h.metrics)
		if err != nil {
			return 0, err
		}
		sum += m.sum(name, labels...)
	}
	return sum, nil
}

// addFleetShardHub starts a second hub process beside the environment's
// (the same arguments but --shard, extra added; metrics and health on the
// hub's agent address plus offset) and waits until it engaged every
// member cluster.
func addFleetShardHub(ctx context.Context, tb testing.TB, f *SimFleet, name string, offset byte, extra ...string) fleetHub {
	tb.Helper()
	args, err := f.Env.ComponentArgs("hub")
	if err != nil {
		tb.Fatal(err)
	}
	args = slices.DeleteFunc(args, func(a string) bool { return strings.HasPrefix(a, "--shard") })
	hubEnv, err := f.Env.ComponentEnv("hub")
	if err != nil {
		tb.Fatal(err)
	}
	b4 := netip.MustParseAddr(f.Env.State().Hub.AgentAddress).As4()
	b4[3] += offset
	ip := netip.AddrFrom4(b4)
	metrics := netip.AddrPortFrom(ip, addr.AgentMetricsPort).String()
	args = append(args, "--metrics-bind-address="+metrics, "--health-probe-bind-address="+netip.AddrPortFrom(ip, addr.AgentHealthPort).String())
	args = append(args, extra...)
	if err := f.Env.AddComponent(localenv.ComponentSpec{Name: name, Path: filepath.Join(f.Bin, "hub"), Cluster: localenv.HubClusterName, Args: args, Env: hubEnv}); err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = f.Env.StopComponent(name, 5*time.Second) })
	url := "http://" + metrics + "/metrics"
	for _, m := range f.Topo.Members {
		if err := WaitForHubEngaged(ctx, url, m.Name, 2*time.Minute); err != nil {
			tb.Fatalf("%s: %v", name, err)
		}
	}
	return fleetHub{component: name, metrics: url}
}

func measureFleetRest(ctx context.Context, b *testing.B, f *SimFleet, window time.Duration) fleetRest {
	b.Helper()
	all := append([]*Cluster{f.Topo.Hub}, f.Topo.Members...)
	reqs := func() []apiCounts {
		out := make([]apiCounts, len(all))
		for i, c := range all {
			var err error
			if out[i], err = apiRequestCounts(ctx, c); err != nil {
				b.Fatal(err)
			}
		}
		return out
	}
	m0, err := fleetHubsMetric(ctx, f, "controller_runtime_reconcile_total", "controller", "etcdcluster")
	if err != nil {
		b.Fatal(err)
	}
	cpu0, r0, t0 := fleetHubsCPU(b, f), reqs(), time.Now()
	sleepCtx(ctx, window)
	r1, cpu1, s := reqs(), fleetHubsCPU(b, f), time.Since(t0).Seconds()
	m1, err := fleetHubsMetric(ctx, f, "controller_runtime_reconcile_total", "controller", "etcdcluster")
	if err != nil {
		b.Fatal(err)
	}
	out := fleetRest{window: window, cpu: (cpu1 - cpu0) / s, rss: fleetHubsRSS(b, f), reconcilesPerSec: (m1 - m0) / s}
	for i := range all {
		d := func(f func(apiCounts) float64) float64 { return f(r1[i]) - f(r0[i]) }
		if i == 0 {
			out.hubReqs = d(func(a apiCounts) float64 { return a.total }) / s
			out.hubWrites = d(func(a apiCounts) float64 { return a.writes })
			continue
		}
		out.memberReqs = append(out.memberReqs, d(func(a apiCounts) float64 { return a.total })/s)
		out.statusReports += d(func(a apiCounts) float64 { return a.statusReports })
		out.spokeStats += d(func(a apiCounts) float64 { return a.spokeStatus })
		out.memberWrites += d(func(a apiCounts) float64 { return a.writes - a.statusReports - a.spokeStatus })
	}
	return out
}

// fleetSpecChanges changes a pod template annotation on samples rings in
// turn, each with the whole fleet at rest, and measures until one of its
// EtcdMembers carries it, and how long the update of the EtcdCluster
// itself took. The fleet at rest: every ring ready, not Progressing (a
// roll runs between operations of one member each) and its generation
// observed, so the roll an earlier sample began is over.
// Until 2026-12-02 only the sampled ring was waited for, and a sample
// came while the rolls of the samples before it ran (at twelve rings,
// several at once): its figure was one under those rolls' load.
func fleetSpecChanges(ctx context.Context, b *testing.B, f *SimFleet, ns string, rings, samples int) (latency, writes []time.Duration) {
	b.Helper()
	var out []time.Duration
	for k := range samples {
		name := fmt.Sprintf("ring%d", (k*7)%rings)
		ec := &etcdfedv1.EtcdCluster{}
		err := poll(ctx, 5*time.Minute, "the fleet at rest", func(ctx context.Context) (string, error) {
			var list etcdfedv1.EtcdClusterList
			if err := f.Topo.Hub.Client.List(ctx, &list, client.InNamespace(ns)); err != nil {
				return "", err
			}
			found := false
			for i := range list.Items {
				r := &list.Items[i]
				if !ringReady(r) || r.Status.ObservedGeneration != r.Generation || meta.IsStatusConditionTrue(r.Status.Conditions, etcdfedv1.ConditionProgressing) {
					return describeEtcdCluster(r, "not at rest"), nil
				}
				if r.Name == name {
					r.DeepCopyInto(ec)
					found = true
				}
			}
			if !found {
				return name + " not found", nil
			}
			return "", nil
		})
		if err != nil {
			b.Fatal(err)
		}
		// The spec change reaches the ring's first EtcdMember the roll
		// writes, whichever cluster holds it (a roll takes one member at
		// a time: waiting for one chosen member measured the whole roll
		// when that member came last).
		var clusters []string
		for _, m := range ec.Status.Members {
			if !slices.Contains(clusters, m.Cluster) {
				clusters = append(clusters, m.Cluster)
			}
		}
		mark := fmt.Sprintf("fleet-%d", k)
		if ec.Spec.PodTemplate.Annotations == nil {
			ec.Spec.PodTemplate.Annotations = map[string]string{}
		}
		ec.Spec.PodTemplate.Annotations["bench.etcdfed.dev/mark"] = mark
		start := time.Now()
		if err := f.Topo.Hub.Client.Update(ctx, ec); err != nil {
			b.Fatal(err)
		}
		writes = append(writes, time.Since(start))
		err = pollFast(ctx, time.Minute, func(ctx context.Context) (bool, error) {
			for _, c := range clusters {
				var list etcdfedv1.EtcdMemberList
				if err := f.member(c).Client.List(ctx, &list, client.InNamespace(etcdfedv1.DefaultRingNamespace), client.MatchingLabels{etcdfedv1.LabelClusterUID: string(ec.UID)}); err != nil {
					return false, err
				}
				for _, m := range list.Items {
					if m.Spec.PodTemplate.Annotations["bench.etcdfed.dev/mark"] == mark {
						return true, nil
					}
				}
			}
			return false, nil
		})
		if err != nil {
			b.Fatalf("spec change on %s: %v", name, err)
		}
		out = append(out, time.Since(start))
	}
	slices.Sort(out)
	slices.Sort(writes)
	return out, writes
}

// fleetHubRestart kills the hub and measures until the new process has
// reconciled every ring once: its etcdcluster reconciles reach the ring
// count and its queue is empty (every ring was queued at its start). It
// also counts the spokes' EtcdSpoke status writes and the etcdfed.dev
// writes to the hub cluster meanwhile. replaced: the hub's pod is
// replaced (a new pod's name in the Lease); otherwise the process
// restarts in its pod after the environment's crash back-off (1 s).
func fleetHubRestart(ctx context.Context, b *testing.B, f *SimFleet, rings int, replaced bool) (time.Duration, float64, float64, float64) {
	b.Helper()
	writes := func() (spoke, hub float64) {
		for _, c := range f.Topo.Members {
			a, err := apiRequestCounts(ctx, c)
			if err != nil {
				b.Fatal(err)
			}
			spoke += a.spokeStatus
		}
		a, err := apiRequestCounts(ctx, f.Topo.Hub)
		if err != nil {
			b.Fatal(err)
		}
		return spoke, a.writes
	}
	spoke0, hub0 := writes()
	old := fleetHubPID(b, f)
	start := time.Now()
	if _, err := f.Env.KillComponent("hub", replaced); err != nil {
		b.Fatal(err)
	}
	var total float64
	err := pollFast(ctx, 10*time.Minute, func(ctx context.Context) (bool, error) {
		pid := 0
		for _, c := range f.Env.Status().Components {
			if c.Name == "hub" {
				pid = c.PID
			}
		}
		if pid == 0 || pid == old {
			return false, nil
		}
		m, err := scrape(ctx, f.Topo.HubMetricsURL)
		if err != nil {
			return false, err
		}
		total = m.sum("controller_runtime_reconcile_total", "controller", "etcdcluster")
		return total >= float64(rings) && m.sum("workqueue_depth", "name", "etcdcluster") == 0, nil
	})
	if err != nil {
		b.Fatalf("hub restart: %v", err)
	}
	took := time.Since(start)
	spoke1, hub1 := writes()
	return took, total, spoke1 - spoke0, hub1 - hub0
}

// fleetLoss loses a member cluster and measures, for each ring it hosted,
// the time until it is failure tolerant again without it, and the hub's
// CPU (s/s), peak RSS and peak queue meanwhile; a list of the rings
// holding more with a limited operation than limit fails the benchmark.
func fleetLoss(ctx context.Context, b *testing.B, f *SimFleet, ns, lost string, affected []string, limit int) fleetLossResult {
	b.Helper()
	cpu0 := fleetHubsCPU(b, f)
	counts0 := lossCounts(ctx, b, f)
	start := time.Now()
	b.Logf("losing %s (members of %d rings) at %s", lost, len(affected), start.UTC().Format(time.TimeOnly))
	if err := f.LoseCluster(ctx, lost); err != nil {
		b.Fatal(err)
	}
	hub := startHubSampler(ctx, b, f)
	watch := limitWatch{limit: limit}
	pending := map[string]bool{}
	for _, n := range affected {
		pending[n] = true
	}
	var repair []time.Duration
	timeout := envDurB(b, "FLEET_LOSS_TIMEOUT", 15*time.Minute)
	lastLog := time.Now()
	for len(pending) > 0 && time.Since(start) < timeout {
		items := watch.sample(ctx, f, ns)
		for i := range items {
			ec := &items[i]
			if pending[ec.Name] && tolerantAway(ec, lost) {
				delete(pending, ec.Name)
				repair = append(repair, time.Since(start))
			}
		}
		if time.Since(lastLog) > 30*time.Second {
			lastLog = time.Now()
			fmt.Fprintf(os.Stderr, "%s loss of %s: %d of %d rings tolerant again\n", time.Now().UTC().Format(time.TimeOnly), lost, len(repair), len(affected))
		}
		time.Sleep(500 * time.Millisecond)
	}
	peaks := hub.finish()
	window := time.Since(start)
	cpu := (fleetHubsCPU(b, f) - cpu0) / window.Seconds()
	counts := lossCounts(ctx, b, f)
	for k := range counts {
		counts[k] -= counts0[k]
	}
	slices.Sort(repair)
	watch.check(b, "the loss of "+lost)
	return fleetLossResult{repair: repair, unrepaired: len(pending), cpu: cpu, rssMax: peaks.rss, queueMax: peaks.queue, window: window,
		inFlightMax: watch.most, waited: len(watch.waited), counts: counts}
}

// fleetLossResult is what fleetLoss measured.
type fleetLossResult struct {
	repair     []time.Duration
	unrepaired int
	cpu        float64
	rssMax     uint64
	queueMax   float64
	window     time.Duration
	// inFlightMax: the most rings seen with a limited operation
	// (Replace, Move, Roll, Disrupt, Defrag) in flight at once.
	inFlightMax int
	waited      int // rings seen waiting for the fleet limit
	// counts are the hubs' counters over the window (lossCounters).
	counts map[string]float64
}

// lossCounters are the hub counters the loss window reports: its passes,
// and the passes member-cluster news asked for, by what woke them
// (etcdfed_hub_ring_wakes_total: a ring already queued is counted again).
var lossCounters = []struct{ key, name, label, value string }{
	{"reconciles", "controller_runtime_reconcile_total", "controller", "etcdcluster"},
	{"wakes member-cluster", "etcdfed_hub_ring_wakes_total", "source", "member-cluster"},
	{"wakes gossip-view", "etcdfed_hub_ring_wakes_total", "source", "gossip-view"},
	{"wakes round-trips", "etcdfed_hub_ring_wakes_total", "source", "round-trips"},
}

// lossCounts reads lossCounters from the hubs (-1 for one not read).
func lossCounts(ctx context.Context, b *testing.B, f *SimFleet) map[string]float64 {
	out := map[string]float64{}
	for _, c := range lossCounters {
		v, err := fleetHubsMetric(ctx, f, c.name, c.label, c.value)
		if err != nil {
			b.Logf("read %s: %v", c.name, err)
			v = math.NaN()
		}
		out[c.key] = v
	}
	return out
}

// fleetLimited are the operation types the hub's fleet limit counts
// (hub/etcdcluster fleetlimit.go).
var fleetLimited = map[etcdfedv1.OperationType]bool{
	etcdfedv1.OperationReplace: true, etcdfedv1.OperationMove: true, etcdfedv1.OperationRoll: true,
	etcdfedv1.OperationDisrupt: true, etcdfedv1.OperationDefrag: true,
}

// saveCPUProfile writes a CPU profile of d from the Go process serving
// /debug/pprof/ at addr to path.
func saveCPUProfile(ctx context.Context, addr string, d time.Duration, path string) error {
	ctx, cancel := context.WithTimeout(ctx, d+30*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, fmt.Sprintf("http://%s/debug/pprof/profile?seconds=%d", addr, int(d.Seconds())), nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET profile: %s", resp.Status)
	}
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	return os.WriteFile(path, data, 0o644)
}

func pct(d []time.Duration, q float64) string {
	if len(d) == 0 {
		return "n/a"
	}
	return d[min(len(d)-1, int(q*float64(len(d))))].Round(time.Millisecond).String()
}

// write logs the report and writes it to FLEET_OUT when set.
func (r fleetReport) write(b *testing.B) {
	out := r.markdown()
	b.Log("\n" + out)
	if p := os.Getenv("FLEET_OUT"); p != "" {
		if err := os.WriteFile(p, []byte(out), 0o644); err != nil {
			b.Error(err)
		}
	}
}

func (r fleetReport) markdown() string {
	var sb strings.Builder
	var mr []string
	for _, v := range r.rest.memberReqs {
		mr = append(mr, fmt.Sprintf("%.1f", v))
	}
	hubs := ""
	if r.shards > 1 {
		hubs = fmt.Sprintf(", %d hub shards", r.shards)
	}
	fmt.Fprintf(&sb, "| figure | %d rings (%d members) over %d simulated clusters (%d zone(s) each)%s |\n|---|---|\n", r.rings, r.members, r.clusters, r.zones, hubs)
	row := func(k, v string) { fmt.Fprintf(&sb, "| %s | %s |\n", k, v) }
	row("time until all Available and failure tolerant", r.available.Round(time.Second).String())
	row("hub's failed attempts to engage a member cluster until then (all clusters)", fmt.Sprintf("%.0f", r.engageFailures))
	row("time until every spoke published its round trip to every peer (the rest window starts 10 s later)", r.roundTrips.Round(time.Second).String())
	row("until then: hub peak RSS MiB, peak etcdcluster queue (sampled every 2 s)", fmt.Sprintf("%d, %.0f", r.bootstrap.rss>>20, r.bootstrap.queue))
	row(fmt.Sprintf("at rest (%s): hub reconciles/s", r.rest.window), fmt.Sprintf("%.2f", r.rest.reconcilesPerSec))
	row("at rest: hub CPU s/s, RSS MiB", fmt.Sprintf("%.3f, %d", r.rest.cpu, r.rest.rss>>20))
	row("at rest: hub cluster API req/s", fmt.Sprintf("%.1f", r.rest.hubReqs))
	row("at rest: member cluster API req/s (each)", strings.Join(mr, " / "))
	row("at rest: etcdfed.dev writes to the hub cluster (window)", fmt.Sprintf("%.0f", r.rest.hubWrites))
	row("at rest: etcdfed.dev writes to member clusters other than spoke status (window)", fmt.Sprintf("%.0f", r.rest.memberWrites))
	row("at rest: EtcdMember / EtcdSpoke status writes by the spokes (window)", fmt.Sprintf("%.0f / %.0f", r.rest.statusReports, r.rest.spokeStats))
	if r.restOnly {
		return sb.String()
	}
	lim := "none"
	if r.limit > 0 {
		lim = strconv.Itoa(r.limit)
	}
	if r.phases["spec"] {
		row(fmt.Sprintf("spec change → EtcdMember p50 / p99 / max (%d at rest)", len(r.latency)), pct(r.latency, 0.5)+" / "+pct(r.latency, 0.99)+" / "+pct(r.latency, 1))
		row("baseline: the bench's update of the EtcdCluster p50 / p99 / max", pct(r.specWrites, 0.5)+" / "+pct(r.specWrites, 0.99)+" / "+pct(r.specWrites, 1))
		row("spec phase: CPU cores used by the hub / the apiservers / their etcds / the bench (simulated spokes and members)", r.specLoad.cores())
		row("spec phase: API requests/s, hub cluster / member clusters; the most frequent", r.specLoad.requests())
	}
	if r.phases["restart"] {
		restarted, replaced := "hub crashed, restarted in its pod → every ring reconciled once", "hub's pod replaced (SIGKILL) → every ring reconciled once"
		if r.shards > 1 {
			restarted = fmt.Sprintf("shard a's hub crashed, restarted in its pod → each of its %d rings reconciled once", r.restartRings)
			replaced = fmt.Sprintf("shard a's hub's pod replaced (SIGKILL) → each of its %d rings reconciled once", r.restartRings)
		}
		row(restarted, fmt.Sprintf("%s (%.0f reconciles)", r.restart.Round(time.Millisecond), r.restartReconciles))
		row("→ meanwhile: EtcdSpoke status writes by the spokes, etcdfed.dev writes to the hub cluster", fmt.Sprintf("%.0f, %.0f", r.restartSpokeWrites, r.restartHubWrites))
		row(replaced, fmt.Sprintf("%s (%.0f reconciles)", r.restartReplaced.Round(time.Millisecond), r.restartReplacedReconciles))
	}
	for _, ro := range []*fleetRollout{r.roll, r.caRotation} {
		if ro == nil {
			continue
		}
		row(ro.what+" of every ring: asking them all took", ro.asked.Round(time.Millisecond).String())
		row("→ done, from each ring's ask, p50 / p90 / p99 / max", pct(ro.done, 0.5)+" / "+pct(ro.done, 0.9)+" / "+pct(ro.done, 0.99)+" / "+pct(ro.done, 1))
		all := "not all done"
		if ro.all > 0 {
			all = ro.all.Round(time.Second).String()
		}
		row("→ every ring done, from the first ask", all)
		row("→ rings not done at the end of the window", fmt.Sprintf("%d (window %s)", ro.unfinished, ro.window.Round(time.Second)))
		if len(ro.unfinishedNames) > 0 {
			row("→ not done", strings.Join(ro.unfinishedNames, "; "))
		}
		row("→ hub CPU s/s, peak RSS MiB, peak etcdcluster queue", fmt.Sprintf("%.3f, %d, %.0f", ro.cpu, ro.hub.rss>>20, ro.hub.queue))
		row("→ fleet limit; most rings with a limited operation in flight at once (of "+strconv.Itoa(ro.limit.samples)+" lists of the rings); the hub's own count at most; rings waiting for the limit at most (hub), seen waiting in all",
			fmt.Sprintf("%s; **%d**; %.0f; %.0f, %d", lim, ro.limit.most, ro.hub.inFlight, ro.hub.waiting, len(ro.limit.waited)))
		if len(ro.limit.over) > 0 {
			row("→ **LIMIT EXCEEDED** (lists over it)", strconv.Itoa(len(ro.limit.over)))
		}
	}
	if !r.phases["loss"] {
		return sb.String()
	}
	row("cluster lost", fmt.Sprintf("%s, hosting members of %d rings (%.0f%%)", r.lost, r.lostRings, 100*float64(r.lostRings)/float64(r.rings)))
	l := r.loss
	row("→ failure tolerant again p50 / p99 / max", pct(l.repair, 0.5)+" / "+pct(l.repair, 0.99)+" / "+pct(l.repair, 1))
	row("→ rings not tolerant again at the end of the window", fmt.Sprintf("%d (window %s)", l.unrepaired, l.window.Round(time.Second)))
	row("→ hub CPU s/s, peak RSS MiB, peak queue during the repair", fmt.Sprintf("%.3f, %d, %.0f", l.cpu, l.rssMax>>20, l.queueMax))
	row("→ hub passes; wakes asked by member-cluster news (a cluster's report or Lease / a gossip view / round trips)",
		fmt.Sprintf("%.0f; %.0f / %.0f / %.0f", l.counts["reconciles"], l.counts["wakes member-cluster"], l.counts["wakes gossip-view"], l.counts["wakes round-trips"]))
	row("→ fleet limit; most rings with a disruptive operation in flight at once; rings seen waiting for it", fmt.Sprintf("%s; %d; %d", lim, l.inFlightMax, l.waited))
	return sb.String()
}

func envIntB(tb testing.TB, name string, def int) int {
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 {
		tb.Fatalf("%s=%q: want a positive number", name, v)
	}
	return n
}

func envDurB(tb testing.TB, name string, def time.Duration) time.Duration {
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	d, err := time.ParseDuration(v)
	if err != nil {
		tb.Fatalf("%s=%q: %v", name, v, err)
	}
	return d
}

// fleetChange is a change asked of every ring, and when a ring has done
// it.
type fleetChange struct {
	what string
	// ask changes ec (a merge patch from its copy is sent).
	ask func(ec *etcdfedv1.EtcdCluster, at time.Time)
	// done says whether ec, asked at at, has done it; failed why it never
	// will ("" while it may).
	done   func(ec *etcdfedv1.EtcdCluster, at time.Time) bool
	failed func(ec *etcdfedv1.EtcdCluster, at time.Time) string
}

// versionRoll sets spec.version to v; a ring has done it when every
// member reports v and the ring is at rest on its generation.
func versionRoll(v string) fleetChange {
	return fleetChange{
		what: fmt.Sprintf("version roll %s → %s", fleetRollFrom, v),
		ask:  func(ec *etcdfedv1.EtcdCluster, _ time.Time) { ec.Spec.Version = v },
		done: func(ec *etcdfedv1.EtcdCluster, _ time.Time) bool {
			if ec.Status.ObservedGeneration != ec.Generation || !tolerantAway(ec, "") || len(ec.Status.Members) == 0 {
				return false
			}
			for _, m := range ec.Status.Members {
				if m.Version != v {
					return false
				}
			}
			return true
		},
		failed: func(ec *etcdfedv1.EtcdCluster, _ time.Time) string {
			if c := meta.FindStatusCondition(ec.Status.Conditions, etcdfedv1.ConditionProgressing); c != nil && c.Reason == etcdfedv1.ReasonRolloutHalted {
				return c.Message
			}
			return ""
		},
	}
}

// caRotation writes the request `etcdfed rotate-ca` writes (the
// annotation, with the time of the ask); a ring has done it when its
// status.caRotation is Completed for that request and it is at rest.
func caRotation() fleetChange {
	req := func(at time.Time) time.Time { return at.UTC().Truncate(time.Second) }
	taken := func(ec *etcdfedv1.EtcdCluster, at time.Time) *etcdfedv1.CARotationStatus {
		cr := ec.Status.CARotation
		if cr == nil || cr.RequestedAt == nil || cr.RequestedAt.Time.Before(req(at)) {
			return nil
		}
		return cr
	}
	return fleetChange{
		what: "CA rotation",
		ask: func(ec *etcdfedv1.EtcdCluster, at time.Time) {
			if ec.Annotations == nil {
				ec.Annotations = map[string]string{}
			}
			ec.Annotations[etcdfedv1.AnnotationRotateCA] = etcdfedv1.CARotationRequest{RequestedAt: req(at)}.String()
		},
		done: func(ec *etcdfedv1.EtcdCluster, at time.Time) bool {
			cr := taken(ec, at)
			return cr != nil && cr.Phase == etcdfedv1.CARotationCompleted && tolerantAway(ec, "")
		},
		failed: func(ec *etcdfedv1.EtcdCluster, at time.Time) string {
			if cr := taken(ec, at); cr != nil && cr.Phase == etcdfedv1.CARotationRefused {
				return "refused: " + cr.Message
			}
			return ""
		},
	}
}

// fleetRollout is what a change of every ring measured.
type fleetRollout struct {
	what string
	// asked: how long asking every ring took (one patch each, in turn).
	asked time.Duration
	// done: per ring, from its ask until it had done the change.
	done []time.Duration
	// all: from the first ask until the last ring had done it (0 when
	// some ring did not).
	all             time.Duration
	unfinished      int
	firstUnfinished string
	// unfinishedNames: every ring not done at the end, with why when a
	// ring said it never will.
	unfinishedNames []string
	window          time.Duration
	cpu             float64
	hub             hubPeaks
	limit           limitWatch
}

// fleetRolloutAll asks change of every ring of ns, one after the other,
// and follows them until every ring has done it (or timeout), sampling
// the hub and the rings' limited operations meanwhile.
func fleetRolloutAll(ctx context.Context, b *testing.B, f *SimFleet, ns string, limit int, timeout time.Duration, change fleetChange) *fleetRollout {
	b.Helper()
	var list etcdfedv1.EtcdClusterList
	if err := f.Topo.Hub.Client.List(ctx, &list, client.InNamespace(ns)); err != nil {
		b.Fatal(err)
	}
	out := &fleetRollout{what: change.what}
	cpu0 := fleetHubsCPU(b, f)
	hub := startHubSampler(ctx, b, f)
	watch := limitWatch{limit: limit}
	start := time.Now()
	b.Logf("%s of %d rings from %s", change.what, len(list.Items), start.UTC().Format(time.TimeOnly))
	asked := map[string]time.Time{}
	for i := range list.Items {
		ec := &list.Items[i]
		before := ec.DeepCopy()
		at := time.Now()
		change.ask(ec, at)
		if err := f.Topo.Hub.Client.Patch(ctx, ec, client.MergeFrom(before)); err != nil {
			b.Fatalf("%s: ask %s: %v", change.what, ec.Name, err)
		}
		asked[ec.Name] = at
		// Sample while asking too: the first rings start at once.
		if i%10 == 9 {
			watch.sample(ctx, f, ns)
		}
	}
	out.asked = time.Since(start)
	pending := maps.Clone(asked)
	failed := map[string]string{}
	lastLog := time.Now()
	for len(pending) > 0 && time.Since(start) < timeout {
		items := watch.sample(ctx, f, ns)
		for i := range items {
			ec := &items[i]
			at, ok := pending[ec.Name]
			if !ok {
				continue
			}
			if change.done(ec, at) {
				delete(pending, ec.Name)
				out.done = append(out.done, time.Since(at))
				if len(pending) == 0 {
					out.all = time.Since(start)
				}
			} else if why := change.failed(ec, at); why != "" {
				failed[ec.Name] = why
			}
		}
		if len(failed) > 0 && len(failed) == len(pending) {
			break
		}
		if time.Since(lastLog) > 30*time.Second {
			lastLog = time.Now()
			fmt.Fprintf(os.Stderr, "%s %s: %d of %d rings done; limited operations in flight %d (most %d), rings waiting for the limit %d\n",
				time.Now().UTC().Format(time.TimeOnly), change.what, len(out.done), len(asked), watch.last, watch.most, len(watch.waited))
		}
		time.Sleep(500 * time.Millisecond)
	}
	out.window = time.Since(start)
	out.cpu = (fleetHubsCPU(b, f) - cpu0) / out.window.Seconds()
	out.hub = hub.finish()
	out.limit = watch
	slices.Sort(out.done)
	each := make([]string, len(out.done))
	for i, d := range out.done {
		each[i] = d.Round(time.Second).String()
	}
	b.Logf("%s: each ring done after (from its ask, sorted): %s", change.what, strings.Join(each, " "))
	out.unfinished = len(pending)
	for _, name := range slices.Sorted(maps.Keys(pending)) {
		if why := failed[name]; why != "" {
			name += ": " + why
		}
		out.unfinishedNames = append(out.unfinishedNames, name)
	}
	if len(out.unfinishedNames) > 0 {
		out.firstUnfinished = out.unfinishedNames[0]
	}
	watch.check(b, change.what)
	return out
}

// limitWatch counts, in each list of the rings, those whose status
// records a limited operation in flight (fleetLimited), and the rings
// seen waiting for the fleet limit.
type limitWatch struct {
	limit      int
	samples    int
	last, most int
	waited     map[string]bool
	// over are the lists holding more than the limit: when, and the
	// rings' operations.
	over []string
}

// sample lists the rings of ns once (one consistent read) and counts; it
// returns the list (nil when it failed).
func (w *limitWatch) sample(ctx context.Context, f *SimFleet, ns string) []etcdfedv1.EtcdCluster {
	var list etcdfedv1.EtcdClusterList
	if err := f.Topo.Hub.Client.List(ctx, &list, client.InNamespace(ns)); err != nil {
		return nil
	}
	if w.waited == nil {
		w.waited = map[string]bool{}
	}
	var ops []string
	for i := range list.Items {
		ec := &list.Items[i]
		if op := ec.Status.Operation; op != nil && fleetLimited[op.Type] {
			ops = append(ops, fmt.Sprintf("%s %s %s (started %s)", ec.Name, op.Type, op.Member, op.StartedAt.UTC().Format("15:04:05")))
		}
		if c := meta.FindStatusCondition(ec.Status.Conditions, etcdfedv1.ConditionProgressing); c != nil && c.Reason == etcdfedv1.ReasonWaitingForFleetLimit {
			w.waited[ec.Name] = true
		}
	}
	w.samples++
	w.last, w.most = len(ops), max(w.most, len(ops))
	if w.limit > 0 && len(ops) > w.limit && len(w.over) < 10 {
		w.over = append(w.over, fmt.Sprintf("%s (list at resourceVersion %s): %d rings with a limited operation: %s",
			time.Now().UTC().Format(time.TimeOnly), list.ResourceVersion, len(ops), strings.Join(ops, "; ")))
	}
	return list.Items
}

// check fails the benchmark when a list held more rings with a limited
// operation than the limit.
func (w *limitWatch) check(b *testing.B, what string) {
	b.Helper()
	if len(w.over) == 0 {
		return
	}
	b.Errorf("FLEET LIMIT EXCEEDED during %s: the limit is %d, %d rings at most had a limited operation in flight at once; first lists over it:\n%s",
		what, w.limit, w.most, strings.Join(w.over, "\n"))
}

// hubPeaks are the hubs' peaks over a phase: RSS, the etcdcluster
// workqueue, and the fleet limit's gauges (the rings it counts in flight,
// those it queues).
type hubPeaks struct {
	rss                      uint64
	queue, inFlight, waiting float64
}

type hubSampler struct {
	mu   sync.Mutex
	p    hubPeaks
	once sync.Once
	stop chan struct{}
	done chan struct{}
}

// startHubSampler samples the hubs every 2 s until finish.
func startHubSampler(ctx context.Context, b *testing.B, f *SimFleet) *hubSampler {
	s := &hubSampler{stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(s.done)
		t := time.NewTicker(2 * time.Second)
		defer t.Stop()
		for {
			select {
			case <-s.stop:
				return
			case <-t.C:
			}
			r := fleetHubsRSS(b, f)
			q, errQ := fleetHubsMetric(ctx, f, "workqueue_depth", "name", "etcdcluster")
			in, errI := fleetHubsMetric(ctx, f, "etcdfed_hub_fleet_disruptions_in_flight")
			wait, errW := fleetHubsMetric(ctx, f, "etcdfed_hub_fleet_disruptions_waiting")
			s.mu.Lock()
			s.p.rss = max(s.p.rss, r)
			if errQ == nil {
				s.p.queue = max(s.p.queue, q)
			}
			if errI == nil {
				s.p.inFlight = max(s.p.inFlight, in)
			}
			if errW == nil {
				s.p.waiting = max(s.p.waiting, wait)
			}
			s.mu.Unlock()
		}
	}()
	return s
}

// finish stops the sampling (again: a no-op) and returns the peaks.
func (s *hubSampler) finish() hubPeaks {
	s.once.Do(func() { close(s.stop) })
	<-s.done
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.p
}
