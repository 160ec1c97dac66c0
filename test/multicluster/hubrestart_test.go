package multicluster

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strconv"
	"testing"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdfedv1 "github.com/etcdfed/etcdfed/api/v1alpha1"
)

// TestHubRestartAtEveryStep kills the hub at each step of an Add (3 -> 5)
// and of a Move (a cordoned zone's live member moved out make before
// break, the step a migration takes for each member), under a recorded
// workload, and requires that the restarted hub resumes and finishes every
// time. Each run kills the hub at every step of one Add and then of one
// Move: the hub restarted after one kill is killed again at the next
// step. (The Move's MoveLeader step is taken only when the moved member
// leads, so it is not in the list.) It is a drill (`make drill`, ETCDFED_DRILL=1; runs from
// ETCDFED_DRILL_RUNS, default 1): `make test` already kills the hub once
// mid scale-up (TestEtcdClusterLifecycle).
//
// The kill is placed by a hook the drill installs in the hub's apiserver
// (stepHold), not by watching: the hub takes a step, then records it in
// the status, and the hook holds that status write while the drill kills
// the hub, then refuses it. So each kill lands at the hub's first record
// of the step (after the step's effect when the record is of a step taken,
// before it when it is of a wait for the step) and before anything that
// follows, whatever the step's speed (a Replace's first steps follow each
// other within a fraction of a second: a watch sees them after the hub
// has moved on). The first record of the restarted hub is held the same
// way: the report gives where the new hub resumed, and how long after the
// kill. The hub is killed at each step when it first records it, in
// whatever order it does (the order is logged when it is not the
// expected one). The drill fails when the operation ends without a record
// of a step it was to kill the hub at (skipped).
func TestHubRestartAtEveryStep(t *testing.T) {
	if os.Getenv("ETCDFED_DRILL") == "" {
		t.Skip("drill: kills the hub at every step of an add and a move (several minutes per run); run `make drill`")
	}
	runs := 1
	if v, err := strconv.Atoi(os.Getenv("ETCDFED_DRILL_RUNS")); err == nil && v > 0 {
		runs = v
	}
	if v, err := strconv.Atoi(os.Getenv("ETCDFED_DRILL_CPU_BURN")); err == nil && v > 0 {
		stop := burnCPU(v)
		defer stop()
		t.Logf("burning CPU in %d goroutines for the whole drill", v)
	}
	topo := hubTopology(t)
	if topo.KillHub == nil {
		t.Skip("the topology cannot kill the hub")
	}
	ctx := context.Background()
	etcd := EtcdClusterSpec(ctx, EtcdClusterSpecInput{T: t, Topology: topo, Namespace: "restart", Name: "restart", Domain: "restart.etcd.test", Replicas: 3, WantZones: "1/1/1"})
	w := StartWorkload(ctx, t, StartWorkloadInput{Client: etcd.Client, Prefix: "restart/", WatchEachEndpoint: true})

	hold, err := startStepHold(ctx, topo.Hub, etcd.Namespace, etcd.Name)
	if err != nil {
		t.Fatal(err)
	}
	defer hold.stop()
	addSteps := []string{"CreateObjects", "AddLearner", "StartMember", "Promote"}
	moveSteps := []string{"CreateObjects", "AddLearner", "StartMember", "Promote", "RemoveMember", "DeleteObject"}
	var kills []hubKill
	var skipped []string
	cordon := func(zones []string) {
		t.Helper()
		ec, err := etcd.Get(ctx, topo.Hub)
		if err != nil {
			t.Fatal(err)
		}
		before := ec.DeepCopy()
		ec.Spec.Topology.CordonedZones = zones
		if err := topo.Hub.Client.Patch(ctx, ec, client.MergeFrom(before)); err != nil {
			t.Fatal(err)
		}
	}
	for run := 0; run < runs; run++ {
		// One Add (the first of 3 -> 5), the hub killed at each of its
		// steps in turn: each restarted hub resumes and is killed again at
		// the next step, then finishes.
		k, s := killAtEverySteps(ctx, t, hold, topo, etcdfedv1.OperationAdd, addSteps, nil, func() {
			if err := SetReplicas(ctx, topo.Hub, etcd, 5); err != nil {
				t.Fatal(err)
			}
		})
		kills, skipped = append(kills, k...), append(skipped, s...)
		if _, err := WaitForEtcdClusterReady(ctx, WaitForEtcdClusterInput{Hub: topo.Hub, Namespace: etcd.Namespace, Name: etcd.Name, Replicas: 5}); err != nil {
			t.Fatal(err)
		}
		if err := SetReplicas(ctx, topo.Hub, etcd, 3); err != nil {
			t.Fatal(err)
		}
		if _, err := WaitForEtcdClusterReady(ctx, WaitForEtcdClusterInput{Hub: topo.Hub, Namespace: etcd.Namespace, Name: etcd.Name, Replicas: 3}); err != nil {
			t.Fatal(err)
		}
		// One Move (a cordoned zone's live member moved out, make before
		// break), the same way.
		ec, err := etcd.Get(ctx, topo.Hub)
		if err != nil {
			t.Fatal(err)
		}
		k, s = killAtEverySteps(ctx, t, hold, topo, etcdfedv1.OperationMove, moveSteps, []string{"DeleteObject"}, func() { cordon([]string{ec.Status.Members[0].Zone}) })
		kills, skipped = append(kills, k...), append(skipped, s...)
		if _, err := WaitForEtcdClusterReady(ctx, WaitForEtcdClusterInput{Hub: topo.Hub, Namespace: etcd.Namespace, Name: etcd.Name, Replicas: 3}); err != nil {
			t.Fatal(err)
		}
		cordon(nil)
		if _, err := WaitForEtcdClusterReady(ctx, WaitForEtcdClusterInput{Hub: topo.Hub, Namespace: etcd.Namespace, Name: etcd.Name, Replicas: 3, Tolerant: true}); err != nil {
			t.Fatal(err)
		}
		t.Logf("run %d of %d done", run+1, runs)
	}
	reportKills(t, kills)
	if len(skipped) > 0 {
		t.Errorf("steps the hub never recorded before the operation ended, so the drill could not kill it there (skipped): %v", skipped)
	}
	if len(kills) == 0 {
		t.Errorf("no step was caught in %d runs", runs)
	}
	checkWorkload(ctx, t, w)
	DeleteEtcdClusterSpec(ctx, t, topo, etcd)
}

