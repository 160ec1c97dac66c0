package text

import (
	"strings"
	"testing"
	"unicode/utf8"
)

func TestTruncate(t *testing.T) {
	for _, tc := range []struct {
		s    string
		n    int
		want string
	}{
		{"", 5, ""},
		{"short", 5, "short"},
		{"exactly10!", 10, "exactly10!"},
		{"one more than", 12, "one more ..."},
		{"abcdef", 3, "..."},
		{"abcdef", 2, "ab"},
		{"abcdef", 0, ""},
		{"abcdef", -1, ""},
		// "é" is two bytes: a cut inside it backs off to its start.
		{"aé" + strings.Repeat("x", 10), 5, "a..."},
		{"aéx" + strings.Repeat("x", 10), 6, "aé..."},
		{"日本語のテキスト", 10, "日本..."},
	} {
		got := Truncate(tc.s, tc.n)
		if got != tc.want {
			t.Errorf("Truncate(%q, %d) = %q, want %q", tc.s, tc.n, got, tc.want)
		}
		if len(got) > max(tc.n, 0) && got != tc.s {
			t.Errorf("Truncate(%q, %d) = %q: %d bytes, more than %d", tc.s, tc.n, got, len(got), tc.n)
		}
		if !utf8.ValidString(got) {
			t.Errorf("Truncate(%q, %d) = %q: not valid UTF-8", tc.s, tc.n, got)
		}
	}
}
