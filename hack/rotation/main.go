// Command rotation picks the slice of the scenarios of test/multicluster
// that this CI run runs, so that every scenario runs within a few runs
// while one run stays within its time budget.
//
// The scenarios are every TestScenario* in test/multicluster (read from
// the source, nothing is compiled) that -exclude does not match (the ones
// `make failures` runs every time). They are packed, in name order, into
// slices whose estimated time (estimates below, measured; a scenario not
// listed counts defaultEstimate) stays within -budget; run number N runs
// slice N mod the number of slices. N is -run, else a number read from
// HEAD's commit hash (its first 12 hex digits). A commit count would be a
// worse key: submissions that add a multiple of the slice count in commits
// land on the same slice every time, and one slice (the real-node runs,
// keyed the same way in .ci/run) never ran across two submissions that
// added 60 commits each. A hash lands on every slice with equal chance,
// whatever the submissions' sizes.
//
// A hash can still pass a slice over many runs in a row. With -ledger FILE
// (.ci/run keeps it in bin/, which CI caches between runs) the choice
// reads what earlier runs passed: the slice whose scenarios passed longest
// ago runs (a scenario that never passed counts oldest; the hash breaks
// ties), so no slice waits more runs than there are slices; `-passed
// PATTERN` records a slice's scenarios after they passed.
//
// -mode prints which long mode .ci/run takes: "nemesis" (the nemesis and
// a scenario slice, the default) or a turn: real nodes, which take the
// real-node scenarios ("realnodes"), the seeded nemesis on real nodes
// ("realnemesis") and the failure scenarios on real nodes ("realfailures")
// in turn, whichever passed longest ago (so the nemesis and the failure
// scenarios alternate node modes), or kind, which takes make test-kind with the
// zone's node stopped ("kind") and with the zone cut off the network,
// a worker node beside each member cluster's control plane ("kindcut"),
// in turn. With a ledger (-passed-mode
// records a mode's pass), a turn is due when it never passed or when the
// other modes passed its count of times since it last did: real nodes
// after 3, kind after 5. Of the turns due, the one that waited longest
// runs (never passed counts longest; on a tie the first in turns, real
// nodes before kind). So from an empty ledger the runs go real nodes,
// kind, nemesis, nemesis, real nodes, and then, run after run passing,
// real nodes come every fourth or fifth run, kind every sixth or seventh
// and the nemesis on the others, three runs in five (TestModesKeepComing):
// the nemesis carries the scenario slices, so it keeps most runs; kind's
// turn, the longest and the one closest to a real deployment, comes less
// often than real nodes, never starving them (a turn that passed counts
// as a pass of the other modes for real nodes).
//
// -uncached lists the turns whose cache in bin/ is incomplete (.ci/run
// asks hack/tools.sh and hack/kind/node-image.sh --missing): such a turn,
// due, gives way to the next due turn whose cache is complete, else to
// the nemesis, and the line -mode prints names it after the mode,
// "nemesis kind", for .ci/run to build its cache with the time it has
// left. A turn not run stays due, so it runs once its cache is complete.
// Without a ledger (a cold cache) the hash chooses, as before: a real-node
// turn when h%4 == 3 (with their cache, else the nemesis warming it), its
// mode by h/4's parity, never kind.
//
// It prints the go test -run pattern of the slice on stdout, and on stderr
// which scenarios run now, with their estimates, and which slices come
// next, so a CI log says what ran and what did not.
//
// Usage: go run ./hack/rotation -exclude REGEXP [-budget 22m] [-run N] [-dir test/multicluster] [-ledger FILE]
//
//	go run ./hack/rotation -ledger FILE -passed PATTERN
//	go run ./hack/rotation -ledger FILE [-run N] [-uncached kind,realnodes] -mode
//	go run ./hack/rotation -ledger FILE -passed-mode MODE
package main

import (
	"errors"
	"flag"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"
)

