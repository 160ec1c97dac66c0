package multicluster

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdfedv1 "github.com/etcdfed/etcdfed/api/v1alpha1"
	"github.com/etcdfed/etcdfed/dev/etcdtest"
	"github.com/etcdfed/etcdfed/dev/localenv"
)

// BenchmarkWAN (`make bench-wan`, ETCDFED_WAN=1): a 5-member ring placed
// 2/2/1 over the three single-zone member clusters of the local
// environment, at each round trip of ETCDFED_WAN_DISTANCES (ms, default
// 0,10,20,40) between every two zones and every two member clusters, put
// with the delaying proxy (Env.SetDistance, setDistance). Three systems
// side by side, in one environment and one run:
//
//   - "etcdfed Auto": an EtcdCluster with spec.etcd.timing Auto and
//     spec.leader preferring the zone of the last member cluster (one of
//     the two 2-member zones);
//   - "etcdfed default": an EtcdCluster with timing Manual (etcd's 100/1000)
//     and no leader placement (the leader where elections put it);
//   - "bare etcd": five plain etcd processes (bin/etcd, plain HTTP, etcd's
//     defaults), placed as the first ring, each in a cgroup below its
//     zone's and on an address of its zone's block, so the same proxy
//     rules delay them.
//
// Per distance and client zone it writes ETCDFED_WAN_WRITES (default 200)
// puts one after the other from a client in that zone writing through its
// nearest endpoints (the members in its own zone: the client process sits
// at zero distance from every zone, so a client whose endpoints are its
// zone's members pays exactly what a client inside the zone would), all
// zones at once, and reports p50 and p99.
//
// Then, at ETCDFED_WAN_FAILOVER ms (default 20; "none" skips): the leader's
// zone lost (SIGKILL of its two members), etcdfed Auto against the bare
// etcd with default timing, each with its leader in the preferred zone,
// ETCDFED_WAN_FAILOVER_RUNS times each (default 2);
// the longest gap between acknowledged writes of open-loop writers in the
// two other zones (a put every 10 ms, 2 s deadline). And a sweep of bare
// etcd failovers at ETCDFED_WAN_SWEEP timings (default
// 100/1000,50/500,30/300, ETCDFED_WAN_SWEEP_RUNS each, default 2), the
// measurement behind Auto's floors.
//
// ETCDFED_WAN_SOAK=1 adds a stability run (ETCDFED_WAN_SOAK_FOR, default
// 10m) at 20 ms with 10 ms jitter under CPU load (two busy processes, one
// per core): leader changes of etcdfed Auto and of bare etcds at the
// ETCDFED_WAN_SOAK_BARE timings (default 30/300,40/400,50/500,100/1000), all at
// once under a steady write load. ETCDFED_WAN_SOAK_ADAPT (default 0s) runs
// the CPU load alone that long first, then until the Auto ring settled,
// for its timing to follow the load (timingFloor Disk raises its floor on
// late heartbeats); what changed then is reported apart, not counted.
// ETCDFED_WAN_SOAK_LOGS names a directory
// to keep the bare etcds' logs in (the etcdfed members' logs stay in the
// environment's directory with ETCDFED_KEEP_STATE=1).
//
// The markdown goes to ETCDFED_WAN_OUT (default out/bench-wan.md). It
// measures; it asserts nothing about speed.
func BenchmarkWAN(b *testing.B) {
	if os.Getenv("ETCDFED_WAN") == "" {
		b.Skip("BenchmarkWAN runs with ETCDFED_WAN=1 (make bench-wan)")
	}
	distances, err := ParseWANDistances(envOr("ETCDFED_WAN_DISTANCES", "0,10,20,40"))
	if err != nil {
		b.Fatal(err)
	}
	writes, err := strconv.Atoi(envOr("ETCDFED_WAN_WRITES", "200"))
	if err != nil || writes < 10 {
		b.Fatalf("ETCDFED_WAN_WRITES %q: want a number of at least 10", os.Getenv("ETCDFED_WAN_WRITES"))
	}
	var failoverAt time.Duration = -1
	if v := envOr("ETCDFED_WAN_FAILOVER", "20"); v != "none" {
		d, err := ParseWANDistances(v)
		if err != nil || len(d) != 1 {
			b.Fatalf("ETCDFED_WAN_FAILOVER %q: want one distance in ms or none", v)
		}
		failoverAt = d[0]
	}
	failoverRuns, err := strconv.Atoi(envOr("ETCDFED_WAN_FAILOVER_RUNS", "2"))
	if err != nil || failoverRuns < 1 {
		b.Fatalf("ETCDFED_WAN_FAILOVER_RUNS %q: want a number of at least 1", os.Getenv("ETCDFED_WAN_FAILOVER_RUNS"))
	}
	sweep, err := ParseWANTimings(envOr("ETCDFED_WAN_SWEEP", "100/1000,50/500,30/300"))
	if err != nil {
		b.Fatal(err)
	}
	if len(sweep) > 4 {
		b.Fatalf("ETCDFED_WAN_SWEEP: at most 4 timings (each bare etcd has its own addresses)")
	}
	sweepRuns, err := strconv.Atoi(envOr("ETCDFED_WAN_SWEEP_RUNS", "2"))
	if err != nil || sweepRuns < 1 {
		b.Fatalf("ETCDFED_WAN_SWEEP_RUNS %q: want a number of at least 1", os.Getenv("ETCDFED_WAN_SWEEP_RUNS"))
	}
	soak := os.Getenv("ETCDFED_WAN_SOAK") == "1"
	soakBare, err := ParseWANTimings(envOr("ETCDFED_WAN_SOAK_BARE", "30/300,40/400,50/500,100/1000"))
	if err != nil {
		b.Fatal(err)
	}
	if len(soakBare) > 4 {
		b.Fatalf("ETCDFED_WAN_SOAK_BARE: at most 4 timings")
	}
	soakFor, err := time.ParseDuration(envOr("ETCDFED_WAN_SOAK_FOR", "10m"))
	if err != nil {
		b.Fatal(err)
	}
	soakAdapt, err := time.ParseDuration(envOr("ETCDFED_WAN_SOAK_ADAPT", "0s"))
	if err != nil {
		b.Fatal(err)
	}
	out := envOr("ETCDFED_WAN_OUT", filepath.Join("..", "..", "out", "bench-wan.md"))

	topo := hubTopology(b)
	env := hubFx.env
	if topo.SetDistance == nil || len(topo.Members) != 3 {
		b.Skip("BenchmarkWAN needs distance (root, iptables, cgroup v2) and three member clusters")
	}
	ctx := context.Background()
	start := time.Now()
	w := &wanBench{b: b, topo: topo, env: env, writes: writes}
	for _, c := range topo.Members {
		zs, err := c.Zones(ctx)
		if err != nil || len(zs) != 1 {
			b.Fatalf("zones of %s: %v %v (want one)", c.Name, zs, err)
		}
		w.zones = append(w.zones, zs[0])
		w.zoneOf = append(w.zoneOf, c.Name)
	}
	w.preferred = w.zones[len(w.zones)-1]
	fmt.Fprintf(os.Stderr, "bench-wan: zones %v, preferred %s, distances %v, %d writes per cell\n", w.zones, w.preferred, distances, writes)

	// ETCDFED_WAN_FLOOR (make bench-wan WAN_FLOOR=Disk): the Auto ring's
	// spec.etcd.timingFloor.
	floor := etcdfedv1.TimingFloor(os.Getenv("ETCDFED_WAN_FLOOR"))
	auto := EtcdClusterSpec(ctx, EtcdClusterSpecInput{T: b, Topology: topo, Namespace: "wan-auto", Name: "auto", Domain: "auto.wan.test", Replicas: 5, WantZones: "2/2/1",
		Spec: func(s *etcdfedv1.EtcdClusterSpec) {
			s.Leader = &etcdfedv1.LeaderSpec{Preferred: []etcdfedv1.LeaderPreference{{Zone: w.preferred}}, SettleSeconds: ptrTo[int32](5), MinIntervalSeconds: ptrTo[int32](10)}
			s.Etcd.TimingFloor = floor
		}})
	def := EtcdClusterSpec(ctx, EtcdClusterSpecInput{T: b, Topology: topo, Namespace: "wan-default", Name: "default", Domain: "default.wan.test", Replicas: 5, WantZones: "2/2/1",
		Spec: func(s *etcdfedv1.EtcdClusterSpec) { s.Etcd.Timing = etcdfedv1.TimingManual }})
	ecA, err := auto.Get(ctx, topo.Hub)
	if err != nil {
		b.Fatal(err)
	}
	perZone := map[string]int{}
	for _, m := range ecA.Status.Members {
		perZone[m.Zone]++
	}
	if perZone[w.preferred] != 2 {
		b.Fatalf("the preferred zone %s holds %d members of %s, want 2", w.preferred, perZone[w.preferred], ecA.Status.ZoneSummary)
	}
	w.shape = perZone
	bare := w.startBare(ctx, 0, WANTiming{100, 1000})
	systems := []wanSystem{w.managed("etcdfed Auto", auto), w.managed("etcdfed default", def), bare}
	names := []string{"etcdfed Auto", "etcdfed default", "bare etcd"}
	load0 := loadAvg()

	var rows []WANRow
	var leaders []WANLeaders
	var failover, sweepLines, soakLines, timingLines []string
	// timingNote keeps what the Auto ring's status.timing said once it
	// settled at distance d: the values and the round trips they came from.
	timingNote := func(d time.Duration) {
		ec, err := auto.Get(ctx, w.topo.Hub)
		if err != nil || ec.Status.Timing == nil {
			timingLines = append(timingLines, fmt.Sprintf("- at %s ms: status not read (%v)", ms(d), err))
			return
		}
		tm := ec.Status.Timing
		timingLines = append(timingLines, fmt.Sprintf("- at %s ms: %d/%d: %s", ms(d), tm.HeartbeatIntervalMillis, tm.ElectionTimeoutMillis, tm.Message))
	}
	write := func(final bool) {
		var md strings.Builder
		fmt.Fprintf(&md, "bench-wan %s, %d puts per client and cell, zones %s (preferred %s), load average %s at the start, %s now, %.0f s\n\n",
			time.Now().UTC().Format("2006-01-02 15:04 MST"), writes, strings.Join(w.zones, ", "), w.preferred, load0, loadAvg(), time.Since(start).Seconds())
		if !final {
			md.WriteString("(incomplete: the run goes on or failed)\n\n")
		}
		md.WriteString(WANTable(names, rows, leaders))
		if len(failover) > 0 {
			fmt.Fprintf(&md, "\nLeader's zone lost (SIGKILL of its two members) at %s, longest gap between acknowledged writes:\n\n| system | gap | |\n| --- | --- | --- |\n%s\n", failoverAt, strings.Join(failover, "\n"))
		}
		if len(sweepLines) > 0 {
			fmt.Fprintf(&md, "\nBare etcd at %s, leader's zone lost, by timing (heartbeat/election ms): gaps of each run\n\n| timing | gaps |\n| --- | --- |\n%s\n", failoverAt, strings.Join(sweepLines, "\n"))
		}
		if len(soakLines) > 0 {
			md.WriteString("\n" + strings.Join(soakLines, "\n") + "\n")
		}
		if len(timingLines) > 0 {
			md.WriteString("\netcdfed Auto's status.timing once the ring settled:\n\n" + strings.Join(timingLines, "\n") + "\n")
		}
		if final {
			fmt.Fprint(os.Stderr, md.String())
		}
		if err := os.MkdirAll(filepath.Dir(out), 0o755); err != nil {
			b.Fatal(err)
		}
		if err := os.WriteFile(out, []byte(md.String()), 0o644); err != nil {
			b.Fatal(err)
		}
	}
	if failoverAt >= 0 {
		w.setDistance(ctx, localenv.Link{RTT: failoverAt})
		w.settle(ctx, auto)
		timingNote(failoverAt)
		var sumBare, sumAuto time.Duration
		for r := 1; r <= failoverRuns; r++ {
			if r > 1 {
				w.settle(ctx, auto)
			}
			gapBare, noteBare := w.failoverBare(ctx, bare.bare, r)
			timingA := systems[0].where(ctx)
			gapAuto, noteAuto := w.failoverManaged(ctx, auto)
			sumBare, sumAuto = sumBare+gapBare, sumAuto+gapAuto
			failover = append(failover,
				fmt.Sprintf("| bare etcd, etcd's defaults 100/1000 (run %d) | %s | %s |", r, gapBare.Round(time.Millisecond), noteBare),
				fmt.Sprintf("| etcdfed Auto, leader in %s (run %d) | %s | %s |", timingA, r, gapAuto.Round(time.Millisecond), noteAuto))
			write(false)
		}
		failover = append(failover, fmt.Sprintf("\nratio of the means, etcdfed Auto / bare: %.2f (goal <= 0.5)", float64(sumAuto)/float64(sumBare)))
		write(false)
	}
	if failoverAt >= 0 {
		for i, tm := range sweep {
			c := w.startBare(ctx, i+1, tm)
			var gaps []string
			for r := 0; r < sweepRuns; r++ {
				g, _ := w.failoverBare(ctx, c.bare, r+2)
				gaps = append(gaps, g.Round(time.Millisecond).String())
			}
			c.stop()
			sweepLines = append(sweepLines, fmt.Sprintf("| %s | %s |", tm, strings.Join(gaps, ", ")))
			write(false)
		}
	}
	if soak {
		soakLines = w.soak(ctx, auto, soakFor, soakAdapt, soakBare)
	}
	// The table last: the failover and the stability run decide Auto's
	// floors, so they go first when the heavy lock leaves little time.
	for _, d := range distances {
		w.setDistance(ctx, localenv.Link{RTT: d})
		w.settle(ctx, auto)
		timingNote(d)
		l := WANLeaders{Distance: d}
		cells := map[string][]WANCell{}
		for _, s := range systems {
			l.Where = append(l.Where, s.where(ctx))
			for i, c := range w.measure(ctx, s) {
				cells[w.zones[i]] = append(cells[w.zones[i]], c)
			}
		}
		for _, z := range w.zones {
			note := fmt.Sprintf("%d members", w.shape[z])
			if z == w.preferred {
				note = "preferred, " + note
			}
			rows = append(rows, WANRow{Distance: d, Zone: z, Note: note, Cells: cells[z]})
		}
		leaders = append(leaders, l)
		fmt.Fprintf(os.Stderr, "bench-wan: %s %s done\n%s", time.Now().UTC().Format(time.TimeOnly), d, WANTable(names, rows[len(rows)-len(w.zones):], leaders[len(leaders)-1:]))
		write(false)
	}

	write(true)
	fmt.Fprintf(os.Stderr, "bench-wan: written to %s\n", out)
}

