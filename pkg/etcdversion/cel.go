package etcdversion

import (
	"fmt"
	"sort"
	"strings"
)

// The CRD's rules on spec.version, rendered from the policy. `make
// generate` writes them as markers onto EtcdClusterSpec.Version
// (hack/versionpolicy) and controller-gen turns them into the CRD's
// x-kubernetes-validations; this package's tests check the markers in the
// tree are these. They refuse, at the API server: a malformed version, a
// minor version etcdfed does not run, a known-bad patch (Check), and a
// change of spec.version that is not one step (Step), each with a message
// that says what to do instead. The hub's planner checks the same against
// the versions the members run (a change made while an earlier one is
// still rolling out passes the API server's check of the spec alone).

// Rule is one x-kubernetes-validations rule.
type Rule struct {
	Rule    string
	Message string
	// MessageExpression, when set, computes the message (the step to take
	// first); Message is the API server's fallback should it fail.
	MessageExpression string
}

// format is the pattern of a version: three numbers of at most nine
// digits (so that int() never overflows), the major version of the lines.
func format() string {
	return fmt.Sprintf("^%d[.][0-9]{1,9}[.][0-9]{1,9}$", lines[0].Minor.Major)
}

// CELRules returns the rules on spec.version, in order.
func CELRules() []Rule {
	f := func(x string) string { return fmt.Sprintf("%s.matches('%s')", x, format()) }
	minor := func(x string) string { return fmt.Sprintf("int(%s.split('.')[1])", x) }
	patch := func(x string) string { return fmt.Sprintf("int(%s.split('.')[2])", x) }
	ok := "!" + f("self") + " || "
	both := "!" + f("self") + " || !" + f("oldSelf") + " || "

	rules := []Rule{
		{Rule: f("self"), Message: fmt.Sprintf("version must be an etcd release such as %s (three numbers, no leading v)", Default())},
		{Rule: ok + fmt.Sprintf("%s >= %d", minor("self"), lines[0].Minor.Minor), Message: beforeMessage()},
		{Rule: ok + fmt.Sprintf("%s <= %d", minor("self"), lines[len(lines)-1].Minor.Minor), Message: unknownMessage()},
	}
	for _, l := range lines {
		for _, b := range l.KnownBad {
			rules = append(rules, Rule{
				Rule: ok + fmt.Sprintf("!(%s == %d && %s >= %d && %s <= %d)",
					minor("self"), l.Minor.Minor, patch("self"), b.First.Patch, patch("self"), b.Last.Patch),
				Message: badMessage(l, b),
			})
		}
	}

	// newest: minor -> its newest patch; upgradeFrom: minor -> the
	// previous line's lowest patch a move to it starts from.
	newest, upgradeFrom := map[int]string{}, map[int]string{}
	for _, l := range lines {
		newest[l.Minor.Minor] = "'" + l.Newest.String() + "'"
		if l.UpgradeFrom != (Version{}) {
			upgradeFrom[l.Minor.Minor] = fmt.Sprint(l.UpgradeFrom.Patch)
		}
	}
	newestMap, upgradeFromMap := celMap(newest), celMap(upgradeFrom)
	up := minor("oldSelf") + " + 1"
	// The first step up from oldSelf: the next line's newest patch, or
	// this line's newest first when oldSelf is older than the next line
	// moves from.
	firstUp := fmt.Sprintf("((%[1]s) in %[2]s && %[3]s < %[2]s[%[1]s] ? %[4]s[%[5]s] : %[4]s[%[1]s])",
		up, upgradeFromMap, patch("oldSelf"), newestMap, minor("oldSelf"))
	rules = append(rules, Rule{
		Rule:    both + fmt.Sprintf("%s <= %s", minor("self"), up),
		Message: "etcd upgrades one minor version at a time: change spec.version to the next minor version first",
		MessageExpression: fmt.Sprintf("(%[1]s) in %[2]s && %[3]s in %[2]s ? 'etcd upgrades one minor version at a time: change spec.version to ' + %[4]s + ' first' : 'etcd upgrades one minor version at a time'",
			up, newestMap, minor("oldSelf"), firstUp),
	})
	for i, l := range lines {
		if i == 0 || l.UpgradeFrom == (Version{}) {
			continue
		}
		prev := lines[i-1]
		rules = append(rules, Rule{
			Rule: both + fmt.Sprintf("!(%s == %d && %s == %d) || %s >= %d",
				minor("self"), l.Minor.Minor, minor("oldSelf"), prev.Minor.Minor, patch("oldSelf"), l.UpgradeFrom.Patch),
			Message: fmt.Sprintf("%s: change spec.version to %s first", upgradeFromMessage(l), prev.Newest),
		})
	}
	down := minor("oldSelf") + " - 1"
	rules = append(rules, Rule{
		Rule:    both + fmt.Sprintf("%s >= %s", minor("self"), down),
		Message: "etcd downgrades one minor version at a time: change spec.version to the previous minor version first",
		MessageExpression: fmt.Sprintf("(%[1]s) in %[2]s ? 'etcd downgrades one minor version at a time: change spec.version to ' + %[2]s[%[1]s] + ' first' : 'etcd downgrades one minor version at a time'",
			down, newestMap),
	})
	for i, l := range lines {
		if i == 0 || l.Downgrade {
			continue
		}
		rules = append(rules, Rule{
			Rule:    both + fmt.Sprintf("!(%s == %d && %s == %d)", minor("oldSelf"), l.Minor.Minor, minor("self"), lines[i-1].Minor.Minor),
			Message: fmt.Sprintf("etcd does not downgrade from %s to %s", l.Minor.MinorString(), lines[i-1].Minor.MinorString()),
		})
	}
	return rules
}

// celMap renders a CEL map literal with int keys, in key order.
func celMap(m map[int]string) string {
	keys := make([]int, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Ints(keys)
	var parts []string
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("%d: %s", k, m[k]))
	}
	return "{" + strings.Join(parts, ", ") + "}"
}

// Markers renders the rules as kubebuilder markers, one line each, for
// the doc comment of EtcdClusterSpec.Version.
func Markers() []string {
	var out []string
	for _, r := range CELRules() {
		m := fmt.Sprintf("// +kubebuilder:validation:XValidation:rule=%q,message=%q", r.Rule, r.Message)
		if r.MessageExpression != "" {
			m += fmt.Sprintf(",messageExpression=%q", r.MessageExpression)
		}
		out = append(out, m)
	}
	return out
}
