package main

import (
	"bytes"
	"io"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// failureScenarios is the Makefile's FAILURE_SCENARIOS, as make passes it.
func failureScenarios(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile("../../Makefile")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^FAILURE_SCENARIOS := (.*)$`).FindSubmatch(b)
	if m == nil {
		t.Fatal("no FAILURE_SCENARIOS in the Makefile")
	}
	return strings.ReplaceAll(string(m[1]), "$$", "$")
}

// Every scenario of test/multicluster runs in CI: in `make failures` or
// in exactly one slice of the rotation, each slice within the budget.
func TestEveryScenarioRuns(t *testing.T) {
	all, err := scenarios("../../test/multicluster")
	if err != nil {
		t.Fatal(err)
	}
	exclude := failureScenarios(t)
	failures := regexp.MustCompile(exclude)
	budget := 22 * time.Minute
	seen := map[string]int{}
	var nSlices int
	for run := 0; ; run++ {
		var log bytes.Buffer
		pattern, err := plan(&log, "../../test/multicluster", exclude, itoa(run), budget, nil)
		if err != nil {
			t.Fatal(err)
		}
		if run == 0 {
			t.Logf("%s", log.String())
			nSlices = strings.Count(log.String(), "(slice ") + 1
		}
		if run >= nSlices {
			break
		}
		re := regexp.MustCompile(pattern)
		var slice []string
		var est time.Duration
		for _, n := range all {
			if re.MatchString(n) {
				slice = append(slice, n)
				seen[n]++
				est += estimate(n)
			}
		}
		if len(slice) > 1 && startup+est > budget {
			t.Errorf("run %d: slice %v estimated %s, over the budget %s", run, slice, startup+est, budget)
		}
		if !strings.Contains(log.String(), "now:  "+slice[0]) {
			t.Errorf("run %d: the log does not name %s:\n%s", run, slice[0], log.String())
		}
	}
	for _, n := range all {
		switch {
		case failures.MatchString(n) && seen[n] > 0:
			t.Errorf("%s runs in make failures and in the rotation", n)
		case !failures.MatchString(n) && seen[n] != 1:
			t.Errorf("%s is in %d slices of the rotation, want 1", n, seen[n])
		}
		if _, ok := estimates[n]; !ok && !failures.MatchString(n) {
			t.Logf("%s has no estimate yet; it counts %s", n, defaultEstimate)
		}
	}
	if !slices.Contains(all, "TestScenarioUpgrade") {
		t.Errorf("the scenario list %v misses TestScenarioUpgrade", all)
	}
}

func TestPackOversized(t *testing.T) {
	estimates["TestScenarioHuge"] = time.Hour
	defer delete(estimates, "TestScenarioHuge")
	got := pack([]string{"TestScenarioA", "TestScenarioHuge", "TestScenarioB"}, 20*time.Minute)
	for _, s := range got {
		if slices.Contains(s, "TestScenarioHuge") && len(s) != 1 {
			t.Errorf("an oversized scenario shares a slice: %v", got)
		}
	}
}

func itoa(n int) string { return strconv.Itoa(n) }

// The run number comes from the commit hash, so that submissions of any
// size reach every slice; a malformed hash is an error, not slice 0.
func TestRunFromHash(t *testing.T) {
	for _, tc := range []struct {
		hash string
		want int
		bad  bool
	}{
		{hash: "19edc62a0b1c" + "ffff", want: 0x19edc62a0b1c},
		{hash: "000000000003", want: 3},
		{hash: "19edc62", bad: true},
		{hash: "zz9edc62a0b1c", bad: true},
	} {
		got, err := runFromHash(tc.hash)
		if tc.bad {
			if err == nil {
				t.Errorf("runFromHash(%q) = %d, want an error", tc.hash, got)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("runFromHash(%q) = %d, %v; want %d", tc.hash, got, err, tc.want)
		}
	}
	if _, err := runNumber(""); err != nil {
		t.Fatalf("runNumber from this checkout's HEAD: %v", err)
	}
}

// With a ledger, every slice runs within as many runs as there are
// slices, whatever the run numbers: here the same run number every time,
// which without a ledger runs one slice for ever. A slice that failed (not
// recorded) runs again.
func TestLedgerRunsEverySlice(t *testing.T) {
	exclude := failureScenarios(t)
	path := t.TempDir() + "/ledger"
	if err := os.WriteFile(path, nil, 0o644); err != nil { // an empty ledger: nothing passed yet
		t.Fatal(err)
	}
	ran := map[string]bool{}
	var first string
	var nSlices int
	for k := 0; ; k++ {
		led, err := readLedger(path)
		if err != nil {
			t.Fatal(err)
		}
		var log bytes.Buffer
		pattern, err := plan(&log, "../../test/multicluster", exclude, "7", 22*time.Minute, led)
		if err != nil {
			t.Fatal(err)
		}
		if k == 0 {
			first = pattern
			nSlices = strings.Count(log.String(), "(slice ") + 1
			if !strings.Contains(log.String(), "never passed") {
				t.Errorf("the first run with an empty ledger does not say why:\n%s", log.String())
			}
			// The first slice fails: not recorded, so it runs again.
			if again, _ := plan(io.Discard, "../../test/multicluster", exclude, "7", 22*time.Minute, led); again != pattern {
				t.Fatalf("a slice that did not pass was not chosen again: %s then %s", pattern, again)
			}
		}
		if ran[pattern] {
			break
		}
		ran[pattern] = true
		if err := appendLedger(path, passedLines(pattern, time.Unix(int64(1000+k), 0))); err != nil {
			t.Fatal(err)
		}
	}
	if len(ran) != nSlices {
		t.Fatalf("%d of %d slices ran before one came round again", len(ran), nSlices)
	}
	// The next one is the slice that passed longest ago: the first.
	led, _ := readLedger(path)
	if again, _ := plan(io.Discard, "../../test/multicluster", exclude, "7", 22*time.Minute, led); again != first {
		t.Errorf("after every slice passed, the rotation took %s, want the oldest %s", again, first)
	}
}

func passedLines(pattern string, at time.Time) []string {
	var lines []string
	for _, n := range patternNames(pattern) {
		lines = append(lines, "scenario "+n+" "+strconv.FormatInt(at.Unix(), 10))
	}
	return lines
}

// The long mode: a turn (real nodes, kind) when it never passed or after
// its count of passes of the other modes, the one that waited longest
// first, real nodes before kind on a tie; a turn whose cache is
// incomplete gives way to one whose cache is complete, else to the
// nemesis with its cache warmed; without a ledger, n%4 == 3 real nodes.
func TestChooseMode(t *testing.T) {
	const r, q, f, k, c, n = modeRealNodes, modeRealNemesis, modeRealFailures, modeKind, modeKindCut, modeNemesis
	for _, tc := range []struct {
		modes    []string
		uncached []string
		want     string
		warm     string
	}{
		// Nothing passed yet: real nodes, then kind.
		{nil, nil, r, ""},
		{[]string{n, n, n, n}, nil, r, ""},
		{[]string{r}, nil, k, ""},
		// Real nodes as before: after three passes of other modes.
		{[]string{k, r}, nil, n, ""},
		{[]string{k, r, n, n}, nil, n, ""},
		{[]string{k, r, n, n, n}, nil, q, ""},
		{[]string{k, r, k, n, n}, nil, q, ""},
		// A real-node turn takes the real-node mode that passed longest
		// ago: the real-node tests, the nemesis on real nodes, the failure
		// scenarios on real nodes.
		{[]string{r, k, q, n, n, n}, nil, f, ""},
		{[]string{f, r, k, q, n, n, n}, nil, f, ""},
		{[]string{r, f, k, q, n, n, n}, nil, r, ""},
		{[]string{f, q, k, r, n, n, n}, nil, f, ""},
		{[]string{q, f, k, r, n, n, n}, nil, q, ""},
		// Kind after five (its other mode, the network cut, this time).
		{[]string{r, k, n, n, r, n}, nil, n, ""},
		{[]string{r, k, n, n, r, n, n}, nil, c, ""},
		// Both due: the one that waited longer; on a tie real nodes.
		{[]string{r, k, n, n, n, n, n}, nil, q, ""},
		{[]string{k, r, n, n, n, n, n}, nil, c, ""},
		{[]string{n}, nil, r, ""},
		// Kind due, its cache incomplete: the nemesis, kind's cache warmed.
		{[]string{r}, []string{k}, n, k},
		{[]string{r, k, n, n, r, n, n}, []string{k}, n, k},
		// ... still due after those nemesis passes, until its cache is complete.
		{[]string{r, k, n, n, r, n, n, n}, nil, c, ""},
		// Both due, kind longer but uncached: real nodes run, nothing warmed
		// (a real-node run has no time left to warm).
		{[]string{r, k, n, n, n, n, n}, []string{k}, q, ""},
		{[]string{k, r, n, n, n, n, n}, []string{k}, q, ""},
		// Both due and uncached: the nemesis, the longer waiting one warmed.
		{[]string{k, r, n, n, n, n, n}, []string{r, k}, n, k},
		{nil, []string{r, k}, n, r},
		// Real nodes due and uncached, kind not due: as before.
		{[]string{k, r, n, n, n}, []string{r}, n, r},
		// The real-node modes share the real-node tools: either named
		// uncached holds the turn, and the turn's first mode is warmed.
		{[]string{k, r, n, n, n}, []string{q}, n, r},
		{[]string{r, k, q, n, n, n}, []string{r}, n, r},
		// A kind turn takes the kind mode that passed longer ago: the
		// zone's node stopped, then the zone cut off the network.
		{[]string{r, k, n, n, n, n, n, q}, nil, c, ""},
		{[]string{r, c, k, n, n, n, n, n, q}, nil, c, ""},
		{[]string{k, c, r, n, n, n, n, q}, nil, k, ""},
		// Either kind mode named uncached holds the turn, and the turn's
		// first mode is warmed.
		{[]string{r, k, n, n, n, n, n, q}, []string{c}, n, k},
		// Not due: a missing cache changes nothing.
		{[]string{k, r}, []string{r, k}, n, ""},
	} {
		got, warm, why := chooseMode(&ledger{modes: tc.modes}, 0, tc.uncached)
		if got != tc.want || warm != tc.warm {
			t.Errorf("modes %v, uncached %v: %s, warm %q (%s); want %s, warm %q", tc.modes, tc.uncached, got, warm, why, tc.want, tc.warm)
		}
	}
	for i, want := range []string{n, n, n, r, n, n, n, q} {
		if got, warm, _ := chooseMode(nil, i, nil); got != want || warm != "" {
			t.Errorf("no ledger, run %d: %s, warm %q; want %s", i, got, warm, want)
		}
		// A cold cache without a ledger: real nodes when their turn has
		// them cached, else the nemesis with them warmed; kind never.
		want, wantWarm := want, ""
		if want == r || want == q {
			want, wantWarm = n, r
		}
		if got, warm, _ := chooseMode(nil, i, []string{r, k}); got != want || warm != wantWarm {
			t.Errorf("no ledger, uncached, run %d: %s, warm %q; want %s, warm %q", i, got, warm, want, wantWarm)
		}
	}
}

// Run after run, each passing, every mode keeps coming: a real-node turn
// at least every fourth or fifth run (the real-node tests, the nemesis on
// real nodes and the failure scenarios on real nodes taking turns, each
// within fifteen), kind every sixth
// or seventh (its node stopped and its network cut taking turns), the nemesis (and with it the scenario slices) on most runs.
func TestModesKeepComing(t *testing.T) {
	led := &ledger{}
	last := map[string]int{}
	gap := map[string]int{}
	for i := range 120 {
		m, warm, why := chooseMode(led, i, nil)
		if warm != "" {
			t.Fatalf("run %d: warm %q with every cache complete (%s)", i, warm, why)
		}
		keys := []string{m}
		if m == modeRealNodes || m == modeRealNemesis || m == modeRealFailures {
			keys = append(keys, "real-node turn")
		}
		if m == modeKind || m == modeKindCut {
			keys = append(keys, "kind turn")
		}
		for _, key := range keys {
			if prev, ok := last[key]; ok && i-prev > gap[key] {
				gap[key] = i - prev
			}
			last[key] = i
		}
		led.modes = append(led.modes, m)
	}
	got := strings.Join(led.modes[:12], " ")
	t.Logf("the first runs: %s; the longest gaps: %v", got, gap)
	if gap["real-node turn"] > 5 || gap[modeRealNodes] > 15 || gap[modeRealNemesis] > 15 || gap[modeRealFailures] > 15 ||
		gap["kind turn"] > 7 || gap[modeKind] > 14 || gap[modeKindCut] > 14 || gap[modeNemesis] > 3 {
		t.Errorf("longest gaps between a mode's runs: %v; want a real-node turn within 5 (each of its modes 15), a kind turn 7 (each of its modes 14), the nemesis 3", gap)
	}
	count := map[string]int{}
	for _, m := range led.modes[20:] {
		count[m]++
	}
	if count[modeNemesis] < 50 || count[modeKind]+count[modeKindCut] < 12 || count[modeKindCut] < 6 ||
		count[modeRealNodes]+count[modeRealNemesis]+count[modeRealFailures] < 20 ||
		count[modeRealNodes] < 6 || count[modeRealNemesis] < 6 || count[modeRealFailures] < 6 {
		t.Errorf("modes over 100 runs: %v", count)
	}
}

// The ledger's file: what do records reads back, a torn line ignored.
func TestLedgerFile(t *testing.T) {
	path := t.TempDir() + "/bin/ledger"
	if led, err := readLedger(path); err != nil || led != nil {
		t.Fatalf("no file: %v, %v; want no ledger", led, err)
	}
	if err := do("", time.Minute, "", "", path, "^(TestScenarioA|TestScenarioB)$", false, "", modeNemesis); err != nil {
		t.Fatal(err)
	}
	f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = f.WriteString("scenario TestScenarioC")
	_ = f.Close()
	led, err := readLedger(path)
	if err != nil {
		t.Fatal(err)
	}
	if led.scenario["TestScenarioA"].IsZero() || led.scenario["TestScenarioB"].IsZero() || !led.scenario["TestScenarioC"].IsZero() {
		t.Errorf("scenarios read back: %v", led.scenario)
	}
	if !slices.Equal(led.modes, []string{modeNemesis}) {
		t.Errorf("modes read back: %v", led.modes)
	}
	if err := do("", time.Minute, "", "", path, "", false, "", modeKind); err != nil {
		t.Errorf("-passed-mode %s: %v", modeKind, err)
	}
	if err := do("", time.Minute, "", "", path, "", false, "", "kindd"); err == nil {
		t.Error("an unknown mode was recorded")
	}
	if led, _ := readLedger(path); !slices.Equal(led.modes, []string{modeNemesis, modeKind}) {
		t.Errorf("modes read back: %v", led.modes)
	}
}