type wanBench struct {
	b         *testing.B
	topo      *Topology
	env       *localenv.Env
	writes    int
	zones     []string // one per member cluster, in order
	zoneOf    []string // the member cluster of zones[i]
	preferred string
	shape     map[string]int
}

// wanSystem is a ring the bench writes to.
type wanSystem struct {
	name string
	// zone returns the client config of the members in a zone.
	zone func(ctx context.Context, zone string) EtcdClientConfig
	// where says where the leader is and with which timing.
	where func(ctx context.Context) string
	bare  *wanBare
	stop  func()
}

type wanBare struct {
	c      *etcdtest.Cluster
	zoneOf []string // zone of c.Members[i]
	timing WANTiming
}

// memberEndpoints is a member's client URL in the EtcdCluster's status
// (members replaced since the ring was created included).
func memberEndpoints(ec *etcdfedv1.EtcdCluster, name string) []string {
	var out []string
	for _, ep := range ec.Status.Endpoints {
		if strings.Contains(ep, "//"+name+".") {
			out = append(out, ep)
		}
	}
	return out
}

func envOr(k, def string) string {
	if v := os.Getenv(k); v != "" {
		return v
	}
	return def
}

func loadAvg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?"
	}
	return strings.Join(strings.Fields(string(b))[:3], " ")
}

