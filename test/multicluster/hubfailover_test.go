package multicluster

import (
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdfedv1 "github.com/etcdfed/etcdfed/api/v1alpha1"
	"github.com/etcdfed/etcdfed/dev/testenv"
)

// TestScenarioHubFailover: two hubs (the Deployment's two replicas, leader
// election on), a 3-member ring under the recorded workload, and a Move
// (a cordoned zone's member moved out, make before break) in flight when
// the leading hub goes:
//
//   - killed (SIGKILL, no restart) at the Move's AddLearner record, its
//     record refused: the Lease is not released, so the standby takes it
//     when it expires, and its first pass resumes the Move;
//   - stopped on purpose at the next Move (a rollout to a new image, the hub
//     built again with another version stamped: the
//     old pod gets SIGTERM, a new one starts and becomes the standby): the
//     leader hands the Lease over as it stops, and the other hub resumes
//     at once.
//
// Each Move must complete (the member out of the cordoned zone), the
// ring's failure tolerance (status.failuresTolerated, the voters etcd's
// member list can lose, sampled every 250 ms) must never drop below one, and the workload is linearizable with nothing
// lost and every watch complete. The times (kill to the standby leading,
// the Lease's expiry to its first record) are logged for
// docs/measurements/hub-failover.md.
func TestScenarioHubFailover(t *testing.T) {
	skipUnlessScenarios(t, "the leading hub killed, and rolled, during a Move")
	topo := hubTopology(t)
	env := hubFx.env
	if env == nil || topo.KillHub == nil {
		t.Skip("needs the local environment's hub process")
	}
	ctx := context.Background()
	hubURL := topo.HubMetricsURL
	standbyURL := addStandbyHub(t, env, "hub-failover", 2)
	for _, m := range topo.Members {
		if err := WaitForHubEngaged(ctx, standbyURL, m.Name, 2*time.Minute); err != nil {
			t.Fatalf("the standby hub: %v", err)
		}
	}
	// Whatever happens below, the environment's hub runs again at the end
	// and leads once the standby is stopped (t.Cleanup runs last-in first).
	t.Cleanup(func() { _ = env.StartComponent("hub") })
	// The new image of the rollout below: the hub built again with another
	// version stamped, built while the first part runs.
	newImage := make(chan error, 1)
	newHub := filepath.Join(t.TempDir(), "hub")
	go func() { newImage <- buildHubVersion(newHub, "hub-failover-rollout") }()

	etcd := EtcdClusterSpec(ctx, EtcdClusterSpecInput{T: t, Topology: topo, Namespace: "failover", Name: "failover", Domain: "failover.etcd.test", Replicas: 3, WantZones: "1/1/1"})
	w := StartWorkload(ctx, t, StartWorkloadInput{Client: etcd.Client, Prefix: "failover/", WatchEachEndpoint: true})
	tol := watchTolerance(ctx, t, topo, etcd)

	hold, err := startStepHold(ctx, topo.Hub, etcd.Namespace, etcd.Name)
	if err != nil {
		t.Fatal(err)
	}
	defer hold.stop()
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
	zoneOf := func(i int) string {
		ec, err := etcd.Get(ctx, topo.Hub)
		if err != nil {
			t.Fatal(err)
		}
		return ec.Status.Members[i].Zone
	}
	// settle waits for the Move of member i out of zone to end, checks it
	// left, and lifts the cordon. With three zones, a cordoned one leaves
	// two, so the ring is not zone tolerant until the cordon is lifted and
	// a member goes back.
	settle := func(i int, zone string) {
		t.Helper()
		if err := poll(ctx, 3*time.Minute, "the Move out of "+zone+" ends", func(context.Context) (string, error) {
			ec, err := etcd.Get(ctx, topo.Hub)
			if err != nil {
				return "", err
			}
			if ec.Status.Operation != nil {
				return fmt.Sprintf("operation %s %s", ec.Status.Operation.Type, ec.Status.Operation.Member), nil
			}
			if z := ec.Status.Members[i].Zone; z == zone {
				return ec.Status.Members[i].Name + " still in " + zone, nil
			}
			return "", nil
		}); err != nil {
			t.Fatal(err)
		}
		if _, err := WaitForEtcdClusterReady(ctx, WaitForEtcdClusterInput{Hub: topo.Hub, Namespace: etcd.Namespace, Name: etcd.Name, Replicas: 3}); err != nil {
			t.Fatal(err)
		}
		cordon(nil)
		if _, err := WaitForEtcdClusterReady(ctx, WaitForEtcdClusterInput{Hub: topo.Hub, Namespace: etcd.Namespace, Name: etcd.Name, Replicas: 3, Tolerant: true}); err != nil {
			t.Fatal(err)
		}
	}

	// Which replica leads is the Lease's business (the two may start
	// together); the other is the standby.
	urls := map[string]string{"hub": hubURL, "hub-failover": standbyURL}
	leader := leadingHub(ctx, t, urls)
	standby := "hub"
	if leader == "hub" {
		standby = "hub-failover"
	}
	t.Logf("%s leads, %s is the standby", leader, standby)

	// 1. The leader killed at the Move's AddLearner record.
	hold.setArmed(true)
	zone := zoneOf(0)
	cordon([]string{zone})
	var lease coordinationv1.Lease
	for {
		h, err := hold.next(ctx, 3*time.Minute)
		if err != nil {
			t.Fatalf("waiting for the Move's AddLearner record: %v", err)
		}
		if h.Op != etcdfedv1.OperationMove || h.Begin || !h.Moved || h.Step != "AddLearner" {
			h.allow()
			continue
		}
		if err := topo.Hub.Client.Get(ctx, client.ObjectKey{Namespace: topo.HubNamespace, Name: "etcdfed-hub"}, &lease); err != nil {
			h.allow()
			t.Fatalf("read the hub's Lease: %v", err)
		}
		if _, err := env.KillComponent(leader, false); err != nil {
			h.allow()
			t.Fatal(err)
		}
		if err := env.StopComponent(leader, 0); err != nil { // no restart: the pod is gone
			t.Fatal(err)
		}
		h.refuse()
		t.Logf("killed the leading hub at %s", h)
		break
	}
	killedAt := time.Now()
	expires := lease.Spec.RenewTime.Add(time.Duration(*lease.Spec.LeaseDurationSeconds) * time.Second)
	leading := waitLeading(ctx, t, urls[standby], time.Minute)
	first, err := hold.next(ctx, 2*time.Minute)
	if err != nil {
		t.Fatalf("the standby made no record of the Move after the kill: %v", err)
	}
	firstAt := first.At
	first.allow()
	hold.setArmed(false)
	drainHeld(hold)
	t.Logf("hub killed: the standby led %.1fs after the kill (the Lease expired %.1fs after the kill); its first record of the Move %.1fs after the kill, %.1fs after the Lease expired: %s",
		leading.Sub(killedAt).Seconds(), expires.Sub(killedAt).Seconds(), firstAt.Sub(killedAt).Seconds(), firstAt.Sub(expires).Seconds(), first)
	if first.Op != etcdfedv1.OperationMove {
		t.Errorf("the standby's first record is %s, not of the Move in flight", first)
	}
	settle(0, zone)

	// 2. A rollout to a new image: the killed replica comes back from the
	// new build (the new pod, the standby now), then the leader is stopped
	// on purpose during a Move and its replacement starts from the new
	// build too.
	if err := <-newImage; err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{leader, standby} {
		prev, err := env.SetComponentPath(name, newHub)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _, _ = env.SetComponentPath(name, prev) })
	}
	leader, standby = standby, leader
	if err := env.StartComponent(standby); err != nil {
		t.Fatal(err)
	}
	for _, m := range topo.Members {
		if err := WaitForHubEngaged(ctx, urls[standby], m.Name, 2*time.Minute); err != nil {
			t.Fatalf("the restarted hub: %v", err)
		}
	}
	zone = zoneOf(1)
	cordon([]string{zone})
	if err := poll(ctx, 3*time.Minute, "the second Move in flight", func(context.Context) (string, error) {
		ec, err := etcd.Get(ctx, topo.Hub)
		if err != nil {
			return "", err
		}
		if op := ec.Status.Operation; op == nil || op.Type != etcdfedv1.OperationMove {
			return fmt.Sprintf("operation %v", ec.Status.Operation), nil
		}
		return "", nil
	}); err != nil {
		t.Fatal(err)
	}
	stopAt := time.Now()
	if err := env.StopComponent(leader, 30*time.Second); err != nil {
		t.Fatal(err)
	}
	stopped := time.Now()
	leading = waitLeading(ctx, t, urls[standby], time.Minute)
	t.Logf("hub rolled: the leader stopped %.1fs after SIGTERM; the other hub led %.1fs after SIGTERM", stopped.Sub(stopAt).Seconds(), leading.Sub(stopAt).Seconds())
	if err := env.StartComponent(leader); err != nil { // the rollout's second new pod
		t.Fatal(err)
	}
	settle(1, zone)
	for _, name := range []string{leader, standby} {
		if exe, err := env.ComponentExecutable(name); err != nil || exe != newHub {
			t.Errorf("after the rollout, hub replica %s runs %q (%v), not the new build %s", name, exe, err, newHub)
		}
	}
	t.Logf("both hub replicas run the new build after the rollout")

	tol.stop()
	if bad := tol.drops(); len(bad) > 0 {
		t.Errorf("failure tolerance dropped %d times during the failovers, first: %s", len(bad), bad[0])
	}
	t.Logf("failure tolerance sampled %d times, never below one voter's loss (FailureTolerant False, a zone's loss, in %d of them: the cordon leaves two zones)", tol.samples(), tol.zoneless)
	checkWorkload(ctx, t, w)
	DeleteEtcdClusterSpec(ctx, t, topo, etcd)
}

