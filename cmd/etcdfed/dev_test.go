package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/etcdfed/etcdfed/dev/localenv"
	"github.com/etcdfed/etcdfed/dev/localenv/proc"
	"github.com/etcdfed/etcdfed/dev/testenv"
	"github.com/etcdfed/etcdfed/dev/testenv/testproc"
	"github.com/etcdfed/etcdfed/pkg/etcdversion"
)

// TestDevUpStatusDown drives the CLI as a user does after `make build`:
// dev up --detach, status, env, down; then up again on the same state, a
// supervisor killed with SIGKILL, and down cleaning up after it. No process
// may be left behind. The time to a usable environment (hub + 3 member
// clusters = 4 apiservers) and its memory are logged.
func TestDevUpStatusDown(t *testing.T) {
	testenv.SkipIfShort(t, "kube-apiserver, etcd and a built etcdfed")
	bin, err := testenv.BinDir()
	if err != nil {
		t.Fatal(err)
	}
	exeDir := t.TempDir()
	if err := testenv.BuildOurs(exeDir, "etcdfed"); err != nil {
		t.Fatal(err)
	}
	exe := filepath.Join(exeDir, "etcdfed")
	state := filepath.Join(t.TempDir(), "state")
	run := func(args ...string) string {
		t.Helper()
		cmd := exec.Command(exe, append(append([]string{}, args...), "--state-dir", state)...)
		cmd.Env = append(os.Environ(), "ETCDFED_BIN_DIR="+bin)
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		if err := cmd.Run(); err != nil {
			t.Fatalf("etcdfed %s: %v\n%s", strings.Join(args, " "), err, out.String())
		}
		return out.String()
	}
	t.Cleanup(func() {
		cmd := exec.Command(exe, "dev", "down", "--state-dir", state)
		_ = cmd.Run()
	})

	// The detached supervisor runs in its own session, so it would outlive
	// a test binary that dies before its cleanup: record it, so that the
	// next `make test` (hack/leftovers) can prove it a leftover and stop it.
	recordSupervisor := func() {
		t.Helper()
		info, err := localenv.ReadSupervisor(state)
		if err != nil {
			t.Fatal(err)
		}
		if err := testproc.RecordStarted("etcdfed-supervisor", info.PID); err != nil {
			t.Fatal(err)
		}
	}
	start := time.Now()
	out := run("dev", "up", "--detach", "--clusters", "3")
	upTime := time.Since(start)
	recordSupervisor()
	t.Logf("dev up --detach (hub + 3 member clusters) returned after %.1fs:\n%s", upTime.Seconds(), out)
	if !strings.Contains(out, "The local environment is ready") || !strings.Contains(out, "apiserver member-3 ready") {
		t.Fatalf("dev up did not report readiness and progress:\n%s", out)
	}

	// Usable: every kubeconfig answers. An apiserver on a loaded machine
	// (CI runs this beside other packages' etcd processes) once took more
	// than 10 s over one read right after its readiness: each gets three
	// tries of 20 s, and a slow one is logged.
	for _, c := range []string{"hub", "member-1", "member-2", "member-3"} {
		kc := filepath.Join(state, "kubeconfigs", c+".yaml")
		cs := clientFor(t, kc)
		var err error
		for try := 1; try <= 3; try++ {
			began := time.Now()
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			_, err = cs.CoreV1().Namespaces().Get(ctx, localenv.RingNamespace, metav1GetOptions())
			cancel()
			if err == nil {
				break
			}
			t.Logf("%s: read %d through its kubeconfig failed after %.1fs: %v", c, try, time.Since(began).Seconds(), err)
		}
		if err != nil {
			t.Fatalf("%s not usable through its kubeconfig after 3 tries: %v", c, err)
		}
	}

	// The apiservers store in the etcd build the demo ring runs (the
	// default release's), so that a first `make demo` builds one etcd.
	wantStore := filepath.Join(bin, localenv.StoreEtcd(bin, etcdversion.Default().String()))
	if filepath.Base(wantStore) == "etcd" {
		t.Fatalf("%s has no etcd-%s: run hack/tools.sh etcd37", bin, etcdversion.Default())
	}
	for _, c := range []string{"hub", "member-1"} {
		rec, err := proc.ReadPIDFile(filepath.Join(localenv.PIDDir(state), "etcd-"+c+".pid"))
		if err != nil {
			t.Fatal(err)
		}
		exe, err := os.Readlink("/proc/" + strconv.Itoa(rec.PID) + "/exe")
		if err != nil {
			t.Fatal(err)
		}
		if got, want := evalSymlinks(t, exe), evalSymlinks(t, wantStore); got != want {
			t.Errorf("the store of %s runs %s, want %s (the demo ring's etcd)", c, got, want)
		}
	}

	status := run("dev", "status")
	t.Logf("dev status:\n%s", status)
	for _, want := range []string{"member-3", "apiserver-hub", "processes"} {
		if !strings.Contains(status, want) {
			t.Errorf("dev status lacks %q", want)
		}
	}
	var s localenv.Status
	if err := json.Unmarshal([]byte(run("dev", "status", "--json")), &s); err != nil {
		t.Fatal(err)
	}
	t.Logf("MEASURED: dev up to a usable environment with 4 apiservers: %.1fs (supervisor's own count %.1fs); memory %d MiB PSS (%d MiB RSS) over %d apiservers",
		upTime.Seconds(), s.Ready.Sub(s.Started).Seconds(), s.TotalPSS>>20, s.TotalRSS>>20, len(s.Clusters))

	// dev env is valid shell.
	env := run("dev", "env")
	sh := exec.Command("sh", "-c", "eval \"$1\" && echo \"$KUBECONFIG|$ETCDFED_DNS_SERVERS|$ETCDFED_KUBECONFIG_MEMBER_2\"", "sh", env)
	got, err := sh.Output()
	if err != nil {
		t.Fatalf("eval of dev env failed: %v\n%s", err, env)
	}
	parts := strings.Split(strings.TrimSpace(string(got)), "|")
	if len(parts) != 3 || !strings.HasSuffix(parts[0], "hub.yaml") || strings.Count(parts[1], ",") != 2 || !strings.HasSuffix(parts[2], "member-2.yaml") {
		t.Errorf("dev env exports %q", got)
	}

	pids := livePIDs(t, state)
	t.Logf("down stops %d processes", len(pids))
	run("dev", "down")
	expectGone(t, state, pids)

	// Again on the same state directory, then the supervisor dies hard:
	// Pdeathsig takes the children, down cleans the rest.
	start = time.Now()
	out = run("dev", "up", "--detach")
	recordSupervisor()
	t.Logf("second dev up (reusing the state) took %.1fs", time.Since(start).Seconds())
	if !strings.Contains(out, "reusing the environment") {
		t.Errorf("second up did not reuse the state:\n%s", out)
	}
	info, err := localenv.ReadSupervisor(state)
	if err != nil {
		t.Fatal(err)
	}
	pids = livePIDs(t, state)
	if err := syscall.Kill(info.PID, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	// Pdeathsig kills every child without anyone's help.
	expectGone(t, "", append(pids, info.PID))
	out = run("dev", "down")
	t.Logf("dev down after the supervisor was killed:\n%s", out)
	expectGone(t, state, nil)
	if live := processesMentioning(state); len(live) > 0 {
		t.Errorf("processes still mention the state directory: %v", live)
	}
}

func livePIDs(t *testing.T, state string) []int {
	t.Helper()
	recs, err := testLivePIDs(state)
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) < 8 {
		t.Fatalf("expected at least 8 processes (4 apiservers and their etcds), found %d", len(recs))
	}
	return recs
}

