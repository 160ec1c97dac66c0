package text

import (
	"fmt"
	"unicode/utf8"
)

// Ellipsis ends a truncated string.
const Ellipsis = "..."

// Truncate returns s when it is at most n bytes long, and otherwise its
// start ending in "...", n bytes at most in all: what fits a field or an
// event with a size limit (a condition's message, an event's note). It
// cuts between characters, never inside one, so the result is valid
// UTF-8 when s is. An n too small for the ellipsis gets the first n bytes
// alone (cut the same way).
func Truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	if n < len(Ellipsis) {
		return s[:runeStart(s, max(n, 0))]
	}
	return s[:runeStart(s, n-len(Ellipsis))] + Ellipsis
}

// runeStart is the largest i <= at where a character of s starts.
func runeStart(s string, at int) int {
	for at > 0 && at < len(s) && !utf8.RuneStart(s[at]) {
		at--
	}
	return at
}

// Bytes formats a size for people: "312.4 MiB".
func Bytes(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	div, exp := int64(unit), 0
	for v := n / unit; v >= unit && exp < 4; v /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB", float64(n)/float64(div), "KMGTP"[exp])
}
