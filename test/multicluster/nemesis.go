package multicluster

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/miekg/dns"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdfedv1 "github.com/etcdfed/etcdfed/api/v1alpha1"
	"github.com/etcdfed/etcdfed/dev/localenv"
	"github.com/etcdfed/etcdfed/dev/nemesis"
	"github.com/etcdfed/etcdfed/dev/workload"
)

// NemesisSpecInput runs fault schedules drawn from a seed on a ring.
type NemesisSpecInput struct {
	T        *testing.T
	Topology *Topology
	Etcd     *ManagedEtcd
	// Replicas of the ring.
	Replicas int
	Seed     uint64
	Profile  nemesis.Profile
	// Schedules are the indexes of the schedules to run (0, 1, ... for a
	// whole run; a few of them to replay).
	Schedules []int
	// Whole bounds the wait for the ring to be whole again after a
	// schedule healed every fault; default 10 minutes.
	Whole time.Duration
}

// NemesisSpec runs each schedule as a subtest (schedule-07): the ring
// must be whole first; the ring's quorumLossRecovery is set as the
// schedule says; a leader watch (every member asked about itself through
// its own address, addresses from the hub's status, from every ring DNS
// server and from the member clusters' pods) and the recorded workload
// (through the ring's DNS names, a watcher per endpoint) start; the
// faults are injected and healed on the schedule's clock while the
// hub's status is logged at every change; then the ring must be whole
// again (replicas ready voters, tolerant, one cluster ID, the same
// members everywhere), the workload linearizable with nothing
// acknowledged lost and every watch complete and in order, the
// leader watch must show one ring throughout (no member answering for
// another cluster ID, never two cluster IDs each with a leader at one
// moment, never two members leading at once beyond an election), and
// the hub must never have started a Recover (nothing in a schedule
// proves a lost voter cannot serve: rule 11). A
// schedule that leaves the ring broken stops the run. It returns the
// summary (logged too).
func NemesisSpec(ctx context.Context, in NemesisSpecInput) nemesis.Summary {
	t := in.T
	t.Helper()
	topo := in.Topology
	if topo.Partition == nil || topo.FailZone == nil || topo.KillHub == nil || topo.StopHub == nil {
		t.Skip("NemesisSpec: the topology cannot partition, kill clusters, or kill and stop the hub")
	}
	units := nemesis.Topology{Hub: localenv.HubClusterName}
	for _, c := range topo.Members {
		zones, err := c.Zones(ctx)
		if err != nil {
			t.Fatal(err)
		}
		units.Clusters = append(units.Clusters, nemesis.Cluster{Name: c.Name, Zones: zones})
	}
	sum := nemesis.Summary{Seed: in.Seed, Profile: in.Profile.Name}
	defer func() {
		t.Logf("summary:\n%s", sum)
	}()
	for _, i := range in.Schedules {
		s := nemesis.Generate(in.Seed, i, units, in.Profile)
		res := nemesis.Result{Schedule: s}
		whole := false
		t.Run(fmt.Sprintf("schedule-%02d", i), func(t *testing.T) {
			whole = runNemesisSchedule(ctx, t, in, s, &res)
		})
		sum.Results = append(sum.Results, res)
		if !whole {
			t.Errorf("the ring was not whole after schedule %d: the run stops here (replay: NEMESIS_SEED=%d NEMESIS_PROFILE=%s NEMESIS_ONLY=%d)", i, in.Seed, in.Profile.Name, i)
			return sum
		}
	}
	return sum
}

