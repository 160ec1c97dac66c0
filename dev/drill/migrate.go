package drill

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdfedv1 "github.com/etcdfed/etcdfed/api/v1alpha1"
	"github.com/etcdfed/etcdfed/dev/workload"
)

// ModeMigrate is the mode of a migration drill's report: the whole ring
// moved to other member clusters with one spec change. It is not a way to
// fail a zone, so it is not in Modes.
const ModeMigrate Mode = "migrate"

// MigratePlan is what PreflightMigrate found.
type MigratePlan struct {
	// Members and the member clusters From that hold them when the drill
	// begins; AllowedBefore is spec.topology.clusters then (empty: any).
	Members, From, AllowedBefore []string
	Replicas                     int
	Tolerant                     bool
}

// PreflightMigrate says whether ec may be moved to the member clusters
// to, and why not. It asks what Preflight asks of the ring (Available,
// every member a ready voter, nothing in flight, the latest spec acted
// on), moves not paused, and at least one member outside to.
func PreflightMigrate(ec *etcdfedv1.EtcdCluster, to []string) (MigratePlan, error) {
	key := ec.Namespace + "/" + ec.Name
	if len(to) == 0 {
		return MigratePlan{}, fmt.Errorf("%w: no member cluster to move EtcdCluster %s to", ErrBadInput, key)
	}
	seen := map[string]bool{}
	for _, c := range to {
		switch {
		case c == "" || strings.ContainsAny(c, "/, "):
			return MigratePlan{}, fmt.Errorf("%w: member cluster %q: want a member cluster's name", ErrBadInput, c)
		case seen[c]:
			return MigratePlan{}, fmt.Errorf("%w: member cluster %s named twice", ErrBadInput, c)
		}
		seen[c] = true
	}
	for _, c := range ec.Spec.Topology.CordonedClusters {
		if seen[c] {
			return MigratePlan{}, fmt.Errorf("%w: member cluster %s is cordoned in EtcdCluster %s (spec.topology.cordonedClusters): no member would move there", ErrBadInput, c, key)
		}
	}
	if err := checkReady(ec); err != nil {
		return MigratePlan{}, err
	}
	if ec.Spec.Topology.PauseMoves {
		return MigratePlan{}, fmt.Errorf("%w: EtcdCluster %s has its moves paused (spec.topology.pauseMoves): resume them first", ErrNotReady, key)
	}
	p := MigratePlan{Replicas: int(ec.Spec.Replicas), AllowedBefore: slices.Clone(ec.Spec.Topology.Clusters),
		Tolerant: meta.IsStatusConditionTrue(ec.Status.Conditions, etcdfedv1.ConditionFailureTolerant)}
	outside := 0
	for _, m := range ec.Status.Members {
		p.Members = append(p.Members, m.Name)
		if !slices.Contains(p.From, m.Cluster) {
			p.From = append(p.From, m.Cluster)
		}
		if !seen[m.Cluster] {
			outside++
		}
	}
	sort.Strings(p.Members)
	sort.Strings(p.From)
	if outside == 0 {
		return MigratePlan{}, fmt.Errorf("%w: every member of EtcdCluster %s is already in %s: nothing to move", ErrBadInput, key, strings.Join(to, ", "))
	}
	if p.AllowedBefore == nil {
		p.AllowedBefore = []string{}
	}
	return p, nil
}

// Migrated: every member is a ready voter in one of the clusters to and
// nothing is in flight.
func Migrated(s Sample, to []string) bool {
	if !healthy(s) {
		return false
	}
	for _, m := range s.Members {
		if !slices.Contains(to, m.Cluster) {
			return false
		}
	}
	return true
}

// MigrationReport is what a migration drill adds to its Report.
type MigrationReport struct {
	// FromClusters held the ring's members when the drill began;
	// ToClusters is spec.topology.clusters the drill set;
	// AllowedClustersBefore is what it was before (empty: any).
	FromClusters          []string `json:"fromClusters"`
	ToClusters            []string `json:"toClusters"`
	AllowedClustersBefore []string `json:"allowedClustersBefore"`
	Members               []string `json:"members"`
	// FailuresToleratedBefore is the failure tolerance etcd's own view
	// gave just before the spec change (healthy voters minus the quorum);
	// MinFailuresTolerated the lowest sampled until the migration ended.
	FailuresToleratedBefore int  `json:"failuresToleratedBefore"`
	MinFailuresTolerated    *int `json:"minFailuresTolerated"`
	// ToleranceSamples counts the samples of etcd's member list and of
	// every voter's status; NoToleranceAt lists (up to 20) those that
	// tolerated no failure; MaxVoters is the most voters sampled (one more
	// than replicas while a move makes before it breaks).
	ToleranceSamples int      `json:"toleranceSamples"`
	NoToleranceAt    []string `json:"noToleranceAt"`
	MaxVoters        int      `json:"maxVoters"`
	// Operations the hub ran, in the order they began, from the
	// EtcdCluster's status.operation.
	Operations []OperationReport `json:"operations"`
}