// estimates are the scenarios' times in one `go test` run of a slice (the
// local environment started once for the slice, `startup` once), rounded
// up by about half from what they took on the project's shared 2-core
// machine on 2026-11-26 (docs/measurements/ci-rotation.md); the ones not
// measured yet are guesses of 3 to 4 minutes.
var estimates = map[string]time.Duration{
	"TestScenarioCARotation":                     3 * time.Minute,
	"TestScenarioFleetClusterLoss":               12 * time.Minute, // estimate, not run yet: an environment of its own (four apiservers), 51 rings formed, 2 min member grace, repairs 5 at a time
	"TestScenarioConsumerCredentials":            3 * time.Minute,
	"TestScenarioDefrag":                         3 * time.Minute, // 128 s
	"TestScenarioSpokeRestartDNS":                2 * time.Minute, // 61 s
	"TestScenarioHubStandbyWarm":                 1 * time.Minute, // estimate: a second hub process engaging three clusters
	"TestScenarioHubFailover":                    5 * time.Minute, // guess: a 3-member ring, two Moves, a Lease expiry
	"TestScenarioHubShards":                      4 * time.Minute, // estimate: the hub restarted as shard a, a second hub as shard b, two 3-member rings, a relabel under the workload, a third overlapping hub holding both rings, a scale-up after it stops
	"TestScenarioTenantCannotReachAnotherTenant": 4 * time.Minute, // 149-208 s: the hub restarted twice, 75 s of forged Pending
	"TestScenarioHubStaleRestore":                7 * time.Minute, // guess: a Move, a Replace, the hub's store restored, 2 minutes watched
	"TestScenarioHubLost":                        8 * time.Minute, // estimate: its own environment (four clusters), a backup, the hub cluster rebuilt, a cluster killed and replaced, a restore
	"TestScenarioHubLostWithoutEscrow":           8 * time.Minute, // estimate: its own environment (three clusters), the hub cluster rebuilt without the escrow, a take-over held, then a CA rotation of three phases
	"TestScenarioDisruptionBudget":               1 * time.Minute, // 36 s
	"TestScenarioDowngrade":                      3 * time.Minute, // 114 s
	"TestScenarioDowngrade37":                    3 * time.Minute,
	"TestScenarioMemberCertRotation":             3 * time.Minute, // 134 s
	"TestScenarioRevocation":                     6 * time.Minute, // estimate: old hub build, ring, one roll, a revocation
	"TestScenarioNoSpace":                        3 * time.Minute,
	"TestScenarioQuorumLossAutomatic":            3 * time.Minute, // 98 s
	"TestScenarioQuorumLossFromBackup":           4 * time.Minute,
	"TestScenarioQuorumLossHubRestarted":         3 * time.Minute,
	"TestScenarioQuorumLossRecovery":             3 * time.Minute,
	"TestScenarioRestoreFromSnapshot":            3 * time.Minute,
	"TestScenarioUpgrade":                        6 * time.Minute,  // 252 s
	"TestScenarioPendingRollHalts":               2 * time.Minute,  // 82 s
	"TestScenarioRegistryDropped":                2 * time.Minute,  // 78 s
	"TestScenarioInstall":                        2 * time.Minute,  // 82 s
	"TestScenarioLegacyNamesAdopted":             9 * time.Minute,  // 545 s (30 Nov, load up to 67): builds the hub, spoke and CLI of 1b133dd (154 s), its own environment, the peer-port rolls after the upgrade
	"TestScenarioGossipBroken":                   3 * time.Minute,  // 164 s
	"TestScenarioPartitionHealed":                3 * time.Minute,  // 91 s on the shared environment, 166 s with the binaries built and the environment started
	"TestScenarioMigrate":                        4 * time.Minute,  // 138 s, its own six-cluster environment
	"TestScenarioAdopt":                          3 * time.Minute,  // 76 s on the shared environment (first run)
	"TestScenarioAdoptWithAuth":                  3 * time.Minute,  // about 110 s
	"TestScenarioMoveInsideMemberCluster":        3 * time.Minute,  // 75 s, its own two-cluster, four-zone environment
	"TestScenarioLeaderPlacement":                5 * time.Minute,  // 113 to 202 s
	"TestScenarioTimingAuto":                     10 * time.Minute, // 479 s (30 Nov, load 20-30): a 3-member ring, 150 ms put live, the 5-minute settle (timing.Settle), a roll
	"TestScenarioHubNeverFreezes":                10 * time.Minute, // four apiserver outages on the shared environment: 401 s alone, 500 s inside make test (29 Nov, load 14 to 20); 1082 s as a scenario with its environment (30 Nov, load about 27)
	"TestScenarioSimulatedClustersFormRing":      4 * time.Minute,  // 162 s inside make test (30 Nov, load 10-13): four simulated member clusters, a ring formed, one cluster lost and repaired
	"TestScenarioPlannedNoGap":                   3 * time.Minute,  // 103-124 s on an idle machine (a 20 s baseline, delete, drain, a 3-member 3.6->3.7 roll at 10 ms; 187 s with the binaries built and the environment started)
}