// runNemesisSchedule runs one schedule and reports whether the ring was
// whole at its end; what broke goes into res and fails t.
func runNemesisSchedule(ctx context.Context, t *testing.T, in NemesisSpecInput, s nemesis.Schedule, res *nemesis.Result) (whole bool) {
	topo, hub := in.Topology, in.Topology.Hub
	t.Log(s)
	violate := func(format string, args ...any) {
		t.Helper()
		v := fmt.Sprintf(format, args...)
		res.Violations = append(res.Violations, v)
		t.Error(v)
	}
	ec, err := WaitForWholeRing(ctx, WaitForWholeRingInput{Topology: topo, Etcd: in.Etcd, Replicas: in.Replicas, Timeout: orDefault(in.Whole, 10*time.Minute)})
	if err != nil {
		violate("the ring was not whole before the schedule: %v", err)
		return false
	}
	clusterID := ec.Status.ClusterID
	recorded, err := strconv.ParseUint(clusterID, 16, 64)
	if err != nil {
		t.Fatalf("cluster ID %q: %v", clusterID, err)
	}
	recoveriesBefore, err := HubEventNotes(ctx, hub, in.Etcd, EventQuery{Reasons: []string{"QuorumRecovery"}})
	if err != nil {
		t.Fatal(err)
	}
	if err := setQuorumLossRecovery(ctx, hub, in.Etcd, s.Automatic); err != nil {
		t.Fatal(err)
	}
	t.Logf("the ring before: %s, leader %s, cluster %s", ec.Status.ZoneSummary, ec.Status.Leader, clusterID)

	leaders := workload.WatchLeaders(ctx, workload.LeaderWatchInput{Client: in.Etcd.Client, Targets: ringTargets(topo, in.Etcd)})
	leadersStopped := false
	defer func() {
		if !leadersStopped {
			leaders.Stop()
		}
	}()
	w := StartWorkload(ctx, t, StartWorkloadInput{Client: in.Etcd.Client, Prefix: fmt.Sprintf("nemesis-%d-%02d-%d/", s.Seed, s.Index, time.Now().UnixNano()), WatchEachEndpoint: true})
	progress(ctx, t, w, 50, time.Minute)

	start := time.Now()
	trail := startStatusTrail(ctx, t, hub, in.Etcd, start)
	active := map[int]bool{}
	defer func() {
		trail.stop()
		for i := range active { // a fatal step: heal what is still in place
			if err := healFault(context.WithoutCancel(ctx), topo, s.Faults[i]); err != nil {
				t.Logf("heal %s: %v", s.Faults[i].What(), err)
			}
		}
	}()
	for _, e := range s.Events() {
		sleepCtx(ctx, time.Until(start.Add(e.At)))
		f := s.Faults[e.Fault]
		at := time.Since(start).Seconds()
		if e.Heal {
			if err := healFault(ctx, topo, f); err != nil {
				t.Fatalf("+%.1fs heal %s: %v", at, f.What(), err)
			}
			delete(active, e.Fault)
			t.Logf("+%.1fs healed %s (took %.1fs; %d writes acknowledged so far)", at, f.What(), time.Since(start).Seconds()-at, w.Acked())
			continue
		}
		if err := injectFault(ctx, topo, f); err != nil {
			t.Fatalf("+%.1fs inject %s: %v", at, f.What(), err)
		}
		if f.Kind != nemesis.KillHub {
			active[e.Fault] = true
		}
		t.Logf("+%.1fs injected %s for %s (took %.1fs)", at, f.What(), f.Hold, time.Since(start).Seconds()-at)
	}
	healed := time.Now()
	// The trail goes on through the wait for the whole ring: a ring that
	// does not come back says in the log how far it came.
	ec, err = WaitForWholeRing(ctx, WaitForWholeRingInput{Topology: topo, Etcd: in.Etcd, Replicas: in.Replicas, ClusterID: clusterID, Timeout: orDefault(in.Whole, 10*time.Minute)})
	trail.stop()
	// Nothing in a schedule is evidence that a lost voter cannot serve
	// (no cluster answers showing its member gone, no fencing): forcing
	// a new cluster is never right here, during the faults or after
	// (rule 11).
	for _, r := range trail.recovers {
		violate("the hub forced a new cluster with no evidence that the lost voters cannot serve: %s", r)
	}
	if notes, err := HubEventNotes(ctx, hub, in.Etcd, EventQuery{Reasons: []string{"QuorumRecovery"}}); err == nil {
		if added := slices.DeleteFunc(notes, func(n string) bool { return slices.Contains(recoveriesBefore, n) }); len(added) > 0 {
			violate("QuorumRecovery events during the schedule or after its last heal: %v", added)
		}
	}
	if err != nil {
		violate("the ring was not whole %s after the last heal: %v", orDefault(in.Whole, 10*time.Minute), err)
	} else {
		whole = true
		t.Logf("whole again %.1fs after the last heal: %s, leader %s", time.Since(healed).Seconds(), ec.Status.ZoneSummary, ec.Status.Leader)
		pctx, cancel := context.WithTimeout(ctx, time.Minute)
		if err := w.WaitForProgress(pctx, 50); err != nil {
			violate("the whole ring took no writes: %v", err)
		}
		cancel()
	}

	lr := leaders.Stop()
	leadersStopped = true
	verdict := workload.CheckLeaders(workload.LeaderCheckInput{Samples: lr.Samples, ClusterID: recorded})
	res.LeaderAnswers = verdict.Samples
	t.Logf("leader watch: %d looks at %d addresses, %d unanswered; %s", lr.Looks, len(lr.Targets), lr.Failed, verdict)
	for _, e := range lr.Errors {
		t.Logf("leader watch could not ask %s", e)
	}
	if err := verdict.Err(); err != nil {
		violate("two rings: %v", err)
		for _, sp := range verdict.Spans {
			t.Logf("leadership: %s", sp)
		}
	}
	r, err := workloadVerdict(ctx, t, w)
	if r != nil {
		res.Operations = r.Stats.Puts + r.Stats.Gets
		res.Acked = r.Stats.AckedPuts
		res.MaxWriteGap = r.MaxWriteGap
	}
	if err != nil {
		violate("%v", err)
	}
	res.Took = time.Since(start)
	t.Logf("schedule %d: %s from the first fault to the checks; longest write gap %s", s.Index, res.Took.Round(time.Second), res.MaxWriteGap.Round(time.Millisecond))
	return whole
}

