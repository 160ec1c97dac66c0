package workload

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// Input configures Run.
type Input struct {
	// Client reaches the cluster; every workload client and watcher gets
	// its own connection.
	Client ClientConfig
	// Clients run concurrently; default 4.
	Clients int
	// Keys is the number of contended keys; default 4.
	Keys int
	// Prefix of every key written; default "workload/". Watchers watch it.
	Prefix string
	// OpTimeout bounds each operation; default 2s.
	OpTimeout time.Duration
	// Pause between two operations of one client; default none (as fast
	// as the cluster answers).
	Pause time.Duration
	// WatchEachEndpoint adds one watcher per endpoint to the one over all
	// endpoints. Every watcher must reach the last acknowledged put, so
	// set it only when every endpoint is back by the end of the run.
	WatchEachEndpoint bool
	// AllowWatchCompaction excuses events a watcher could not get because
	// the cluster compacted them; by default a compaction fails the check.
	AllowWatchCompaction bool
	// WatchSettle bounds how long Stop waits for the watchers to see the
	// last acknowledged put; default 1m.
	WatchSettle time.Duration
	// CheckTimeout bounds the linearizability check; default 2m.
	CheckTimeout time.Duration
	// Recorder receives the history; default a new one.
	Recorder *Recorder
}

// Workload is a running client workload.
type Workload struct {
	Recorder *Recorder
	in       Input
	cancel   context.CancelFunc
	done     chan struct{}
	stopOnce sync.Once

	watchCancel context.CancelFunc
	watchers    []*watcher
	watchClosed []*clientv3.Client

	acked    atomic.Int64
	failed   atomic.Int64
	lastOK   atomic.Int64 // recorder time of the last acknowledged put
	mu       sync.Mutex
	maxGap   time.Duration
	maxGapAt time.Time
	// gaps are the longest gaps between acknowledged puts, longest first
	// (at most keptGaps).
	gaps     []Gap
	failures []Failure
}

// keptGaps is how many of the longest write gaps a Workload keeps.
const keptGaps = 16

// Gap is a time without an acknowledged put: it began at the last
// acknowledged put before it.
type Gap struct {
	Began time.Time
	Took  time.Duration
}

// Failure is one failed operation of the workload: when it was called,
// when it failed, and why.
type Failure struct {
	Client int
	// Op is "put" or "get"; Key the key it was on.
	Op, Key      string
	Call, Return time.Time
	Err          string
}

func (f Failure) String() string {
	return fmt.Sprintf("client %d %s %s called %s, failed after %s: %s", f.Client, f.Op, f.Key, f.Call.Format("15:04:05.000"),
		f.Return.Sub(f.Call).Round(time.Millisecond), f.Err)
}

// Run starts clients that put unique values and get them back on a few
// contended keys (linearizability), put unique keys under <prefix>unique/
// (acknowledged writes must survive), and watchers on the prefix from the
// revision before the first put (watch completeness), until Stop.
func Run(ctx context.Context, in Input) (_ *Workload, err error) {
	in.defaults()
	if len(in.Client.Endpoints) == 0 {
		return nil, errors.New("workload: no endpoints")
	}
	var opened []*clientv3.Client
	defer func() {
		if err != nil {
			for _, c := range opened {
				_ = c.Close()
			}
		}
	}()
	open := func(cfg ClientConfig) (*clientv3.Client, error) {
		c, err := NewClient(cfg)
		if err != nil {
			return nil, fmt.Errorf("etcd client for %s: %w", strings.Join(cfg.Endpoints, ","), err)
		}
		opened = append(opened, c)
		return c, nil
	}
	clients := make([]*clientv3.Client, in.Clients)
	for i := range clients {
		if clients[i], err = open(in.Client); err != nil {
			return nil, err
		}
	}
	start, err := startRevision(ctx, clients[0], in)
	if err != nil {
		return nil, err
	}

	wctx, wcancel := context.WithCancel(context.WithoutCancel(ctx))
	w := &Workload{Recorder: in.Recorder, in: in, done: make(chan struct{}), watchCancel: wcancel}
	watchCfgs := map[string]ClientConfig{"all endpoints": in.Client}
	names := []string{"all endpoints"}
	if in.WatchEachEndpoint && len(in.Client.Endpoints) > 1 {
		for _, e := range in.Client.Endpoints {
			watchCfgs[e] = in.Client.Endpoint(e)
			names = append(names, e)
		}
	}
	for _, name := range names {
		c, err := open(watchCfgs[name])
		if err != nil {
			wcancel()
			return nil, err
		}
		w.watchClosed = append(w.watchClosed, c)
		w.watchers = append(w.watchers, startWatcher(wctx, c, name, in.Prefix, start))
	}

	ctx, cancel := context.WithCancel(ctx)
	w.cancel = cancel
	var wg sync.WaitGroup
	for i, c := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer c.Close()
			w.client(ctx, i, c)
		}()
	}
	go func() { wg.Wait(); close(w.done) }()
	return w, nil
}

