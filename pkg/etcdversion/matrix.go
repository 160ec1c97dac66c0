package etcdversion

import (
	"fmt"
	"strings"
)

// TestedChange is a change of spec.version a scenario of test/multicluster
// makes under the recorded workload, checked at every step.
type TestedChange struct {
	// Test is the scenario.
	Test string
	// Path is the ring's version at the start, then each change made.
	Path []Version
}

// Tested are the scenarios' version changes. They read their versions from
// here, so the matrix in the docs says what they run.
var Tested = []TestedChange{
	{Test: "TestScenarioUpgrade", Path: []Version{lines[0].Newest, lines[1].Newest, lines[2].Newest}},
	{Test: "TestScenarioDowngrade", Path: []Version{lines[1].Newest, lines[0].Newest}},
	{Test: "TestScenarioDowngrade37", Path: []Version{lines[2].Newest, lines[1].Newest}},
}

// TestedPath returns the Path of the scenario test; it panics when there is
// none (a scenario renamed without its entry here).
func TestedPath(test string) []Version {
	for _, t := range Tested {
		if t.Test == test {
			return append([]Version(nil), t.Path...)
		}
	}
	panic("etcdversion: no tested change for " + test)
}

// MatrixBegin and MatrixEnd delimit the generated matrix in
// docs/upgrades.md.
const (
	MatrixBegin = "<!-- BEGIN version matrix: generated from pkg/etcdversion by `make generate`; do not edit -->"
	MatrixEnd   = "<!-- END version matrix -->"
)

// Matrix renders the version matrix (markdown) for docs/upgrades.md,
// without the delimiters.
func Matrix() string {
	var b strings.Builder
	p := func(format string, a ...any) { fmt.Fprintf(&b, format, a...) }
	p("| etcd | newest tested patch | patches refused (why; fixed in) | moving up to it | moving down from it |\n")
	p("| --- | --- | --- | --- | --- |\n")
	for i, l := range lines {
		newest := l.Newest.String()
		if l.Newest == Default() {
			newest += " (the default for a new ring)"
		}
		var bad []string
		for _, x := range l.KnownBad {
			r := x.First.String()
			if x.First != x.Last {
				r += " to " + x.Last.String()
			}
			bad = append(bad, fmt.Sprintf("%s: %s; fixed in [%s](%s)", r, x.Why, x.Fixed, x.Source))
		}
		if len(bad) == 0 {
			bad = []string{"none"}
		}
		up := "none: the oldest line etcdfed runs"
		if i > 0 {
			up = fmt.Sprintf("from %s, one minor version up", lines[i-1].Minor.MinorString())
			if l.UpgradeFrom != (Version{}) {
				up = fmt.Sprintf("from %s or later ([etcd's guide](%s): %s)", l.UpgradeFrom, l.UpgradeSource, l.UpgradeFromWhy)
				if l.UpgradeBlog != "" {
					up = fmt.Sprintf("from %s or later ([etcd's guide](%s), [etcd's blog](%s): %s)", l.UpgradeFrom, l.UpgradeSource, l.UpgradeBlog, l.UpgradeFromWhy)
				}
			}
		}
		down := "none"
		if i > 0 {
			down = fmt.Sprintf("etcd does not downgrade from %s to %s", l.Minor.MinorString(), lines[i-1].Minor.MinorString())
			if l.Downgrade {
				down = fmt.Sprintf("to %s, after etcd's `downgrade enable %s` ([etcd's guide](%s))", lines[i-1].Minor.MinorString(), lines[i-1].Minor.MinorString(), l.DowngradeSource)
			}
		}
		p("| %s | %s | %s | %s | %s |\n", l.Minor.MinorString(), newest, strings.Join(bad, "<br>"), up, down)
	}
	p("\nA patch release of a line above that is not refused is accepted (a newer\n")
	p("one than the newest tested too); patches of one line may go up or down.\n")
	p("Any other change of `spec.version` is refused with the step to take\n")
	p("first, by the API server and again by the hub against the versions the\n")
	p("members run.\n\n")

	p("Tested changes (test/multicluster, under the recorded workload, checked at\n")
	p("every step), on member clusters of Kubernetes %s:\n\n", strings.Join(KubernetesTested, ", "))
	p("| scenario | versions |\n| --- | --- |\n")
	for _, t := range Tested {
		var vs []string
		for _, v := range t.Path {
			vs = append(vs, v.String())
		}
		p("| `%s` | %s |\n", t.Test, strings.Join(vs, " -> "))
	}

	p("\nFlags whose name depends on the version (the spoke passes the one the\n")
	p("member's version takes; etcd 3.7 refuses to start with a removed\n")
	p("`--experimental-*` name, [etcd #19959](%s)):\n\n", RemovedIn37Source)
	p("| setting |")
	for _, l := range lines {
		p(" %s |", l.Minor.MinorString())
	}
	p("\n| --- |")
	for range lines {
		p(" --- |")
	}
	p("\n")
	for _, f := range Flags() {
		p("| %s |", f)
		for _, l := range lines {
			name := "(none)"
			if n := FlagName(l.Minor, f); n != "" {
				name = "`--" + n + "`"
			}
			p(" %s |", name)
		}
		p("\n")
	}
	return b.String()
}
