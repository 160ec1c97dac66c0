package multicluster

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdfedv1 "github.com/etcdfed/etcdfed/api/v1alpha1"
	"github.com/etcdfed/etcdfed/dev/drill"
)

// toleranceSampler samples, every interval, the failure tolerance etcd's
// own member list gives (healthy voters minus the quorum of all voters,
// each voter asked for its status) and the operation in the EtcdCluster's
// status, until stopped.
type toleranceSampler struct {
	mu sync.Mutex
	// samples is the number of moments sampled; zero lists the ones with
	// no failure tolerance, listFailed how often the member list did not
	// answer and raced how often it changed during the sample (no sample
	// either way).
	samples, listFailed, raced int
	zero                       []string
	minTol                     int
	maxVoters                  int
	// ops are the operations seen, in order: key -> first and last seen.
	ops   []string
	first map[string]time.Time
	last  map[string]time.Time

	stop func()
	done chan struct{}
}

func startToleranceSampler(ctx context.Context, t testing.TB, hub *Cluster, m *ManagedEtcd, interval time.Duration) *toleranceSampler {
	t.Helper()
	c, err := EtcdClient(m.Client)
	if err != nil {
		t.Fatal(err)
	}
	s := &toleranceSampler{minTol: 1 << 30, first: map[string]time.Time{}, last: map[string]time.Time{}, done: make(chan struct{})}
	sctx, cancel := context.WithCancel(ctx)
	s.stop = cancel
	go func() {
		defer close(s.done)
		defer func() { _ = c.Close() }()
		for sctx.Err() == nil {
			at := time.Now()
			s.sample(sctx, hub, m, at, func(ctx context.Context) (drill.Tolerance, error) {
				return drill.SampleTolerance(ctx, c)
			})
			select {
			case <-sctx.Done():
			case <-time.After(time.Until(at.Add(interval))):
			}
		}
	}()
	return s
}

func (s *toleranceSampler) sample(ctx context.Context, hub *Cluster, m *ManagedEtcd, at time.Time, list func(context.Context) (drill.Tolerance, error)) {
	tl, err := list(ctx)
	ec := &etcdfedv1.EtcdCluster{}
	gerr := hub.Client.Get(ctx, client.ObjectKey{Namespace: m.Namespace, Name: m.Name}, ec)
	now := time.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	if gerr == nil && ec.Status.Operation != nil {
		op := ec.Status.Operation
		key := fmt.Sprintf("%s %s (%s) %s->%s", op.Type, op.Member, op.Reason, domainOf(op.From), domainOf(op.To))
		if _, ok := s.first[key]; !ok {
			s.ops = append(s.ops, key)
			s.first[key] = op.StartedAt.Time
		}
		s.last[key] = now
	}
	if ctx.Err() != nil {
		return
	}
	if errors.Is(err, drill.ErrRaced) {
		s.raced++
		return
	}
	if err != nil {
		s.listFailed++
		return
	}
	tol := tl.Tolerated()
	s.samples++
	s.minTol = min(s.minTol, tol)
	s.maxVoters = max(s.maxVoters, tl.Voters)
	if tol <= 0 {
		s.zero = append(s.zero, fmt.Sprintf("%s: %d voters, %d healthy: %s", at.Format("15:04:05.000"), tl.Voters, tl.Healthy, tl.Detail))
	}
}

func domainOf(d *etcdfedv1.FailureDomain) string {
	if d == nil {
		return "-"
	}
	return d.Cluster
}

// finish stops the sampler and returns how long each operation took
// (from its startedAt to the last sample that showed it).
func (s *toleranceSampler) finish() map[string]time.Duration {
	s.stop()
	<-s.done
	s.mu.Lock()
	defer s.mu.Unlock()
	out := map[string]time.Duration{}
	for _, k := range s.ops {
		out[k] = s.last[k].Sub(s.first[k])
	}
	return out
}

// checkMadeBeforeBreak requires of a finished sampler what moves made
// before break give: samples taken, none without failure tolerance, and
// the surge voter (replicas+1 voters) seen.
func (s *toleranceSampler) checkMadeBeforeBreak(t testing.TB, replicas int) {
	t.Helper()
	if s.samples == 0 {
		t.Errorf("no sample of etcd's member list")
	}
	for _, z := range s.zero {
		t.Errorf("no failure tolerance at %s", z)
	}
	if s.maxVoters != replicas+1 {
		t.Errorf("at most %d voters sampled, want %d (the surge voter of each move)", s.maxVoters, replicas+1)
	}
}

