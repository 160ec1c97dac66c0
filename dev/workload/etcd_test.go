package workload

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/etcdfed/etcdfed/dev/testenv"
)

// etcdProc is one real etcd member on loopback.
type etcdProc struct {
	name, peer, client, dir string
	// extra flags (e.g. --force-new-cluster).
	extra []string
	// bin is the binary of bin/ it runs; default etcd.
	bin string
	cmd *exec.Cmd
}

// startCluster starts n etcd members forming one cluster.
func startCluster(t *testing.T, n int) []*etcdProc {
	t.Helper()
	return startClusterOn(t, n, "")
}

// startClusterOn starts n members of binary (a file of bin/; "" for
// bin/etcd) forming one cluster.
func startClusterOn(t *testing.T, n int, binary string) []*etcdProc {
	t.Helper()
	testenv.SkipIfShort(t, "etcd processes")
	var ps []*etcdProc
	var initial []string
	for i := range n {
		p := &etcdProc{name: fmt.Sprintf("m%d", i), dir: t.TempDir(), bin: binary,
			peer: fmt.Sprintf("http://127.0.0.1:%d", testenv.FreePort(t)), client: fmt.Sprintf("http://127.0.0.1:%d", testenv.FreePort(t))}
		ps = append(ps, p)
		initial = append(initial, p.name+"="+p.peer)
	}
	for _, p := range ps {
		p.start(t, strings.Join(initial, ","))
	}
	return ps
}

func (p *etcdProc) start(t *testing.T, initial string) {
	t.Helper()
	bin, err := testenv.BinDir()
	if err != nil {
		t.Fatal(err)
	}
	binary := p.bin
	if binary == "" {
		binary = "etcd"
	}
	args := []string{"--name", p.name, "--data-dir", filepath.Join(p.dir, "data"),
		"--listen-peer-urls", p.peer, "--initial-advertise-peer-urls", p.peer,
		"--listen-client-urls", p.client, "--advertise-client-urls", p.client,
		"--initial-cluster", initial, "--initial-cluster-state", "new", "--initial-cluster-token", "workload-test",
		"--unsafe-no-fsync", "--log-level", "error"}
	p.cmd = exec.Command(filepath.Join(bin, binary), append(args, p.extra...)...)
	log, err := os.OpenFile(filepath.Join(p.dir, "etcd.log"), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	p.cmd.Stdout, p.cmd.Stderr = log, log
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	cmd := p.cmd
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_, _ = cmd.Process.Wait()
		if t.Failed() {
			b, _ := os.ReadFile(log.Name())
			t.Logf("%s log:\n%s", p.name, b)
		}
	})
}

func (p *etcdProc) kill() {
	_ = p.cmd.Process.Kill()
	_, _ = p.cmd.Process.Wait()
}

// startLedCluster starts n members and waits up to 30 s for one to
// lead: the members, a configuration and a client (closed at cleanup)
// for them all, and the leader's status and endpoint.
func startLedCluster(t *testing.T, n int) ([]*etcdProc, ClientConfig, *clientv3.Client, *clientv3.StatusResponse, string) {
	t.Helper()
	return startLedClusterOn(t, n, "")
}

// startLedClusterOn is startLedCluster on binary (a file of bin/; "" for
// bin/etcd).
func startLedClusterOn(t *testing.T, n int, binary string) ([]*etcdProc, ClientConfig, *clientv3.Client, *clientv3.StatusResponse, string) {
	t.Helper()
	ps := startClusterOn(t, n, binary)
	cfg := ClientConfig{Endpoints: endpoints(ps)}
	c, err := NewClient(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	st, ep := waitForLeader(t, c, cfg.Endpoints)
	return ps, cfg, c, st, ep
}

// waitForLeader waits up to 30 s for one of the endpoints to lead and
// returns its status and endpoint.
func waitForLeader(t *testing.T, c *clientv3.Client, endpoints []string) (*clientv3.StatusResponse, string) {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		for _, ep := range endpoints {
			sctx, cancel := context.WithTimeout(context.Background(), time.Second)
			resp, err := c.Status(sctx, ep)
			cancel()
			if err == nil && resp.Leader != 0 && resp.Leader == resp.Header.MemberId {
				return resp, ep
			}
		}
	}
	t.Fatal("no leader within 30s")
	return nil, ""
}

func endpoints(ps []*etcdProc) []string {
	var out []string
	for _, p := range ps {
		out = append(out, p.client)
	}
	return out
}

