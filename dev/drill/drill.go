package drill

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdfedv1 "github.com/etcdfed/etcdfed/api/v1alpha1"
	"github.com/etcdfed/etcdfed/dev/workload"
	"github.com/etcdfed/etcdfed/hub/pki"
	"github.com/etcdfed/etcdfed/internal/text"
)

// Faults fails and restores zones for the kill and partition modes. Only
// the local environment provides them.
type Faults struct {
	// Fail fails the zone.
	Fail func(ctx context.Context, zone Zone, mode Mode) error
	// Restore undoes Fail.
	Restore func(ctx context.Context, zone Zone) error
	// Check says why mode cannot run here, or nil.
	Check func(ctx context.Context, mode Mode) error
}

// ErrModeUnsupported says kill or partition was asked where no fault
// injector runs.
var ErrModeUnsupported = errors.New("drill: mode unsupported here")

// Input configures Run.
type Input struct {
	// Hub reads and patches the EtcdCluster and reads its CA Secret.
	Hub             client.Client
	Namespace, Name string
	Zone            Zone
	Mode            Mode
	// Duration holds the failure this long; 0: until the hub has moved
	// every member out of the zone (bounded by Timeout).
	Duration time.Duration
	// Timeout bounds each wait: for the members to be replaced, for the
	// ring to heal. Default 10m.
	Timeout time.Duration
	// Faults fail zones for kill and partition; nil: those modes fail
	// with ErrModeUnsupported.
	Faults *Faults
	// DNSServers resolve the ring's endpoint names; empty: the system
	// resolver.
	DNSServers []string
	// TLS overrides the client certificate the drill issues itself from
	// the EtcdCluster's CA.
	TLS *tls.Config
	// AllowWatchCompaction lets watchers lose compacted revisions.
	AllowWatchCompaction bool
	// Artifacts receives porcupine's visualization of a history that is
	// not linearizable; "" keeps none.
	Artifacts string
	// Progress receives a line whenever the drill's state changes; nil
	// for none.
	Progress func(string)
	// PollInterval between reads of the EtcdCluster; default 250ms.
	PollInterval time.Duration
	// Pause between two operations of one workload client; default 10ms.
	Pause time.Duration
	// To is, for RunMigrate only, the member clusters the ring moves to
	// (spec.topology.clusters from then on); Zone, Mode, Duration and
	// Faults are not used there.
	To []string
}

// Run runs a zone-failure drill and returns its report. It returns an
// error (and no report) when the drill cannot start or is interrupted; a
// zone it failed is always restored before it returns. A drill that ran
// but failed a check returns a report with Pass false and no error.
func Run(ctx context.Context, in Input) (*Report, error) {
	in.defaults()
	if !slices.Contains(Modes, in.Mode) {
		return nil, fmt.Errorf("%w: mode %q: want cordon, kill or partition", ErrBadInput, in.Mode)
	}
	if in.Duration < 0 {
		return nil, fmt.Errorf("%w: negative duration %s", ErrBadInput, in.Duration)
	}
	key := client.ObjectKey{Namespace: in.Namespace, Name: in.Name}
	ec := &etcdfedv1.EtcdCluster{}
	if err := in.Hub.Get(ctx, key, ec); err != nil {
		return nil, fmt.Errorf("get EtcdCluster %s: %w", key, err)
	}
	plan, err := Preflight(ec, in.Zone, in.Mode, in.Duration)
	if err != nil {
		return nil, err
	}
	if in.Mode != ModeCordon {
		if in.Faults == nil || in.Faults.Fail == nil {
			return nil, fmt.Errorf("%w: --mode %s needs a fault injector, which only the local environment (etcdfed dev up) has; on any other deployment use --mode cordon", ErrModeUnsupported, in.Mode)
		}
		if in.Faults.Check != nil {
			if err := in.Faults.Check(ctx, in.Mode); err != nil {
				return nil, fmt.Errorf("%w: --mode %s: %w", ErrModeUnsupported, in.Mode, err)
			}
		}
	}
	tlsCfg := in.TLS
	if tlsCfg == nil && ec.Spec.TLS.Mode != etcdfedv1.TLSDisabled {
		if tlsCfg, err = clientTLS(ctx, in.Hub, ec); err != nil {
			return nil, err
		}
	}
	d := &drill{in: in, key: key, plan: plan, t0: time.Now()}
	return d.run(ctx, workload.ClientConfig{Endpoints: ec.Status.Endpoints, DNSServers: in.DNSServers, TLS: tlsCfg})
}