const leaderSample = `leader_election_master_status{name="etcdfed-hub"}`

// leadingHub waits until exactly one of the hubs (component name to
// metrics URL) says it leads, and returns its name.
func leadingHub(ctx context.Context, t *testing.T, urls map[string]string) string {
	t.Helper()
	var leader string
	if err := poll(ctx, time.Minute, "one hub leads", func(context.Context) (string, error) {
		var leading []string
		for name, url := range urls {
			if v, err := metricValue(url, leaderSample); err == nil && v == "1" {
				leading = append(leading, name)
			}
		}
		if len(leading) != 1 {
			return fmt.Sprintf("leading: %v", leading), nil
		}
		leader = leading[0]
		return "", nil
	}); err != nil {
		t.Fatal(err)
	}
	return leader
}

// waitLeading polls a hub's metrics every 100 ms until it says it leads,
// and returns when it first did.
func waitLeading(ctx context.Context, t *testing.T, url string, timeout time.Duration) time.Time {
	t.Helper()
	var at time.Time
	if err := poll(ctx, timeout, "the hub at "+url+" leads", func(context.Context) (string, error) {
		v, err := metricValue(url, leaderSample)
		if err != nil {
			return err.Error(), nil // not serving yet, or gone
		}
		if v != "1" {
			return "leader_election_master_status " + v, nil
		}
		at = time.Now()
		return "", nil
	}); err != nil {
		t.Fatal(err)
	}
	return at
}

