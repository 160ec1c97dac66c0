package multicluster

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/anishathalye/porcupine"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// KVInput is one operation on the key-value model.
type KVInput struct {
	Op    string // "put" or "get"
	Key   string
	Value string // put
}

// KVOutput is what the operation returned.
type KVOutput struct {
	// Value and Found are a get's answer.
	Value string
	Found bool
	// Unknown marks a put whose outcome is unknown (error or timeout): it
	// may have taken effect at any time after its call, or never.
	Unknown bool
}

type kvState struct {
	value string
	found bool
}

// KVModel is a linearizable register per key: a get returns the value of
// the latest put. The history is partitioned by key.
var KVModel = porcupine.Model{
	Partition: func(history []porcupine.Operation) [][]porcupine.Operation {
		byKey := map[string][]porcupine.Operation{}
		var keys []string
		for _, op := range history {
			k := op.Input.(KVInput).Key
			if _, ok := byKey[k]; !ok {
				keys = append(keys, k)
			}
			byKey[k] = append(byKey[k], op)
		}
		sort.Strings(keys)
		out := make([][]porcupine.Operation, 0, len(keys))
		for _, k := range keys {
			out = append(out, byKey[k])
		}
		return out
	},
	Init: func() any { return kvState{} },
	Step: func(state, input, output any) (bool, any) {
		st, in, out := state.(kvState), input.(KVInput), output.(KVOutput)
		switch in.Op {
		case "put":
			return true, kvState{value: in.Value, found: true}
		case "get":
			return out.Found == st.found && out.Value == st.value, st
		}
		return false, st
	},
	Equal: func(a, b any) bool { return a.(kvState) == b.(kvState) },
	DescribeOperation: func(input, output any) string {
		in, out := input.(KVInput), output.(KVOutput)
		if in.Op == "put" {
			if out.Unknown {
				return fmt.Sprintf("put(%s, %s) -> ?", in.Key, in.Value)
			}
			return fmt.Sprintf("put(%s, %s)", in.Key, in.Value)
		}
		if !out.Found {
			return fmt.Sprintf("get(%s) -> <none>", in.Key)
		}
		return fmt.Sprintf("get(%s) -> %s", in.Key, out.Value)
	},
	DescribeState: func(state any) string {
		st := state.(kvState)
		if !st.found {
			return "<none>"
		}
		return st.value
	},
}

// Recorder records every operation of a client workload: its client, call
// and return times, input and output.
type Recorder struct {
	t0  time.Time
	mu  sync.Mutex
	ops []porcupine.Operation
	// acked are the keys whose put was acknowledged, with the value.
	acked map[string]string
}

// NewRecorder returns an empty recorder.
func NewRecorder() *Recorder { return &Recorder{t0: time.Now(), acked: map[string]string{}} }

func (r *Recorder) now() int64 { return int64(time.Since(r.t0)) }

// Put writes key=value through c and records the operation. An error
// records the put as unknown (it may or may not have happened).
func (r *Recorder) Put(ctx context.Context, c *clientv3.Client, client int, key, value string) error {
	call := r.now()
	_, err := c.Put(ctx, key, value)
	ret := r.now()
	op := porcupine.Operation{ClientId: client, Input: KVInput{Op: "put", Key: key, Value: value}, Call: call, Return: ret, Output: KVOutput{}}
	if err != nil {
		op.Output, op.Return = KVOutput{Unknown: true}, math.MaxInt64
	}
	r.mu.Lock()
	r.ops = append(r.ops, op)
	if err == nil {
		r.acked[key] = value
	}
	r.mu.Unlock()
	return err
}