func (w *wanBench) managed(name string, m *ManagedEtcd) wanSystem {
	return wanSystem{
		name: name,
		zone: func(ctx context.Context, zone string) EtcdClientConfig {
			ec, err := m.Get(ctx, w.topo.Hub)
			if err != nil {
				w.b.Fatal(err)
			}
			c := m.Client
			c.Endpoints = nil
			for _, ms := range ec.Status.Members {
				if ms.Zone == zone {
					c.Endpoints = append(c.Endpoints, memberEndpoints(ec, ms.Name)...)
				}
			}
			return c
		},
		where: func(ctx context.Context) string {
			ec, err := m.Get(ctx, w.topo.Hub)
			if err != nil {
				return err.Error()
			}
			zone := "?"
			for _, ms := range ec.Status.Members {
				if ms.Name == ec.Status.Leader {
					zone = ms.Zone
				}
			}
			tm := "?"
			if t := ec.Status.Timing; t != nil {
				tm = fmt.Sprintf("%d/%d", t.HeartbeatIntervalMillis, t.ElectionTimeoutMillis)
			}
			return zone + ", " + tm
		},
	}
}

// startBare starts five plain etcd processes shaped as w.shape, member i
// of zone z on the address .(200+10*set+i) of z's block, in a cgroup
// below z's.
func (w *wanBench) startBare(ctx context.Context, set int, tm WANTiming, extra ...string) wanSystem {
	b := w.b
	var hosts, cgroups, zoneOf []string
	for _, z := range w.zones {
		dir, cidr, err := w.env.UnitCgroup(z)
		if err != nil {
			b.Fatal(err)
		}
		p, err := netip.ParsePrefix(cidr)
		if err != nil {
			b.Fatal(err)
		}
		for i := 0; i < w.shape[z]; i++ {
			a := p.Addr().As4()
			a[3] = byte(200 + 10*set + i)
			hosts = append(hosts, netip.AddrFrom4(a).String())
			cgroups = append(cgroups, filepath.Join(dir, fmt.Sprintf("bench-bare%d-%d", set, i)))
			zoneOf = append(zoneOf, z)
		}
	}
	c := etcdtest.Start(b, etcdtest.Options{Members: len(hosts), Name: fmt.Sprintf("bare%d", set), Hosts: hosts, Cgroups: cgroups,
		ExtraArgs: append([]string{fmt.Sprintf("--heartbeat-interval=%d", tm.Heartbeat), fmt.Sprintf("--election-timeout=%d", tm.Election)}, extra...)})
	bare := &wanBare{c: c, zoneOf: zoneOf, timing: tm}
	return wanSystem{
		name: "bare etcd",
		bare: bare,
		zone: func(_ context.Context, zone string) EtcdClientConfig {
			var cfg EtcdClientConfig
			for i, m := range c.Members {
				if zoneOf[i] == zone {
					cfg.Endpoints = append(cfg.Endpoints, m.ClientURL)
				}
			}
			return cfg
		},
		where: func(ctx context.Context) string {
			l, err := c.Leader(ctx)
			if err != nil {
				return err.Error()
			}
			return zoneOf[slices.Index(c.Members, l)] + ", " + tm.String()
		},
		stop: func() {
			for _, m := range c.Members {
				m.Stop()
			}
		},
	}
}

