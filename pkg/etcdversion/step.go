package etcdversion

import (
	"errors"
	"fmt"
	"strings"
)

// ErrUnsupported: etcdfed does not run that version (an unknown minor, or
// a known-bad patch).
var ErrUnsupported = errors.New("etcdversion: unsupported etcd version")

// ErrStep: a ring cannot go from one version to the other in one change.
var ErrStep = errors.New("etcdversion: not one step")

// Check returns nil when etcdfed runs v, else an error wrapping
// ErrUnsupported that says why and what to run instead.
func Check(v Version) error {
	if msg := unsupported(v); msg != "" {
		return fmt.Errorf("%w: %s", ErrUnsupported, msg)
	}
	return nil
}

// unsupported is Check's message, "" when v is supported.
func unsupported(v Version) string {
	oldest := lines[0]
	if v.Major < oldest.Minor.Major || (v.Major == oldest.Minor.Major && v.Minor < oldest.Minor.Minor) {
		return beforeMessage()
	}
	if _, ok := LineOf(v); !ok {
		return unknownMessage()
	}
	if b, bad := badFor(v); bad {
		l, _ := LineOf(v)
		return badMessage(l, b)
	}
	return ""
}

func beforeMessage() string {
	return fmt.Sprintf("etcd versions before %s are not supported", lines[0].Minor.MinorString())
}

func unknownMessage() string {
	return fmt.Sprintf("unknown etcd version: etcdfed knows etcd %s (a newer minor version needs a newer etcdfed)", knownMinors())
}

// knownMinors is "3.5, 3.6 and 3.7".
func knownMinors() string {
	var m []string
	for _, l := range lines {
		m = append(m, l.Minor.MinorString())
	}
	if len(m) == 1 {
		return m[0]
	}
	return strings.Join(m[:len(m)-1], ", ") + " and " + m[len(m)-1]
}

func badMessage(l Line, b Bad) string {
	which := "etcd " + b.First.String()
	if b.First != b.Last {
		which = fmt.Sprintf("etcd %s to %s are", b.First, b.Last)
	} else {
		which += " is"
	}
	return fmt.Sprintf("%s refused: %s; fixed in %s: use %s (the newest %s etcdfed runs)", which, b.Why, b.Fixed, l.Newest, l.Minor.MinorString())
}

// StepError says why a ring cannot go from From to To in one change of
// spec.version, and the way it can.
type StepError struct {
	From, To Version
	// Why is etcd's rule the change breaks.
	Why string
	// Path is the way from From to To, each change one step; its first
	// entry is the change to make first. Empty when there is none.
	Path []Version
}

func (e *StepError) Error() string {
	if len(e.Path) == 0 {
		return e.Why
	}
	var rest []string
	for _, v := range e.Path[1:] {
		rest = append(rest, v.String())
	}
	return fmt.Sprintf("%s: change spec.version to %s first (then %s)", e.Why, e.Path[0], strings.Join(rest, ", then "))
}

func (e *StepError) Unwrap() error { return ErrStep }

// First is the change of spec.version to make first, ok false when there
// is no way.
func (e *StepError) First() (Version, bool) {
	if len(e.Path) == 0 {
		return Version{}, false
	}
	return e.Path[0], true
}

// Step returns nil when a ring whose members run from may have
// spec.version changed to to in one step: to is supported (Check), and
// the change stays within one minor version, or moves one minor up from a
// patch etcd supports the upgrade from, or one minor down where etcd
// supports the downgrade. Otherwise the error is Check's or a *StepError
// naming the step to take first.
func Step(from, to Version) error {
	if err := Check(to); err != nil {
		return err
	}
	why := stepRule(from, to)
	if why == "" {
		return nil
	}
	path, _ := way(from, to)
	return &StepError{From: from, To: to, Why: why, Path: path}
}

// stepRule is the rule of etcd that a change from from to a supported to
// breaks, "" when it breaks none.
func stepRule(from, to Version) string {
	if from.Major != to.Major {
		return fmt.Sprintf("etcd does not move between major versions (%s to %s)", from, to)
	}
	switch d := from.minorsAbove(to); {
	case d == 0:
		return ""
	case d == 1:
		l, _ := LineOf(to)
		if from.Compare(l.UpgradeFrom) < 0 {
			return upgradeFromMessage(l)
		}
		return ""
	case d > 1:
		return "etcd upgrades one minor version at a time"
	case d == -1:
		if l, ok := LineOf(from); !ok || !l.Downgrade {
			return fmt.Sprintf("etcd does not downgrade from %s to %s", from.MinorString(), to.MinorString())
		}
		return ""
	default:
		return "etcd downgrades one minor version at a time"
	}
}

func upgradeFromMessage(l Line) string {
	return fmt.Sprintf("moving to %s needs every member on %s or later (%s)", l.Minor.MinorString(), l.UpgradeFrom, l.UpgradeFromWhy)
}

// Path returns the changes of spec.version that take a ring whose members
// run from to the version to, each one step (Step), ending with to; empty
// when from is to. The steps between go by the newest patch of each line.
func Path(from, to Version) ([]Version, error) {
	if err := Check(to); err != nil {
		return nil, err
	}
	if from == to {
		return nil, nil
	}
	if p, ok := way(from, to); ok {
		return p, nil
	}
	return nil, &StepError{From: from, To: to, Why: stepRule(from, to)}
}

// way is the path from from to a supported to, ok false when there is
// none (a downgrade etcd does not support on the way, a version etcdfed
// does not run).
func way(from, to Version) ([]Version, bool) {
	var path []Version
	cur := from
	for range 2*len(lines) + 2 {
		if stepRule(cur, to) == "" {
			return append(path, to), true
		}
		next, ok := hop(cur, to)
		if !ok {
			return nil, false
		}
		path = append(path, next)
		cur = next
	}
	return nil, false
}

// hop is the next version on the way from cur toward to.
func hop(cur, to Version) (Version, bool) {
	if cur.Major != to.Major {
		return Version{}, false
	}
	here, known := LineOf(cur)
	switch d := cur.minorsAbove(to); {
	case d > 0:
		up, ok := LineOf(Version{cur.Major, cur.Minor + 1, 0})
		switch {
		case !ok:
			return Version{}, false
		case cur.Compare(up.UpgradeFrom) >= 0:
			return up.Newest, true
		case known && cur != here.Newest:
			// Up to the newest patch of this line first.
			return here.Newest, true
		}
		return Version{}, false
	case d < 0:
		if !known || !here.Downgrade {
			return Version{}, false
		}
		down, ok := LineOf(Version{cur.Major, cur.Minor - 1, 0})
		return down.Newest, ok
	}
	return Version{}, false
}