// Get reads key through c (a linearizable read) and records it. A failed
// read is not recorded: it has no effect and returned nothing.
func (r *Recorder) Get(ctx context.Context, c *clientv3.Client, client int, key string) (string, bool, error) {
	call := r.now()
	resp, err := c.Get(ctx, key)
	ret := r.now()
	if err != nil {
		return "", false, err
	}
	out := KVOutput{}
	if len(resp.Kvs) > 0 {
		out.Found, out.Value = true, string(resp.Kvs[0].Value)
	}
	r.mu.Lock()
	r.ops = append(r.ops, porcupine.Operation{ClientId: client, Input: KVInput{Op: "get", Key: key}, Call: call, Return: ret, Output: out})
	r.mu.Unlock()
	return out.Value, out.Found, nil
}

// Operations returns a copy of the history.
func (r *Recorder) Operations() []porcupine.Operation {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]porcupine.Operation(nil), r.ops...)
}

// Stats counts the recorded operations.
type Stats struct {
	Puts, AckedPuts, UnknownPuts, Gets int
}

func (s Stats) String() string {
	return fmt.Sprintf("%d puts (%d acknowledged, %d unknown), %d gets", s.Puts, s.AckedPuts, s.UnknownPuts, s.Gets)
}

// Stats counts the history.
func (r *Recorder) Stats() Stats {
	var s Stats
	for _, op := range r.Operations() {
		if op.Input.(KVInput).Op == "put" {
			s.Puts++
			if op.Output.(KVOutput).Unknown {
				s.UnknownPuts++
			} else {
				s.AckedPuts++
			}
		} else {
			s.Gets++
		}
	}
	return s
}

// ErrNotLinearizable says the history has no linearization.
var ErrNotLinearizable = errors.New("multicluster: history is not linearizable")

// CheckLinearizable checks the history against KVModel. When it is not
// linearizable, porcupine's visualization is written to dir (if not empty)
// and named in the error.
func (r *Recorder) CheckLinearizable(timeout time.Duration, dir string) error {
	ops := r.Operations()
	res, info := porcupine.CheckOperationsVerbose(KVModel, ops, timeout)
	switch res {
	case porcupine.Ok:
		return nil
	case porcupine.Unknown:
		return fmt.Errorf("multicluster: linearizability check of %d operations timed out after %s", len(ops), timeout)
	}
	where := ""
	if dir != "" {
		path := filepath.Join(dir, "linearizability.html")
		if err := porcupine.VisualizePath(KVModel, info, path); err == nil {
			where = " (visualization: " + path + ")"
		}
	}
	return fmt.Errorf("%w: %d operations%s", ErrNotLinearizable, len(ops), where)
}

// CheckAckedWritesPresent reads every key with an acknowledged put through
// c and checks that the key still exists. (Which value it holds is the
// linearizability check's business: a later unknown put may have won.)
func (r *Recorder) CheckAckedWritesPresent(ctx context.Context, c *clientv3.Client, prefix string) error {
	r.mu.Lock()
	acked := map[string]string{}
	for k, v := range r.acked {
		if strings.HasPrefix(k, prefix) {
			acked[k] = v
		}
	}
	r.mu.Unlock()
	resp, err := c.Get(ctx, prefix, clientv3.WithPrefix(), clientv3.WithKeysOnly())
	if err != nil {
		return fmt.Errorf("read back %s*: %w", prefix, err)
	}
	have := map[string]bool{}
	for _, kv := range resp.Kvs {
		have[string(kv.Key)] = true
	}
	var lost []string
	for k := range acked {
		if !have[k] {
			lost = append(lost, k)
		}
	}
	sort.Strings(lost)
	if len(lost) > 0 {
		return fmt.Errorf("multicluster: %d of %d acknowledged writes lost: %v", len(lost), len(acked), lost)
	}
	return nil
}

// WorkloadInput configures RunWorkload.
type WorkloadInput struct {
	// NewClient returns a client for one workload client.
	NewClient func() (*clientv3.Client, error)
	// Clients run concurrently; default 4.
	Clients int
	// Keys is the number of contended keys; default 4.
	Keys int
	// Prefix of every key written; default "workload/".
	Prefix string
	// OpTimeout bounds each operation; default 2s.
	OpTimeout time.Duration
	// Recorder receives the history; default a new one.
	Recorder *Recorder
}