// setDistance puts link between every two zones and every two member
// clusters (zero: none). The zones' links carry the members' traffic; the
// clusters' carry the rest between them, the spokes' gossip among it,
// whose round trips are the matrix Auto timing is derived from: with the
// zones' links alone the spokes measured zero distance.
func (w *wanBench) setDistance(ctx context.Context, link localenv.Link) {
	var d localenv.Distance
	if !link.IsZero() {
		for _, units := range [][]string{w.zones, w.zoneOf} {
			for i, a := range units {
				for _, z := range units[i+1:] {
					d.Links = append(d.Links, localenv.PairLink{A: a, B: z, Link: link})
				}
			}
		}
	}
	if err := w.topo.SetDistance(ctx, d); err != nil {
		w.b.Fatal(err)
	}
	w.b.Cleanup(func() { _ = w.topo.SetDistance(context.Background(), w.topo.BaseDistance) })
	fmt.Fprintf(os.Stderr, "bench-wan: %s distance %s\n", time.Now().UTC().Format(time.TimeOnly), d)
}

// timingHeld matches what status.timing says of a change held back: until
// the round trips settle ("keeping 40/400 until <time>: ...") or until
// every voter's disk window is full ("kept at 40/400 until every voter
// ..."). A message that says both "keeping" and " until " elsewhere, as
// the late heartbeats' hold ("etcd's defaults 100/1000 until <time>") with
// a change too small to roll ("keeping 110/1100: ... differs too little"),
// holds nothing back: the run of 2 Dec 06:28 waited for it until its
// 25 minutes ran out.
var timingHeld = regexp.MustCompile(`(keeping|kept at) \d+/\d+ until `)