// drainHeld lets through the writes that were held when the hold was
// disarmed (the hook asks next only while armed; one may be waiting).
func drainHeld(h *stepHold) {
	for {
		w, err := h.next(context.Background(), 200*time.Millisecond)
		if err != nil {
			return
		}
		w.allow()
	}
}

// toleranceWatch samples a ring's failure tolerance as the hub reports it.
type toleranceWatch struct {
	mu  sync.Mutex
	bad []string
	n   int
	// zoneless counts samples whose FailureTolerant (a zone's loss) was
	// False: expected while a cordon leaves fewer zones than members need.
	zoneless int
	cancel   context.CancelFunc
	done     chan struct{}
}

// watchTolerance samples the EtcdCluster every 250 ms until stop: a sample
// is a drop when status.failuresTolerated (the voters etcd's own member
// list can lose now) is below one.
func watchTolerance(ctx context.Context, t *testing.T, topo *Topology, etcd *ManagedEtcd) *toleranceWatch {
	ctx, cancel := context.WithCancel(ctx)
	tw := &toleranceWatch{cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(tw.done)
		tick := time.NewTicker(250 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			ec, err := etcd.Get(ctx, topo.Hub)
			if err != nil {
				continue
			}
			var why []string
			if f := ec.Status.FailuresTolerated; f != nil && *f < 1 {
				why = append(why, fmt.Sprintf("failuresTolerated %d", *f))
			}
			zoneless := false
			if c := apimeta.FindStatusCondition(ec.Status.Conditions, etcdfedv1.ConditionFailureTolerant); c != nil && c.Status == "False" {
				zoneless = true
			}
			tw.mu.Lock()
			tw.n++
			if zoneless {
				tw.zoneless++
			}
			if len(why) > 0 {
				tw.bad = append(tw.bad, time.Now().Format("15:04:05.000")+" "+strings.Join(why, "; "))
			}
			tw.mu.Unlock()
		}
	}()
	return tw
}

func (tw *toleranceWatch) stop() { tw.cancel(); <-tw.done }

func (tw *toleranceWatch) drops() []string {
	tw.mu.Lock()
	defer tw.mu.Unlock()
	return append([]string(nil), tw.bad...)
}

func (tw *toleranceWatch) samples() int {
	tw.mu.Lock()
	defer tw.mu.Unlock()
	return tw.n
}

// buildHubVersion builds the hub into path with version stamped: another
// image of the same code.
func buildHubVersion(path, version string) error {
	root, err := testenv.RepoRoot()
	if err != nil {
		return err
	}
	cmd := exec.Command("go", "build", "-o", path, "-ldflags", "-X github.com/etcdfed/etcdfed/internal/version.Version="+version, "./cmd/hub")
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("build the hub's new image: %w\n%s", err, out)
	}
	return nil
}