// defaults fills in what in leaves unset.
func (in *Input) defaults() {
	if in.Clients == 0 {
		in.Clients = 4
	}
	if in.Keys == 0 {
		in.Keys = 4
	}
	if in.Prefix == "" {
		in.Prefix = "workload/"
	}
	if in.OpTimeout == 0 {
		in.OpTimeout = 2 * time.Second
	}
	if in.WatchSettle == 0 {
		in.WatchSettle = time.Minute
	}
	if in.CheckTimeout == 0 {
		in.CheckTimeout = 2 * time.Minute
	}
	if in.Recorder == nil {
		in.Recorder = NewRecorder()
	}
}

// startRevision is the revision the watchers start at, the one after the
// current: every put of the workload comes later. The contended keys'
// values before it are where the model starts (recorded in in.Recorder):
// an earlier run with the same prefix on this cluster left them, and the
// first get of a key may return one.
func startRevision(ctx context.Context, c *clientv3.Client, in Input) (int64, error) {
	rctx, rcancel := context.WithTimeout(ctx, 30*time.Second)
	resp, err := c.Get(rctx, in.Prefix, clientv3.WithPrefix(), clientv3.WithCountOnly())
	rcancel()
	if err != nil {
		return 0, fmt.Errorf("read the start revision: %w", err)
	}
	for k := range in.Keys {
		key := fmt.Sprintf("%sk%d", in.Prefix, k)
		rctx, rcancel := context.WithTimeout(ctx, 30*time.Second)
		kr, err := c.Get(rctx, key, clientv3.WithRev(resp.Header.Revision))
		rcancel()
		if err != nil {
			return 0, fmt.Errorf("read %s at the start revision: %w", key, err)
		}
		if len(kr.Kvs) > 0 {
			in.Recorder.Initial(key, string(kr.Kvs[0].Value), kr.Kvs[0].ModRevision)
		}
	}
	return resp.Header.Revision + 1, nil
}

func (w *Workload) client(ctx context.Context, id int, c *clientv3.Client) {
	rng := rand.New(rand.NewPCG(uint64(id), uint64(time.Now().UnixNano())))
	for seq := 0; ctx.Err() == nil; seq++ {
		octx, cancel := context.WithTimeout(ctx, w.in.OpTimeout)
		var err error
		isPut := false
		value := fmt.Sprintf("c%d-%d", id, seq)
		call := time.Now()
		var key string
		switch r := rng.IntN(10); {
		case r < 4:
			isPut, key = true, fmt.Sprintf("%sk%d", w.in.Prefix, rng.IntN(w.in.Keys))
			err = w.Recorder.Put(octx, c, id, key, value)
		case r < 6:
			isPut, key = true, fmt.Sprintf("%sunique/c%d-%06d", w.in.Prefix, id, seq)
			err = w.Recorder.Put(octx, c, id, key, value)
		default:
			key = fmt.Sprintf("%sk%d", w.in.Prefix, rng.IntN(w.in.Keys))
			_, _, err = w.Recorder.Get(octx, c, id, key)
		}
		cancel()
		if err != nil && ctx.Err() == nil {
			op := "get"
			if isPut {
				op = "put"
			}
			w.mu.Lock()
			w.failures = append(w.failures, Failure{Client: id, Op: op, Key: key, Call: call, Return: time.Now(), Err: err.Error()})
			w.mu.Unlock()
		}
		if err != nil {
			w.failed.Add(1)
			if ctx.Err() == nil {
				sleep(ctx, max(w.in.Pause, 50*time.Millisecond)) // don't spin on a dead endpoint
			}
			continue
		}
		if isPut {
			now := w.Recorder.now()
			if prev := w.lastOK.Swap(now); prev > 0 && now > prev {
				gap := time.Duration(now - prev)
				w.mu.Lock()
				at := w.Recorder.t0.Add(time.Duration(prev))
				if gap > w.maxGap {
					w.maxGap, w.maxGapAt = gap, at
				}
				w.gaps = keepLongest(w.gaps, Gap{Began: at, Took: gap}, keptGaps)
				w.mu.Unlock()
			}
			w.acked.Add(1)
		}
		if w.in.Pause > 0 {
			sleep(ctx, w.in.Pause)
		}
	}
}