// settle waits for the spokes to measure the distance and the hub to act
// on it: 20 s, then the Auto ring ready with no operation in flight and
// its leader in place.
func (w *wanBench) settle(ctx context.Context, auto *ManagedEtcd) {
	sleepCtx(ctx, 20*time.Second)
	// timingFloor Disk lowers the timing once every voter has run ten
	// minutes (its window of WAL syncs full) and its spoke wrote so (at
	// most five minutes later), then rolls.
	timeout := 5 * time.Minute
	if ec, err := auto.Get(ctx, w.topo.Hub); err == nil && ec.Spec.Etcd.TimingFloor == etcdfedv1.TimingFloorDisk {
		timeout = 25 * time.Minute
	}
	err := WaitForStatus(ctx, WaitForStatusInput{Hub: w.topo.Hub, Etcd: auto, What: "ring ready, nothing in flight, leader in place", Timeout: timeout, Until: func(ec *etcdfedv1.EtcdCluster) string {
		switch lp := ec.Status.LeaderPlacement; {
		case ec.Status.Operation != nil:
			return fmt.Sprintf("operation %s of %s", ec.Status.Operation.Type, ec.Status.Operation.Member)
		case lp == nil || !lp.InPlace:
			return fmt.Sprintf("leader placement %+v", lp)
		}
		for _, m := range ec.Status.Members {
			if !m.Ready || m.Role == etcdfedv1.RoleLearner {
				return fmt.Sprintf("member %s not a ready voter", m.Name)
			}
		}
		// A change of timing held until the round trips held still
		// (timing.Settle), or (timingFloor Disk) until every voter
		// reports a full window of WAL syncs, is still to come; so is one
		// of timingFloor Disk while no voter reports its syncs (the
		// first minute after the members started: etcdstatus.DiskWarmup).
		if tm := ec.Status.Timing; tm != nil && (timingHeld.MatchString(tm.Message) || strings.Contains(tm.Message, "WAL syncs reported yet")) {
			return "timing change held: " + tm.Message
		}
		// The chosen timing runs on every member (a roll onto it done).
		if tm := ec.Status.Timing; tm != nil && (tm.HeartbeatIntervalMillis != etcdfedv1.DefaultHeartbeatIntervalMillis || tm.ElectionTimeoutMillis != etcdfedv1.DefaultElectionTimeoutMillis) {
			for _, m := range ec.Status.Members {
				c := memberCluster(w.b, w.topo, m.Cluster)
				why, err := rolledOnto(ctx, c, auto, m.Name, *tm, time.Time{})
				if err != nil {
					return err.Error()
				}
				if why != "" {
					return m.Name + ": " + why
				}
			}
		}
		return ""
	}})
	if err != nil {
		w.b.Fatal(err)
	}
}

// measure writes w.writes puts from a client in each zone at once (its
// nearest endpoints) and returns the cells in the order of w.zones.
func (w *wanBench) measure(ctx context.Context, s wanSystem) []WANCell {
	out := make([]WANCell, len(w.zones))
	var wg sync.WaitGroup
	for i, z := range w.zones {
		cfg := s.zone(ctx, z)
		if len(cfg.Endpoints) == 0 {
			w.b.Fatalf("%s: no member in %s", s.name, z)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			c, err := EtcdClient(cfg)
			if err != nil {
				out[i].Errors = w.writes
				return
			}
			defer func() { _ = c.Close() }()
			val := strings.Repeat("v", 256)
			var lat []time.Duration
			for n := -5; n < w.writes; n++ {
				pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
				t0 := time.Now()
				_, err := c.Put(pctx, fmt.Sprintf("/bench-wan/%s/%d", z, n), val)
				d := time.Since(t0)
				cancel()
				switch {
				case n < 0: // warm-up: connections, leader known
				case err != nil:
					out[i].Errors++
				default:
					lat = append(lat, d)
				}
			}
			slices.Sort(lat)
			out[i].P50, out[i].P99, out[i].Writes = Percentile(lat, 50), Percentile(lat, 99), len(lat)
		}()
	}
	wg.Wait()
	return out
}

// openLoop puts one write every 10 ms (alternating between cfgs), each
// with a 2 s deadline, until ctx ends; it returns the acknowledgement
// times.
func openLoop(ctx context.Context, cfgs []EtcdClientConfig) func() []time.Time {
	var mu sync.Mutex
	var acks []time.Time
	var wg sync.WaitGroup
	var clients []*clientv3.Client
	for _, cfg := range cfgs {
		if c, err := EtcdClient(cfg); err == nil {
			clients = append(clients, c)
		}
	}
	done := make(chan struct{})
	if len(clients) == 0 {
		close(done)
		return func() []time.Time { return nil }
	}
	go func() {
		defer close(done)
		tick := time.NewTicker(10 * time.Millisecond)
		defer tick.Stop()
		for n := 0; ; n++ {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			c := clients[n%len(clients)]
			wg.Add(1)
			go func() {
				defer wg.Done()
				pctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
				defer cancel()
				if _, err := c.Put(pctx, fmt.Sprintf("/bench-wan/failover/%d", n), "x"); err == nil {
					mu.Lock()
					acks = append(acks, time.Now())
					mu.Unlock()
				}
			}()
		}
	}()
	return func() []time.Time {
		<-done
		wg.Wait()
		for _, c := range clients {
			_ = c.Close()
		}
		return acks
	}
}

// survivors are the client configs of the zones other than the preferred
// one.
func (w *wanBench) survivors(ctx context.Context, s wanSystem) []EtcdClientConfig {
	var out []EtcdClientConfig
	for _, z := range w.zones {
		if z != w.preferred {
			out = append(out, s.zone(ctx, z))
		}
	}
	return out
}

