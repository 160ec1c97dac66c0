package etcdversion

import (
	"errors"
	"fmt"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
)

func TestParse(t *testing.T) {
	for _, c := range []struct {
		in   string
		want Version
		ok   bool
	}{
		{"3.6.16", Version{3, 6, 16}, true},
		{"3.7.0", Version{3, 7, 0}, true},
		{"v3.6.16", Version{}, false},
		{"3.6", Version{}, false},
		{"3.6.16-0", Version{}, false},
		{"3.+6.1", Version{}, false},
		{"3.-6.1", Version{}, false},
		{"3.6.1234567890", Version{}, false},
		{"", Version{}, false},
	} {
		got, err := Parse(c.in)
		if (err == nil) != c.ok || got != c.want {
			t.Errorf("Parse(%q) = %v, %v; want %v, ok %v", c.in, got, err, c.want, c.ok)
		}
		if err != nil && !errors.Is(err, ErrMalformed) {
			t.Errorf("Parse(%q): %v does not wrap ErrMalformed", c.in, err)
		}
	}
	for in, want := range map[string]Version{"3.6.0": {3, 6, 0}, "3.6": {3, 6, 0}, "3.7.0-rc.0": {3, 7, 0}, "3.5.35+x": {3, 5, 35}} {
		if got, ok := ParseLoose(in); !ok || got != want {
			t.Errorf("ParseLoose(%q) = %v, %v; want %v", in, got, ok, want)
		}
	}
	if _, ok := ParseLoose("3"); ok {
		t.Error(`ParseLoose("3") ok`)
	}
}

// The policy's own invariants: lines one minor apart, each line's newest
// patch runnable and an allowed start of the step to the next line,
// known-bad ranges in order within their line with the fix after them.
func TestPolicyInvariants(t *testing.T) {
	for i, l := range lines {
		if l.Minor.Patch != 0 || !l.Newest.SameMinor(l.Minor) {
			t.Errorf("line %s: Minor must have patch 0 and Newest (%s) be of it", l.Minor, l.Newest)
		}
		if err := Check(l.Newest); err != nil {
			t.Errorf("line %s: its newest patch is refused: %v", l.Minor.MinorString(), err)
		}
		if i > 0 {
			prev := lines[i-1]
			if l.Minor.Major != prev.Minor.Major || l.Minor.Minor != prev.Minor.Minor+1 {
				t.Errorf("line %s does not follow %s by one minor", l.Minor, prev.Minor)
			}
			if l.UpgradeFrom != (Version{}) && (!l.UpgradeFrom.SameMinor(prev.Minor) || prev.Newest.Compare(l.UpgradeFrom) < 0) {
				t.Errorf("line %s: UpgradeFrom %s must be a %s patch no newer than %s", l.Minor.MinorString(), l.UpgradeFrom, prev.Minor.MinorString(), prev.Newest)
			}
			if l.UpgradeFrom != (Version{}) && (l.UpgradeFromWhy == "" || l.UpgradeSource == "") {
				t.Errorf("line %s: UpgradeFrom without a reason or source", l.Minor.MinorString())
			}
			if l.Downgrade && l.DowngradeSource == "" {
				t.Errorf("line %s: a downgrade without etcd's guide", l.Minor.MinorString())
			}
		}
		last := Version{}
		for j, b := range l.KnownBad {
			if !b.First.SameMinor(l.Minor) || !b.Last.SameMinor(l.Minor) || b.First.Compare(b.Last) > 0 {
				t.Errorf("line %s: bad range %s..%s", l.Minor.MinorString(), b.First, b.Last)
			}
			if j > 0 && b.First.Compare(last) <= 0 {
				t.Errorf("line %s: bad ranges overlap or are out of order at %s", l.Minor.MinorString(), b.First)
			}
			if b.Fixed.Compare(b.Last) <= 0 || b.Why == "" || b.Source == "" {
				t.Errorf("line %s: bad range %s..%s needs a fix after it, a reason and a source", l.Minor.MinorString(), b.First, b.Last)
			}
			if _, bad := badFor(b.Fixed); bad && b.Fixed.Compare(l.Newest) >= 0 {
				t.Errorf("line %s: the fix %s is itself refused", l.Minor.MinorString(), b.Fixed)
			}
			last = b.Last
		}
	}
	if Default() != lines[len(lines)-1].Newest {
		t.Errorf("Default %s is not the newest patch of the newest line", Default())
	}
}