// defaults fills what was left out.
func (in *Input) defaults() {
	if in.Timeout == 0 {
		in.Timeout = 10 * time.Minute
	}
	if in.PollInterval == 0 {
		in.PollInterval = 250 * time.Millisecond
	}
	if in.Pause == 0 {
		in.Pause = 10 * time.Millisecond
	}
	if in.Progress == nil {
		in.Progress = func(string) {}
	}
}

// clientTLS issues a client certificate from the EtcdCluster's CA, as
// `etcdfed client-cert` does.
func clientTLS(ctx context.Context, hub client.Client, ec *etcdfedv1.EtcdCluster) (*tls.Config, error) {
	ca, err := pki.ReadCA(ctx, hub, ec)
	if err != nil {
		return nil, fmt.Errorf("a client certificate for the workload: %w", err)
	}
	// Root: with etcd authentication on, any other common name that no
	// spec.clients entry declares reads and writes nothing.
	leaf, err := ca.IssueClient(etcdfedv1.EtcdRootUser, time.Now())
	if err != nil {
		return nil, fmt.Errorf("issue a client certificate: %w", err)
	}
	return pki.ClientTLS(ca.CertPEM, leaf)
}

type drill struct {
	in   Input
	key  client.ObjectKey
	plan Plan
	t0   time.Time
	// target: a migration's member clusters (nil for a zone failure).
	target []string

	mu      sync.Mutex
	samples []Sample
	phase   string
	w       *workload.Workload
}

func (d *drill) latest() (Sample, bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if len(d.samples) == 0 {
		return Sample{}, false
	}
	return d.samples[len(d.samples)-1], true
}

func (d *drill) setPhase(p string) {
	d.mu.Lock()
	d.phase = p
	d.mu.Unlock()
	d.in.Progress(d.progressLine())
}

// sample reads the EtcdCluster every PollInterval until ctx ends, and
// reports progress when the status line changes other than in its numbers
// (a message counting seconds would print a line a second), and every 10s.
func (d *drill) sample(ctx context.Context) {
	lastLine, lastAt := "", time.Time{}
	for ctx.Err() == nil {
		ec := &etcdfedv1.EtcdCluster{}
		gctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		err := d.in.Hub.Get(gctx, d.key, ec)
		cancel()
		if err == nil {
			d.mu.Lock()
			d.samples = append(d.samples, SampleOf(ec, time.Now()))
			d.mu.Unlock()
			if line := digits.ReplaceAllString(d.statusLine(), "#"); line != lastLine || time.Since(lastAt) >= 10*time.Second {
				d.in.Progress(d.progressLine())
				lastLine, lastAt = line, time.Now()
			}
		}
		select {
		case <-ctx.Done():
		case <-time.After(d.in.PollInterval):
		}
	}
}

var digits = regexp.MustCompile(`[0-9]+`)

// statusLine summarises the latest sample.
func (d *drill) statusLine() string {
	s, ok := d.latest()
	if !ok {
		return "no status read yet"
	}
	parts := []string{fmt.Sprintf("%d/%d ready", s.ReadyMembers, s.Replicas)}
	if !s.Available {
		parts = append(parts, "NOT AVAILABLE")
	}
	if d.target != nil {
		in := 0
		for _, m := range s.Members {
			if slices.Contains(d.target, m.Cluster) {
				in++
			}
		}
		parts = append(parts, fmt.Sprintf("%d of %d in %s", in, len(s.Members), strings.Join(d.target, ",")))
	} else {
		inZone := 0
		for _, m := range s.Members {
			if d.in.Zone.Contains(m.Cluster, m.Zone) {
				inZone++
			}
		}
		parts = append(parts, fmt.Sprintf("%d in %s", inZone, d.in.Zone))
	}
	if op := s.Operation; op != nil {
		parts = append(parts, fmt.Sprintf("%s %s: %s", op.Type, op.Member, op.Step))
	} else if s.Waiting != "" {
		parts = append(parts, "waiting: "+text.Truncate(s.Waiting, 80))
	}
	if s.Degraded != "" {
		parts = append(parts, "Degraded: "+text.Truncate(s.Degraded, 100))
	}
	return strings.Join(parts, ", ")
}

