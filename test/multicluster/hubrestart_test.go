package multicluster

import (
	"context"
	"fmt"
	"os"
	"slices"
	"sort"
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
// leads, so it is not in the list.) It reports, per step, the time from the kill until the operation
// moved on. It is a drill (`make drill`, ETCDFED_DRILL=1; runs from
// ETCDFED_DRILL_RUNS, default 1): `make test` already kills the hub once
// mid scale-up (TestEtcdClusterLifecycle). The drill watches the
// EtcdCluster and kills the hub as soon as the step is recorded (the hub
// does not wait for it), and a step it could not kill the hub at is a
// failure.
func TestHubRestartAtEveryStep(t *testing.T) {
	if os.Getenv("ETCDFED_DRILL") == "" {
		t.Skip("drill: kills the hub at every step of an add and a replace (several minutes per run); run `make drill`")
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

	// Every version of the EtcdCluster, in order, from before the first
	// operation is asked for: a step that passes in a fraction of a second
	// is still seen, and the hub is killed within milliseconds of writing
	// it (the hub itself never waits for the drill).
	cw, err := newClusterWatch(ctx, topo.Hub, etcd.Namespace, etcd.Name)
	if err != nil {
		t.Fatal(err)
	}
	defer cw.stop()
	addSteps := []string{"CreateObjects", "AddLearner", "StartMember", "Promote"}
	moveSteps := []string{"CreateObjects", "AddLearner", "StartMember", "Promote", "RemoveMember", "DeleteObject"}
	order := map[string][]string{string(etcdfedv1.OperationAdd): addSteps, string(etcdfedv1.OperationMove): moveSteps}
	resume := map[string][]time.Duration{}
	var missed []string
	// The first version an operation appears in is its Begin record,
	// whose step is a placeholder (CreateObjects, recorded before the
	// objects are written): the operation is at a step from the next
	// version on. The watch sees every version, so the first sighting is the Begin.
	begun := map[string]bool{}
	// killAt waits for the operation to reach step and kills the hub
	// there; it returns how long the restarted hub took to move on.
	killAt := func(op, step string) {
		t.Helper()
		var at string
		err := cw.until(ctx, 2*time.Minute, op+" at "+step, func(ec *etcdfedv1.EtcdCluster) (string, error) {
			o := ec.Status.Operation
			if o == nil || string(o.Type) != op {
				return "no " + op + " in flight", nil
			}
			if key := fmt.Sprint(o.Type, o.Member, o.Incarnation, o.StartedAt); !begun[key] {
				begun[key] = true
				return op + " begun", nil
			}
			if o.Step != step {
				if i, j := slices.Index(order[op], o.Step), slices.Index(order[op], step); i > j && j >= 0 {
					return "", fmt.Errorf("already at %s, past %s", o.Step, step)
				}
				return "at " + o.Step, nil
			}
			at = o.Member + "@" + o.Step
			return "", nil
		})
		if err != nil {
			missed = append(missed, op+"/"+step)
			t.Logf("%s/%s: not caught (%v)", op, step, err)
			return
		}
		if err := topo.KillHub(ctx); err != nil {
			t.Fatal(err)
		}
		killed := time.Now()
		err = cw.until(ctx, 3*time.Minute, "the restarted hub moves past "+step, func(ec *etcdfedv1.EtcdCluster) (string, error) {
			if o := ec.Status.Operation; o != nil && o.Member+"@"+o.Step == at {
				return "still " + at, nil
			}
			return "", nil
		})
		if err != nil {
			t.Fatalf("hub killed at %s %s did not resume: %v", op, at, err)
		}
		d := time.Since(killed)
		resume[op+"/"+step] = append(resume[op+"/"+step], d)
		t.Logf("killed at %s %s: resumed after %.1fs", op, at, d.Seconds())
	}
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
		if err := SetReplicas(ctx, topo.Hub, etcd, 5); err != nil {
			t.Fatal(err)
		}
		for _, step := range addSteps {
			killAt(string(etcdfedv1.OperationAdd), step)
		}
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
		cordon([]string{ec.Status.Members[0].Zone})
		for _, step := range moveSteps {
			killAt(string(etcdfedv1.OperationMove), step)
		}
		if _, err := WaitForEtcdClusterReady(ctx, WaitForEtcdClusterInput{Hub: topo.Hub, Namespace: etcd.Namespace, Name: etcd.Name, Replicas: 3}); err != nil {
			t.Fatal(err)
		}
		cordon(nil)
		if _, err := WaitForEtcdClusterReady(ctx, WaitForEtcdClusterInput{Hub: topo.Hub, Namespace: etcd.Namespace, Name: etcd.Name, Replicas: 3, Tolerant: true}); err != nil {
			t.Fatal(err)
		}
		t.Logf("run %d of %d done", run+1, runs)
	}
	keys := make([]string, 0, len(resume))
	for k := range resume {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		ds := resume[k]
		slices.Sort(ds)
		t.Logf("resume after a kill at %-22s %d runs: min %.1fs, median %.1fs, max %.1fs", k, len(ds), ds[0].Seconds(), ds[len(ds)/2].Seconds(), ds[len(ds)-1].Seconds())
	}
	if len(missed) > 0 {
		t.Errorf("steps passed before the test could kill the hub there, although it watched for each (the watch ended and was listed again %d times): %v", cw.relistedTimes(), missed)
	}
	if len(resume) == 0 {
		t.Errorf("no step was caught in %d runs", runs)
	}
	checkWorkload(ctx, t, w)
	DeleteEtcdClusterSpec(ctx, t, topo, etcd)
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