// OperationReport is one membership operation seen during a migration.
type OperationReport struct {
	Type   string `json:"type"`
	Member string `json:"member"`
	Reason string `json:"reason"`
	// From and To are member clusters ("" where the operation has none).
	From string `json:"from"`
	To   string `json:"to"`
	// Began is when it started, seconds after the spec change; Seconds
	// how long it was seen in flight.
	Began   float64 `json:"beganSeconds"`
	Seconds float64 `json:"seconds"`
}

// toleranceLog collects tolerance samples.
type toleranceLog struct {
	mu                 sync.Mutex
	samples, maxVoters int
	min                *int
	none               []string
	unanswered, raced  int
	stop               context.CancelFunc
	done               chan struct{}
}

func (l *toleranceLog) add(t Tolerance, at time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.samples++
	l.maxVoters = max(l.maxVoters, t.Voters)
	if l.min == nil || t.Tolerated() < *l.min {
		l.min = ptr(t.Tolerated())
	}
	if t.Tolerated() <= 0 && len(l.none) < 20 {
		l.none = append(l.none, fmt.Sprintf("%s: %d voters, %d answered: %s", at.UTC().Format("15:04:05.000"), t.Voters, t.Healthy, t.Detail))
	}
}

// sampleTolerance samples c every interval until stopped.
func sampleTolerance(ctx context.Context, c *clientv3.Client, interval time.Duration) *toleranceLog {
	l := &toleranceLog{done: make(chan struct{})}
	ctx, l.stop = context.WithCancel(ctx)
	go func() {
		defer close(l.done)
		for ctx.Err() == nil {
			at := time.Now()
			t, err := SampleTolerance(ctx, c)
			switch {
			case ctx.Err() != nil:
			case errors.Is(err, ErrRaced):
				l.mu.Lock()
				l.raced++
				l.mu.Unlock()
			case err != nil:
				l.mu.Lock()
				l.unanswered++
				l.mu.Unlock()
			default:
				l.add(t, at)
			}
			select {
			case <-ctx.Done():
			case <-time.After(time.Until(at.Add(interval))):
			}
		}
	}()
	return l
}

func (l *toleranceLog) finish() {
	l.stop()
	<-l.done
}

