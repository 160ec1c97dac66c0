package workload

import (
	"context"
	"errors"
	"fmt"
	"math"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/anishathalye/porcupine"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// PutRecord is one put the workload attempted.
type PutRecord struct {
	Key, Value string
	// Acked is true when etcd acknowledged the put; Revision is then the
	// revision it was applied at. An unacknowledged put may or may not
	// have taken effect.
	Acked    bool
	Revision int64
}

// Recorder records every operation of a client workload: its client, call
// and return times, input and output.
type Recorder struct {
	t0   time.Time
	mu   sync.Mutex
	ops  []porcupine.Operation
	puts []PutRecord
}

// NewRecorder returns an empty recorder.
func NewRecorder() *Recorder { return &Recorder{t0: time.Now()} }

func (r *Recorder) now() int64 { return int64(time.Since(r.t0)) }

// Put writes key=value through c and records the operation. An error
// records the put as unknown (it may or may not have happened).
func (r *Recorder) Put(ctx context.Context, c *clientv3.Client, client int, key, value string) error {
	call := r.now()
	resp, err := c.Put(ctx, key, value)
	ret := r.now()
	op := porcupine.Operation{ClientId: client, Input: KVInput{Op: OpPut, Key: key, Value: value}, Call: call, Return: ret}
	rec := PutRecord{Key: key, Value: value}
	if err != nil {
		op.Output, op.Return = KVOutput{Unknown: true}, math.MaxInt64
	} else {
		rec.Acked, rec.Revision = true, resp.Header.Revision
		op.Output = KVOutput{Revision: rec.Revision}
	}
	r.mu.Lock()
	r.ops = append(r.ops, op)
	r.puts = append(r.puts, rec)
	r.mu.Unlock()
	return err
}

// Initial records that key held value (put at revision rev) before the
// workload's first operation: a put (of client 0, for the visualization)
// that returned before any other call, marked Initial. Stats leaves it
// out; the lost-write and watch checks never see it (not one of Puts).
func (r *Recorder) Initial(key, value string, rev int64) {
	call := r.now()
	r.mu.Lock()
	r.ops = append(r.ops, porcupine.Operation{ClientId: 0, Input: KVInput{Op: OpPut, Key: key, Value: value},
		Call: call, Return: call + 1, Output: KVOutput{Revision: rev, Initial: true}})
	r.mu.Unlock()
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
	r.ops = append(r.ops, porcupine.Operation{ClientId: client, Input: KVInput{Op: OpGet, Key: key}, Call: call, Return: ret, Output: out})
	r.mu.Unlock()
	return out.Value, out.Found, nil
}

// Operations returns a copy of the history.
func (r *Recorder) Operations() []porcupine.Operation {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]porcupine.Operation(nil), r.ops...)
}

