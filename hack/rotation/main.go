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
// PATTERN` records a slice's scenarios after they passed. -mode prints
// which long mode .ci/run takes, "realnodes" or "nemesis": with a ledger,
// real nodes when they never passed or after three passes of the other
// (-passed-mode records one); without, the hash's h%4==3 as before. A
// cold cache has no ledger and falls back to the hash.
//
// It prints the go test -run pattern of the slice on stdout, and on stderr
// which scenarios run now, with their estimates, and which slices come
// next, so a CI log says what ran and what did not.
//
// Usage: go run ./hack/rotation -exclude REGEXP [-budget 22m] [-run N] [-dir test/multicluster] [-ledger FILE]
//
//	go run ./hack/rotation -ledger FILE -passed PATTERN
//	go run ./hack/rotation -ledger FILE [-run N] -mode
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
	"TestScenarioPlannedNoGap":                   2 * time.Minute,  // 77 s (delete, drain, a 3-member 3.6->3.7 roll at 10 ms; 187 s with the binaries built and the environment started)
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
	mode := flag.Bool("mode", false, "print the long mode this run takes (realnodes or nemesis), and exit")
	passedMode := flag.String("passed-mode", "", "record in -ledger that this mode's run passed, and exit")
	flag.Parse()
	if err := do(*exclude, *budget, *run, *dir, *ledgerPath, *passed, *mode, *passedMode); err != nil {
		fmt.Fprintln(os.Stderr, "rotation:", err)
		os.Exit(1)
	}
}

func do(exclude string, budget time.Duration, run, dir, ledgerPath, passed string, mode bool, passedMode string) error {
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
			if passedMode != modeRealNodes && passedMode != modeNemesis {
				return fmt.Errorf("-passed-mode %q: want %s or %s", passedMode, modeRealNodes, modeNemesis)
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
		m, why := chooseMode(led, n)
		fmt.Fprintf(os.Stderr, "long mode: %s (%s)\n", m, why)
		fmt.Println(m)
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

// The long modes of a CI run (.ci/run).
const (
	modeRealNodes = "realnodes"
	modeNemesis   = "nemesis"
)

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
	f, err := os.OpenFile(path, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		return fmt.Errorf("open the ledger: %w", err)
	}
	_, werr := f.WriteString(strings.Join(lines, "\n") + "\n")
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

// chooseMode is the long mode this run takes: with a ledger, real nodes
// when they never passed or the other mode passed three times since; else
// real nodes when n%4 == 3.
func chooseMode(led *ledger, n int) (string, string) {
	if led == nil {
		if n%4 == 3 {
			return modeRealNodes, "no ledger: the run number's n%4 == 3"
		}
		return modeNemesis, "no ledger: the run number's n%4 != 3"
	}
	since := 0
	for k := len(led.modes) - 1; k >= 0 && led.modes[k] != modeRealNodes; k-- {
		since++
	}
	switch {
	case !slices.Contains(led.modes, modeRealNodes):
		return modeRealNodes, "ledger: real nodes never passed"
	case since >= 3:
		return modeRealNodes, fmt.Sprintf("ledger: %d passes of the nemesis since real nodes last passed", since)
	}
	return modeNemesis, fmt.Sprintf("ledger: %d of 3 passes of the nemesis since real nodes last passed", since)
}