// expectGone waits (bounded) for the processes to be reaped by whoever
// owns them and fails if any is still there.
func expectGone(t *testing.T, state string, pids []int) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for _, pid := range pids {
		for alive(pid) && time.Now().Before(deadline) {
			time.Sleep(50 * time.Millisecond)
		}
		if alive(pid) {
			t.Errorf("pid %d survived dev down", pid)
		}
	}
	if state == "" {
		return
	}
	if recs, _ := testLivePIDs(state); len(recs) > 0 {
		t.Errorf("pid files of live processes remain: %v", recs)
	}
}

func alive(pid int) bool {
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	s := string(data)
	i := strings.LastIndexByte(s, ')')
	return i >= 0 && len(s) > i+2 && s[i+2] != 'Z'
}

// processesMentioning lists live processes whose command line mentions dir.
func processesMentioning(dir string) []string {
	entries, _ := os.ReadDir("/proc")
	var out []string
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		cmd, _ := os.ReadFile("/proc/" + e.Name() + "/cmdline")
		if bytes.Contains(cmd, []byte(dir)) && alive(pid) {
			out = append(out, e.Name()+": "+strings.ReplaceAll(string(cmd), "\x00", " "))
		}
	}
	return out
}

// etcdfed dev partition checks its flags before it asks the environment
// anything: --heal alone, two groups or more, well-formed one-way cuts.
func TestPartitionFlags(t *testing.T) {
	defer func(saved struct {
		groups string
		oneWay []string
		heal   bool
	}) {
		partitionFlags = saved
	}(partitionFlags)
	for _, tc := range []struct {
		groups string
		oneWay []string
		heal   bool
		want   string // error substring; "" means accepted
		shape  string
	}{
		{groups: "hub,member-3|member-1,member-2", shape: "groups hub,member-3|member-1,member-2"},
		{oneWay: []string{"member-1>member-2"}, shape: "one-way member-1>member-2"},
		{heal: true, shape: "none"},
		{groups: "hub,member-1", want: "is one group"},
		{groups: "hub||member-1", want: "empty group"},
		{oneWay: []string{"member-1"}, want: "want FROM>TO"},
		{heal: true, groups: "a|b", want: "--heal takes no"},
		{want: "give --groups, --one-way or --heal"},
	} {
		partitionFlags.groups, partitionFlags.oneWay, partitionFlags.heal = tc.groups, tc.oneWay, tc.heal
		p, err := partitionFromFlags()
		switch {
		case tc.want == "" && (err != nil || p.String() != tc.shape):
			t.Errorf("%+v: %v %q, want %q", tc, err, p.String(), tc.shape)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%+v: error %v, want %q", tc, err, tc.want)
		}
	}
}