// Workload is a running client workload.
type Workload struct {
	Recorder *Recorder
	in       WorkloadInput
	cancel   context.CancelFunc
	done     chan struct{}
	acked    atomic.Int64
	failed   atomic.Int64
	lastOK   atomic.Int64 // recorder time of the last acknowledged put
	mu       sync.Mutex
	maxGap   time.Duration
}

// RunWorkload starts clients that put unique values and get them back on
// a few contended keys (linearizability), and put unique keys under
// <prefix>unique/ (acknowledged writes must survive), until Stop.
func RunWorkload(ctx context.Context, in WorkloadInput) (*Workload, error) {
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
	if in.Recorder == nil {
		in.Recorder = NewRecorder()
	}
	ctx, cancel := context.WithCancel(ctx)
	w := &Workload{Recorder: in.Recorder, in: in, cancel: cancel, done: make(chan struct{})}
	clients := make([]*clientv3.Client, in.Clients)
	for i := range clients {
		c, err := in.NewClient()
		if err != nil {
			cancel()
			for _, c := range clients[:i] {
				_ = c.Close()
			}
			return nil, err
		}
		clients[i] = c
	}
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

func (w *Workload) client(ctx context.Context, id int, c *clientv3.Client) {
	rng := rand.New(rand.NewPCG(uint64(id), uint64(time.Now().UnixNano())))
	for seq := 0; ctx.Err() == nil; seq++ {
		octx, cancel := context.WithTimeout(ctx, w.in.OpTimeout)
		var err error
		isPut := false
		switch r := rng.IntN(10); {
		case r < 4:
			isPut = true
			err = w.Recorder.Put(octx, c, id, fmt.Sprintf("%sk%d", w.in.Prefix, rng.IntN(w.in.Keys)), fmt.Sprintf("c%d-%d", id, seq))
		case r < 6:
			isPut = true
			err = w.Recorder.Put(octx, c, id, fmt.Sprintf("%sunique/c%d-%06d", w.in.Prefix, id, seq), "x")
		default:
			_, _, err = w.Recorder.Get(octx, c, id, fmt.Sprintf("%sk%d", w.in.Prefix, rng.IntN(w.in.Keys)))
		}
		cancel()
		if err != nil {
			w.failed.Add(1)
			if ctx.Err() == nil {
				time.Sleep(50 * time.Millisecond) // don't spin on a dead endpoint
			}
			continue
		}
		if isPut {
			now := w.Recorder.now()
			if prev := w.lastOK.Swap(now); prev > 0 {
				gap := time.Duration(now - prev)
				w.mu.Lock()
				if gap > w.maxGap {
					w.maxGap = gap
				}
				w.mu.Unlock()
			}
			w.acked.Add(1)
		}
	}
}

// Acked is the number of acknowledged puts so far.
func (w *Workload) Acked() int64 { return w.acked.Load() }

// Failed is the number of failed operations so far.
func (w *Workload) Failed() int64 { return w.failed.Load() }

// MaxWriteGap is the longest time between two acknowledged puts (the
// write-availability gap of the run).
func (w *Workload) MaxWriteGap() time.Duration {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.maxGap
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

// Stop stops the clients and waits for them.
func (w *Workload) Stop() {
	w.cancel()
	<-w.done
}

// Check verifies the run: the history is linearizable and every
// acknowledged unique write is still there (read through c after the run).
func (w *Workload) Check(ctx context.Context, c *clientv3.Client, artifacts string) error {
	if err := w.Recorder.CheckLinearizable(2*time.Minute, artifacts); err != nil {
		return err
	}
	return w.Recorder.CheckAckedWritesPresent(ctx, c, w.in.Prefix+"unique/")
}

// ArtifactsDir is where scenarios write files worth keeping (the
// linearizability visualization): $ARTIFACTS when set, else dir.
func ArtifactsDir(dir string) string {
	if a := os.Getenv("ARTIFACTS"); a != "" {
		return a
	}
	return dir
}