func injectFault(ctx context.Context, topo *Topology, f nemesis.Fault) error {
	switch f.Kind {
	case nemesis.Partition, nemesis.OneWay:
		return topo.Partition(ctx, f.Cut)
	case nemesis.KillCluster:
		return topo.FailZone(ctx, f.Cluster, string(localenv.ModeKill))
	case nemesis.KillHub:
		return topo.KillHub(ctx)
	case nemesis.StopHub:
		return topo.StopHub(ctx)
	case nemesis.Distance:
		if topo.SetDistance == nil {
			return fmt.Errorf("fault %s: this environment cannot put distance between units", f.Kind)
		}
		return topo.SetDistance(ctx, f.Distance)
	}
	return fmt.Errorf("unknown fault %q", f.Kind)
}

func healFault(ctx context.Context, topo *Topology, f nemesis.Fault) error {
	switch f.Kind {
	case nemesis.Partition, nemesis.OneWay:
		return topo.HealPartition(ctx)
	case nemesis.KillCluster:
		return topo.RestoreZone(ctx, f.Cluster)
	case nemesis.StopHub:
		return topo.StartHub(ctx)
	case nemesis.Distance:
		// Schedules start at the environment's distance (zero unless
		// DISTANCE set one) and return to it.
		return topo.SetDistance(ctx, topo.BaseDistance)
	}
	return nil
}

// setQuorumLossRecovery sets spec.failurePolicy.quorumLossRecovery.
func setQuorumLossRecovery(ctx context.Context, hub *Cluster, m *ManagedEtcd, automatic bool) error {
	ec, err := m.Get(ctx, hub)
	if err != nil {
		return err
	}
	before := ec.DeepCopy()
	ec.Spec.FailurePolicy.QuorumLossRecovery = etcdfedv1.QuorumLossRecoveryManual
	if automatic {
		ec.Spec.FailurePolicy.QuorumLossRecovery = etcdfedv1.QuorumLossRecoveryAutomatic
	}
	return hub.Client.Patch(ctx, ec, client.MergeFrom(before))
}

