package workload

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/etcdfed/etcdfed/dev/testenv"
)

// stop stops p with SIGTERM and waits for it to exit.
func (p *etcdProc) stop() {
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	_, _ = p.cmd.Process.Wait()
}

// versions is what a member's /version says: its release and the
// cluster version.
type versions struct {
	Server  string `json:"etcdserver"`
	Cluster string `json:"etcdcluster"`
}

func versionOf(ctx context.Context, p *etcdProc) (versions, error) {
	var v versions
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, p.client+"/version", nil)
	if err != nil {
		return v, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return v, err
	}
	defer resp.Body.Close()
	return v, json.NewDecoder(resp.Body).Decode(&v)
}

// waitFor polls f every 200 ms until it returns "" or timeout passes,
// then fails with f's last answer.
func waitFor(t *testing.T, timeout time.Duration, what string, f func() string) {
	t.Helper()
	last := ""
	for deadline := time.Now().Add(timeout); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
		if last = f(); last == "" {
			return
		}
	}
	t.Fatalf("%s: not within %s: %s", what, timeout, last)
}

// rollingUpgrade is one rolling upgrade of real members under the
// recorded workload.
type rollingUpgrade struct {
	// members, and the release (a file of bin/, "" for bin/etcd) they
	// start on.
	members int
	start   string
	// steps: each release (a file of bin/, "" for bin/etcd) the members
	// are rolled to in turn, with the version it reports and the cluster
	// version once every member runs it.
	steps []rollStep
	// down is how long each member stays stopped, as a pod's restart
	// keeps it away (the others write meanwhile, and it catches up).
	down time.Duration
}

type rollStep struct{ binary, version, cluster string }

// run starts the members and rolls them through each step the way the
// hub does (docs/operations.md, "What the hub does"): followers first,
// each stopped with SIGTERM and started on the new release on its own
// data, and the leader last after leadership moved to a member already
// rolled, under the recorded workload. Each restarted member must answer
// on the new release before the next one goes; the cluster version must
// stay the old one while a member runs the old release and reach the new
// one after the last; and the history must be linearizable with no
// acknowledged write lost and every watch complete.
func (u rollingUpgrade) run(t *testing.T) {
	bin, err := testenv.BinDir()
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range append([]rollStep{{binary: u.start}}, u.steps...) {
		if b.binary == "" {
			continue
		}
		if _, err := os.Stat(filepath.Join(bin, b.binary)); err != nil {
			t.Skipf("no bin/%s (hack/tools.sh builds it)", b.binary)
		}
	}
	ps, cfg, c, _, _ := startLedClusterOn(t, u.members, u.start)
	ctx := context.Background()
	w, err := Run(ctx, Input{Client: cfg, Prefix: "test/", WatchEachEndpoint: true})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	progress := func() {
		t.Helper()
		pctx, cancel := context.WithTimeout(ctx, 60*time.Second)
		defer cancel()
		if err := w.WaitForProgress(pctx, 300); err != nil {
			t.Fatal(err)
		}
	}
	// leader is the index of the member that leads, -1 when none answers
	// that it does.
	leader := func() int {
		for i, p := range ps {
			sctx, cancel := context.WithTimeout(ctx, 2*time.Second)
			st, err := c.Status(sctx, p.client)
			cancel()
			if err == nil && st.Leader != 0 && st.Leader == st.Header.MemberId {
				return i
			}
		}
		return -1
	}
	progress()
	for _, step := range u.steps {
		release := step.binary
		if release == "" {
			release = "etcd"
		}
		var old string
		if v, err := versionOf(ctx, ps[0]); err == nil {
			old = v.Cluster
		}
		l := leader()
		if l < 0 {
			t.Fatal("no leader")
		}
		var order []int
		for i := range ps {
			if i != l {
				order = append(order, i)
			}
		}
		order = append(order, l)
		for n, i := range order {
			if leader() == i {
				// The hub moves leadership to a rolled member first.
				target := ps[order[0]]
				sctx, cancel := context.WithTimeout(ctx, 2*time.Second)
				st, err := c.Status(sctx, target.client)
				cancel()
				if err != nil {
					t.Fatal(err)
				}
				lc, err := clientv3.New(clientv3.Config{Endpoints: []string{ps[i].client}})
				if err != nil {
					t.Fatal(err)
				}
				mctx, cancel := context.WithTimeout(ctx, 10*time.Second)
				_, err = lc.MoveLeader(mctx, st.Header.MemberId)
				cancel()
				_ = lc.Close()
				if err != nil {
					t.Fatalf("moving leadership from %s to %s: %v", ps[i].name, target.name, err)
				}
				waitFor(t, 30*time.Second, "leadership away from "+ps[i].name, func() string {
					if cur := leader(); cur == i || cur < 0 {
						return fmt.Sprintf("leader %d", cur)
					}
					return ""
				})
				t.Logf("moved leadership from %s to %s", ps[i].name, target.name)
			}
			t.Logf("restarting %s on %s", ps[i].name, release)
			ps[i].stop()
			time.Sleep(u.down)
			ps[i].bin = step.binary
			ps[i].start(t, "")
			waitFor(t, 60*time.Second, ps[i].name+" answers on "+step.version, func() string {
				vctx, cancel := context.WithTimeout(ctx, 2*time.Second)
				defer cancel()
				v, err := versionOf(vctx, ps[i])
				if err != nil || v.Server != step.version {
					return fmt.Sprintf("%+v, %v", v, err)
				}
				sctx, cancel2 := context.WithTimeout(ctx, 2*time.Second)
				defer cancel2()
				if _, err := c.Status(sctx, ps[i].client); err != nil {
					return err.Error()
				}
				return ""
			})
			progress()
			if n < len(order)-1 {
				// A member still on the old release holds the cluster
				// version.
				for _, p := range ps {
					if v, err := versionOf(ctx, p); err != nil || v.Cluster != old {
						t.Errorf("after %d of %d members: %s says the cluster version is %+v (%v), want %s", n+1, len(ps), p.name, v, err, old)
					}
				}
			}
		}
		waitFor(t, 30*time.Second, "every member on "+step.version+" with cluster version "+step.cluster, func() string {
			for _, p := range ps {
				if v, err := versionOf(ctx, p); err != nil || v.Server != step.version || v.Cluster != step.cluster {
					return fmt.Sprintf("%s: %+v, %v", p.name, v, err)
				}
			}
			return ""
		})
		t.Logf("every member on %s, cluster version %s; %d puts acknowledged so far, longest write gap %s", step.version, step.cluster, w.Acked(), w.MaxWriteGap())
		progress()
	}
	dir := os.Getenv("ETCDFED_KEEP_HISTORY")
	if dir == "" {
		dir = t.TempDir()
	}
	r := w.Check(ctx, dir)
	t.Log(r)
	if err := r.Err(); err != nil {
		t.Fatalf("workload check: %v", err)
	}
}