// setBreakBeforeMake sets (on) or removes the annotation
// etcdfed.dev/break-before-make.
func setBreakBeforeMake(ctx context.Context, hub *Cluster, m *ManagedEtcd, on bool) error {
	ec, err := m.Get(ctx, hub)
	if err != nil {
		return err
	}
	before := ec.DeepCopy()
	if ec.Annotations == nil {
		ec.Annotations = map[string]string{}
	}
	if on {
		ec.Annotations[etcdfedv1.AnnotationBreakBeforeMake] = "true"
	} else {
		delete(ec.Annotations, etcdfedv1.AnnotationBreakBeforeMake)
	}
	return hub.Client.Patch(ctx, ec, client.MergeFrom(before))
}

// setAllowedClusters sets spec.topology.clusters.
func setAllowedClusters(ctx context.Context, hub *Cluster, m *ManagedEtcd, clusters []string) error {
	return patchSpec(ctx, hub, m, func(s *etcdfedv1.EtcdClusterSpec) { s.Topology.Clusters = clusters })
}

// waitPlacedIn waits until the ring is ready with replicas members, all
// in clusters, no operation in flight.
func waitPlacedIn(ctx context.Context, hub *Cluster, m *ManagedEtcd, replicas int, clusters []string, timeout time.Duration) (*etcdfedv1.EtcdCluster, error) {
	var ec *etcdfedv1.EtcdCluster
	err := poll(ctx, timeout, fmt.Sprintf("every member of %s in %v", m.Name, clusters), func(pctx context.Context) (string, error) {
		got, err := WaitForEtcdClusterReady(pctx, WaitForEtcdClusterInput{Hub: hub, Namespace: m.Namespace, Name: m.Name, Replicas: replicas, Timeout: 2 * time.Second})
		if err != nil {
			return "not ready", nil
		}
		for _, mem := range got.Status.Members {
			if !slices.Contains(clusters, mem.Cluster) {
				return fmt.Sprintf("%s still in %s", mem.Name, mem.Cluster), nil
			}
		}
		ec = got
		return "", nil
	})
	return ec, err
}

// MigrateSpecInput is a ring of three members in From, moved to To.
type MigrateSpecInput struct {
	T        testing.TB
	Topology *Topology
	Etcd     *ManagedEtcd
	From, To []string
}