func (d *drill) progressLine() string {
	d.mu.Lock()
	phase, w := d.phase, d.w
	d.mu.Unlock()
	writes := ""
	if w != nil {
		writes = fmt.Sprintf("; %d writes acknowledged", w.Acked())
	}
	return fmt.Sprintf("[%6.1fs] %s: %s%s", time.Since(d.t0).Seconds(), phase, d.statusLine(), writes)
}

// waitFor waits until cond holds for the latest sample taken after from.
func (d *drill) waitFor(ctx context.Context, from time.Time, timeout time.Duration, cond func(Sample) bool) bool {
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	for {
		if s, ok := d.latest(); ok && !s.At.Before(from) && cond(s) {
			return true
		}
		select {
		case <-ctx.Done():
			return false
		case <-deadline.C:
			return false
		case <-time.After(d.in.PollInterval / 2):
		}
	}
}

func (d *drill) run(ctx context.Context, cfg workload.ClientConfig) (rep *Report, err error) {
	in := d.in
	stopSampling := d.startSampling(ctx)
	defer stopSampling()

	w, prefix, err := d.startWorkload(ctx, cfg)
	if err != nil {
		return nil, err
	}
	defer w.Stop()

	// Fail the zone; from here on, every way out restores it.
	d.setPhase(fmt.Sprintf("failing %s (%s)", in.Zone, in.Mode))
	failed := time.Now()
	if err := d.fail(ctx); err != nil {
		// A partial failure (one of several clusters) is undone too.
		rerr := d.restore(context.WithoutCancel(ctx))
		return nil, errors.Join(fmt.Errorf("fail zone %s (%s): %w", in.Zone, in.Mode, err), rerr)
	}
	injected := time.Since(failed)
	restored := time.Time{}
	defer func() {
		if restored.IsZero() {
			if rerr := d.restore(context.WithoutCancel(ctx)); rerr != nil {
				err = errors.Join(err, rerr)
			}
		}
	}()

	var notes []string
	if in.Duration > 0 {
		d.setPhase(fmt.Sprintf("%s failed (%s), holding %s", in.Zone, in.Mode, in.Duration))
		select {
		case <-ctx.Done():
		case <-time.After(in.Duration):
		}
	} else {
		d.setPhase(fmt.Sprintf("%s failed (%s), waiting for the hub to move its members", in.Zone, in.Mode))
		if !d.waitFor(ctx, failed, in.Timeout, func(s Sample) bool { return Evacuated(s, in.Zone) }) && ctx.Err() == nil {
			notes = append(notes, fmt.Sprintf("the hub had not moved every member out of %s after %s; the zone was restored then", in.Zone, in.Timeout))
		}
	}
	if ctx.Err() != nil {
		return nil, fmt.Errorf("drill interrupted (zone %s restored): %w", in.Zone, ctx.Err())
	}

	d.setPhase("restoring " + in.Zone.String())
	restored = time.Now()
	if err := d.restore(ctx); err != nil {
		return nil, fmt.Errorf("restore zone %s: %w", in.Zone, err)
	}
	d.setPhase("restored " + in.Zone.String() + ", waiting for the ring to heal")
	healed := d.waitFor(ctx, restored, in.Timeout, func(s Sample) bool { return Healed(s, in.Zone, d.plan) })
	if ctx.Err() != nil {
		return nil, fmt.Errorf("drill interrupted after the restore: %w", ctx.Err())
	}
	if healed {
		// A little traffic on the healed ring, then the checks.
		pctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		if err := w.WaitForProgress(pctx, 20); err != nil {
			notes = append(notes, "the workload made no progress after the ring healed: "+err.Error())
		}
		cancel()
	}
	stopSampling()

	res, samples, notes := d.check(ctx, w, cfg, prefix, notes)
	tl := Analyze(AnalyzeInput{Samples: samples, Zone: in.Zone, Plan: d.plan, Failed: failed, Restored: restored})
	gap, gapAt := w.MaxWriteGapAt()
	return d.report(tl, res, failed, restored, time.Now(), injected, gap, gapAt, prefix, notes), nil
}