// The workload against three real etcd members, one of them killed and
// restarted in the middle with a watcher on its endpoint: all three checks
// pass, every watcher saw every acknowledged put, and the watcher on the
// killed member's endpoint came back to the end of the stream.
func TestWorkloadAgainstRealEtcd(t *testing.T) {
	ps := startCluster(t, 3)
	ctx := context.Background()
	cfg := ClientConfig{Endpoints: endpoints(ps)}
	w, err := Run(ctx, Input{Client: cfg, Prefix: "test/", WatchEachEndpoint: true, Pause: 5 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	progress := func(n int64) {
		t.Helper()
		pctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		if err := w.WaitForProgress(pctx, n); err != nil {
			t.Fatal(err)
		}
	}
	progress(100)
	ps[2].kill()
	progress(100)
	ps[2].start(t, "")
	progress(100)
	r := w.Check(ctx, t.TempDir())
	if err := r.Err(); err != nil {
		t.Fatalf("workload check: %v", err)
	}
	if len(r.Watches) != 4 {
		t.Fatalf("%d watchers, want 4 (all endpoints and one per endpoint)", len(r.Watches))
	}
	for _, v := range r.Watches {
		if v.Seen != v.Expected || v.Expected < 150 {
			t.Errorf("%s: saw %d of %d", v.Watcher, v.Seen, v.Expected)
		}
	}
	t.Log(r)
}

// A watch that needs compacted revisions reports the compaction; the
// check fails unless the run allows compaction, and still counts what
// came after.
func TestWatcherReportsCompaction(t *testing.T) {
	ps := startCluster(t, 1)
	ctx := context.Background()
	c, err := NewClient(ClientConfig{Endpoints: endpoints(ps)})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	r := NewRecorder()
	var puts []int64
	for i := range 10 {
		pctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		err := r.Put(pctx, c, 0, fmt.Sprintf("p/k%d", i), fmt.Sprint(i))
		cancel()
		if err != nil {
			t.Fatal(err)
		}
		puts = append(puts, r.Puts()[i].Revision)
	}
	if _, err := c.Compact(ctx, puts[5]); err != nil {
		t.Fatal(err)
	}
	wctx, cancel := context.WithCancel(ctx)
	wt := startWatcher(wctx, c, "compacted", "p/", puts[0])
	deadline := time.Now().Add(30 * time.Second)
	for wt.last.Load() < puts[9] && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	cancel()
	<-wt.done
	log := wt.Log()
	if len(log.Compactions) != 1 || log.Compactions[0] != (Compaction{From: puts[0], To: puts[5]}) {
		t.Fatalf("compactions %+v, want one from %d to %d", log.Compactions, puts[0], puts[5])
	}
	v := CheckWatch(WatchCheckInput{Puts: r.Puts(), Log: log, RequireComplete: true})
	if err := v.Err(); err == nil || !strings.Contains(err.Error(), "compacted") {
		t.Errorf("compaction not allowed: got %v", err)
	}
	v = CheckWatch(WatchCheckInput{Puts: r.Puts(), Log: log, RequireComplete: true, AllowCompaction: true})
	if err := v.Err(); err != nil || v.Seen != 5 || len(v.CompactedAway) != 5 {
		t.Errorf("compaction allowed: %v, seen %d, compacted away %v", err, v.Seen, v.CompactedAway)
	}
}

// A RingWatch over three real etcd members sees a killed member stop
// answering and answer again once restarted, and a leader moved by
// MoveLeader, each bracketed by the looks before and after.
func TestRingWatchAgainstRealEtcd(t *testing.T) {
	ps, cfg, c, st, leaderEP := startLedCluster(t, 3)
	ctx := context.Background()
	leader := st.Leader
	r := WatchRing(ctx, cfg, 50*time.Millisecond, time.Second)
	time.Sleep(300 * time.Millisecond) // a few looks of the steady ring
	// Kill a follower and start it again.
	victim := ps[0]
	if victim.client == leaderEP {
		victim = ps[1]
	}
	killedAt := time.Now()
	victim.kill()
	time.Sleep(time.Second)
	victim.start(t, "")
	restartedAt := time.Now()
	// Move leadership to another follower.
	var to uint64
	members, err := c.MemberList(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range members.Members {
		if m.ID != leader && m.ClientURLs[0] != victim.client {
			to = m.ID
		}
	}
	lc, err := NewClient(cfg.Endpoint(leaderEP))
	if err != nil {
		t.Fatal(err)
	}
	defer lc.Close()
	movedAt := time.Now()
	if _, err := lc.MoveLeader(ctx, to); err != nil {
		t.Fatal(err)
	}
	time.Sleep(2 * time.Second) // the victim back and the move seen
	ds, looks := r.Stop()
	for _, d := range ds {
		t.Log(d)
	}
	has := func(kind, ep string, after time.Time) bool {
		for _, d := range ds {
			if d.Kind == kind && (ep == "" || d.Endpoint == ep) && d.To.After(after) && d.To.Sub(d.From) < time.Second {
				return true
			}
		}
		return false
	}
	if !has(DisruptionStopped, victim.client, killedAt) {
		t.Errorf("no bracketed %q of %s after the kill", DisruptionStopped, victim.client)
	}
	if !has(DisruptionAnswers, victim.client, restartedAt) {
		t.Errorf("no bracketed %q of %s after the restart", DisruptionAnswers, victim.client)
	}
	if !has(DisruptionLeaderChanged, "", movedAt) {
		t.Errorf("no bracketed %q after MoveLeader to %x", DisruptionLeaderChanged, to)
	}
	if looks < 100 {
		t.Errorf("%d looks in about 4 s over 3 endpoints; want at least 100", looks)
	}
}