// WaitForWholeRingInput names a ring that must be whole.
type WaitForWholeRingInput struct {
	Topology *Topology
	Etcd     *ManagedEtcd
	Replicas int
	// ClusterID, when set, is the cluster ID the ring must still have.
	ClusterID string
	Timeout   time.Duration
}

// WaitForWholeRing waits until the ring is whole: the hub reports
// Replicas ready voters, no operation in flight and FailureTolerant;
// the cluster ID is ClusterID (when given); every member's endpoint
// answers for that one cluster ID and lists exactly the members the hub
// reports, with their IDs; etcd lists them all as started voters, every
// endpoint sees the same leader and answers a linearizable read.
func WaitForWholeRing(ctx context.Context, in WaitForWholeRingInput) (*etcdfedv1.EtcdCluster, error) {
	deadline := time.Now().Add(orDefault(in.Timeout, 10*time.Minute))
	hub, m := in.Topology.Hub, in.Etcd
	ec, err := WaitForEtcdClusterReady(ctx, WaitForEtcdClusterInput{Hub: hub, Namespace: m.Namespace, Name: m.Name, Replicas: in.Replicas, Tolerant: true, Timeout: time.Until(deadline)})
	if err != nil {
		return nil, err
	}
	if in.ClusterID != "" && ec.Status.ClusterID != in.ClusterID {
		return ec, fmt.Errorf("the hub reports cluster %s, the ring's was %s", ec.Status.ClusterID, in.ClusterID)
	}
	ids := map[string]string{}
	var names []string
	for _, mem := range ec.Status.Members {
		ids[mem.Name] = mem.ID
		names = append(names, mem.Name)
	}
	err = poll(ctx, max(time.Until(deadline), time.Minute), "one ring, the same members everywhere", func(ctx context.Context) (string, error) {
		if err := oneRing(ctx, m, ec.Status.ClusterID, nil); err != nil {
			return "", err
		}
		if err := WaitForSameMembersEverywhere(ctx, m, ids); err != nil {
			return err.Error(), nil
		}
		return "", nil
	})
	if err != nil {
		return ec, err
	}
	return ec, WaitForEtcdMembers(ctx, WaitForEtcdMembersInput{Config: m.Client, Members: names, Timeout: max(time.Until(deadline), time.Minute)})
}

// ringTargets returns the addresses a leader watch asks, refreshed at
// each call: every member's address in the hub's status, every address
// any ring DNS server gives a member's name, and every pod of the ring in
// every member cluster that answers (a second ring's members live at
// addresses the first never had). Names are remembered across calls; a
// source that does not answer adds nothing.
func ringTargets(topo *Topology, m *ManagedEtcd) func(context.Context) []workload.LeaderTarget {
	scheme, port := "https", strconv.Itoa(int(etcdfedv1.DefaultClientPort))
	if len(m.Client.Endpoints) > 0 {
		if u, err := url.Parse(m.Client.Endpoints[0]); err == nil && u.Port() != "" {
			scheme, port = u.Scheme, u.Port()
		}
	}
	names := map[string]bool{}
	var uid types.UID
	return func(ctx context.Context) []workload.LeaderTarget {
		var out []workload.LeaderTarget
		add := func(name, addr string) {
			out = append(out, workload.LeaderTarget{Member: name, Endpoint: scheme + "://" + net.JoinHostPort(addr, port), ServerName: MemberHost(name, m.Domain)})
		}
		gctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		if ec, err := m.Get(gctx, topo.Hub); err == nil {
			uid = ec.UID
			for _, mem := range ec.Status.Members {
				names[mem.Name] = true
				if mem.Address != "" {
					add(mem.Name, mem.Address)
				}
			}
		}
		cancel()
		for name := range names {
			for _, srv := range topo.DNSServers {
				lctx, cancel := context.WithTimeout(ctx, time.Second)
				addrs, err := lookup(lctx, srv, dns.Fqdn(MemberHost(name, m.Domain)), dns.TypeA)
				cancel()
				if err == nil {
					for _, a := range addrs {
						add(name, a.String())
					}
				}
			}
		}
		if uid == "" {
			return out
		}
		var mu sync.Mutex
		var wg sync.WaitGroup
		for _, c := range topo.Members {
			wg.Add(1)
			go func() {
				defer wg.Done()
				lctx, cancel := context.WithTimeout(ctx, 2*time.Second)
				defer cancel()
				pods, err := c.Clientset.CoreV1().Pods(etcdfedv1.DefaultRingNamespace).List(lctx, metav1.ListOptions{LabelSelector: etcdfedv1.LabelClusterUID + "=" + string(uid)})
				if err != nil {
					return
				}
				mu.Lock()
				defer mu.Unlock()
				for _, p := range pods.Items {
					if p.Status.PodIP != "" {
						add(p.Name, p.Status.PodIP)
					}
				}
			}()
		}
		wg.Wait()
		return out
	}
}

