package multicluster

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/etcdfed/etcdfed/dev/drill"
)

// DrillSpecInput runs one zone-failure drill.
type DrillSpecInput struct {
	T        testing.TB
	Topology *Topology
	Etcd     *ManagedEtcd
	// Member names the member whose zone is drilled.
	Member string
	Mode   drill.Mode
	// Etcdfed is the etcdfed binary and StateDir the local environment's
	// state directory (for kill and partition): the drill then runs as a
	// user runs it, `etcdfed drill zone-failure --json`, and its JSON
	// document on standard output is the report checked. Without Etcdfed
	// it runs through the function the CLI calls, with the topology's
	// faults.
	Etcdfed  string
	StateDir string
}

// DrillSpec runs `etcdfed drill zone-failure` on the zone of Member, with
// the failure held until the hub has moved its members, and checks the
// report (read back from the CLI's --json output): it passed, every verdict
// passed, the times it must have are there and in order (detected before
// the first move for a real failure, the first move before the members
// were replaced, the restore before the ring healed), the member moved
// out of the zone, every watcher saw what was acknowledged, and the JSON
// document carries the same.
func DrillSpec(ctx context.Context, in DrillSpecInput) *drill.Report {
	t := in.T
	t.Helper()
	topo := in.Topology
	if in.Mode != drill.ModeCordon && topo.FailZone == nil {
		t.Skipf("DrillSpec %s: the topology cannot fail zones", in.Mode)
	}
	if in.Mode == drill.ModePartition && topo.CanPartition != nil {
		t.Skipf("DrillSpec partition: partitions unavailable here: %v", topo.CanPartition)
	}
	ec, err := in.Etcd.Get(ctx, topo.Hub)
	if err != nil {
		t.Fatal(err)
	}
	zone := ""
	for _, m := range ec.Status.Members {
		if m.Name == in.Member {
			zone = m.Zone
		}
	}
	if zone == "" {
		t.Fatalf("member %s has no zone", in.Member)
	}
	var rep *drill.Report
	var doc []byte
	if in.Etcdfed != "" {
		rep, doc = drillCLI(ctx, t, in, zone)
	} else {
		rep, doc = drillInProcess(ctx, t, in, zone)
	}
	var text bytes.Buffer
	if err := rep.Text(&text); err != nil {
		t.Fatal(err)
	}
	t.Logf("drill report:\n%s", text.String())
	if !rep.Pass || len(rep.Failures) > 0 {
		t.Fatalf("drill failed: %v", rep.Failures)
	}
	v := rep.Verdicts
	for name, x := range map[string]drill.Verdict{"linearizable": v.Linearizable, "lost writes": v.LostWrites.Verdict, "watch": v.Watch.Verdict, "evacuated": v.Evacuated, "healed": v.Healed} {
		if !x.Pass {
			t.Errorf("verdict %s failed: %s", name, x.Detail)
		}
	}
	if v.LostWrites.Lost != 0 || v.LostWrites.AckedKeys == 0 {
		t.Errorf("lost writes: %d lost of %d", v.LostWrites.Lost, v.LostWrites.AckedKeys)
	}
	if len(v.Watch.Watchers) != 1+len(ec.Status.Endpoints) {
		t.Errorf("%d watchers, want one over all endpoints and one per endpoint (%d)", len(v.Watch.Watchers), len(ec.Status.Endpoints))
	}
	for _, w := range v.Watch.Watchers {
		if !w.Pass || w.Seen != w.Expected || w.Expected != rep.Workload.AckedPuts || w.Missed+w.Duplicates+w.OutOfOrder+w.Mismatched+w.Unexpected != 0 {
			t.Errorf("watcher %s: %+v (acknowledged puts %d)", w.Name, w, rep.Workload.AckedPuts)
		}
	}
	if rep.Workload.AckedPuts == 0 || rep.Workload.MaxWriteGap <= 0 {
		t.Errorf("workload: %+v", rep.Workload)
	}

	// Times present and in order.
	tm := rep.Times
	type point struct {
		name string
		at   *float64
	}
	order := []point{{"first move", tm.FirstMove}, {"members replaced", tm.Evacuated}, {"restored", tm.Restored}, {"healed", tm.Healed}}
	if in.Mode != drill.ModeCordon {
		order = append([]point{{"detected", tm.Detected}}, order...)
	}
	prev, prevName := 0.0, "failure"
	for _, p := range order {
		switch {
		case p.at == nil:
			t.Errorf("no %s time in the report", p.name)
		case *p.at < prev:
			t.Errorf("%s at %.1fs comes before %s at %.1fs", p.name, *p.at, prevName, prev)
		default:
			prev, prevName = *p.at, p.name
		}
	}
	if in.Mode != drill.ModeCordon && !strings.Contains(tm.DetectedBy, zone) && !slices.ContainsFunc(rep.ZoneClusters, func(c string) bool { return strings.Contains(tm.DetectedBy, c) }) {
		t.Errorf("detected by %q names neither %s nor %v", tm.DetectedBy, zone, rep.ZoneClusters)
	}
	movedOut := false
	for _, m := range rep.Moves {
		if m.Member == in.Member && strings.HasSuffix(m.From, "/"+zone) && !strings.HasSuffix(m.To, "/"+zone) {
			movedOut = true
		}
	}
	if !movedOut || !slices.Contains(rep.ZoneMembers, in.Member) {
		t.Errorf("%s not reported moved out of %s: moves %+v, zone members %v", in.Member, zone, rep.Moves, rep.ZoneMembers)
	}

	// The JSON document's documented fields, read as any consumer of
	// --json reads them.
	var fields map[string]any
	if err := json.Unmarshal(doc, &fields); err != nil {
		t.Fatalf("report JSON: %v", err)
	}
	times, _ := fields["times"].(map[string]any)
	verdicts, _ := fields["verdicts"].(map[string]any)
	if fields["kind"] != drill.ReportKind || fields["pass"] != true || fields["mode"] != string(in.Mode) || times["healedSeconds"] == nil || verdicts["watch"] == nil {
		t.Errorf("report JSON lacks what the report says:\n%s", doc)
	}
	t.Logf("%s drill of %s: detected %s, first move %s, members replaced %s, healed %s after the failure; longest write gap %.3fs",
		in.Mode, zone, fmtAt(tm.Detected), fmtAt(tm.FirstMove), fmtAt(tm.Evacuated), fmtAt(tm.Healed), rep.Workload.MaxWriteGap)
	return rep
}