func sleep(ctx context.Context, d time.Duration) {
	select {
	case <-ctx.Done():
	case <-time.After(d):
	}
}

// Prefix is the prefix of every key the workload writes.
func (w *Workload) Prefix() string { return w.in.Prefix }

// Acked is the number of acknowledged puts so far.
func (w *Workload) Acked() int64 { return w.acked.Load() }

// Failed is the number of failed operations so far.
func (w *Workload) Failed() int64 { return w.failed.Load() }

// Failures are the failed operations so far (not those cut short by
// Stop), in the order they failed.
func (w *Workload) Failures() []Failure {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]Failure(nil), w.failures...)
}

// MaxWriteGap is the longest time between two acknowledged puts (the
// write-availability gap of the run).
func (w *Workload) MaxWriteGap() time.Duration {
	d, _ := w.MaxWriteGapAt()
	return d
}

// MaxWriteGapAt is MaxWriteGap and when that gap began (the last
// acknowledged put before it).
func (w *Workload) MaxWriteGapAt() (time.Duration, time.Time) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.maxGap, w.maxGapAt
}

// LongestWriteGaps are the longest gaps between acknowledged puts of the
// run so far, longest first (at most 16): a planned stop's hand-off, what
// came after it and the client's own warm-up before it can be told apart
// by when each began.
func (w *Workload) LongestWriteGaps() []Gap {
	w.mu.Lock()
	defer w.mu.Unlock()
	return slices.Clone(w.gaps)
}

// keepLongest adds g to gaps (longest first) and keeps the n longest.
func keepLongest(gaps []Gap, g Gap, n int) []Gap {
	i, _ := slices.BinarySearchFunc(gaps, g, func(a, b Gap) int { return cmp.Compare(b.Took, a.Took) })
	if i >= n {
		return gaps
	}
	gaps = slices.Insert(gaps, i, g)
	return gaps[:min(len(gaps), n)]
}

// WaitForProgress waits until n more puts are acknowledged than when it
// was called.
func (w *Workload) WaitForProgress(ctx context.Context, n int64) error {
	target := w.acked.Load() + n
	for w.acked.Load() < target {
		select {
		case <-ctx.Done():
			return fmt.Errorf("workload made no progress (%d of %d puts acknowledged, %d failures): %w",
				w.acked.Load()-(target-n), n, w.failed.Load(), ctx.Err())
		case <-time.After(20 * time.Millisecond):
		}
	}
	return nil
}

// Stop stops the clients, waits (up to WatchSettle) until every watcher
// has seen the last acknowledged put, then stops the watchers. It may be
// called more than once.
func (w *Workload) Stop() {
	w.stopOnce.Do(func() {
		w.cancel()
		<-w.done
		var last int64
		for _, p := range w.Recorder.Puts() {
			if p.Acked {
				last = max(last, p.Revision)
			}
		}
		deadline := time.Now().Add(w.in.WatchSettle)
		for _, wt := range w.watchers {
			for wt.last.Load() < last && time.Now().Before(deadline) {
				time.Sleep(20 * time.Millisecond)
			}
		}
		w.watchCancel()
		for _, wt := range w.watchers {
			<-wt.done
		}
		for _, c := range w.watchClosed {
			_ = c.Close()
		}
	})
}

