package topology

import (
	"strconv"
	"strings"
)

// CompareNames orders member names naturally: by the part before the trailing
// digits, then by the ordinal's value, so that "main-2" < "main-10". It is
// the one member order of etcdfed (placement, status, rollouts).
func CompareNames(a, b string) int {
	pa, na := splitOrdinal(a)
	pb, nb := splitOrdinal(b)
	if c := strings.Compare(pa, pb); c != 0 {
		return c
	}
	// Compare ordinals as numbers without parsing: shorter (without leading
	// zeros) is smaller.
	ta, tb := strings.TrimLeft(na, "0"), strings.TrimLeft(nb, "0")
	if len(ta) != len(tb) {
		return len(ta) - len(tb)
	}
	if c := strings.Compare(ta, tb); c != 0 {
		return c
	}
	return strings.Compare(a, b)
}

// splitOrdinal splits a name into its prefix and trailing decimal digits.
func splitOrdinal(name string) (prefix, ordinal string) {
	i := len(name)
	for i > 0 && name[i-1] >= '0' && name[i-1] <= '9' {
		i--
	}
	return name[:i], name[i:]
}

// newNames returns n names prefix+ordinal with the lowest ordinals not taken.
func newNames(prefix string, taken map[string]bool, n int) []string {
	names := make([]string, 0, n)
	for i := 0; len(names) < n; i++ {
		name := prefix + strconv.Itoa(i)
		if !taken[name] {
			names = append(names, name)
		}
	}
	return names
}