// failoverBare moves the bare etcd's leader into the preferred zone,
// SIGKILLs both its members there under the open-loop writers, and
// returns the longest write gap; the two are started again after.
func (w *wanBench) failoverBare(ctx context.Context, bare *wanBare, run int) (time.Duration, string) {
	b := w.b
	c := bare.c
	if err := c.WaitHealthy(ctx, time.Minute); err != nil {
		b.Fatal(err)
	}
	var victims []*etcdtest.Member
	for i, m := range c.Members {
		if bare.zoneOf[i] == w.preferred {
			victims = append(victims, m)
		}
	}
	if err := moveBareLeader(ctx, c, victims[0]); err != nil {
		b.Fatal(err)
	}
	sys := wanSystem{zone: func(_ context.Context, zone string) EtcdClientConfig {
		var cfg EtcdClientConfig
		for i, m := range c.Members {
			if bare.zoneOf[i] == zone {
				cfg.Endpoints = append(cfg.Endpoints, m.ClientURL)
			}
		}
		return cfg
	}}
	gap, note := w.failover(ctx, w.survivors(ctx, sys), func() {
		var wg sync.WaitGroup
		for _, m := range victims {
			wg.Add(1)
			go func() { defer wg.Done(); m.Stop() }()
		}
		wg.Wait()
	})
	for _, m := range victims {
		c.Restart(m)
	}
	if err := c.WaitHealthy(ctx, time.Minute); err != nil {
		b.Fatal(err)
	}
	fmt.Fprintf(os.Stderr, "bench-wan: bare etcd %s failover %d: gap %s (%s)\n", bare.timing, run, gap, note)
	return gap, note
}

// moveBareLeader makes to the leader (MoveLeader from the current one).
func moveBareLeader(ctx context.Context, c *etcdtest.Cluster, to *etcdtest.Member) error {
	return poll(ctx, time.Minute, "leadership moved to "+to.Name, func(ctx context.Context) (string, error) {
		l, err := c.Leader(ctx)
		if err != nil {
			return err.Error(), nil
		}
		if l == to {
			return "", nil
		}
		cli := c.NewClient(l.ClientURL)
		defer func() { _ = cli.Close() }()
		sctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		st, err := cli.Status(sctx, to.ClientURL)
		if err != nil {
			return err.Error(), nil
		}
		if _, err := cli.MoveLeader(sctx, st.Header.MemberId); err != nil {
			return err.Error(), nil
		}
		return "moved, checking", nil
	})
}

// failover runs the open-loop writers on cfgs for 3 s, calls kill, and
// 10 s later returns the longest gap between acknowledged writes from a
// second before the kill on.
func (w *wanBench) failover(ctx context.Context, cfgs []EtcdClientConfig, kill func()) (time.Duration, string) {
	lctx, cancel := context.WithCancel(ctx)
	stop := openLoop(lctx, cfgs)
	sleepCtx(ctx, 3*time.Second)
	killed := time.Now()
	kill()
	sleepCtx(ctx, 10*time.Second)
	end := time.Now()
	cancel()
	acks := stop()
	gap, at := LongestGap(acks, killed.Add(-time.Second), end)
	return gap, fmt.Sprintf("%d writes acknowledged; the gap began %.3f s after the kill", len(acks), at.Sub(killed).Seconds())
}

// failoverManaged kills the preferred zone (localenv kill: its pods
// SIGKILLed) with the leader there, measures the gap, and restores it.
func (w *wanBench) failoverManaged(ctx context.Context, m *ManagedEtcd) (time.Duration, string) {
	b := w.b
	sys := w.managed("", m)
	cfgs := w.survivors(ctx, sys)
	gap, note := w.failover(ctx, cfgs, func() {
		if err := w.topo.FailZone(ctx, w.preferred, "kill"); err != nil {
			b.Fatal(err)
		}
	})
	if err := w.topo.RestoreZone(ctx, w.preferred); err != nil {
		b.Fatal(err)
	}
	fmt.Fprintf(os.Stderr, "bench-wan: etcdfed failover: gap %s (%s)\n", gap, note)
	return gap, note
}

