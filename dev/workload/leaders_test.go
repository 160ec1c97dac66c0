package workload

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/etcdfed/etcdfed/dev/testenv"
)

// answers builds the answers of one member, one every 250 ms from
// fromMS to toMS (each look taking 20 ms), all with the same view.
func answers(member string, cluster, id, leader, term uint64, fromMS, toMS int) []LeaderSample {
	t0 := time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)
	var out []LeaderSample
	for ms := fromMS; ms <= toMS; ms += 250 {
		at := t0.Add(time.Duration(ms) * time.Millisecond)
		out = append(out, LeaderSample{Target: LeaderTarget{Member: member, Endpoint: "https://" + member + ":2379"}, From: at, To: at.Add(20 * time.Millisecond),
			ClusterID: cluster, MemberID: id, Leader: leader, RaftTerm: term})
	}
	return out
}

func join(ss ...[]LeaderSample) []LeaderSample {
	var out []LeaderSample
	for _, s := range ss {
		out = append(out, s...)
	}
	return out
}

func TestCheckLeaders(t *testing.T) {
	const ring, other = 0xc1, 0xc2
	for _, tc := range []struct {
		name string
		in   []LeaderSample
		want []error // nil: one ring throughout
	}{
		{
			name: "one ring, one leader, followers agreeing",
			in: join(answers("m0", ring, 1, 1, 2, 0, 30_000), answers("m1", ring, 2, 1, 2, 0, 30_000),
				answers("m2", ring, 3, 1, 2, 0, 30_000)),
		},
		{
			// The old leader cut off keeps claiming for an election
			// timeout or two while the majority elects m1 at term 3.
			name: "a deposed leader claims for 2 s after the new one is elected",
			in: join(answers("m0", ring, 1, 1, 2, 0, 12_000), answers("m0", ring, 1, 0, 2, 12_250, 30_000),
				answers("m1", ring, 2, 1, 2, 0, 9_750), answers("m1", ring, 2, 2, 3, 10_000, 30_000),
				answers("m2", ring, 3, 2, 3, 10_000, 30_000)),
		},
		{
			name: "leadership moved back and forth between terms",
			in: join(answers("m0", ring, 1, 1, 2, 0, 10_000), answers("m0", ring, 1, 2, 3, 10_250, 20_000), answers("m0", ring, 1, 1, 4, 20_250, 30_000),
				answers("m1", ring, 2, 1, 2, 0, 10_000), answers("m1", ring, 2, 2, 3, 10_250, 20_000), answers("m1", ring, 2, 1, 4, 20_250, 30_000)),
		},
		{
			// A member forced into a new cluster keeps the cluster ID:
			// only two leaders for longer than an election show it.
			name: "a second ring forced from one member's data, same cluster ID",
			in: join(answers("m0", ring, 1, 1, 2, 0, 60_000), answers("m1", ring, 2, 1, 2, 0, 60_000),
				answers("m2", ring, 3, 1, 2, 0, 20_000), answers("m2", ring, 3, 3, 3, 20_250, 60_000)),
			want: []error{ErrTwoLeaders},
		},
		{
			name: "a member answering for another cluster, with a leader",
			in:   join(answers("m0", ring, 1, 1, 2, 0, 10_000), answers("m1", ring, 2, 1, 2, 0, 10_000), answers("x0", other, 9, 9, 2, 5_000, 5_500)),
			want: []error{ErrForeignCluster, ErrTwoClusters},
		},
		{
			name: "a member answering for another cluster, no leader anywhere then",
			in:   join(answers("m0", ring, 1, 1, 2, 0, 4_000), answers("x0", other, 9, 0, 2, 5_000, 5_500)),
			want: []error{ErrForeignCluster},
		},
		{
			name: "another cluster's leader long after this ring's last answer",
			in:   join(answers("m0", ring, 1, 1, 2, 0, 4_000), answers("x0", other, 9, 9, 2, 6_000, 7_000)),
			want: []error{ErrForeignCluster},
		},
		{
			name: "nobody answered",
			want: []error{ErrNoLeaderSamples},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v := CheckLeaders(LeaderCheckInput{Samples: tc.in, ClusterID: ring})
			err := v.Err()
			if len(tc.want) == 0 {
				if err != nil {
					t.Fatalf("want one ring, got %v", err)
				}
				t.Log(v)
				return
			}
			for _, w := range tc.want {
				if !errors.Is(err, w) {
					t.Errorf("want %v in %v", w, err)
				}
			}
			for _, w := range []error{ErrForeignCluster, ErrTwoClusters, ErrTwoLeaders, ErrNoLeaderSamples} {
				if errors.Is(err, w) && !slices.Contains(tc.want, w) {
					t.Errorf("unexpected %v in %v", w, err)
				}
			}
		})
	}
}