// startSampling reads the EtcdCluster in the background (sample) until
// the stop it returns is called; stop waits for the sampler, and calling it
// again does nothing.
func (d *drill) startSampling(ctx context.Context) (stop func()) {
	sctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); d.sample(sctx) }()
	return func() { cancel(); <-done }
}

// startWorkload starts the recorded workload under a prefix of its own
// and waits until it has written.
func (d *drill) startWorkload(ctx context.Context, cfg workload.ClientConfig) (*workload.Workload, string, error) {
	d.setPhase("starting the workload")
	prefix := fmt.Sprintf("etcdfed-drill/%s/", d.t0.UTC().Format("20060102T150405.000000000Z"))
	w, err := workload.Run(ctx, workload.Input{Client: cfg, Prefix: prefix, Pause: d.in.Pause, WatchEachEndpoint: true, AllowWatchCompaction: d.in.AllowWatchCompaction})
	if err != nil {
		return nil, "", fmt.Errorf("start the workload: %w", err)
	}
	d.mu.Lock()
	d.w = w
	d.mu.Unlock()
	pctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	err = w.WaitForProgress(pctx, 50)
	cancel()
	if err != nil {
		w.Stop()
		return nil, "", fmt.Errorf("the workload cannot write to the ring before the drill: %w", err)
	}
	return w, prefix, nil
}

// check checks the workload once sampling has stopped, deletes its keys
// and returns its result with the samples taken; a cleanup that failed is
// added to notes.
func (d *drill) check(ctx context.Context, w *workload.Workload, cfg workload.ClientConfig, prefix string, notes []string) (*workload.Result, []Sample, []string) {
	d.setPhase("checking the workload")
	res := w.Check(ctx, d.in.Artifacts)
	if err := d.cleanup(ctx, cfg, prefix); err != nil {
		notes = append(notes, fmt.Sprintf("the workload's keys under %s were not deleted: %v", prefix, err))
	}
	d.mu.Lock()
	samples := slices.Clone(d.samples)
	d.mu.Unlock()
	return res, samples, notes
}