// defaultEstimate counts a scenario with no estimate yet.
const defaultEstimate = 8 * time.Minute

// startup is the time of one slice's go test beyond its scenarios: the
// test binary built, the local environment started.
const startup = 2 * time.Minute

func main() {
	exclude := flag.String("exclude", "", "scenarios not to rotate (a go test -run pattern: the ones run every time)")
	budget := flag.Duration("budget", 22*time.Minute, "the most one slice may take, estimated")
	run := flag.String("run", "", "this CI run's number (default: read from HEAD's commit hash)")
	dir := flag.String("dir", "test/multicluster", "the package of the scenarios")
	ledgerPath := flag.String("ledger", "", "file of what earlier runs passed (kept between CI runs); empty or missing: choose by -run alone")
	passed := flag.String("passed", "", "record in -ledger that the scenarios of this pattern (as printed) passed, and exit")
	mode := flag.Bool("mode", false, "print the long mode this run takes ("+strings.Join(longModes(), ", ")+"), and after it a due turn whose cache to build, and exit")
	uncached := flag.String("uncached", "", "with -mode: the turns whose cache is incomplete, comma-separated")
	passedMode := flag.String("passed-mode", "", "record in -ledger that this mode's run passed, and exit")
	flag.Parse()
	if err := do(*exclude, *budget, *run, *dir, *ledgerPath, *passed, *mode, *uncached, *passedMode); err != nil {
		fmt.Fprintln(os.Stderr, "rotation:", err)
		os.Exit(1)
	}
}

func do(exclude string, budget time.Duration, run, dir, ledgerPath, passed string, mode bool, uncached, passedMode string) error {
	now := time.Now()
	switch {
	case passed != "" || passedMode != "":
		if ledgerPath == "" {
			return errors.New("-passed and -passed-mode need -ledger")
		}
		var lines []string
		for _, n := range patternNames(passed) {
			lines = append(lines, fmt.Sprintf("scenario %s %d", n, now.Unix()))
		}
		if passedMode != "" {
			if !slices.Contains(longModes(), passedMode) {
				return fmt.Errorf("-passed-mode %q: want one of %s", passedMode, strings.Join(longModes(), ", "))
			}
			lines = append(lines, fmt.Sprintf("mode %s %d", passedMode, now.Unix()))
		}
		return appendLedger(ledgerPath, lines)
	}
	led, err := readLedger(ledgerPath)
	if err != nil {
		return err
	}
	if mode {
		n, err := runNumber(run)
		if err != nil {
			return err
		}
		var un []string
		for _, u := range strings.Split(uncached, ",") {
			if u = strings.TrimSpace(u); u == "" {
				continue
			}
			if turnOf(u) == nil {
				return fmt.Errorf("-uncached %q: want turns of %s", u, strings.Join(longModes()[1:], ", "))
			}
			un = append(un, u)
		}
		m, warm, why := chooseMode(led, n, un)
		fmt.Fprintf(os.Stderr, "long mode: %s (%s)\n", m, why)
		fmt.Println(strings.TrimSpace(m + " " + warm))
		return nil
	}
	pattern, err := plan(os.Stderr, dir, exclude, run, budget, led)
	if err != nil {
		return err
	}
	fmt.Println(pattern)
	return nil
}