// The demo's hints: with real nodes, etcdfed status and the drill run inside the
// environment's network (its hub is not reachable from the host's, and the
// address may route off the machine); with process nodes, directly.
func TestDemoHintsRunWhereTheHubIs(t *testing.T) {
	for _, tc := range []struct {
		nodes localenv.NodeMode
		want  string
	}{
		{localenv.NodesReal, "etcdfed dev shell --state-dir /s -- etcdfed status demo --kubeconfig "},
		{localenv.NodesProcess, "; etcdfed status demo --kubeconfig "},
	} {
		got := demoHints("etcdfed", &localenv.State{Dir: "/s", Nodes: tc.nodes})
		if !strings.Contains(got, tc.want) {
			t.Errorf("nodes %q: hints lack %q:\n%s", tc.nodes, tc.want, got)
		}
		// Every command given the hub's kubeconfig (status, the drill)
		// runs inside the environment's network with real nodes, and
		// directly with process nodes.
		for _, line := range strings.Split(got, "\n") {
			for _, cmd := range strings.Split(line, "; ") {
				if !strings.Contains(cmd, "--kubeconfig") {
					continue
				}
				if inside := strings.Contains(cmd, "dev shell --state-dir /s -- "); inside != (tc.nodes == localenv.NodesReal) {
					t.Errorf("nodes %q: %q runs inside the environment's network: %t", tc.nodes, strings.TrimSpace(cmd), inside)
				}
			}
		}
	}
}

// The commands dev up prints that need an apiserver run where its address
// is: with real nodes inside the environment's network (dev shell), not
// from the host, where such an address leads wherever the host's routes
// send it (on a new machine, seen: a proxy outside it answered).
func TestSummaryRunsClusterListWhereTheHubIs(t *testing.T) {
	for _, tc := range []struct {
		nodes       localenv.NodeMode
		want, wrong string
	}{
		{localenv.NodesReal, "  etcdfed dev shell --state-dir /s -- etcdfed cluster list --kubeconfig /s/kubeconfigs/hub.yaml", "  etcdfed cluster list"},
		{localenv.NodesProcess, "  etcdfed cluster list --kubeconfig /s/kubeconfigs/hub.yaml", "dev shell"},
	} {
		var out bytes.Buffer
		writeSummary(&out, "etcdfed", &localenv.State{Dir: "/s", Nodes: tc.nodes, Hub: localenv.ClusterState{Name: "hub"}}, time.Second)
		if got := out.String(); !strings.Contains(got, tc.want) || strings.Contains(got, tc.wrong) {
			t.Errorf("nodes %q: the summary lacks %q or has %q:\n%s", tc.nodes, tc.want, tc.wrong, got)
		}
	}
}