// The overlap allowed is Overlap, measured on the certain spans: two
// leaders for 9.5 s pass with the default 10 s, and fail with 5 s.
func TestCheckLeadersOverlapBound(t *testing.T) {
	in := join(answers("m0", 0xc1, 1, 1, 2, 0, 20_000), answers("m1", 0xc1, 2, 2, 3, 10_000, 30_000))
	if err := CheckLeaders(LeaderCheckInput{Samples: in}).Err(); err != nil {
		t.Errorf("default bound: %v", err)
	}
	v := CheckLeaders(LeaderCheckInput{Samples: in, Overlap: 5 * time.Second})
	if !errors.Is(v.Err(), ErrTwoLeaders) || len(v.TwoLeaders) != 1 {
		t.Fatalf("5 s bound: %v", v.Err())
	}
	if got := v.TwoLeaders[0].Both; got < 9*time.Second || got > 10*time.Second {
		t.Errorf("overlap %s, want about 9.98 s", got)
	}
}

// A LeaderWatch over real etcd: a ring of three, then one member's data
// copied while it is stopped and started as a second ring with
// --force-new-cluster (the split of issue 24: the same cluster ID, its own
// leader), and a separate cluster of one. CheckLeaders finds nothing in
// the ring alone, and the fork (two leaders beyond the bound) and the
// other cluster (a foreign cluster ID with a leader at the same moment)
// once they answer.
func TestLeaderWatchFindsASecondRing(t *testing.T) {
	ps, _, _, st, _ := startLedCluster(t, 3)
	ctx := context.Background()
	ring := st.Header.ClusterId
	var mu sync.Mutex
	targets := []LeaderTarget{}
	for _, p := range ps {
		targets = append(targets, LeaderTarget{Member: p.name, Endpoint: p.client})
	}
	addTarget := func(p *etcdProc) {
		mu.Lock()
		defer mu.Unlock()
		targets = append(targets, LeaderTarget{Member: p.name, Endpoint: p.client})
	}
	lw := WatchLeaders(ctx, LeaderWatchInput{Every: 100 * time.Millisecond, Refresh: 200 * time.Millisecond, Targets: func(context.Context) []LeaderTarget {
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(targets)
	}})
	defer lw.Stop()
	time.Sleep(3 * time.Second)
	split := time.Now()

	// The fork: the third member's data, stopped, copied, started alone.
	ps[2].kill()
	fork := &etcdProc{name: ps[2].name, dir: t.TempDir(), peer: fmt.Sprintf("http://127.0.0.1:%d", testenv.FreePort(t)), client: fmt.Sprintf("http://127.0.0.1:%d", testenv.FreePort(t)),
		extra: []string{"--force-new-cluster"}}
	if err := os.CopyFS(filepath.Join(fork.dir, "data"), os.DirFS(filepath.Join(ps[2].dir, "data"))); err != nil {
		t.Fatal(err)
	}
	fork.start(t, "")
	addTarget(fork)
	// Another cluster altogether.
	other := startCluster(t, 1)[0]
	addTarget(other)
	fc, err := NewClient(ClientConfig{Endpoints: []string{fork.client}})
	if err != nil {
		t.Fatal(err)
	}
	defer fc.Close()
	forkLeads := time.Time{}
	for deadline := time.Now().Add(30 * time.Second); forkLeads.IsZero() && time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		sctx, cancel := context.WithTimeout(ctx, time.Second)
		resp, err := fc.Status(sctx, fork.client)
		cancel()
		if err == nil && resp.Leader == resp.Header.MemberId {
			if resp.Header.ClusterId != ring {
				t.Fatalf("the fork answers for cluster %x, not %x", resp.Header.ClusterId, ring)
			}
			forkLeads = time.Now()
		}
	}
	if forkLeads.IsZero() {
		t.Fatal("the fork never led")
	}
	time.Sleep(4 * time.Second)
	res := lw.Stop()
	t.Logf("%d answers of %d looks (%d failed) over %d targets", len(res.Samples), res.Looks, res.Failed, len(res.Targets))

	var before []LeaderSample
	for _, s := range res.Samples {
		if s.To.Before(split) {
			before = append(before, s)
		}
	}
	const bound = 2 * time.Second
	if v := CheckLeaders(LeaderCheckInput{Samples: before, ClusterID: ring, Overlap: bound}); v.Err() != nil || v.Samples < 30 {
		t.Errorf("the ring alone (%d answers): %v", v.Samples, v.Err())
	} else {
		t.Logf("the ring alone: %s", v)
	}
	v := CheckLeaders(LeaderCheckInput{Samples: res.Samples, ClusterID: ring, Overlap: bound})
	err = v.Err()
	t.Logf("with the fork and the other cluster: %v", err)
	for _, want := range []error{ErrTwoLeaders, ErrForeignCluster, ErrTwoClusters} {
		if !errors.Is(err, want) {
			t.Errorf("not found: %v", want)
		}
	}
	for _, o := range v.TwoLeaders {
		if o.A.ClusterID != ring || o.B.ClusterID != ring {
			continue
		}
		if o.A.Target.Endpoint == fork.client || o.B.Target.Endpoint == fork.client {
			return
		}
	}
	t.Errorf("no overlap names the fork %s: %v", fork.client, v.TwoLeaders)
}
