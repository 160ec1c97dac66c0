package workload

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/etcdfed/etcdfed/internal/testenv"
)

// restartOn stops p with SIGTERM and starts it again on binary (a file of
// bin/) on its own data.
func (p *etcdProc) restartOn(t *testing.T, binary string) {
	t.Helper()
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	_, _ = p.cmd.Process.Wait()
	p.bin = binary
	p.start(t, "")
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

// TestRollingUpgrade36To37 rolls three real members from etcd 3.6.16 to
// 3.7.3 the way the hub does (docs/operations.md, "What the hub does"):
// followers first, each stopped with SIGTERM and started on the new
// release on its own data, and the leader last after leadership moved
// away, under the recorded workload. Each restarted member must answer on
// 3.7.3 before the next one goes; the cluster version must stay 3.6.0
// while one member runs 3.6 and reach 3.7.0 after the last; and the
// history must be linearizable with no acknowledged write lost and every
// watch complete. It is the smallest form of the 3.6 to 3.7 step of
// test/multicluster's TestScenarioUpgrade, without Kubernetes.
func TestRollingUpgrade36To37(t *testing.T) {
	const from, to, release = "3.6.", "3.7.3", "etcd-3.7.3"
	bin, err := testenv.BinDir()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(bin, release)); err != nil {
		t.Skipf("no bin/%s (hack/tools.sh etcd37 builds it)", release)
	}
	ps, cfg, c, _, _ := startLedCluster(t, 3)
	ctx := context.Background()
	for _, p := range ps {
		v, err := versionOf(ctx, p)
		if err != nil || !strings.HasPrefix(v.Server, from) {
			t.Fatalf("%s runs %+v (%v), want etcd %sx: bin/etcd is the 3.6 release the roll starts from", p.name, v, err, from)
		}
	}
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
			// The hub moves leadership to an upgraded member first.
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
		ps[i].restartOn(t, release)
		waitFor(t, 60*time.Second, ps[i].name+" answers on "+to, func() string {
			vctx, cancel := context.WithTimeout(ctx, 2*time.Second)
			defer cancel()
			v, err := versionOf(vctx, ps[i])
			if err != nil || v.Server != to {
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
			// A member still on 3.6 holds the cluster version at 3.6.
			for _, p := range ps {
				if v, err := versionOf(ctx, p); err != nil || !strings.HasPrefix(v.Cluster, from) {
					t.Errorf("after %d of %d members: %s says the cluster version is %+v (%v), want %sx", n+1, len(ps), p.name, v, err, from)
				}
			}
		}
	}
	waitFor(t, 30*time.Second, "every member on "+to+" with cluster version 3.7.0", func() string {
		for _, p := range ps {
			if v, err := versionOf(ctx, p); err != nil || v.Server != to || v.Cluster != "3.7.0" {
				return fmt.Sprintf("%s: %+v, %v", p.name, v, err)
			}
		}
		return ""
	})
	progress()
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
