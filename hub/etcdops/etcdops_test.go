package etcdops

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"

	"github.com/etcdfed/etcdfed/dev/testenv"
	"github.com/etcdfed/etcdfed/hub/planner"
)

type proc struct {
	name, peer, client string
	cmd                *exec.Cmd
}

func urls(t *testing.T, name string) proc {
	return proc{name: name, peer: fmt.Sprintf("http://127.0.0.1:%d", testenv.FreePort(t)), client: fmt.Sprintf("http://127.0.0.1:%d", testenv.FreePort(t))}
}

// start runs a real etcd process with the given initial cluster.
func start(t *testing.T, p *proc, initialCluster, state string) {
	t.Helper()
	bin, err := testenv.BinDir()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	p.cmd = exec.Command(filepath.Join(bin, "etcd"),
		"--name", p.name, "--data-dir", filepath.Join(dir, "data"),
		"--listen-peer-urls", p.peer, "--initial-advertise-peer-urls", p.peer,
		"--listen-client-urls", p.client, "--advertise-client-urls", p.client,
		"--initial-cluster", initialCluster, "--initial-cluster-state", state, "--initial-cluster-token", "etcdops-test",
		"--log-level", "error")
	log, err := os.Create(filepath.Join(dir, "etcd.log"))
	if err != nil {
		t.Fatal(err)
	}
	p.cmd.Stdout, p.cmd.Stderr = log, log
	if err := testenv.StartProcess(p.cmd); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = p.cmd.Process.Kill()
		_, _ = p.cmd.Process.Wait()
		if t.Failed() {
			b, _ := os.ReadFile(log.Name())
			t.Logf("%s log:\n%s", p.name, b)
		}
	})
}

