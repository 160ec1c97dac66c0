package workload

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// watcher records the events of one watch on the workload's prefix. It
// re-establishes the watch from the last seen revision + 1 whenever it
// ends (an error, a member without a leader, a compaction), so a
// disconnect costs no event.
type watcher struct {
	c      *clientv3.Client
	prefix string
	done   chan struct{}
	// last is the highest revision seen.
	last atomic.Int64

	mu  sync.Mutex
	log WatchLog
}

func startWatcher(ctx context.Context, c *clientv3.Client, name, prefix string, start int64) *watcher {
	w := &watcher{c: c, prefix: prefix, done: make(chan struct{}), log: WatchLog{Name: name, Start: start}}
	go w.run(ctx)
	return w
}

func (w *watcher) run(ctx context.Context) {
	defer close(w.done)
	next := w.log.Start
	for ctx.Err() == nil {
		// WithRequireLeader: a member cut off from its leader ends the
		// watch instead of holding it silently; it is then resumed,
		// possibly on another endpoint.
		wctx, cancel := context.WithCancel(clientv3.WithRequireLeader(ctx))
		reason := "watch ended"
		for resp := range w.c.Watch(wctx, w.prefix, clientv3.WithPrefix(), clientv3.WithRev(next)) {
			if resp.CompactRevision != 0 {
				w.mu.Lock()
				w.log.Compactions = append(w.log.Compactions, Compaction{From: next, To: resp.CompactRevision})
				w.mu.Unlock()
				next, reason = resp.CompactRevision, "compacted"
				break
			}
			if err := resp.Err(); err != nil {
				reason = err.Error()
				break
			}
			if len(resp.Events) == 0 {
				continue
			}
			evs := make([]WatchEvent, len(resp.Events))
			for i, ev := range resp.Events {
				evs[i] = WatchEvent{Key: string(ev.Kv.Key), Value: string(ev.Kv.Value), Revision: ev.Kv.ModRevision, Delete: ev.Type == clientv3.EventTypeDelete}
				next = max(next, ev.Kv.ModRevision+1)
				if ev.Kv.ModRevision > w.last.Load() {
					w.last.Store(ev.Kv.ModRevision)
				}
			}
			w.mu.Lock()
			w.log.Events = append(w.log.Events, evs...)
			w.mu.Unlock()
		}
		cancel()
		if ctx.Err() != nil {
			return
		}
		w.mu.Lock()
		w.log.Resumes++
		w.log.LastError = reason
		w.mu.Unlock()
		select {
		case <-ctx.Done():
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// Log returns a copy of what the watcher saw.
func (w *watcher) Log() WatchLog {
	w.mu.Lock()
	defer w.mu.Unlock()
	l := w.log
	l.Events = append([]WatchEvent(nil), w.log.Events...)
	l.Compactions = append([]Compaction(nil), w.log.Compactions...)
	return l
}