// etcdfed dev latency set and dev up --latency refuse a bad distance
// before they ask the environment anything (none runs here).
func TestLatencyRefusesBadInput(t *testing.T) {
	for _, args := range [][]string{
		{"dev", "latency", "set", "two-regions"},
		{"dev", "latency", "set", "zone-1:zone-2=20"},
		{"dev", "up", "--latency", "zone-1:zone-2=20ms/30ms"},
	} {
		var out bytes.Buffer
		root.SetArgs(append(args, "--state-dir", t.TempDir()))
		root.SetOut(&out)
		root.SetErr(&out)
		err := root.Execute()
		if !errors.Is(err, localenv.ErrBadDistance) {
			t.Errorf("etcdfed %s: %v, want a bad distance", strings.Join(args, " "), err)
		}
	}
	upFlags.latency = ""
}

// A node mode asked with --nodes that the state directory does not hold is
// refused, with the two commands that do what was meant; nothing starts.
func TestDevUpRefusesAnotherNodeMode(t *testing.T) {
	t.Cleanup(func() {
		upFlags.nodes = string(localenv.NodesProcess)
		devUpCmd.Flags().Lookup("nodes").Changed = false
	})
	for _, tc := range []struct {
		has   localenv.NodeMode
		asked string
	}{
		{"", "real"}, // a state written before real nodes existed holds process nodes
		{localenv.NodesProcess, "real"},
		{localenv.NodesReal, "process"},
	} {
		dir := t.TempDir()
		data, err := json.Marshal(localenv.State{Version: localenv.StateVersion, Nodes: tc.has})
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(localenv.StatePath(dir), data, 0o644); err != nil {
			t.Fatal(err)
		}
		var out bytes.Buffer
		root.SetArgs([]string{"dev", "up", "--nodes", tc.asked, "--state-dir", dir})
		root.SetOut(&out)
		root.SetErr(&out)
		err = root.Execute()
		if err == nil {
			t.Fatalf("dev up --nodes %s on a state of %q nodes: no error", tc.asked, tc.has)
		}
		for _, want := range []string{"--nodes " + tc.asked + ": the environment in " + dir, "dev down --purge", "dev up --nodes " + tc.asked + " --state-dir"} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("dev up --nodes %s on %q nodes: error %q lacks %q", tc.asked, tc.has, err, want)
			}
		}
		if _, err := os.Stat(filepath.Join(dir, "logs")); err == nil {
			t.Errorf("dev up --nodes %s on %q nodes started something (logs/ exists)", tc.asked, tc.has)
		}
	}
	// The mode the state holds, asked again, is no refusal: the check
	// passes it on (what follows needs a running environment, not tested
	// here).
	dir := t.TempDir()
	data, _ := json.Marshal(localenv.State{Version: localenv.StateVersion, Nodes: localenv.NodesReal})
	_ = os.WriteFile(localenv.StatePath(dir), data, 0o644)
	if err := checkNodeMode(dir, localenv.NodesReal); err != nil {
		t.Errorf("the same mode refused: %v", err)
	}
	if err := checkNodeMode(t.TempDir(), localenv.NodesReal); err != nil {
		t.Errorf("a new state directory refused: %v", err)
	}
}

func evalSymlinks(t *testing.T, path string) string {
	t.Helper()
	p, err := filepath.EvalSymlinks(path)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// A real-node environment gets the longer start deadline unless --timeout
// says otherwise: asked with --nodes real, or held by the state directory
// (a second `dev up` without --nodes); process nodes keep theirs.
func TestStartTimeoutOfTheNodeMode(t *testing.T) {
	realDir := t.TempDir()
	data, _ := json.Marshal(localenv.State{Version: localenv.StateVersion, Nodes: localenv.NodesReal})
	if err := os.WriteFile(localenv.StatePath(realDir), data, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		flag  time.Duration
		dir   string
		asked localenv.NodeMode
		want  time.Duration
	}{
		{0, t.TempDir(), localenv.NodesProcess, processStartTimeout},
		{0, t.TempDir(), localenv.NodesReal, realStartTimeout},
		{0, realDir, localenv.NodesProcess, realStartTimeout}, // the flag's default; the state is real
		{2 * time.Minute, realDir, localenv.NodesReal, 2 * time.Minute},
	} {
		if got := startTimeout(tc.flag, tc.dir, tc.asked); got != tc.want {
			t.Errorf("startTimeout(%s, state %s, --nodes %s) = %s, want %s", tc.flag, tc.dir, tc.asked, got, tc.want)
		}
	}
	if realStartTimeout <= processStartTimeout {
		t.Errorf("real nodes' deadline %s is not longer than process nodes' %s", realStartTimeout, processStartTimeout)
	}
	if f := devUpCmd.Flags().Lookup("timeout"); f.DefValue != "0s" {
		t.Errorf("--timeout defaults to %s: the node mode's deadline never applies", f.DefValue)
	}
}