func eventually(t testing.TB, what string, f func() error) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		err := f()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: %v", what, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// TestMembershipLifecycle drives real etcd processes through every call the
// hub makes: observe, add a learner, refuse a second learner, refuse an early
// promotion, start and promote it, move leadership, remove a member.
func TestMembershipLifecycle(t *testing.T) {
	testenv.SkipIfShort(t, "etcd processes")
	ctx := context.Background()
	a := urls(t, "a")
	start(t, &a, "a="+a.peer, "new")
	c, err := New(Config{Endpoints: []string{a.client}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()

	eventually(t, "single member healthy", func() error {
		e := c.Observe(ctx)
		if !e.Reachable || len(e.Members) != 1 || !e.Members[0].Healthy || e.LeaderID != e.Members[0].ID {
			return fmt.Errorf("observed %+v", e)
		}
		return nil
	})

	b := urls(t, "b")
	idB, err := c.AddLearner(ctx, b.peer)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.AddLearner(ctx, "http://127.0.0.1:1"); !errors.Is(err, ErrTooManyLearners) {
		t.Errorf("second learner: got %v, want ErrTooManyLearners", err)
	}
	if err := c.Promote(ctx, []string{a.client}, idB); !errors.Is(err, ErrLearnerNotReady) {
		t.Errorf("promoting a learner that never started: got %v, want ErrLearnerNotReady", err)
	}
	e := c.Observe(ctx)
	if len(e.Members) != 2 || !e.Members[1].IsLearner && !e.Members[0].IsLearner {
		t.Fatalf("after add: %+v", e)
	}

	start(t, &b, strings.Join([]string{"a=" + a.peer, "b=" + b.peer}, ","), "existing")
	eventually(t, "promote b", func() error { return c.Promote(ctx, []string{a.client}, idB) })

	var idA uint64
	eventually(t, "two healthy voters", func() error {
		e := c.Observe(ctx)
		healthy := 0
		for _, m := range e.Members {
			if m.IsLearner {
				return fmt.Errorf("%s still a learner", m.Name)
			}
			if m.Healthy {
				healthy++
			}
			if m.Name == "a" {
				idA = m.ID
			}
		}
		if healthy != 2 || e.LeaderID != idA {
			return fmt.Errorf("observed %+v", e)
		}
		return nil
	})

	if err := c.MoveLeader(ctx, []string{a.client}, idB); err != nil {
		t.Fatal(err)
	}
	eventually(t, "leader moved to b", func() error {
		if e := c.Observe(ctx); e.LeaderID != idB {
			return fmt.Errorf("leader is %x, want %x", e.LeaderID, idB)
		}
		return nil
	})

	// Right after a leader change etcd refuses reconfiguration until the new
	// leader has seen a quorum for 5 s: the hub requeues on this sentinel.
	// c reaches only a: a that applies its own removal may stop before it
	// answers, and says so; b's member list below is the proof.
	eventually(t, "remove a", func() error {
		err := c.Remove(ctx, idA)
		switch {
		case errors.Is(err, ErrAnswererStopped):
			return nil
		case err != nil && !errors.Is(err, ErrUnhealthyCluster):
			t.Fatalf("remove: unexpected %v", err)
		}
		return err
	})
	cb, err := New(Config{Endpoints: []string{b.client}})
	if err != nil {
		t.Fatal(err)
	}
	defer cb.Close()
	if err := cb.Remove(ctx, idA); err != nil {
		t.Errorf("removing a removed member must succeed: %v", err)
	}
	eventually(t, "b alone", func() error {
		e := cb.Observe(ctx)
		if len(e.Members) != 1 || e.Members[0].ID != idB || !e.Members[0].Healthy {
			return fmt.Errorf("observed %+v", e)
		}
		return nil
	})
}

func TestObserveUnreachable(t *testing.T) {
	c, err := New(Config{Endpoints: []string{fmt.Sprintf("http://127.0.0.1:%d", testenv.FreePort(t))}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if e := c.Observe(context.Background()); e.Reachable || e.Error == "" {
		t.Fatalf("observed %+v, want unreachable with an error", e)
	}
}

func TestMajorityLeader(t *testing.T) {
	for _, tc := range []struct {
		seen []uint64
		want uint64
	}{
		{nil, 0}, {[]uint64{0, 0}, 0}, {[]uint64{5, 5, 7}, 5}, {[]uint64{7, 0, 5}, 5}, {[]uint64{9}, 9},
	} {
		if got := majorityLeader(tc.seen); got != tc.want {
			t.Errorf("majorityLeader(%v) = %d, want %d", tc.seen, got, tc.want)
		}
	}
}

// The errors etcd gives for the hub's calls map to the sentinels the hub
// retries on, whether they arrive as gRPC status or as client errors.
func TestClassify(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want error
	}{
		{rpctypes.ErrGRPCLearnerNotReady, ErrLearnerNotReady},
		{rpctypes.ErrMemberLearnerNotReady, ErrLearnerNotReady},
		{rpctypes.ErrGRPCUnhealthy, ErrUnhealthyCluster},
		{rpctypes.ErrGRPCTooManyLearners, ErrTooManyLearners},
		{rpctypes.ErrGRPCStopped, ErrAnswererStopped},
		{rpctypes.ErrStopped, ErrAnswererStopped},
	} {
		if got := classify(tc.err); !errors.Is(got, tc.want) {
			t.Errorf("classify(%v) = %v, want %v", tc.err, got, tc.want)
		}
	}
	if got := classify(rpctypes.ErrGRPCMemberNotFound); errors.Is(got, ErrAnswererStopped) || errors.Is(got, ErrUnhealthyCluster) {
		t.Errorf("member not found classified as %v", got)
	}
}

// TestRemoveTheLeaderItCannotReach: what the planner's fallback after a
// minute of MoveLeader rests on (removeFromEtcd, leaderHandOffLimit). A
// hub that reaches the leader of three real etcd members neither by its
// client URL nor otherwise cannot move leadership (MoveLeader is asked of
// the leader), yet its removal, asked of a follower, goes through: the
// two left elect a leader of their own and take writes.
func TestRemoveTheLeaderItCannotReach(t *testing.T) {
	testenv.SkipIfShort(t, "etcd processes")
	ctx := context.Background()
	ps := []proc{urls(t, "a"), urls(t, "b"), urls(t, "c")}
	var initial []string
	for _, p := range ps {
		initial = append(initial, p.name+"="+p.peer)
	}
	for i := range ps {
		start(t, &ps[i], strings.Join(initial, ","), "new")
	}
	all, err := New(Config{Endpoints: []string{ps[0].client, ps[1].client, ps[2].client}})
	if err != nil {
		t.Fatal(err)
	}
	defer all.Close()
	var leader planner.ListEntry
	eventually(t, "three healthy voters and a leader", func() error {
		e := all.Observe(ctx)
		healthy := 0
		for _, m := range e.Members {
			if m.Healthy {
				healthy++
			}
			if m.ID == e.LeaderID {
				leader = m
			}
		}
		if healthy != 3 || leader.ID == 0 {
			return fmt.Errorf("observed %+v", e)
		}
		return nil
	})
	var followers []string
	var transferee uint64
	for _, p := range ps {
		if p.name != leader.Name {
			followers = append(followers, p.client)
		}
	}
	// The hub's view: the leader's client URL does not answer it (here a
	// port nothing listens on), its followers do.
	c, err := New(Config{Endpoints: followers})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	for _, m := range c.Observe(ctx).Members {
		if m.ID != leader.ID {
			transferee = m.ID
		}
	}
	unreachable := fmt.Sprintf("http://127.0.0.1:%d", testenv.FreePort(t))
	mctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	err = c.MoveLeader(mctx, []string{unreachable}, transferee)
	cancel()
	if err == nil {
		t.Fatal("MoveLeader asked of an address that does not answer succeeded")
	}
	t.Logf("MoveLeader, the leader out of reach: %v", err)
	// Right after an election etcd refuses reconfiguration for a while
	// (ErrUnhealthyCluster); the hub tries again on its next pass.
	eventually(t, "remove the leader "+leader.Name, func() error {
		err := c.Remove(ctx, leader.ID)
		if err != nil && !errors.Is(err, ErrUnhealthyCluster) {
			t.Fatalf("remove the leader: unexpected %v", err)
		}
		return err
	})
	eventually(t, "two voters, one of them leading, taking writes", func() error {
		e := c.Observe(ctx)
		if len(e.Members) != 2 || e.LeaderID == 0 || e.LeaderID == leader.ID {
			return fmt.Errorf("observed %+v", e)
		}
		pctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		defer cancel()
		_, err := c.c.Put(pctx, "after-the-leader", "x")
		return err
	})
}
