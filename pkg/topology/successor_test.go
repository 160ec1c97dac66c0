package topology

import (
	"testing"
	"time"
)

func TestChooseSuccessor(t *testing.T) {
	ms := time.Millisecond
	for _, tc := range []struct {
		name  string
		cands []Successor
		want  uint64 // 0: none
	}{
		{"none", nil, 0},
		{"the most up to date, though farther", []Successor{{ID: 1, Applied: 100, Away: ms}, {ID: 2, Applied: 1000, Away: 20 * ms}}, 2},
		{"within the slack: the nearest", []Successor{{ID: 1, Applied: 1000, Away: 20 * ms}, {ID: 2, Applied: 1001, Away: 2 * ms}, {ID: 3, Applied: 1002, Away: 9 * ms}}, 2},
		// A fixed bucketing of indexes (index / slack) would part 1023
		// and 1025; the slack counts from the most advanced.
		{"the slack is counted from the most advanced", []Successor{{ID: 1, Applied: 1025, Away: 20 * ms}, {ID: 2, Applied: 1023, Away: 2 * ms}}, 2},
		{"just past the slack is behind", []Successor{{ID: 1, Applied: 1000 + AppliedSlack + 1, Away: 20 * ms}, {ID: 2, Applied: 1000, Away: 2 * ms}}, 1},
		{"behind: the less so first", []Successor{{ID: 1, Applied: 5000, Away: 20 * ms}, {ID: 2, Applied: 100, Away: ms}, {ID: 3, Applied: 900, Away: 9 * ms}, {ID: 4, Applied: 4990, Away: 30 * ms}}, 1},
		{"the most advanced is always up to date", []Successor{{ID: 2, Applied: 100, Away: ms}, {ID: 3, Applied: 900, Away: 9 * ms}, {ID: 4, Applied: 1000, Away: 30 * ms}}, 4},
		{"distance unknown (0) for all: the lowest ID", []Successor{{ID: 7, Applied: 5}, {ID: 3, Applied: 5}}, 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := ChooseSuccessor(tc.cands)
			if tc.want == 0 {
				if ok {
					t.Fatalf("chose %d, want none", got.ID)
				}
				return
			}
			if !ok || got.ID != tc.want {
				t.Fatalf("chose %d (%v), want %d", got.ID, ok, tc.want)
			}
		})
	}
}
