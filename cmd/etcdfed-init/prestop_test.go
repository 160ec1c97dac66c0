package main

import (
	"errors"
	"testing"
	"time"
)

// TestChooseSuccessor: the hook leaves out the voters that did not answer
// and ranks the rest as topology.ChooseSuccessor does.
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
		// The ranking itself: topology.ChooseSuccessor's tests.
		{"the probe's round trip is the distance", []candidate{{id: 1, name: "a", applied: 1000, rtt: 20 * ms}, {id: 2, name: "b", applied: 1001, rtt: 2 * ms}}, "b"},
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
