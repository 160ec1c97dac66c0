package main

import (
	"strings"
	"testing"
)

// wantRefusal checks a refusal function's answer in a table test: nil
// when want is "", else an error containing want.
func wantRefusal(t *testing.T, err error, want string) {
	t.Helper()
	switch {
	case want == "" && err != nil:
		t.Fatalf("refused: %v", err)
	case want != "" && (err == nil || !strings.Contains(err.Error(), want)):
		t.Fatalf("error %v, want %q", err, want)
	}
}