// MigrateSpec moves the ring from In.From to In.To with one spec change
// (spec.topology.clusters) under the recorded workload: every member
// moved make-before-break, one at a time, the leader last; failure
// tolerance, sampled from etcd's own member list and every voter's status
// call, is never 0; linearizable, nothing acknowledged lost, every watch
// complete. Then, beside it, the same kind of move break before make
// (the annotation etcdfed.dev/break-before-make, the behaviour before
// make-before-break moves): one member moved back into a From cluster. It
// reports the longest write gap, the failure tolerance sampled and the
// time per member moved of both.
func MigrateSpec(ctx context.Context, in MigrateSpecInput) {
	t := in.T
	t.Helper()
	hub := in.Topology.Hub
	replicas := 3

	// Make before break: the whole ring to other clusters.
	w := startScenarioWorkload(ctx, t, in.Etcd, "migrate")
	ec, err := in.Etcd.Get(ctx, hub)
	if err != nil {
		t.Fatal(err)
	}
	leader := ec.Status.Leader
	sampler := startToleranceSampler(ctx, t, hub, in.Etcd, 200*time.Millisecond)
	start := time.Now()
	if err := setAllowedClusters(ctx, hub, in.Etcd, in.To); err != nil {
		t.Fatal(err)
	}
	got, err := waitPlacedIn(ctx, hub, in.Etcd, replicas, in.To, 10*time.Minute)
	if err != nil {
		sampler.finish()
		t.Fatal(err)
	}
	total := time.Since(start)
	progress(ctx, t, w, 50, 30*time.Second)
	ops := sampler.finish()
	w.Stop()
	gap, gapAt := w.MaxWriteGapAt()
	t.Logf("make before break: %d members moved from %v to %v in %.1fs; longest gap between acknowledged writes %s (at %s); %d samples of etcd's member list, min failure tolerance %d, at most %d voters, member list unanswered %d times, changed during a sample %d times",
		replicas, in.From, in.To, total.Seconds(), gap.Round(time.Millisecond), gapAt.Format("15:04:05.000"), sampler.samples, sampler.minTol, sampler.maxVoters, sampler.listFailed, sampler.raced)
	var moved []string
	for _, k := range sampler.ops {
		t.Logf("  %s: %.1fs", k, ops[k].Seconds())
		if strings.HasPrefix(k, string(etcdfedv1.OperationMove)+" ") {
			moved = append(moved, strings.Fields(k)[1])
		} else {
			t.Errorf("operation %s during the migration: every member must move make before break", k)
		}
	}
	for _, name := range moved {
		// Each move is told: Evacuating with the evidence (the cluster
		// no longer allowed), MemberReplaced once it is done.
		if note, err := waitForHubEventNote(ctx, hub, in.Etcd, etcdfedv1.EventEvacuating, name, "make before break", "no longer allowed"); err != nil {
			t.Error(err)
		} else {
			t.Logf("event %s: %s", etcdfedv1.EventEvacuating, note)
		}
		if _, err := waitForHubEventNote(ctx, hub, in.Etcd, etcdfedv1.EventMemberReplaced, name, "moved make before break"); err != nil {
			t.Error(err)
		}
	}
	if len(moved) != replicas {
		t.Errorf("moves seen %v, want every one of the %d members moved once", moved, replicas)
	} else if moved[len(moved)-1] != leader {
		t.Logf("the leader at the start, %s, was not moved last (%v): leadership may have changed during the migration", leader, moved)
	}
	sampler.checkMadeBeforeBreak(t, replicas)
	checkWorkload(ctx, t, w)
	for _, m := range got.Status.Members {
		t.Logf("  %s in %s, incarnation %d, dnsName %q", m.Name, m.Cluster, m.Incarnation, m.DNSName)
		// The stable name clients use follows the new incarnation, and
		// the incarnation's own name (its peer URL) serves it too.
		checkRecordFollows(ctx, t, in.Topology, in.Etcd, m)
		if m.DNSName == "" {
			t.Errorf("%s moved make before break without a name of its own", m.Name)
		} else if err := WaitForRecordResolves(ctx, WaitForRecordResolvesInput{Servers: in.Topology.DNSServers, Name: m.DNSName, Address: m.Address}); err != nil {
			t.Errorf("%s's own name: %v", m.Name, err)
		}
	}

	// Break before make, for comparison: the same kind of move (one live
	// member, allowed clusters changed), with the EtcdCluster asking for
	// the old behaviour (annotation etcdfed.dev/break-before-make).
	victim := got.Status.Members[0]
	w2 := startScenarioWorkload(ctx, t, in.Etcd, "migrate-bbm")
	if err := setBreakBeforeMake(ctx, hub, in.Etcd, true); err != nil {
		t.Fatal(err)
	}
	back := slices.Clone(in.To)
	back[slices.Index(back, victim.Cluster)] = in.From[0]
	sampler2 := startToleranceSampler(ctx, t, hub, in.Etcd, 200*time.Millisecond)
	start = time.Now()
	if err := setAllowedClusters(ctx, hub, in.Etcd, back); err != nil {
		t.Fatal(err)
	}
	if _, err := waitPlacedIn(ctx, hub, in.Etcd, replicas, back, 5*time.Minute); err != nil {
		sampler2.finish()
		t.Fatal(err)
	}
	total = time.Since(start)
	progress(ctx, t, w2, 50, 30*time.Second)
	ops2 := sampler2.finish()
	w2.Stop()
	gap2, gapAt2 := w2.MaxWriteGapAt()
	t.Logf("break before make (annotation): %s moved from %s to %s in %.1fs; longest gap between acknowledged writes %s (at %s); min failure tolerance %d over %d samples (%d with none), at most %d voters",
		victim.Name, victim.Cluster, in.From[0], total.Seconds(), gap2.Round(time.Millisecond), gapAt2.Format("15:04:05.000"), sampler2.minTol, sampler2.samples, len(sampler2.zero), sampler2.maxVoters)
	sawReplace := false
	for _, k := range sampler2.ops {
		t.Logf("  %s: %.1fs", k, ops2[k].Seconds())
		sawReplace = sawReplace || strings.HasPrefix(k, string(etcdfedv1.OperationReplace)+" ")
	}
	if !sawReplace {
		t.Errorf("operations %v: want a Replace (break before make), as the annotation asks", sampler2.ops)
	}
	checkWorkload(ctx, t, w2)
	if err := setBreakBeforeMake(ctx, hub, in.Etcd, false); err != nil {
		t.Fatal(err)
	}
}

