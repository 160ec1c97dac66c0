package etcdcluster

import (
	"context"
	"errors"
	"strings"
	"testing"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"

	etcdfedv1 "github.com/etcdfed/etcdfed/api/v1alpha1"
	"github.com/etcdfed/etcdfed/dev/etcdtest"
	"github.com/etcdfed/etcdfed/hub/etcdops"
	"github.com/etcdfed/etcdfed/hub/planner"
)

// TestNoSpaceCompactionConsent fills a real etcd with a 16 MiB quota until
// it raises NOSPACE (one key rewritten: every revision is history), then
// takes the hub's NOSPACE recovery step (applyDefragment) under each
// policy in turn, and reads the history back: without the user's consent
// nothing is compacted beyond spec.etcd's auto-compaction retention (none
// configured, a periodic one: nothing; revision 10: the last 10 revisions
// stay readable); with spec.defragmentation.noSpaceCompaction
// CurrentRevision, every older revision is gone.
func TestNoSpaceCompactionConsent(t *testing.T) {
	c := etcdtest.Start(t, etcdtest.Options{Members: 1, Name: "consent", ExtraArgs: []string{"--quota-backend-bytes=16777216"}})
	ctx := context.Background()
	kv := c.NewClient()
	value := strings.Repeat("x", 512<<10)
	filled := false
	for i := 0; i < 200 && !filled; i++ {
		if _, err := kv.Put(ctx, "/fill", value); err != nil {
			if !strings.Contains(err.Error(), "database space exceeded") {
				t.Fatalf("put %d: %v", i, err)
			}
			filled = true
		}
	}
	if !filled {
		t.Fatal("200 puts of 512 KiB never exceeded a 16 MiB quota")
	}
	resp, err := kv.Get(ctx, "/fill")
	if err != nil {
		t.Fatal(err)
	}
	cur := resp.Header.Revision
	if cur < 20 {
		t.Fatalf("only %d revisions before NOSPACE", cur)
	}
	ops, err := etcdops.New(etcdops.Config{Endpoints: c.Endpoints()})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = ops.Close() }()

	r := &Reconciler{}
	recoverWith := func(t *testing.T, spec func(*etcdfedv1.EtcdCluster)) {
		t.Helper()
		s := ring()
		spec(s.ec)
		op := &planner.Operation{Type: planner.OpDefrag, Reason: planner.ReasonNoSpace, Member: "main-0", Step: planner.ActDefragment}
		d := &decision{ledger: &s.ec.Status, plan: planner.Decision{Action: planner.ActDefragment, Operation: op, Member: "main-0"}, step: step{memberURLs: c.Endpoints()}}
		if err := r.applyDefragment(ctx, &taking{s: s, d: d, etcd: ops}); err != nil {
			t.Fatal(err)
		}
	}
	readable := func(rev int64) (bool, error) {
		_, err := kv.Get(ctx, "/fill", clientv3.WithRev(rev))
		if errors.Is(err, rpctypes.ErrCompacted) {
			return false, nil
		}
		return err == nil, err
	}
	expect := func(t *testing.T, rev int64, want bool) {
		t.Helper()
		got, err := readable(rev)
		if err != nil {
			t.Fatalf("read at revision %d: %v", rev, err)
		}
		if got != want {
			t.Errorf("revision %d of %d readable: %v, want %v", rev, cur, got, want)
		}
	}

	t.Run("no auto-compaction, no consent: no history compacted", func(t *testing.T) {
		recoverWith(t, func(*etcdfedv1.EtcdCluster) {})
		expect(t, 2, true)
	})
	t.Run("periodic retention, no consent: no history compacted", func(t *testing.T) {
		recoverWith(t, func(ec *etcdfedv1.EtcdCluster) {
			ec.Spec.Etcd.AutoCompactionMode, ec.Spec.Etcd.AutoCompactionRetention = etcdfedv1.AutoCompactionPeriodic, "1h"
		})
		expect(t, 2, true)
	})
	t.Run("retention of 10 revisions, Retention said: the last 10 kept", func(t *testing.T) {
		recoverWith(t, func(ec *etcdfedv1.EtcdCluster) {
			ec.Spec.Etcd.AutoCompactionMode, ec.Spec.Etcd.AutoCompactionRetention = etcdfedv1.AutoCompactionRevision, "10"
			ec.Spec.Defragmentation.NoSpaceCompaction = etcdfedv1.NoSpaceCompactionRetention
		})
		expect(t, cur-10, true)
		expect(t, cur-11, false)
	})
	t.Run("consent: compacted to the current revision", func(t *testing.T) {
		recoverWith(t, func(ec *etcdfedv1.EtcdCluster) {
			ec.Spec.Etcd.AutoCompactionMode, ec.Spec.Etcd.AutoCompactionRetention = etcdfedv1.AutoCompactionRevision, "10"
			ec.Spec.Defragmentation.NoSpaceCompaction = etcdfedv1.NoSpaceCompactionCurrentRevision
		})
		expect(t, cur-1, false)
		expect(t, cur, true)
	})
}