// TestRollingUpgrade36To37 rolls three real members from etcd 3.6.16
// (bin/etcd) to 3.7.3 as the hub does (rollingUpgrade.run), each
// restarted at once.
func TestRollingUpgrade36To37(t *testing.T) {
	rollingUpgrade{members: 3, steps: []rollStep{{"etcd-3.7.3", "3.7.3", "3.7.0"}}}.run(t)
}

// TestRollingUpgrade35To36To37 is the path of test/multicluster's
// TestScenarioUpgrade without Kubernetes: five real members formed on
// etcd 3.5.35, rolled to 3.6.16 and then to 3.7.3, each member away for
// 3 s as a pod restart keeps it (the others go on writing meanwhile, and
// it catches up; it was 10 s, which cost make test 70 s of waiting).
func TestRollingUpgrade35To36To37(t *testing.T) {
	rollingUpgrade{members: 5, start: "etcd-3.5.35", down: 3 * time.Second, steps: []rollStep{
		{"", "3.6.16", "3.6.0"},
		{"etcd-3.7.3", "3.7.3", "3.7.0"},
	}}.run(t)
}

// TestSecondRunOnOnePrefix: a workload started on keys an earlier run with
// the same prefix left (test/multicluster's RollSpecSpec runs one per roll,
// and TestScenarioUpgrade rolls one ring twice) starts its model from
// their values; it failed as not linearizable whenever a key's first
// operation was a get.
func TestSecondRunOnOnePrefix(t *testing.T) {
	_, cfg, _, _, _ := startLedCluster(t, 1)
	ctx := context.Background()
	for run := range 2 {
		w, err := Run(ctx, Input{Client: cfg, Prefix: "same/", Keys: 2})
		if err != nil {
			t.Fatal(err)
		}
		pctx, cancel := context.WithTimeout(ctx, 60*time.Second)
		err = w.WaitForProgress(pctx, 200)
		cancel()
		if err != nil {
			t.Fatal(err)
		}
		r := w.Check(ctx, t.TempDir())
		t.Logf("run %d: %s", run+1, r)
		if err := r.Err(); err != nil {
			t.Fatalf("run %d: %v", run+1, err)
		}
	}
}