// report builds the report of a drill that failed the zone at failed,
// restored it at restored and ended at ended.
func (d *drill) report(tl Timeline, res *workload.Result, failed, restored, ended time.Time, injected, gap time.Duration, gapAt time.Time, prefix string, notes []string) *Report {
	in := d.in
	r := &Report{Kind: ReportKind, Version: ReportVersion, Cluster: d.key.String(), Zone: in.Zone.String(), Mode: in.Mode,
		Duration: seconds(restored.Sub(failed)), RequestedDuration: seconds(in.Duration), DrillSeconds: seconds(ended.Sub(d.t0)), StartedAt: d.t0.UTC(), ZoneMembers: d.plan.Members, ZoneClusters: d.plan.Clusters,
		Replicas: d.plan.Replicas, WasTolerant: d.plan.Tolerant, Notes: notes, Moves: []MoveReport{}, Failures: []string{}}
	if r.Notes == nil {
		r.Notes = []string{}
	}
	r.Times = Times{Injected: seconds(injected), Detected: since(tl.Detected, failed), DetectedBy: tl.DetectedBy,
		MemberDegraded: since(tl.MemberDegraded, failed), FirstMove: since(tl.FirstMove, failed), FirstMoveBy: tl.FirstMoveBy,
		Evacuated: since(tl.Evacuated, failed), Restored: since(&restored, failed), Healed: since(tl.Healed, failed)}
	r.Availability = Availability{Unavailable: seconds(tl.Unavailable), LongestUnavailable: seconds(tl.LongestUnavailable)}
	for _, m := range tl.Moves {
		r.Moves = append(r.Moves, MoveReport{Member: m.Member, From: m.From, To: m.To, Incarnation: m.Incarnation, At: seconds(m.At.Sub(failed))})
	}
	r.Workload = WorkloadInfo{Prefix: prefix, Puts: res.Stats.Puts, AckedPuts: res.Stats.AckedPuts, UnknownPuts: res.Stats.UnknownPuts, Gets: res.Stats.Gets,
		FailedOps: res.Failed, MaxWriteGap: seconds(gap)}
	if !gapAt.IsZero() {
		r.Workload.MaxWriteGapStart = seconds(gapAt.Sub(failed))
	}
	v := &r.Verdicts
	v.Linearizable, v.LostWrites, v.Watch = workloadVerdicts(res)
	switch {
	case tl.Evacuated != nil:
		v.Evacuated = Verdict{Pass: true, Detail: fmt.Sprintf("every member a ready voter outside %s %.1fs after the failure", in.Zone, *r.Times.Evacuated)}
	case in.Duration > 0:
		v.Evacuated = Verdict{Pass: true, Detail: fmt.Sprintf("not required: the failure was held for %s only", in.Duration)}
	default:
		v.Evacuated = Verdict{Detail: fmt.Sprintf("the hub did not move every member out of %s within %s", in.Zone, in.Timeout)}
	}
	if tl.Healed != nil {
		v.Healed = Verdict{Pass: true, Detail: fmt.Sprintf("healed %.1fs after the restore", tl.Healed.Sub(restored).Seconds())}
	} else {
		v.Healed = Verdict{Detail: fmt.Sprintf("the ring did not heal within %s of the restore", in.Timeout)}
	}
	for _, x := range []struct {
		name string
		v    Verdict
	}{{"linearizable", v.Linearizable}, {"lost writes", v.LostWrites.Verdict}, {"watch", v.Watch.Verdict}, {"members replaced", v.Evacuated}, {"healed", v.Healed}} {
		if !x.v.Pass {
			r.Failures = append(r.Failures, x.name+": "+x.v.Detail)
		}
	}
	r.Pass = len(r.Failures) == 0
	return r
}

// fail fails the zone.
func (d *drill) fail(ctx context.Context) error {
	if d.in.Mode == ModeCordon {
		return d.setCordon(ctx, true)
	}
	return d.in.Faults.Fail(ctx, d.in.Zone, d.in.Mode)
}

// restore undoes fail (bounded to 5 minutes).
func (d *drill) restore(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	if d.in.Mode == ModeCordon {
		return d.setCordon(ctx, false)
	}
	return d.in.Faults.Restore(ctx, d.in.Zone)
}

// setCordon adds or removes the zone in spec.topology.cordonedZones,
// with optimistic locking so a concurrent edit is never overwritten.
func (d *drill) setCordon(ctx context.Context, on bool) error {
	z := d.in.Zone.String()
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		ec := &etcdfedv1.EtcdCluster{}
		if err := d.in.Hub.Get(ctx, d.key, ec); err != nil {
			return err
		}
		before := ec.DeepCopy()
		zones := slices.DeleteFunc(slices.Clone(ec.Spec.Topology.CordonedZones), func(s string) bool { return s == z })
		if on {
			zones = append(zones, z)
		}
		if slices.Equal(zones, ec.Spec.Topology.CordonedZones) {
			return nil
		}
		ec.Spec.Topology.CordonedZones = zones
		if err := d.in.Hub.Patch(ctx, ec, client.MergeFromWithOptions(before, client.MergeFromWithOptimisticLock{})); err != nil {
			return fmt.Errorf("patch spec.topology.cordonedZones of %s: %w", d.key, err)
		}
		return nil
	})
}

// cleanup deletes the workload's keys.
func (d *drill) cleanup(ctx context.Context, cfg workload.ClientConfig, prefix string) error {
	c, err := workload.NewClient(cfg)
	if err != nil {
		return err
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	_, err = c.Delete(ctx, prefix, clientv3.WithPrefix())
	return err
}