// RunMigrate moves the ring to the member clusters in.To with one spec
// change (spec.topology.clusters) under the recorded workload, follows the
// hub's moves and etcd's own failure tolerance until every member is a
// ready voter there, checks the workload and returns the report. The
// migration is the point: nothing is moved back. It returns an error (and
// no report) when the drill cannot start or is interrupted; a drill that
// ran but failed a check returns a report with Pass false.
func RunMigrate(ctx context.Context, in Input) (*Report, error) {
	if in.Timeout == 0 {
		in.Timeout = 30 * time.Minute // a move takes up to about a minute
	}
	in.defaults()
	key := client.ObjectKey{Namespace: in.Namespace, Name: in.Name}
	plan, cfg, err := preflightMigrate(ctx, in, key)
	if err != nil {
		return nil, err
	}
	d := &drill{in: in, key: key, t0: time.Now(), target: slices.Clone(in.To), plan: Plan{Members: plan.Members, Clusters: plan.From, Replicas: plan.Replicas, Tolerant: plan.Tolerant}}

	stopSampling := d.startSampling(ctx)
	defer stopSampling()

	w, prefix, err := d.startWorkload(ctx, cfg)
	if err != nil {
		return nil, err
	}
	defer w.Stop()
	ec3, err := workload.NewClient(cfg)
	if err != nil {
		return nil, fmt.Errorf("an etcd client for the tolerance samples: %w", err)
	}
	defer func() { _ = ec3.Close() }()
	tctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	before, err := SampleTolerance(tctx, ec3)
	cancel()
	if err != nil {
		return nil, fmt.Errorf("etcd's failure tolerance before the migration: %w", err)
	}
	tol := sampleTolerance(ctx, ec3, 250*time.Millisecond)
	defer tol.finish()

	d.setPhase(fmt.Sprintf("moving the ring to %s (spec.topology.clusters)", strings.Join(in.To, ", ")))
	began := time.Now()
	if err := d.setClusters(ctx, in.To); err != nil {
		return nil, err
	}
	injected := time.Since(began)
	var notes []string
	d.setPhase("waiting for the hub to move every member")
	if !d.waitFor(ctx, began, in.Timeout, func(s Sample) bool { return Migrated(s, in.To) }) && ctx.Err() == nil {
		notes = append(notes, fmt.Sprintf("the hub had not moved every member to %s after %s; spec.topology.clusters stays %s", strings.Join(in.To, ", "), in.Timeout, strings.Join(in.To, ", ")))
	}
	if ctx.Err() != nil {
		return nil, fmt.Errorf("drill interrupted (spec.topology.clusters is %s; the hub goes on moving): %w", strings.Join(in.To, ", "), ctx.Err())
	}
	tol.finish()
	pctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	if err := w.WaitForProgress(pctx, 20); err != nil {
		notes = append(notes, "the workload made no progress after the migration: "+err.Error())
	}
	cancel()
	stopSampling()

	res, samples, notes := d.check(ctx, w, cfg, prefix, notes)
	tl := Analyze(AnalyzeInput{Samples: samples, Plan: d.plan, Failed: began})
	migrated, healed := migrationTimes(samples, began, in.To, plan.Tolerant)
	tl.Evacuated, tl.Healed = migrated, healed
	gap, gapAt := w.MaxWriteGapAt()
	r := d.report(tl, res, began, time.Time{}, time.Now(), injected, gap, gapAt, prefix, notes)
	r.Mode, r.Zone, r.ZoneMembers, r.ZoneClusters = ModeMigrate, "", plan.Members, plan.From
	r.Duration, r.RequestedDuration = 0, 0
	r.Migration = migrationReport(plan, in.To, before, tol, samples, began)
	d.migrationVerdicts(r, before, migrated, healed, began, tol)
	return r, nil
}

// preflightMigrate reads the EtcdCluster key and checks that it may move
// to in.To (PreflightMigrate); it returns the plan and how the workload
// reaches the ring.
func preflightMigrate(ctx context.Context, in Input, key client.ObjectKey) (MigratePlan, workload.ClientConfig, error) {
	ec := &etcdfedv1.EtcdCluster{}
	if err := in.Hub.Get(ctx, key, ec); err != nil {
		return MigratePlan{}, workload.ClientConfig{}, fmt.Errorf("get EtcdCluster %s: %w", key, err)
	}
	plan, err := PreflightMigrate(ec, in.To)
	if err != nil {
		return MigratePlan{}, workload.ClientConfig{}, err
	}
	tlsCfg := in.TLS
	if tlsCfg == nil && ec.Spec.TLS.Mode != etcdfedv1.TLSDisabled {
		if tlsCfg, err = clientTLS(ctx, in.Hub, ec); err != nil {
			return MigratePlan{}, workload.ClientConfig{}, err
		}
	}
	return plan, workload.ClientConfig{Endpoints: ec.Status.Endpoints, DNSServers: in.DNSServers, TLS: tlsCfg}, nil
}

// migrationTimes are, in the samples from began on, the first that is
// Migrated to to (migrated), and the first after it where the ring is also
// Available and, when it tolerated a failure before, tolerates one again
// (healed); nil when never.
func migrationTimes(samples []Sample, began time.Time, to []string, tolerant bool) (migrated, healed *time.Time) {
	for _, s := range samples {
		if s.At.Before(began) {
			continue
		}
		if migrated == nil && Migrated(s, to) {
			migrated = ptr(s.At)
		}
		if migrated != nil && healed == nil && Migrated(s, to) && s.Available && (s.Tolerant || !tolerant) {
			healed = ptr(s.At)
		}
	}
	return migrated, healed
}

// migrationReport is what the report says of the migration alone.
func migrationReport(plan MigratePlan, to []string, before Tolerance, tol *toleranceLog, samples []Sample, began time.Time) *MigrationReport {
	m := &MigrationReport{FromClusters: plan.From, ToClusters: slices.Clone(to), AllowedClustersBefore: plan.AllowedBefore, Members: plan.Members,
		FailuresToleratedBefore: before.Tolerated(), MinFailuresTolerated: tol.min, ToleranceSamples: tol.samples, NoToleranceAt: tol.none,
		MaxVoters: tol.maxVoters, Operations: operations(samples, began)}
	if m.NoToleranceAt == nil {
		m.NoToleranceAt = []string{}
	}
	return m
}