// soak runs, at 20 ms with 10 ms jitter and two busy processes, the Auto
// ring and a bare etcd at each of bareTimings under a steady write load
// for soakFor, all at once, and counts their leader changes the same way
// for every system (SoakTally: a new term led by another member; a
// member behind does not count again), the raft term increments, and,
// for the Auto ring, the hub's moves of leadership back to the preferred
// zone (each raises the term once) apart from the elections. Each
// system's WAL fsyncs over a second (from the members' metrics) show
// when the machine's disk, not the network or the timing, stalled a
// leader: its heartbeats wait for the fsync.
func (w *wanBench) soak(ctx context.Context, auto *ManagedEtcd, soakFor, adapt time.Duration, bareTimings []WANTiming) []string {
	b := w.b
	w.setDistance(ctx, localenv.Link{RTT: 20 * time.Millisecond, Jitter: 10 * time.Millisecond})
	w.settle(ctx, auto)
	ec, err := auto.Get(ctx, w.topo.Hub)
	if err != nil {
		b.Fatal(err)
	}
	floor := WANTiming{int(ec.Status.Timing.HeartbeatIntervalMillis), int(ec.Status.Timing.ElectionTimeoutMillis)}
	var bares []wanSystem
	for i, tm := range bareTimings {
		s := w.startBare(ctx, i+1, tm, "--log-level=info")
		s.name = "bare etcd " + tm.String()
		defer s.stop()
		bares = append(bares, s)
	}
	autoSys := w.managed("etcdfed Auto", auto)

	// Members' status endpoints, fixed for the run.
	type probe struct {
		name string
		cfg  EtcdClientConfig
	}
	var probesA []probe
	probesB := make([][]probe, len(bares))
	for _, ms := range ec.Status.Members {
		cfg := auto.Client
		cfg.Endpoints = memberEndpoints(ec, ms.Name)
		if len(cfg.Endpoints) == 0 {
			b.Fatalf("no endpoint of %s in %v", ms.Name, ec.Status.Endpoints)
		}
		probesA = append(probesA, probe{ms.Name, cfg})
	}
	for i, bs := range bares {
		for _, m := range bs.bare.c.Members {
			probesB[i] = append(probesB[i], probe{m.Name, EtcdClientConfig{Endpoints: []string{m.ClientURL}}})
		}
	}
	look := func(ctx context.Context, sys string, ps []probe, clients map[string]*clientv3.Client, t *SoakTally) {
		for _, p := range ps {
			c := clients[p.name]
			sctx, cancel := context.WithTimeout(ctx, time.Second)
			st, err := c.Status(sctx, p.cfg.Endpoints[0])
			cancel()
			if err != nil {
				t.Misses++
				continue
			}
			if ch, ok := t.Observe(st.RaftTerm, st.Leader); ok {
				fmt.Fprintf(os.Stderr, "bench-wan soak: %s %s term %d leader %x (was %x, seen first by %s), load %s\n",
					time.Now().UTC().Format("15:04:05.000"), sys, ch.Term, ch.To, ch.From, p.name, loadAvg())
			}
		}
	}
	open := func(ps []probe) map[string]*clientv3.Client {
		out := map[string]*clientv3.Client{}
		for _, p := range ps {
			c, err := EtcdClient(p.cfg)
			if err != nil {
				b.Fatal(err)
			}
			out[p.name] = c
		}
		return out
	}
	clientsA := open(probesA)
	clientsB := make([]map[string]*clientv3.Client, len(bares))
	tb := make([]*SoakTally, len(bares))
	for i := range bares {
		clientsB[i] = open(probesB[i])
		tb[i] = &SoakTally{}
	}
	defer func() {
		for _, cs := range append(clientsB, clientsA) {
			for _, c := range cs {
				_ = c.Close()
			}
		}
	}()
	ta := &SoakTally{}
	lookAll := func() {
		look(ctx, "etcdfed Auto", probesA, clientsA, ta)
		for i, bs := range bares {
			look(ctx, bs.name, probesB[i], clientsB[i], tb[i])
		}
	}
	lookAll()
	for _, ms := range ec.Status.Members {
		fmt.Fprintf(os.Stderr, "bench-wan soak: etcdfed Auto member %s [%s] in %s/%s\n", ms.Name, ms.ID, ms.Cluster, ms.Zone)
	}
	moves0 := leaderMoves(ec)
	// Every member's metrics page, for its WAL fsyncs over a second.
	var pagesA []string
	for _, ms := range ec.Status.Members {
		var pod corev1.Pod
		c := memberCluster(b, w.topo, ms.Cluster)
		if err := c.Client.Get(ctx, client.ObjectKey{Namespace: etcdfedv1.DefaultRingNamespace, Name: auto.ObjectName(ms.Name)}, &pod); err != nil || pod.Status.PodIP == "" {
			b.Fatalf("pod of %s: %v (IP %q)", ms.Name, err, pod.Status.PodIP)
		}
		pagesA = append(pagesA, "http://"+net.JoinHostPort(pod.Status.PodIP, "2381")+"/metrics")
	}
	pagesB := make([][]string, len(bares))
	for i, bs := range bares {
		for _, m := range bs.bare.c.Members {
			pagesB[i] = append(pagesB[i], m.ClientURL+"/metrics")
		}
	}
	slowAll := func() []int64 {
		out := []int64{slowFsyncs(ctx, pagesA)}
		for i := range bares {
			out = append(out, slowFsyncs(ctx, pagesB[i]))
		}
		return out
	}
	slow0 := slowAll()

	// CPU load: one busy process per core.
	var burners []*exec.Cmd
	for range 2 {
		cmd := exec.Command("sha256sum", "/dev/zero")
		cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
		if err := cmd.Start(); err != nil {
			b.Fatal(err)
		}
		burners = append(burners, cmd)
	}
	defer func() {
		for _, c := range burners {
			_ = c.Process.Kill()
			_ = c.Wait()
		}
	}()
	load0 := loadAvg()
	timingA, counted := floor.String()+" (Auto)", floor
	var adapting []string
	if adapt > 0 {
		// The load alone first, for the Auto ring's timing to follow it
		// (timingFloor Disk: late heartbeats raise the floor, a roll);
		// what changed meanwhile is reported apart and not counted.
		fmt.Fprintf(os.Stderr, "bench-wan soak: %s of load before the count, for the Auto ring's timing to follow it\n", adapt)
		actx, acancel := context.WithTimeout(ctx, adapt)
		for actx.Err() == nil {
			sleepCtx(actx, time.Second)
			lookAll()
		}
		acancel()
		w.settle(ctx, auto)
		lookAll()
		if ec, err := auto.Get(ctx, w.topo.Hub); err == nil {
			adapted := WANTiming{int(ec.Status.Timing.HeartbeatIntervalMillis), int(ec.Status.Timing.ElectionTimeoutMillis)}
			if counted = adapted; adapted != floor {
				timingA = floor.String() + " -> " + adapted.String() + " (Auto, before the count)"
			}
			adapting = append(adapting, fmt.Sprintf("Before the count, %s of the same CPU load without writes (then until the ring settled): etcdfed Auto %d raft term increments, %d leader changes, timing %s at the end (%s); %s", adapt, ta.Term-ta.Term0, ta.Changes, adapted, ec.Status.Timing.Message, bareTallies(bares, tb)))
			moves0 = leaderMoves(ec)
		}
		ta = &SoakTally{}
		for i := range tb {
			tb[i] = &SoakTally{}
		}
		slow0 = slowAll()
		lookAll()
		load0 = loadAvg()
	}
	sctx, cancel := context.WithTimeout(ctx, soakFor)
	defer cancel()
	var wg sync.WaitGroup
	var mu sync.Mutex
	puts := map[string][2]int{}
	for _, s := range append([]wanSystem{autoSys}, bares...) {
		for _, z := range w.zones {
			cfg := s.zone(ctx, z)
			wg.Add(1)
			go func() {
				defer wg.Done()
				c, err := EtcdClient(cfg)
				if err != nil {
					return
				}
				defer func() { _ = c.Close() }()
				ok, bad := 0, 0
				for n := 0; sctx.Err() == nil; n++ {
					pctx, pcancel := context.WithTimeout(sctx, 2*time.Second)
					if _, err := c.Put(pctx, fmt.Sprintf("/bench-wan/soak/%s/%d", z, n%1000), "soak"); err == nil {
						ok++
					} else if sctx.Err() == nil {
						bad++
					}
					pcancel()
					sleepCtx(sctx, 20*time.Millisecond)
				}
				mu.Lock()
				p := puts[s.name]
				puts[s.name] = [2]int{p[0] + ok, p[1] + bad}
				mu.Unlock()
			}()
		}
	}
	for sctx.Err() == nil {
		sleepCtx(sctx, time.Second)
		lookAll()
	}
	wg.Wait()
	lookAll()
	load1 := loadAvg()
	slow1 := slowAll()
	moves := 0
	if ec, err := auto.Get(ctx, w.topo.Hub); err == nil {
		moves = int(leaderMoves(ec) - moves0)
		// A timing changed during the count rolled the ring: each roll's
		// leader transfer is among the increments, not among the moves.
		if end := (WANTiming{int(ec.Status.Timing.HeartbeatIntervalMillis), int(ec.Status.Timing.ElectionTimeoutMillis)}); end != counted {
			timingA += ", " + end.String() + " at the end (rolled during the count: its leader transfers count as elections here)"
		}
	}
	if dir := os.Getenv("ETCDFED_WAN_SOAK_LOGS"); dir != "" {
		keepBareLogs(dir, bares)
	}
	line := func(name string, tm string, t *SoakTally, transfers int, slow int64) string {
		p := puts[name]
		return fmt.Sprintf("| %s | %s | %d | %d | %d | %d | %d | %d | %d acknowledged, %d failed | %d |", name, tm, t.Term-t.Term0, transfers, t.Elections(transfers), len(t.Leaders), t.Changes, slow, p[0], p[1], t.Misses)
	}
	out := []string{
		fmt.Sprintf("Stability run: %s at 20 ms ± 10 ms between zones, two busy processes (sha256sum /dev/zero), load average %s at the start of the load, %s at the end; a put every 20 ms after the last from a client in each zone, status of every member every second:", soakFor, load0, load1),
		"",
		"| system | timing | raft term increments | hub's leader moves | elections (increments - moves) | leaders seen | leader changes | WAL fsyncs over 1 s (all members) | puts | status misses |",
		"| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |",
		line("etcdfed Auto", timingA, ta, moves, slow1[0]-slow0[0]),
	}
	for i, bs := range bares {
		out = append(out, line(bs.name, bs.bare.timing.String(), tb[i], 0, slow1[i+1]-slow0[i+1]))
	}
	if len(adapting) > 0 {
		out = append(out, "")
		out = append(out, adapting...)
	}
	fmt.Fprintln(os.Stderr, strings.Join(out, "\n"))
	return out
}