// Result is the outcome of the three checks of a run.
type Result struct {
	Stats Stats
	// Failed operations (errors and timeouts) during the run.
	Failed      int64
	MaxWriteGap time.Duration
	// Linearizable is nil when porcupine found a linearization.
	Linearizable error
	// AckedKeys is the number of unique keys with an acknowledged put;
	// LostKeys those missing after the run. ReadBack is set when they
	// could not be read back.
	AckedKeys int
	LostKeys  []string
	ReadBack  error
	// Watches has one verdict per watcher.
	Watches []WatchVerdict
}

// Lost is nil when no acknowledged write was lost (and they were read).
func (r *Result) Lost() error {
	if r.ReadBack != nil {
		return r.ReadBack
	}
	if len(r.LostKeys) > 0 {
		return fmt.Errorf("%w: %d of %d: %s", ErrWritesLost, len(r.LostKeys), r.AckedKeys, firstFew(r.LostKeys, 10))
	}
	return nil
}

// Watch is nil when every watcher passed.
func (r *Result) Watch() error {
	var errs []error
	for _, v := range r.Watches {
		errs = append(errs, v.Err())
	}
	return errors.Join(errs...)
}

// Err joins the failures of the three checks; nil when all passed.
func (r *Result) Err() error { return errors.Join(r.Linearizable, r.Lost(), r.Watch()) }

func (r *Result) String() string {
	if err := r.Err(); err != nil {
		return fmt.Sprintf("%s, %d failed operations: %v", r.Stats, r.Failed, err)
	}
	seen := 0
	for _, v := range r.Watches {
		seen += v.Seen
	}
	return fmt.Sprintf("%s, %d failed operations, longest write gap %s; linearizable, none of %d acknowledged unique writes lost, %d watchers saw every acknowledged put once and in order (%d events checked)",
		r.Stats, r.Failed, r.MaxWriteGap.Round(time.Millisecond), r.AckedKeys, len(r.Watches), seen)
}

// Check stops the workload (when it still runs) and runs the three checks:
// the history is linearizable; every acknowledged unique write is still
// there (read back through a new client after the run); every watcher saw
// every acknowledged put exactly once and in order. Porcupine's
// visualization of a non-linearizable history goes to artifacts (when not
// empty). Result.Err says whether the run passed.
func (w *Workload) Check(ctx context.Context, artifacts string) *Result {
	w.Stop()
	r := &Result{Stats: w.Recorder.Stats(), Failed: w.Failed(), MaxWriteGap: w.MaxWriteGap()}
	r.Linearizable = w.Recorder.CheckLinearizable(w.in.CheckTimeout, artifacts)
	puts := w.Recorder.Puts()
	if c, err := NewClient(w.in.Client); err != nil {
		r.ReadBack = fmt.Errorf("etcd client to read back: %w", err)
	} else {
		rctx, cancel := context.WithTimeout(ctx, time.Minute)
		have, err := ReadKeys(rctx, c, w.in.Prefix+"unique/")
		cancel()
		_ = c.Close()
		if err != nil {
			r.ReadBack = err
		} else {
			r.AckedKeys, r.LostKeys = LostWrites(puts, w.in.Prefix+"unique/", have)
		}
	}
	for _, wt := range w.watchers {
		r.Watches = append(r.Watches, CheckWatch(WatchCheckInput{Puts: puts, Log: wt.Log(), RequireComplete: true, AllowCompaction: w.in.AllowWatchCompaction}))
	}
	return r
}

// ArtifactsDir is where scenarios write files worth keeping (the
// linearizability visualization): $ARTIFACTS when set, else dir.
func ArtifactsDir(dir string) string {
	if a := os.Getenv("ARTIFACTS"); a != "" {
		return a
	}
	return dir
}
