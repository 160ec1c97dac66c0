package etcdversion

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// Version is an etcd release, such as 3.6.16.
type Version struct {
	Major, Minor, Patch int
}

// ErrMalformed: the text is not an etcd release of three numbers.
var ErrMalformed = errors.New("etcdversion: not an etcd release such as 3.6.16")

// Parse reads a release of three numbers, such as 3.6.16 (no leading v,
// no suffix: what spec.version holds).
func Parse(s string) (Version, error) {
	p := strings.Split(s, ".")
	if len(p) != 3 {
		return Version{}, fmt.Errorf("%w: %q", ErrMalformed, s)
	}
	var n [3]int
	for i, part := range p {
		v, ok := number(part)
		if !ok {
			return Version{}, fmt.Errorf("%w: %q", ErrMalformed, s)
		}
		n[i] = v
	}
	return Version{n[0], n[1], n[2]}, nil
}

// MustParse is Parse for literals; it panics on a malformed one.
func MustParse(s string) Version {
	v, err := Parse(s)
	if err != nil {
		panic(err)
	}
	return v
}

// ParseLoose reads the leading major.minor[.patch] of what etcd reports
// (a server version such as 3.7.0-rc.0, a cluster or storage version such
// as 3.6.0, or 3.6); a missing patch is 0. ok is false when there is no
// major.minor.
func ParseLoose(s string) (Version, bool) {
	if i := strings.IndexAny(s, "-+"); i >= 0 {
		s = s[:i]
	}
	p := strings.SplitN(s, ".", 3)
	if len(p) < 2 {
		return Version{}, false
	}
	var n [3]int
	for i, part := range p {
		v, ok := number(part)
		if !ok {
			return Version{}, false
		}
		n[i] = v
	}
	return Version{n[0], n[1], n[2]}, true
}

// number reads decimal digits only (no sign, no spaces).
func number(s string) (int, bool) {
	if s == "" || len(s) > 9 || strings.TrimLeft(s, "0123456789") != "" {
		return 0, false
	}
	v, err := strconv.Atoi(s)
	return v, err == nil
}

// MinorOf is "3.6" of a version as etcd reports it (3.6.16, a cluster
// version 3.6.0, 3.7.0-rc.0), "" when it is none.
func MinorOf(s string) string {
	v, ok := ParseLoose(s)
	if !ok {
		return ""
	}
	return v.MinorString()
}

// String is 3.6.16.
func (v Version) String() string { return fmt.Sprintf("%d.%d.%d", v.Major, v.Minor, v.Patch) }

// MinorString is 3.6.
func (v Version) MinorString() string { return fmt.Sprintf("%d.%d", v.Major, v.Minor) }

// Compare is -1, 0 or 1 as v is lower than, equal to or higher than w.
func (v Version) Compare(w Version) int {
	for _, d := range [3]int{v.Major - w.Major, v.Minor - w.Minor, v.Patch - w.Patch} {
		switch {
		case d < 0:
			return -1
		case d > 0:
			return 1
		}
	}
	return 0
}

// SameMinor reports whether v and w are releases of one minor version.
func (v Version) SameMinor(w Version) bool { return v.Major == w.Major && v.Minor == w.Minor }

// minorsAbove is how many minor versions w is above v (negative below);
// only meaningful within one major version.
func (v Version) minorsAbove(w Version) int { return w.Minor - v.Minor }
