package version

import (
	"fmt"
	"strconv"
	"strings"
)

// The supported skew between the hub and a spoke: a spoke runs the hub's
// minor version or up to MaxSpokeMinorsBehind minors older, of the same
// major. A spoke newer than the hub is not supported: the hub reads and
// writes the objects of its own API level, so the hub upgrades first and
// the spokes follow (docs/upgrades.md). Patch versions may differ either
// way.
const MaxSpokeMinorsBehind = 1

// Skew is the verdict on one spoke's version against the hub's.
type Skew int

const (
	// SkewSupported: the pair is within the rule.
	SkewSupported Skew = iota
	// SkewUnsupported: the pair is outside the rule.
	SkewUnsupported
	// SkewUnknown: at least one side is not a release version (a
	// development build such as "dev-0123456789ab") and the two differ,
	// so the rule cannot be applied.
	SkewUnknown
)

// CheckSkew judges a spoke's reported version against the hub's. why says,
// for SkewUnsupported and SkewUnknown, what is wrong in a phrase such as
// "v0.3.1 is 2 minor versions behind the hub's v0.5.0".
func CheckSkew(hub, spoke string) (verdict Skew, why string) {
	if hub == spoke {
		return SkewSupported, ""
	}
	h, hok := parseRelease(hub)
	s, sok := parseRelease(spoke)
	if !hok || !sok {
		return SkewUnknown, fmt.Sprintf("%q and the hub's %q cannot be compared (not both release versions vMAJOR.MINOR.PATCH)", spoke, hub)
	}
	switch {
	case h.major != s.major:
		return SkewUnsupported, fmt.Sprintf("%s is of another major version than the hub's %s", spoke, hub)
	case s.minor > h.minor:
		return SkewUnsupported, fmt.Sprintf("%s is newer than the hub's %s: upgrade the hub first", spoke, hub)
	case h.minor-s.minor > MaxSpokeMinorsBehind:
		return SkewUnsupported, fmt.Sprintf("%s is %d minor versions behind the hub's %s (at most %d supported): upgrade the spoke", spoke, h.minor-s.minor, hub, MaxSpokeMinorsBehind)
	}
	return SkewSupported, ""
}

type release struct{ major, minor int }

// parseRelease reads vMAJOR.MINOR.PATCH with an optional pre-release or
// build suffix (v0.5.0-rc.1, v0.5.0+abc); the leading v is optional.
func parseRelease(v string) (release, bool) {
	v = strings.TrimPrefix(v, "v")
	if i := strings.IndexAny(v, "-+"); i >= 0 {
		v = v[:i]
	}
	parts := strings.Split(v, ".")
	if len(parts) != 3 {
		return release{}, false
	}
	var n [3]int
	for i, p := range parts {
		x, err := strconv.Atoi(p)
		if err != nil || x < 0 || len(p) > 6 {
			return release{}, false
		}
		n[i] = x
	}
	return release{n[0], n[1]}, true
}