func plan(log io.Writer, dir, exclude, run string, budget time.Duration, led *ledger) (string, error) {
	names, err := scenarios(dir)
	if err != nil {
		return "", err
	}
	var skip *regexp.Regexp
	if exclude != "" {
		if skip, err = regexp.Compile(exclude); err != nil {
			return "", fmt.Errorf("-exclude: %w", err)
		}
	}
	var rotated []string
	for _, n := range names {
		if skip == nil || !skip.MatchString(n) {
			rotated = append(rotated, n)
		}
	}
	if len(rotated) == 0 {
		return "", errors.New("no scenario to rotate")
	}
	n, err := runNumber(run)
	if err != nil {
		return "", err
	}
	slices := pack(rotated, budget)
	i, why := chooseSlice(slices, n, led)
	fmt.Fprintf(log, "scenario rotation: %d scenarios besides those `make failures` runs, in %d slices of at most %s (estimated); run %d runs slice %d of %d (%s):\n",
		len(rotated), len(slices), budget, n, i+1, len(slices), why)
	for _, s := range slices[i] {
		fmt.Fprintf(log, "  now:  %s (~%s)\n", s, estimate(s))
	}
	for k := 1; k < len(slices); k++ {
		j := (i + k) % len(slices)
		fmt.Fprintf(log, "  run %d (slice %d): %s\n", n+k, j+1, strings.Join(slices[j], ", "))
	}
	return "^(" + strings.Join(slices[i], "|") + ")$", nil
}