// bareTallies says, for the adaptation before a soak's count, each bare
// etcd's term increments and leader changes.
func bareTallies(bares []wanSystem, tb []*SoakTally) string {
	var parts []string
	for i, bs := range bares {
		parts = append(parts, fmt.Sprintf("%s %d increments, %d changes", bs.name, tb[i].Term-tb[i].Term0, tb[i].Changes))
	}
	return strings.Join(parts, "; ")
}

// leaderMoves is the hub's count of leadership moves for spec.leader.
func leaderMoves(ec *etcdfedv1.EtcdCluster) int64 {
	if lp := ec.Status.LeaderPlacement; lp != nil {
		return lp.Moves
	}
	return 0
}

// keepBareLogs copies the bare etcds' logs (etcd.log beside each data
// directory) into dir, to read their elections beside the etcdfed
// members' logs the environment keeps (ETCDFED_KEEP_STATE).
func keepBareLogs(dir string, bares []wanSystem) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		fmt.Fprintln(os.Stderr, "bench-wan soak: keep logs:", err)
		return
	}
	for _, bs := range bares {
		for _, m := range bs.bare.c.Members {
			b, err := os.ReadFile(filepath.Join(filepath.Dir(m.DataDir), "etcd.log"))
			if err == nil {
				err = os.WriteFile(filepath.Join(dir, m.Name+".log"), b, 0o644)
			}
			if err != nil {
				fmt.Fprintln(os.Stderr, "bench-wan soak: keep logs:", err)
			}
		}
	}
}

// slowFsyncs sums the WAL fsyncs over a second (WALFsyncsOver) of the
// members whose metrics pages are pages; a page that cannot be read
// counts none, and says so.
func slowFsyncs(ctx context.Context, pages []string) int64 {
	hc := &http.Client{Timeout: 5 * time.Second}
	var sum int64
	for _, p := range pages {
		page, err := getMetrics(ctx, hc, p, "")
		if err == nil {
			var over int64
			over, _, err = WALFsyncsOver(page, "1.024")
			sum += over
		}
		if err != nil {
			fmt.Fprintf(os.Stderr, "bench-wan soak: WAL fsyncs of %s: %v\n", p, err)
		}
	}
	return sum
}
