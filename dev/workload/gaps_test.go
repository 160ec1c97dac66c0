package workload

import (
	"slices"
	"testing"
	"time"
)

func TestKeepLongest(t *testing.T) {
	t0 := time.Date(2026, 11, 30, 0, 0, 0, 0, time.UTC)
	var gaps []Gap
	for i, ms := range []int{5, 80, 12, 140, 7, 80, 3, 96, 1} {
		gaps = keepLongest(gaps, Gap{Began: t0.Add(time.Duration(i) * time.Second), Took: time.Duration(ms) * time.Millisecond}, 4)
	}
	var got []int
	for _, g := range gaps {
		got = append(got, int(g.Took/time.Millisecond))
	}
	if want := []int{140, 96, 80, 80}; !slices.Equal(got, want) {
		t.Fatalf("kept %v, want %v", got, want)
	}
	if gaps[0].Began != t0.Add(3*time.Second) {
		t.Fatalf("the longest gap began at %s, want the fourth", gaps[0].Began)
	}
}