// scenarios are the names of the TestScenario* functions in dir's test
// files, sorted.
func scenarios(dir string) ([]string, error) {
	files, err := filepath.Glob(filepath.Join(dir, "*_test.go"))
	if err != nil {
		return nil, err
	}
	var out []string
	fset := token.NewFileSet()
	for _, f := range files {
		file, err := parser.ParseFile(fset, f, nil, parser.SkipObjectResolution)
		if err != nil {
			return nil, err
		}
		for _, d := range file.Decls {
			if fn, ok := d.(*ast.FuncDecl); ok && fn.Recv == nil && strings.HasPrefix(fn.Name.Name, "TestScenario") {
				out = append(out, fn.Name.Name)
			}
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no TestScenario* in %s", dir)
	}
	sort.Strings(out)
	return out, nil
}

// runNumber is run, or the number HEAD's commit hash gives (runFromHash).
func runNumber(run string) (int, error) {
	if run == "" {
		out, err := exec.Command("git", "rev-parse", "HEAD").Output()
		if err != nil {
			return 0, fmt.Errorf("no -run and no commit (git rev-parse HEAD): %w", err)
		}
		return runFromHash(strings.TrimSpace(string(out)))
	}
	n, err := strconv.Atoi(run)
	if err != nil || n < 0 {
		return 0, fmt.Errorf("run number %q: want a count", run)
	}
	return n, nil
}

// runFromHash reads the first 12 hex digits of a commit hash as a number
// (.ci/run does the same in bash to choose between real nodes and the
// nemesis).
func runFromHash(hash string) (int, error) {
	if len(hash) < 12 {
		return 0, fmt.Errorf("commit hash %q: want at least 12 hex digits", hash)
	}
	n, err := strconv.ParseInt(hash[:12], 16, 64)
	if err != nil {
		return 0, fmt.Errorf("commit hash %q: %w", hash, err)
	}
	return int(n), nil
}

func estimate(name string) time.Duration {
	if d, ok := estimates[name]; ok {
		return d
	}
	return defaultEstimate
}

// pack splits names into as few slices as keep each within budget
// (estimated, with startup), the longest scenarios first each into the
// slice with the least so far; a scenario longer than the budget gets a
// slice of its own. Each slice is in name order, the slices in the order
// of their first names, so the plan depends only on the names and
// estimates.
func pack(names []string, budget time.Duration) [][]string {
	byLength := append([]string(nil), names...)
	sort.SliceStable(byLength, func(i, j int) bool { return estimate(byLength[i]) > estimate(byLength[j]) })
	for k := 1; ; k++ {
		slices := make([][]string, k)
		used := make([]time.Duration, k)
		fits := true
		for _, n := range byLength {
			best := 0
			for i := range used {
				if used[i] < used[best] {
					best = i
				}
			}
			if len(slices[best]) > 0 && startup+used[best]+estimate(n) > budget {
				fits = false
				if k < len(names) {
					break
				}
			}
			slices[best] = append(slices[best], n)
			used[best] += estimate(n)
		}
		if fits || k >= len(names) {
			for _, s := range slices {
				sort.Strings(s)
			}
			sort.Slice(slices, func(i, j int) bool { return slices[i][0] < slices[j][0] })
			return slices
		}
	}
}

// The long modes of a CI run (.ci/run): the nemesis and a scenario slice
// by default, a turn when one is due.
const (
	modeNemesis   = "nemesis"
	modeRealNodes = "realnodes"
	modeKind      = "kind"
	// modeKindCut is make test-kind with the zone cut off the network
	// (KIND_FAIL=cut) instead of its node stopped, and a worker node per
	// member cluster (KIND_WORKERS=1): every other kind turn.
	modeKindCut = "kindcut"
	// modeRealNemesis is the seeded nemesis on real nodes (make nemesis
	// NODES=real, profile ci, 2 schedules): every other real-node turn,
	// so that the nemesis alternates node modes.
	modeRealNemesis = "realnemesis"
	// modeRealFailures is make failures NODES=real (every failure
	// scenario on real nodes) in the place of make failures on process
	// nodes, the nemesis and the slice.
	modeRealFailures = "realfailures"
)

// turn is a long mode other than the nemesis, taken when it is due: when
// none of its modes passed yet, or the other modes passed every times
// since one of them did. A turn of several modes (a real-node turn that
// alternates real-node scenarios and a nemesis on real nodes, say) takes
// the one that passed longest ago.
type turn struct {
	modes []string
	every int
	what  string
}

// turns, in the order that breaks a tie (see the package comment for why
// these counts).
var turns = []turn{
	{modes: []string{modeRealNodes, modeRealNemesis, modeRealFailures}, every: 3, what: "real nodes"},
	{modes: []string{modeKind, modeKindCut}, every: 5, what: "kind"},
}

// longModes: the nemesis, then every turn's modes.
func longModes() []string {
	out := []string{modeNemesis}
	for _, t := range turns {
		out = append(out, t.modes...)
	}
	return out
}

// turnOf is the turn a mode belongs to; nil for the nemesis and unknown
// names.
func turnOf(mode string) *turn {
	for i := range turns {
		if slices.Contains(turns[i].modes, mode) {
			return &turns[i]
		}
	}
	return nil
}

// ledger is what earlier CI runs passed: the last pass of each scenario,
// and the modes passed, oldest first. Its file holds one line per pass,
// "scenario NAME UNIX" or "mode MODE UNIX", appended.
type ledger struct {
	scenario map[string]time.Time
	modes    []string
}

// readLedger reads path; nil without a path or a file.
func readLedger(path string) (*ledger, error) {
	if path == "" {
		return nil, nil
	}
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read the ledger: %w", err)
	}
	led := &ledger{scenario: map[string]time.Time{}}
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) != 3 {
			continue // a line cut short by a run that died while appending
		}
		sec, err := strconv.ParseInt(f[2], 10, 64)
		if err != nil {
			continue
		}
		switch f[0] {
		case "scenario":
			if t := time.Unix(sec, 0); t.After(led.scenario[f[1]]) {
				led.scenario[f[1]] = t
			}
		case "mode":
			led.modes = append(led.modes, f[1])
		}
	}
	return led, nil
}

// appendLedger appends lines to path, creating it (and its directory).
func appendLedger(path string, lines []string) error {
	if len(lines) == 0 {
		return nil
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return fmt.Errorf("ledger directory: %w", err)
	}
	// A line a dead run left without its newline ends first, so that it
	// does not swallow the first of these.
	text := strings.Join(lines, "\n") + "\n"
	if b, err := os.ReadFile(path); err == nil && len(b) > 0 && b[len(b)-1] != '\n' {
		text = "\n" + text
	}
	f, err := os.OpenFile(path, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		return fmt.Errorf("open the ledger: %w", err)
	}
	_, werr := f.WriteString(text)
	return errors.Join(werr, f.Close())
}

// patternNames are the scenario names of a pattern plan printed,
// "^(A|B)$".
func patternNames(pattern string) []string {
	p := strings.TrimSuffix(strings.TrimPrefix(strings.TrimSpace(pattern), "^("), ")$")
	var out []string
	for _, n := range strings.Split(p, "|") {
		if n != "" {
			out = append(out, n)
		}
	}
	return out
}