// Every fact of the policy that comes from etcd names where etcd says so
// by a link: the known-bad ranges, the minimum patches of a minor step
// (and etcd's blog post where there is one), the downgrades and the flags
// 3.7 removed.
func TestPolicySourcesAreLinks(t *testing.T) {
	link := func(what, s string) {
		t.Helper()
		if !strings.HasPrefix(s, "https://") || strings.ContainsAny(s, " ()") {
			t.Errorf("%s: source %q is not a link", what, s)
		}
	}
	for _, l := range lines {
		for _, b := range l.KnownBad {
			link(fmt.Sprintf("%s..%s", b.First, b.Last), b.Source)
		}
		if l.UpgradeFrom != (Version{}) {
			link(l.Minor.MinorString()+" UpgradeSource", l.UpgradeSource)
		}
		if l.UpgradeBlog != "" {
			link(l.Minor.MinorString()+" UpgradeBlog", l.UpgradeBlog)
		}
		if l.Downgrade {
			link(l.Minor.MinorString()+" DowngradeSource", l.DowngradeSource)
		}
	}
	link("RemovedIn37", RemovedIn37Source)
	if m := Matrix(); !strings.Contains(m, "]("+RemovedIn37Source+")") {
		t.Errorf("the matrix does not link where etcd removed the --experimental-* flags:\n%s", m)
	}
}

// Every release etcdfed runs serves the probes the member pod uses: /livez
// and /readyz (etcd 3.5.11), /readyz failing on a learner (3.5.19). So the
// pod needs no version-aware probe path.
func TestEveryRunnableReleaseHasTheProbes(t *testing.T) {
	readyzLearnerCheck := MustParse("3.5.19") // CHANGELOG-3.5 v3.5.19; 3.6.0 has both
	for _, l := range lines {
		for p := 0; p <= l.Newest.Patch; p++ {
			v := Version{l.Minor.Major, l.Minor.Minor, p}
			if Check(v) == nil && v.Compare(readyzLearnerCheck) < 0 {
				t.Errorf("%s is runnable but has no /readyz learner check", v)
			}
		}
	}
}

func TestCheck(t *testing.T) {
	for _, c := range []struct {
		v    string
		want string // "" when runnable
	}{
		{"3.4.37", "etcd versions before 3.5 are not supported"},
		{"2.3.8", "etcd versions before 3.5 are not supported"},
		{"3.8.0", "unknown etcd version: etcdfed knows etcd 3.5, 3.6 and 3.7"},
		{"4.0.0", "unknown etcd version"},
		{"3.5.0", "etcd 3.5.0 to 3.5.22 are refused"},
		{"3.5.22", "fixed in 3.5.23: use 3.5.35"},
		{"3.5.24", "etcd 3.5.23 to 3.5.24 are refused: --force-new-cluster"},
		{"3.5.25", ""},
		{"3.5.35", ""},
		{"3.5.99", ""},
		{"3.6.1", "etcd 3.6.0 to 3.6.4 are refused"},
		{"3.6.5", "etcd 3.6.5 is refused"},
		{"3.6.6", ""},
		{"3.6.16", ""},
		{"3.7.0", ""},
		{"3.7.3", ""},
	} {
		err := Check(MustParse(c.v))
		switch {
		case c.want == "" && err != nil:
			t.Errorf("Check(%s) = %v, want nil", c.v, err)
		case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want) || !errors.Is(err, ErrUnsupported)):
			t.Errorf("Check(%s) = %v, want ErrUnsupported with %q", c.v, err, c.want)
		}
	}
}