// hubKill is one kill of the drill: the write held when the hub was
// killed, and the restarted hub's first write.
type hubKill struct {
	Op           etcdfedv1.OperationType
	Step, Member string // the step whose record was held at the kill
	ResumedAt    string // the step of the new hub's first record ("" when it finished the operation)
	Resumed      time.Duration
}

// killAtEverySteps arms the hold, starts the operation (start), and kills
// the hub at the first record of each of steps: the first status write
// that records the step is held, the hub killed, the write refused. Only
// writes that change the operation's record count (the others carry the
// stored record: a write of conditions only). The restarted hub's first
// record is held too: where it resumed, and when. The hub may record the
// steps in another order than steps (a restarted hub that does not see
// the old member's cluster yet creates the new member before it deletes
// the old one's object): the drill kills it at each step when it comes,
// and logs the order. A step the hub never records before the operation
// ends is returned as skipped, unless it is in mayFold: a last step the
// hub may take and end the operation with in one pass, so that no record
// of it is ever written (a Move's DeleteObject after a kill at
// RemoveMember: the restarted hub finds the old ID gone, deletes the old
// objects and ends the Move). A folded step is logged.
func killAtEverySteps(ctx context.Context, t *testing.T, hold *stepHold, topo *Topology, op etcdfedv1.OperationType, steps, mayFold []string, start func()) (kills []hubKill, skipped []string) {
	t.Helper()
	hold.setArmed(true)
	defer hold.setArmed(false)
	start()
	var killed *hubKill // the last kill, until the new hub's first record
	var killedAt time.Time
	var order []string // the steps in the order the hub first recorded them
	finished := false
	for (len(order) < len(steps) && !finished) || killed != nil {
		w, err := hold.next(ctx, 3*time.Minute)
		if err != nil {
			if killed != nil {
				t.Fatalf("the hub killed at %s %s@%s did not resume: %v", op, killed.Member, killed.Step, err)
			}
			t.Fatalf("%s: waiting to kill the hub at the steps it has not recorded yet (recorded %v of %v): %v", op, order, steps, err)
		}
		if w.Op != op || w.Begin || !w.Moved {
			w.allow()
			continue
		}
		if killed != nil {
			killed.ResumedAt, killed.Resumed = w.Step, w.At.Sub(killedAt)
			t.Logf("killed at %s %s@%s: the new hub's first record %.1fs after the kill: %s", op, killed.Member, killed.Step, killed.Resumed.Seconds(), w)
			kills = append(kills, *killed)
			killed = nil
		}
		switch {
		case w.Step == "":
			w.allow()
			finished = true
		case slices.Contains(steps, w.Step) && !slices.Contains(order, w.Step) && !finished:
			if err := topo.KillHub(ctx); err != nil {
				w.allow()
				t.Fatal(err)
			}
			killedAt = time.Now()
			w.refuse()
			killed = &hubKill{Op: op, Step: w.Step, Member: w.Member}
			order = append(order, w.Step)
			t.Logf("killed the hub at %s while its record of it was held (%s)", w, killedAt.Sub(w.At).Round(time.Millisecond))
		default:
			w.allow()
		}
	}
	for _, s := range steps {
		switch {
		case slices.Contains(order, s):
		case slices.Contains(mayFold, s) && finished:
			t.Logf("%s: the hub took %s and ended the operation in one pass (no record of it to kill at)", op, s)
		default:
			skipped = append(skipped, fmt.Sprintf("%s/%s", op, s))
		}
	}
	if !slices.Equal(order, steps) {
		t.Logf("%s: the hub first recorded the steps in the order %v (expected %v)", op, order, steps)
	}
	return kills, skipped
}

// reportKills logs, per step, the times from the kill to the new hub's
// first write and the steps that write recorded.
func reportKills(t *testing.T, kills []hubKill) {
	t.Helper()
	type row struct {
		times []time.Duration
		at    []string
	}
	rows := map[string]*row{}
	var keys []string
	for _, k := range kills {
		key := string(k.Op) + "/" + k.Step
		if rows[key] == nil {
			rows[key] = &row{}
			keys = append(keys, key)
		}
		rows[key].times = append(rows[key].times, k.Resumed)
		rows[key].at = append(rows[key].at, orText(k.ResumedAt, "(finished)"))
	}
	for _, k := range keys {
		ds := rows[k].times
		slices.Sort(ds)
		t.Logf("killed at %-22s %d runs: the new hub's first record after min %.1fs, median %.1fs, max %.1fs; it recorded %v", k, len(ds), ds[0].Seconds(), ds[len(ds)/2].Seconds(), ds[len(ds)-1].Seconds(), rows[k].at)
	}
}

// burnCPU keeps n goroutines spinning until stop is called: the drill's
// "under CPU load".
func burnCPU(n int) (stop func()) {
	done := make(chan struct{})
	for i := 0; i < n; i++ {
		go func() {
			x := 0
			for {
				select {
				case <-done:
					return
				default:
					for j := 0; j < 1e6; j++ {
						x += j
					}
				}
			}
		}()
	}
	return func() { close(done) }
}