func fmtAt(p *float64) string {
	if p == nil {
		return "-"
	}
	return fmt.Sprintf("%.1fs", *p)
}

// drillCLI runs `etcdfed drill zone-failure --json` against the topology's
// hub, with the local environment's state directory for kill and
// partition, logs its progress (standard error) line by line, and returns
// the report decoded from its standard output, with that output. The
// command must exit 0: it exits non-zero when the drill failed.
func drillCLI(ctx context.Context, t testing.TB, in DrillSpecInput, zone string) (*drill.Report, []byte) {
	t.Helper()
	args := []string{"drill", "zone-failure", "--kubeconfig", in.Topology.Hub.Kubeconfig,
		"--cluster", in.Etcd.Namespace + "/" + in.Etcd.Name, "--zone", zone, "--mode", string(in.Mode),
		"--timeout", "5m", "--json", "--artifacts", ArtifactsDir(t.TempDir())}
	if in.StateDir != "" {
		args = append(args, "--state-dir", in.StateDir)
	}
	return runDrillCLI(ctx, t, in.Topology, in.Etcdfed, args)
}

// runDrillCLI runs `etcdfed` with args (a drill with --json) and the
// topology's DNS servers, logs its progress (standard error) line by line,
// and returns the report decoded from its standard output, with that
// output. The command must exit 0: it exits non-zero when the drill failed.
func runDrillCLI(ctx context.Context, t testing.TB, topo *Topology, etcdfed string, args []string) (*drill.Report, []byte) {
	t.Helper()
	if len(topo.DNSServers) > 0 {
		args = append(args, "--dns-server", strings.Join(topo.DNSServers, ","))
	}
	cmd := exec.CommandContext(ctx, etcdfed, args...)
	var stdout bytes.Buffer
	cmd.Stdout = &stdout
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("running %s %s", etcdfed, strings.Join(args, " "))
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(stderr)
	for sc.Scan() {
		t.Log(sc.Text())
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("etcdfed drill: %v; standard output:\n%s", err, stdout.String())
	}
	rep := &drill.Report{}
	if err := json.Unmarshal(stdout.Bytes(), rep); err != nil {
		t.Fatalf("etcdfed drill --json printed no report (%v):\n%s", err, stdout.String())
	}
	return rep, stdout.Bytes()
}

// drillInProcess runs the drill through drill.Run, the function the CLI
// calls, with the topology's faults (a topology with no CLI to run).
func drillInProcess(ctx context.Context, t testing.TB, in DrillSpecInput, zone string) (*drill.Report, []byte) {
	t.Helper()
	topo := in.Topology
	var faults *drill.Faults
	if topo.FailZone != nil {
		faults = &drill.Faults{
			Fail: func(ctx context.Context, z drill.Zone, m drill.Mode) error {
				return topo.FailZone(ctx, z.Name, string(m))
			},
			Restore: func(ctx context.Context, z drill.Zone) error { return topo.RestoreZone(ctx, z.Name) },
		}
	}
	rep, err := drill.Run(ctx, drill.Input{Hub: topo.Hub.Client, Namespace: in.Etcd.Namespace, Name: in.Etcd.Name,
		Zone: drill.Zone{Name: zone}, Mode: in.Mode, Timeout: 5 * time.Minute, Faults: faults, DNSServers: topo.DNSServers,
		Artifacts: ArtifactsDir(t.TempDir()), Progress: func(line string) { t.Log(line) }})
	if err != nil {
		t.Fatalf("drill: %v", err)
	}
	var buf bytes.Buffer
	if err := rep.JSON(&buf); err != nil {
		t.Fatal(err)
	}
	return rep, buf.Bytes()
}