// chooseSlice is the slice this run takes: without a ledger, n modulo the
// count; with one, the slice whose scenarios' oldest pass is oldest (never
// passed: oldest of all), ties going to the first from n modulo the count
// on.
func chooseSlice(slices [][]string, n int, led *ledger) (int, string) {
	start := n % len(slices)
	if led == nil {
		return start, "no ledger: chosen by the run number"
	}
	oldest := func(s []string) time.Time {
		var o time.Time
		for k, name := range s {
			if t := led.scenario[name]; k == 0 || t.Before(o) {
				o = t
			}
		}
		return o
	}
	best := start
	for k := 1; k < len(slices); k++ {
		j := (start + k) % len(slices)
		if oldest(slices[j]).Before(oldest(slices[best])) {
			best = j
		}
	}
	if t := oldest(slices[best]); !t.IsZero() {
		return best, "ledger: its scenarios passed longest ago, the oldest at " + t.UTC().Format(time.RFC3339)
	}
	return best, "ledger: a scenario of it never passed"
}

// chooseMode is the long mode this run takes, and the due turn's mode
// whose cache (uncached names the incomplete ones) this run should build,
// or "" (see the package comment): with a ledger, of the turns due, the
// one that waited longest and has its cache, else the nemesis; without,
// real nodes when n%4 == 3, else the nemesis.
func chooseMode(led *ledger, n int, uncached []string) (mode, warm, why string) {
	// A turn's modes share its cache: uncached may name any of them, and
	// the mode to warm is named by the turn's first.
	cached := func(m string) bool {
		t := turnOf(m)
		return t == nil || !slices.ContainsFunc(t.modes, func(tm string) bool { return slices.Contains(uncached, tm) })
	}
	warmOf := func(m string) string { return turnOf(m).modes[0] }
	if led == nil {
		real := modeRealNodes
		if (n/4)%2 == 1 {
			real = modeRealNemesis
		}
		switch {
		case n%4 != 3:
			return modeNemesis, "", "no ledger: the run number's n%4 != 3"
		case !cached(real):
			return modeNemesis, warmOf(real), "no ledger: the run number's n%4 == 3, but bin/'s cache lacks the real-node tools"
		}
		return real, "", "no ledger: the run number's n%4 == 3, and (n/4)%2 picks " + real
	}
	type due struct {
		mode, why string
		wait      int // passes of other modes since the turn's last; never: more than any
	}
	var dues []due
	for _, t := range turns {
		last := map[string]int{} // a mode's last pass, 1-based; 0 never
		for k, m := range led.modes {
			last[m] = k + 1
		}
		mode, turnLast := t.modes[0], 0
		for _, m := range t.modes {
			if last[m] < last[mode] {
				mode = m
			}
			turnLast = max(turnLast, last[m])
		}
		since := len(led.modes) - turnLast
		switch {
		case turnLast == 0:
			dues = append(dues, due{mode, t.what + " never passed", len(led.modes) + 1})
		case since >= t.every:
			dues = append(dues, due{mode, fmt.Sprintf("%d passes of other modes since %s last passed (due after %d)", since, t.what, t.every), since})
		default:
			why += fmt.Sprintf("; %s: %d of %d passes of other modes since it last passed", t.what, since, t.every)
		}
	}
	why = strings.TrimPrefix(why, "; ")
	if len(dues) == 0 {
		return modeNemesis, "", "ledger: no turn due: " + why
	}
	sort.SliceStable(dues, func(i, j int) bool { return dues[i].wait > dues[j].wait })
	var waiting []string
	for _, d := range dues {
		if cached(d.mode) {
			return d.mode, "", "ledger: " + d.why + strings.Join(waiting, "")
		}
		waiting = append(waiting, fmt.Sprintf("; %s is due (%s) but bin/'s cache lacks its pieces", d.mode, d.why))
	}
	return modeNemesis, warmOf(dues[0].mode), "ledger: " + strings.TrimPrefix(strings.Join(waiting, ""), "; ")
}
