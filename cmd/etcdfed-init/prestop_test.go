package main

import (
	"errors"
	"testing"
	"time"
)

func TestChooseSuccessor(t *testing.T) {
	ms := time.Millisecond
	for _, tc := range []struct {
		name  string
		cands []candidate
		want  string
	}{
		{"none", nil, ""},
		{"none answered", []candidate{{id: 1, name: "a", err: errors.New("down")}}, ""},
		{"the one that answered", []candidate{{id: 1, name: "a", applied: 900, err: errors.New("down")}, {id: 2, name: "b", applied: 10}}, "b"},
		{"most applied", []candidate{{id: 1, name: "a", applied: 100, rtt: ms}, {id: 2, name: "b", applied: 1000, rtt: 20 * ms}}, "b"},
		{"equal applied within the slack: the nearest", []candidate{{id: 1, name: "a", applied: 1000, rtt: 20 * ms}, {id: 2, name: "b", applied: 1001, rtt: 2 * ms}, {id: 3, name: "c", applied: 1002, rtt: 9 * ms}}, "b"},
		{"tie: the lowest ID", []candidate{{id: 7, name: "x", applied: 5, rtt: ms}, {id: 3, name: "y", applied: 5, rtt: ms}}, "y"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := chooseSuccessor(tc.cands)
			if tc.want == "" {
				if ok {
					t.Fatalf("chose %s, want none", got.name)
				}
				return
			}
			if !ok || got.name != tc.want {
				t.Fatalf("chose %q (%v), want %q", got.name, ok, tc.want)
			}
		})
	}
}
