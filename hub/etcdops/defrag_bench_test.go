package etcdops

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/etcdfed/etcdfed/dev/etcdtest"
	"github.com/etcdfed/etcdfed/hub/planner"
)

// BenchmarkDefrag320MiB: a 3-member etcd where 320 MiB were written,
// deleted and compacted is defragmented member by member the way the hub
// does it (followers first, the leader last after MoveLeader), while one
// client writes a small key in a loop. It reports each member's
// defragmentation time and the longest gap between acknowledged writes
// while it ran, beside the longest gap of the same writer over 5s with no
// defragmentation just before (the baseline, same run, same machine).
func BenchmarkDefrag320MiB(b *testing.B) {
	const fill = 320
	c := etcdtest.Start(b, etcdtest.Options{Members: 3, Name: "defrag"})
	ctx := context.Background()
	kv := c.NewClient()
	value := strings.Repeat("f", 1<<20)
	start := time.Now()
	for i := range fill {
		pctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		_, err := kv.Put(pctx, fmt.Sprintf("fill/%04d", i), value)
		cancel()
		if err != nil {
			b.Fatal(err)
		}
	}
	del, err := kv.Delete(ctx, "fill/", clientv3.WithPrefix())
	if err != nil {
		b.Fatal(err)
	}
	if _, err := kv.Compact(ctx, del.Header.Revision, clientv3.WithCompactPhysical()); err != nil {
		b.Fatal(err)
	}
	b.Logf("wrote %d MiB in %.1fs, deleted and compacted", fill, time.Since(start).Seconds())

	var mu sync.Mutex
	var acks []time.Time
	wctx, stop := context.WithCancel(ctx)
	defer stop()
	go func() {
		for i := 0; wctx.Err() == nil; i++ {
			pctx, cancel := context.WithTimeout(wctx, 5*time.Second)
			_, err := kv.Put(pctx, "writer", fmt.Sprint(i))
			cancel()
			if err == nil {
				mu.Lock()
				acks = append(acks, time.Now())
				mu.Unlock()
			}
		}
	}()
	longestGap := func(from, to time.Time) time.Duration {
		mu.Lock()
		defer mu.Unlock()
		var longest time.Duration
		for i := 1; i < len(acks); i++ {
			if acks[i].Before(from) || acks[i-1].After(to) {
				continue
			}
			longest = max(longest, acks[i].Sub(acks[i-1]))
		}
		return longest
	}
	ops, err := New(Config{Endpoints: c.Endpoints()})
	if err != nil {
		b.Fatal(err)
	}
	defer func() { _ = ops.Close() }()
	var e planner.Etcd
	eventually(b, "every member's file fragmented", func() error {
		e = ops.Observe(ctx)
		for _, m := range e.Members {
			if !(planner.Maintenance{MinFragmentedPercent: 45, MinReclaimable: 100 << 20}).Fragmented(m) {
				return fmt.Errorf("%s: file %d, in use %d", m.Name, m.DBSize, m.DBSizeInUse)
			}
		}
		return nil
	})
	// The baseline: the same writer for 5s with nothing defragmented.
	baseFrom := time.Now()
	time.Sleep(5 * time.Second)
	base := longestGap(baseFrom, time.Now())
	b.Logf("baseline: longest write gap over 5s with no defragmentation: %s", base.Round(time.Millisecond))
	b.ResetTimer()
	var total, worst, worstGap time.Duration
	for range b.N {
		// Followers first, the leader last after moving leadership away.
		order := []planner.ListEntry{}
		var leader planner.ListEntry
		for _, m := range e.Members {
			if m.ID == e.LeaderID {
				leader = m
				continue
			}
			order = append(order, m)
		}
		order = append(order, leader)
		for _, m := range order {
			if m.ID == leader.ID {
				var to uint64
				for _, o := range order {
					if o.ID != leader.ID {
						to = o.ID
					}
				}
				if err := ops.MoveLeader(ctx, leader.ClientURLs, to); err != nil {
					b.Fatal(err)
				}
			}
			before := ops.Observe(ctx)
			var size int64
			for _, o := range before.Members {
				if o.ID == m.ID {
					size = o.DBSize
				}
			}
			from := time.Now()
			took, err := ops.Defragment(ctx, m.ClientURLs)
			if err != nil {
				b.Fatal(err)
			}
			to := time.Now()
			// The writer's first put after the defragmentation ends the gap.
			for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
				mu.Lock()
				done := len(acks) > 0 && acks[len(acks)-1].After(to)
				mu.Unlock()
				if done {
					break
				}
			}
			gap := longestGap(from, to)
			after := ops.Observe(ctx)
			for _, o := range after.Members {
				if o.ID == m.ID {
					b.Logf("%s: file %s -> %s in %s; longest write gap meanwhile %s",
						m.Name, planner.Bytes(size), planner.Bytes(o.DBSize), took.Round(time.Millisecond), gap.Round(time.Millisecond))
				}
			}
			total += took
			worst, worstGap = max(worst, took), max(worstGap, gap)
		}
	}
	b.ReportMetric(total.Seconds()/float64(3*b.N), "s/member")
	b.ReportMetric(worst.Seconds(), "s-slowest-member")
	b.ReportMetric(worstGap.Seconds(), "s-write-gap")
	b.ReportMetric(base.Seconds(), "s-write-gap-baseline")
}