// Puts returns a copy of every attempted put, in the order they returned.
func (r *Recorder) Puts() []PutRecord {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]PutRecord(nil), r.puts...)
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
		if op.Output.(KVOutput).Initial {
			continue
		}
		if op.Input.(KVInput).Op == OpPut {
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
var ErrNotLinearizable = errors.New("workload: history is not linearizable")

// ErrCheckTimedOut says porcupine gave up before deciding.
var ErrCheckTimedOut = errors.New("workload: linearizability check timed out")

// CheckLinearizable checks the history against KVModel. When it is not
// linearizable, porcupine's visualization is written to dir (if not empty)
// and named in the error.
func (r *Recorder) CheckLinearizable(timeout time.Duration, dir string) error {
	return CheckLinearizable(r.Operations(), timeout, dir)
}

// CheckLinearizable checks ops against KVModel; see Recorder.CheckLinearizable.
// Puts whose outcome is unknown and whose value no get returned are left
// out of the search (WithoutUnobservedUnknownPuts): the verdict is the
// same, and a history with many of them (a long outage) no longer makes
// porcupine give up.
func CheckLinearizable(ops []porcupine.Operation, timeout time.Duration, dir string) error {
	ops = WithoutUnobservedUnknownPuts(ops)
	res, info := porcupine.CheckOperationsVerbose(KVModel, ops, timeout)
	switch res {
	case porcupine.Ok:
		return nil
	case porcupine.Unknown:
		return fmt.Errorf("%w: %d operations, gave up after %s", ErrCheckTimedOut, len(ops), timeout)
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

// WithoutUnobservedUnknownPuts returns ops without the puts whose outcome
// is unknown and whose value no get of their key returned. Leaving them
// out changes no verdict, because the workload's values are unique. A
// linearization of the rest stays one with such puts appended at the end:
// an unknown put never returned, so nothing has to follow it, and after
// it nothing reads. Conversely, in a linearization of the whole history
// such a put is never the last put before a get (that get would have
// returned its value), so removing it changes no get's answer. Each such
// put is otherwise pending until the end of the history: with tens of
// them on a few keys (every put of a minutes-long quorum loss) porcupine's
// search over which of them took effect grows until it times out.
func WithoutUnobservedUnknownPuts(ops []porcupine.Operation) []porcupine.Operation {
	type keyValue struct{ key, value string }
	read := map[keyValue]bool{}
	for _, op := range ops {
		in, out := op.Input.(KVInput), op.Output.(KVOutput)
		if in.Op == OpGet && out.Found {
			read[keyValue{in.Key, out.Value}] = true
		}
	}
	kept := make([]porcupine.Operation, 0, len(ops))
	for _, op := range ops {
		in, out := op.Input.(KVInput), op.Output.(KVOutput)
		if in.Op == OpPut && out.Unknown && !read[keyValue{in.Key, in.Value}] {
			continue
		}
		kept = append(kept, op)
	}
	return kept
}

// ErrWritesLost says acknowledged writes are gone.
var ErrWritesLost = errors.New("workload: acknowledged writes lost")

// LostWrites returns, sorted, the keys under prefix with an acknowledged
// put that are not in present. (Which value a key holds is the
// linearizability check's business: a later unknown put may have won.)
func LostWrites(puts []PutRecord, prefix string, present map[string]bool) (acked int, lost []string) {
	seen := map[string]bool{}
	for _, p := range puts {
		if !p.Acked || !strings.HasPrefix(p.Key, prefix) || seen[p.Key] {
			continue
		}
		seen[p.Key] = true
		acked++
		if !present[p.Key] {
			lost = append(lost, p.Key)
		}
	}
	sort.Strings(lost)
	return acked, lost
}

// ReadKeys returns the keys under prefix, read through c (linearizable).
func ReadKeys(ctx context.Context, c *clientv3.Client, prefix string) (map[string]bool, error) {
	resp, err := c.Get(ctx, prefix, clientv3.WithPrefix(), clientv3.WithKeysOnly())
	if err != nil {
		return nil, fmt.Errorf("read back %s*: %w", prefix, err)
	}
	have := make(map[string]bool, len(resp.Kvs))
	for _, kv := range resp.Kvs {
		have[string(kv.Key)] = true
	}
	return have, nil
}

// CheckAckedWritesPresent reads every key under prefix through c and
// checks that each key with an acknowledged put still exists.
func (r *Recorder) CheckAckedWritesPresent(ctx context.Context, c *clientv3.Client, prefix string) error {
	have, err := ReadKeys(ctx, c, prefix)
	if err != nil {
		return err
	}
	acked, lost := LostWrites(r.Puts(), prefix, have)
	if len(lost) > 0 {
		return fmt.Errorf("%w: %d of %d: %s", ErrWritesLost, len(lost), acked, firstFew(lost, 10))
	}
	return nil
}

// firstFew joins up to n items and says how many more there are.
func firstFew(items []string, n int) string {
	if len(items) <= n {
		return strings.Join(items, ", ")
	}
	return fmt.Sprintf("%s and %d more", strings.Join(items[:n], ", "), len(items)-n)
}