// statusTrail logs what the hub says about a ring whenever it changes
// (placement, leader, readiness, the conditions not True and Degraded,
// the operation in flight), and notes every Recover operation.
type statusTrail struct {
	cancel   context.CancelFunc
	done     chan struct{}
	once     sync.Once
	recovers []string
}

func startStatusTrail(ctx context.Context, t testing.TB, hub *Cluster, m *ManagedEtcd, start time.Time) *statusTrail {
	ctx, cancel := context.WithCancel(ctx)
	st := &statusTrail{cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(st.done)
		last := ""
		seen := map[string]bool{}
		for ctx.Err() == nil {
			gctx, gcancel := context.WithTimeout(ctx, 2*time.Second)
			ec, err := m.Get(gctx, hub)
			gcancel()
			if err == nil {
				// Logged when the gist changes, not each time a message
				// counts another second.
				key := fmt.Sprintf("%s %s %d %v", ec.Status.ZoneSummary, ec.Status.Leader, ec.Status.ReadyMembers, incarnations(ec))
				for _, c := range ec.Status.Conditions {
					key += " " + c.Type + "=" + string(c.Status) + "/" + c.Reason
				}
				if op := ec.Status.Operation; op != nil {
					key += fmt.Sprintf(" %s %s %s", op.Type, op.Member, op.Step)
				}
				if key != last && ctx.Err() == nil {
					line := describeEtcdCluster(ec, fmt.Sprintf("%s, leader %s, %d of %d ready", ec.Status.ZoneSummary, ec.Status.Leader, ec.Status.ReadyMembers, len(ec.Status.Members)))
					t.Logf("+%.1fs hub: %s", time.Since(start).Seconds(), line)
					last = key
				}
				if op := ec.Status.Operation; op != nil && op.Type == etcdfedv1.OperationRecover {
					key := fmt.Sprintf("%s %s (%s)", op.Type, op.Member, op.Reason)
					if !seen[key] {
						seen[key] = true
						st.recovers = append(st.recovers, fmt.Sprintf("%s at +%.1fs", key, time.Since(start).Seconds()))
					}
				}
			}
			sleepCtx(ctx, time.Second)
		}
	}()
	return st
}

// stop ends the trail; the recovers are final once it returns.
func (st *statusTrail) stop() {
	st.once.Do(func() {
		st.cancel()
		<-st.done
	})
}

// nemesisSeed reads a seed: decimal, or hexadecimal with 0x.
func nemesisSeed(s string) (uint64, error) {
	s = strings.TrimSpace(s)
	base := 10
	if h, ok := strings.CutPrefix(strings.ToLower(s), "0x"); ok {
		s, base = h, 16
	}
	v, err := strconv.ParseUint(s, base, 64)
	if err != nil {
		return 0, errors.New("NEMESIS_SEED " + strconv.Quote(s) + ": want a decimal or 0x-hexadecimal number")
	}
	return v, nil
}
