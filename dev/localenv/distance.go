package localenv

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/etcdfed/etcdfed/dev/localenv/delayproxy"
)

// Distance is what lies between the environment's units: a round trip,
// a jitter and a loss per pair of zones, of member clusters, or of the
// hub and a member cluster (units as in partition.go). The kernel here
// has no netem qdisc, so distance is made in user space: the process
// node mode sends a unit's traffic for another unit through a delaying
// proxy (package delayproxy) with iptables REDIRECT rules matched by the
// sender's cgroup and the destination's block; real nodes through a
// transparent one chosen by the sender's and the destination's blocks
// (realdistance.go).
//
// A distance is a preset, links of its own, or both (links win over the
// preset's for the same pair); its text form is what `etcdfed dev up
// --latency` and `etcdfed dev latency set` take:
//
//	three-regions
//	member-1:member-2=20ms/5ms/0.1%,zone-1a:zone-1b=1ms
//	one-region,hub:member-3=40ms
//
// A link is ROUNDTRIP[/JITTER[/LOSS%]]: each direction is delayed by
// half the round trip plus or minus half the jitter, so that a round
// trip lies within ROUNDTRIP ± JITTER; a TCP segment lost costs a
// retransmission timeout (200ms or the round trip, whichever is
// longer), a datagram lost is dropped. Links are symmetric. The most
// specific pair wins: a pair of zones over the pair of their clusters.
type Distance struct {
	// Preset is one of Presets ("" or "none": no preset).
	Preset string
	// Links are pairs of units and their link.
	Links []PairLink
}

// Link is a round trip, jitter and loss (delayproxy.Link).
type Link = delayproxy.Link

// PairLink is the link between two units, both ways.
type PairLink struct {
	A, B string
	Link
}

// Presets of Distance.
const (
	// PresetNone: zero distance everywhere.
	PresetNone = "none"
	// PresetOneRegion: every member cluster and every zone in one region,
	// 1 to 2ms apart (1.5ms ± 0.5ms).
	PresetOneRegion = "one-region"
	// PresetThreeRegions: member cluster i in region (i-1) mod 3; between
	// regions 1 and 2 10ms, 1 and 3 30ms, 2 and 3 60ms (each ± a tenth);
	// clusters of one region and zones of one cluster as one-region. The
	// hub stays at zero distance (add hub:member-N links to move it).
	PresetThreeRegions = "three-regions"
)

// Presets lists the presets.
var Presets = []string{PresetNone, PresetOneRegion, PresetThreeRegions}

// Bounds of a link.
const (
	MaxRTT  = 10 * time.Second
	MaxLoss = 0.5
)

// ErrBadDistance says a distance cannot be made as given.
var ErrBadDistance = errors.New("localenv: bad distance")

var (
	oneRegion    = Link{RTT: 1500 * time.Microsecond, Jitter: time.Millisecond}
	regionRTTs   = [3][3]time.Duration{{0, 10 * time.Millisecond, 30 * time.Millisecond}, {10 * time.Millisecond, 0, 60 * time.Millisecond}, {30 * time.Millisecond, 60 * time.Millisecond, 0}}
	regionJitter = 10 // a tenth of the round trip
)

// IsZero reports whether d adds no distance anywhere.
func (d Distance) IsZero() bool {
	if d.Preset != "" && d.Preset != PresetNone {
		return false
	}
	for _, l := range d.Links {
		if !l.IsZero() {
			return false
		}
	}
	return true
}

// String renders d in the text form ParseDistance reads ("none" when
// zero).
func (d Distance) String() string {
	var parts []string
	if d.Preset != "" && d.Preset != PresetNone {
		parts = append(parts, d.Preset)
	}
	for _, l := range d.Links {
		parts = append(parts, l.A+":"+l.B+"="+FormatLink(l.Link))
	}
	if len(parts) == 0 {
		return PresetNone
	}
	return strings.Join(parts, ",")
}

// MarshalText stores a distance as its text form (state.json).
func (d Distance) MarshalText() ([]byte, error) { return []byte(d.String()), nil }

// UnmarshalText reads the text form.
func (d *Distance) UnmarshalText(b []byte) error {
	v, err := ParseDistance(string(b))
	if err != nil {
		return err
	}
	*d = v
	return nil
}

// FormatLink renders a link as ROUNDTRIP[/JITTER[/LOSS%]].
func FormatLink(l Link) string {
	s := l.RTT.String()
	if l.Jitter > 0 || l.Loss > 0 {
		s += "/" + l.Jitter.String()
	}
	if l.Loss > 0 {
		s += "/" + strconv.FormatFloat(l.Loss*100, 'f', -1, 64) + "%"
	}
	return s
}