// migrationVerdicts replaces a zone failure's last two verdicts with a
// migration's and adds the tolerance verdict.
func (d *drill) migrationVerdicts(r *Report, before Tolerance, migrated, healed *time.Time, began time.Time, tol *toleranceLog) {
	v := &r.Verdicts
	to := strings.Join(d.target, ", ")
	if migrated != nil {
		v.Evacuated = Verdict{Pass: true, Detail: fmt.Sprintf("every member a ready voter in %s %.1fs after the spec change", to, migrated.Sub(began).Seconds())}
	} else {
		v.Evacuated = Verdict{Detail: fmt.Sprintf("the hub did not move every member to %s within %s", to, d.in.Timeout)}
	}
	if healed != nil {
		v.Healed = Verdict{Pass: true, Detail: fmt.Sprintf("Available%s %.1fs after the spec change", map[bool]string{true: " and failure tolerant", false: ""}[d.plan.Tolerant], healed.Sub(began).Seconds())}
	} else {
		v.Healed = Verdict{Detail: "the ring was not Available (and failure tolerant, as it was before) once moved"}
	}
	switch {
	case before.Tolerated() <= 0:
		v.Tolerance = &Verdict{Pass: true, Detail: fmt.Sprintf("not required: etcd tolerated no failure before the migration (%d voters, %d answered)", before.Voters, before.Healthy)}
	case tol.samples == 0:
		v.Tolerance = &Verdict{Detail: fmt.Sprintf("no sample of etcd's member list (%d unanswered, %d changed during the sample)", tol.unanswered, tol.raced)}
	case len(tol.none) > 0:
		v.Tolerance = &Verdict{Detail: fmt.Sprintf("no failure tolerance at %d of %d samples, first %s", len(tol.none), tol.samples, tol.none[0])}
	default:
		v.Tolerance = &Verdict{Pass: true, Detail: fmt.Sprintf("at least %d failure(s) tolerated at each of %d samples of etcd's member list (%d before; at most %d voters)", *tol.min, tol.samples, before.Tolerated(), tol.maxVoters)}
	}
	r.Failures = r.Failures[:0]
	for _, x := range []struct {
		name string
		v    Verdict
	}{{"linearizable", v.Linearizable}, {"lost writes", v.LostWrites.Verdict}, {"watch", v.Watch.Verdict}, {"members moved", v.Evacuated}, {"healed", v.Healed}, {"failure tolerance", *v.Tolerance}} {
		if !x.v.Pass {
			r.Failures = append(r.Failures, x.name+": "+x.v.Detail)
		}
	}
	r.Pass = len(r.Failures) == 0
}

// operations lists the operations the samples show from began on, each
// once, in the order they began.
func operations(samples []Sample, began time.Time) []OperationReport {
	out := []OperationReport{}
	index := map[string]int{}
	cluster := func(fd *etcdfedv1.FailureDomain) string {
		if fd == nil {
			return ""
		}
		return fd.Cluster
	}
	for _, s := range samples {
		op := s.Operation
		if op == nil || s.At.Before(began) {
			continue
		}
		k := fmt.Sprintf("%s/%s/%s", op.Type, op.Member, op.StartedAt.UTC().Format(time.RFC3339Nano))
		i, ok := index[k]
		if !ok {
			i = len(out)
			index[k] = i
			out = append(out, OperationReport{Type: string(op.Type), Member: op.Member, Reason: op.Reason, From: cluster(op.From), To: cluster(op.To),
				Began: seconds(op.StartedAt.Sub(began))})
		}
		out[i].Seconds = seconds(s.At.Sub(op.StartedAt.Time))
	}
	return out
}

// setClusters sets spec.topology.clusters, with optimistic locking so a
// concurrent edit is never overwritten.
func (d *drill) setClusters(ctx context.Context, to []string) error {
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		ec := &etcdfedv1.EtcdCluster{}
		if err := d.in.Hub.Get(ctx, d.key, ec); err != nil {
			return err
		}
		before := ec.DeepCopy()
		ec.Spec.Topology.Clusters = slices.Clone(to)
		if err := d.in.Hub.Patch(ctx, ec, client.MergeFromWithOptions(before, client.MergeFromWithOptimisticLock{})); err != nil {
			return fmt.Errorf("patch spec.topology.clusters of %s: %w", d.key, err)
		}
		return nil
	})
}