// MigrateDrillSpecInput is a formed ring moved to To by `etcdfed drill
// migrate`.
type MigrateDrillSpecInput struct {
	T        testing.TB
	Topology *Topology
	Etcd     *ManagedEtcd
	To       []string
	// Etcdfed is the etcdfed binary.
	Etcdfed string
}

// MigrateDrillSpec runs `etcdfed drill migrate --json` to move the ring to
// In.To, as a user would, and checks its report: passed, every member in
// To, every operation a make-before-break Move, failure tolerance never
// below one, one voter more than replicas at some moment, and the JSON
// fields the docs name.
func MigrateDrillSpec(ctx context.Context, in MigrateDrillSpecInput) *drill.Report {
	t := in.T
	t.Helper()
	ec, err := in.Etcd.Get(ctx, in.Topology.Hub)
	if err != nil {
		t.Fatal(err)
	}
	if ec, err = WaitForEtcdClusterReady(ctx, WaitForEtcdClusterInput{Hub: in.Topology.Hub, Namespace: in.Etcd.Namespace, Name: in.Etcd.Name, Replicas: int(ec.Spec.Replicas), Timeout: 2 * time.Minute}); err != nil {
		t.Fatal(err)
	}
	args := []string{"drill", "migrate", "--kubeconfig", in.Topology.Hub.Kubeconfig, "--cluster", in.Etcd.Namespace + "/" + in.Etcd.Name,
		"--to", strings.Join(in.To, ","), "--timeout", "10m", "--json", "--artifacts", ArtifactsDir(t.TempDir())}
	rep, doc := runDrillCLI(ctx, t, in.Topology, in.Etcdfed, args)
	m := rep.Migration
	if m == nil || rep.Mode != drill.ModeMigrate || !rep.Pass {
		t.Fatalf("report of a migration drill: mode %q, pass %t, migration %+v, failures %v", rep.Mode, rep.Pass, m, rep.Failures)
	}
	if !slices.Equal(m.ToClusters, in.To) || len(m.Members) != int(ec.Spec.Replicas) {
		t.Errorf("report moves %v to %v, want the ring's %d members to %v", m.Members, m.ToClusters, ec.Spec.Replicas, in.To)
	}
	moved := 0
	for _, o := range m.Operations {
		if o.Type != string(etcdfedv1.OperationMove) {
			t.Errorf("operation %+v during the drill: every member must move make before break", o)
		}
		moved++
	}
	outside := 0
	for _, mem := range ec.Status.Members {
		if !slices.Contains(in.To, mem.Cluster) {
			outside++
		}
	}
	if moved != outside {
		t.Errorf("%d operations reported, want one per member outside %v (%d)", moved, in.To, outside)
	}
	if m.MinFailuresTolerated == nil || *m.MinFailuresTolerated < 1 || m.MaxVoters != int(ec.Spec.Replicas)+1 || m.ToleranceSamples == 0 {
		t.Errorf("tolerance: min %v over %d samples, at most %d voters; want at least 1 and %d voters", m.MinFailuresTolerated, m.ToleranceSamples, m.MaxVoters, ec.Spec.Replicas+1)
	}
	var fields map[string]any
	if err := json.Unmarshal(doc, &fields); err != nil {
		t.Fatal(err)
	}
	verdicts, _ := fields["verdicts"].(map[string]any)
	mig, _ := fields["migration"].(map[string]any)
	if fields["mode"] != "migrate" || verdicts["toleranceKept"] == nil || mig["minFailuresTolerated"] == nil || mig["operations"] == nil {
		t.Errorf("report JSON lacks what the report says:\n%s", doc)
	}
	got, err := in.Etcd.Get(ctx, in.Topology.Hub)
	if err != nil {
		t.Fatal(err)
	}
	for _, mem := range got.Status.Members {
		if !slices.Contains(in.To, mem.Cluster) {
			t.Errorf("%s still in %s after the drill", mem.Name, mem.Cluster)
		}
	}
	t.Logf("etcdfed drill migrate: %d member(s) moved to %v, every member moved %s after the spec change; failure tolerance %d before, at least %d over %d samples, at most %d voters; longest write gap %.3fs; %d puts acknowledged",
		moved, in.To, fmtAt(rep.Times.Evacuated), m.FailuresToleratedBefore, *m.MinFailuresTolerated, m.ToleranceSamples, m.MaxVoters, rep.Workload.MaxWriteGap, rep.Workload.AckedPuts)
	for _, o := range m.Operations {
		t.Logf("  %s %s (%s) %s -> %s: %.1fs", o.Type, o.Member, o.Reason, o.From, o.To, o.Seconds)
	}
	return rep
}