// ParseDistance reads a distance's text form: a preset and/or
// comma-separated links A:B=ROUNDTRIP[/JITTER[/LOSS%]]. It checks the
// syntax and the bounds; the unit names are checked against a topology
// when the distance is set.
func ParseDistance(s string) (Distance, error) {
	var d Distance
	s = strings.TrimSpace(s)
	if s == "" {
		return d, fmt.Errorf("%w: empty (give a preset: %s, or links like zone-1:zone-2=20ms/5ms/0.1%%)", ErrBadDistance, strings.Join(Presets, ", "))
	}
	seen := map[[2]string]bool{}
	for i, item := range strings.Split(s, ",") {
		item = strings.TrimSpace(item)
		pair, spec, isLink := strings.Cut(item, "=")
		if !isLink {
			if strings.Contains(item, ":") {
				return d, fmt.Errorf("%w: %q: a link needs its round trip: A:B=ROUNDTRIP[/JITTER[/LOSS%%]], e.g. %s=20ms", ErrBadDistance, item, item)
			}
			if i != 0 {
				return d, fmt.Errorf("%w: %q: a preset comes first, links are A:B=ROUNDTRIP[/JITTER[/LOSS%%]]", ErrBadDistance, item)
			}
			if !isPreset(item) {
				return d, fmt.Errorf("%w: no preset %q (presets: %s; or links like zone-1:zone-2=20ms/5ms/0.1%%)", ErrBadDistance, item, strings.Join(Presets, ", "))
			}
			d.Preset = item
			continue
		}
		a, b, ok := strings.Cut(pair, ":")
		a, b = strings.TrimSpace(a), strings.TrimSpace(b)
		if !ok || a == "" || b == "" {
			return d, fmt.Errorf("%w: %q: want A:B=ROUNDTRIP[/JITTER[/LOSS%%]] (two units, e.g. zone-1:zone-2)", ErrBadDistance, item)
		}
		if a == b {
			return d, fmt.Errorf("%w: %q: a unit has no distance to itself", ErrBadDistance, item)
		}
		key := [2]string{min(a, b), max(a, b)}
		if seen[key] {
			return d, fmt.Errorf("%w: %s:%s is given twice", ErrBadDistance, a, b)
		}
		seen[key] = true
		l, err := ParseLink(strings.TrimSpace(spec))
		if err != nil {
			return d, fmt.Errorf("%w: %s:%s: %w", ErrBadDistance, a, b, err)
		}
		d.Links = append(d.Links, PairLink{A: a, B: b, Link: l})
	}
	if d.Preset == PresetNone && len(d.Links) > 0 {
		d.Preset = ""
	}
	return d, nil
}

func isPreset(s string) bool {
	for _, p := range Presets {
		if s == p {
			return true
		}
	}
	return false
}

// ParseLink reads ROUNDTRIP[/JITTER[/LOSS%]]: "20ms", "20ms/5ms",
// "20ms/5ms/0.1%".
func ParseLink(s string) (Link, error) {
	var l Link
	parts := strings.Split(s, "/")
	if len(parts) > 3 || s == "" {
		return l, fmt.Errorf("link %q: want ROUNDTRIP[/JITTER[/LOSS%%]], e.g. 20ms/5ms/0.1%%", s)
	}
	dur := func(what, v string) (time.Duration, error) {
		d, err := time.ParseDuration(strings.TrimSpace(v))
		if err != nil {
			return 0, fmt.Errorf("%s %q: want a duration with its unit, e.g. 20ms", what, v)
		}
		if d < 0 || d > MaxRTT {
			return 0, fmt.Errorf("%s %s: want 0..%s", what, d, MaxRTT)
		}
		return d, nil
	}
	var err error
	if l.RTT, err = dur("round trip", parts[0]); err != nil {
		return l, err
	}
	if len(parts) > 1 {
		if l.Jitter, err = dur("jitter", parts[1]); err != nil {
			return l, err
		}
		if l.Jitter > l.RTT {
			return l, fmt.Errorf("jitter %s exceeds the round trip %s (a delay cannot be negative)", l.Jitter, l.RTT)
		}
	}
	if len(parts) > 2 {
		v := strings.TrimSpace(parts[2])
		num, ok := strings.CutSuffix(v, "%")
		f, err := strconv.ParseFloat(num, 64)
		if !ok || err != nil {
			return l, fmt.Errorf("loss %q: want a percentage, e.g. 0.1%%", v)
		}
		if f < 0 || f/100 > MaxLoss {
			return l, fmt.Errorf("loss %s: want 0%%..%g%%", v, MaxLoss*100)
		}
		l.Loss = f / 100
	}
	return l, nil
}