func TestStep(t *testing.T) {
	for _, c := range []struct {
		from, to string
		want     string   // "" when one step
		path     []string // the way when it is not, first step first
	}{
		{from: "3.6.16", to: "3.6.16"},
		{from: "3.6.16", to: "3.6.8"},
		{from: "3.6.8", to: "3.6.16"},
		{from: "3.5.35", to: "3.6.16"},
		{from: "3.5.32", to: "3.6.6"},
		{from: "3.6.11", to: "3.7.0"},
		{from: "3.6.16", to: "3.7.3"},
		{from: "3.7.3", to: "3.6.16"},
		{from: "3.6.16", to: "3.5.35"},
		{from: "3.7.3", to: "3.6.6"},
		{from: "3.5.31", to: "3.6.16", want: "moving to 3.6 needs every member on 3.5.32 or later (etcd's upgrade guide: 3.5.26 repairs 'zombie members'",
			path: []string{"3.5.35", "3.6.16"}},
		{from: "3.6.10", to: "3.7.3", want: "moving to 3.7 needs every member on 3.6.11 or later", path: []string{"3.6.16", "3.7.3"}},
		{from: "3.5.35", to: "3.7.3", want: "etcd upgrades one minor version at a time", path: []string{"3.6.16", "3.7.3"}},
		{from: "3.5.25", to: "3.7.3", want: "etcd upgrades one minor version at a time", path: []string{"3.5.35", "3.6.16", "3.7.3"}},
		{from: "3.7.3", to: "3.5.35", want: "etcd downgrades one minor version at a time", path: []string{"3.6.16", "3.5.35"}},
		{from: "3.6.16", to: "3.6.3", want: "etcd 3.6.0 to 3.6.4 are refused"},
		{from: "3.6.16", to: "3.8.0", want: "unknown etcd version"},
		{from: "3.5.35", to: "3.4.37", want: "etcd versions before 3.5 are not supported"},
	} {
		err := Step(MustParse(c.from), MustParse(c.to))
		if c.want == "" {
			if err != nil {
				t.Errorf("Step(%s, %s) = %v, want one step", c.from, c.to, err)
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("Step(%s, %s) = %v, want %q", c.from, c.to, err, c.want)
			continue
		}
		var se *StepError
		if c.path == nil {
			if errors.As(err, &se) {
				t.Errorf("Step(%s, %s): a StepError for an unsupported target: %v", c.from, c.to, err)
			}
			continue
		}
		if !errors.As(err, &se) || !errors.Is(err, ErrStep) {
			t.Errorf("Step(%s, %s) = %v, want a StepError", c.from, c.to, err)
			continue
		}
		var got []string
		for _, v := range se.Path {
			got = append(got, v.String())
		}
		if !slices.Equal(got, c.path) {
			t.Errorf("Step(%s, %s) path %v, want %v", c.from, c.to, got, c.path)
		}
		if first, _ := se.First(); !strings.Contains(err.Error(), "change spec.version to "+first.String()+" first") {
			t.Errorf("Step(%s, %s) = %q does not name the first step %s", c.from, c.to, err, first)
		}
	}
}

// Path checked against brute force: every version on it is one step from
// the one before, and there is no shorter way through the lines' newest
// patches.
func TestPathSteps(t *testing.T) {
	var all []Version
	for _, l := range lines {
		for p := 0; p <= l.Newest.Patch; p++ {
			all = append(all, Version{l.Minor.Major, l.Minor.Minor, p})
		}
	}
	for _, from := range all {
		for _, l := range lines {
			to := l.Newest
			path, err := Path(from, to)
			if err != nil {
				t.Errorf("Path(%s, %s): %v", from, to, err)
				continue
			}
			cur := from
			for _, v := range path {
				if err := Step(cur, v); err != nil {
					t.Errorf("Path(%s, %s) = %v: %s to %s is not one step: %v", from, to, path, cur, v, err)
				}
				cur = v
			}
			if from != to && (len(path) == 0 || path[len(path)-1] != to) {
				t.Errorf("Path(%s, %s) = %v does not end at %s", from, to, path, to)
			}
			minors := to.Minor - from.Minor
			if minors < 0 {
				minors = -minors
			}
			if len(path) > minors+1 {
				t.Errorf("Path(%s, %s) = %v: more than one step per minor and one to a newer patch", from, to, path)
			}
		}
	}
}

func TestFlagName(t *testing.T) {
	for _, c := range []struct {
		v    string
		f    Flag
		want string
	}{
		{"3.5.35", FlagMaxLearners, ""},
		{"3.6.16", FlagMaxLearners, "max-learners"},
		{"3.7.3", FlagMaxLearners, "max-learners"},
		{"3.5.35", FlagPeerSkipClientSANVerification, "experimental-peer-skip-client-san-verification"},
		{"3.6.16", FlagPeerSkipClientSANVerification, "peer-skip-client-san-verification"},
		{"3.7.3", FlagPeerSkipClientSANVerification, "peer-skip-client-san-verification"},
	} {
		if got := FlagName(MustParse(c.v), c.f); got != c.want {
			t.Errorf("FlagName(%s, %s) = %q, want %q", c.v, c.f, got, c.want)
		}
	}
	for _, f := range Flags() {
		if n := FlagName(Default(), f); slices.Contains(RemovedIn37, n) {
			t.Errorf("the newest line spells %s as %s, which etcd 3.7 removed", f, n)
		}
	}
}

// The CRD rules render into markers controller-gen reads: no double quote
// or backslash inside a value, every rule guarded against a malformed
// version (so that int() never fails on one).
func TestCELRulesRender(t *testing.T) {
	for _, r := range CELRules() {
		for _, s := range []string{r.Rule, r.Message, r.MessageExpression} {
			if strings.ContainsAny(s, "\"\\") {
				t.Errorf("a rule text holds a double quote or backslash: %s", s)
			}
		}
		if strings.Contains(r.MessageExpression, "etcd's") {
			t.Errorf("a message expression holds an apostrophe inside a CEL string: %s", r.MessageExpression)
		}
		if strings.Contains(r.Rule, "int(") && !strings.HasPrefix(r.Rule, "!self.matches(") {
			t.Errorf("rule %s is not guarded by the format", r.Rule)
		}
		if strings.Contains(r.Rule, "oldSelf") && !strings.Contains(r.Rule, "!oldSelf.matches(") {
			t.Errorf("transition rule %s is not guarded by the old value's format", r.Rule)
		}
	}
}

// hack/tools.sh builds the newest patch of every line and the Kubernetes
// release the tests run, so "newest tested" in the matrix is what runs.
func TestToolsPinTheNewestPatches(t *testing.T) {
	b, err := os.ReadFile("../../hack/tools.sh")
	if err != nil {
		t.Fatal(err)
	}
	pins := map[string]string{}
	for _, m := range regexp.MustCompile(`(?m)^(ETCD[0-9]*_VERSION|KUBE_VERSION)=v([0-9.]+)$`).FindAllStringSubmatch(string(b), -1) {
		pins[m[1]] = m[2]
	}
	var pinned []string
	for _, k := range []string{"ETCD35_VERSION", "ETCD_VERSION", "ETCD37_VERSION"} {
		pinned = append(pinned, pins[k])
	}
	var newest []string
	for _, l := range lines {
		newest = append(newest, l.Newest.String())
	}
	if !slices.Equal(pinned, newest) {
		t.Errorf("hack/tools.sh pins etcd %v (3.5, 3.6, 3.7), the policy's newest patches are %v", pinned, newest)
	}
	if !slices.Equal([]string{pins["KUBE_VERSION"]}, KubernetesTested) {
		t.Errorf("hack/tools.sh pins Kubernetes %s, the policy says %v is tested", pins["KUBE_VERSION"], KubernetesTested)
	}
	// `make demo` runs a ring on the default: the demo's tools build it
	// (the tool of ETCD37_VERSION is etcd37, of ETCD_VERSION etcd); so do
	// `make demo NODES=real`'s (realdemo).
	var tool string
	for k, v := range pins {
		if v == Default().String() && strings.HasPrefix(k, "ETCD") {
			tool = strings.ToLower(strings.TrimSuffix(k, "_VERSION"))
		}
	}
	for _, purpose := range []string{"demo", "realdemo"} {
		demo := regexp.MustCompile(`(?m)^\s*\[` + purpose + `\]="([^"]*)"`).FindStringSubmatch(string(b))
		if demo == nil {
			t.Fatalf("hack/tools.sh has no [%s] purpose", purpose)
		}
		if tool == "" || !slices.Contains(strings.Fields(demo[1]), tool) {
			t.Errorf("hack/tools.sh --for %s builds %q, not the default %s (tool %q)", purpose, demo[1], Default(), tool)
		}
		// One etcd server build: the ring and the apiservers' stores run the
		// default's (localenv.StoreEtcd), so a first `make demo` builds no other.
		for _, other := range []string{"etcd", "etcd35", "etcd37"} {
			if other != tool && slices.Contains(strings.Fields(demo[1]), other) {
				t.Errorf("hack/tools.sh --for %s builds %s besides the default's %s: a cold first run pays for a second etcd", purpose, other, tool)
			}
		}
	}
}
