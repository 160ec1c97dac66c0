package main

import (
	"bytes"
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
		pattern, err := plan(&log, "../../test/multicluster", exclude, itoa(run), budget)
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
