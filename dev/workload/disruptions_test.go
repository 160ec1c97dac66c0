package workload

import (
	"testing"
	"time"
)

// A failed request is explained by a disruption when the request's time
// overlaps the disruption's bracket widened by the election timeout on
// both sides; otherwise it is named.
func TestUnexplained(t *testing.T) {
	t0 := time.Date(2026, 11, 25, 20, 0, 0, 0, time.UTC)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	stop := Disruption{Kind: DisruptionStopped, Endpoint: "main-1", From: at(10_000), To: at(10_100)}
	moved := Disruption{Kind: DisruptionLeaderChanged, Endpoint: "main-2", From: at(20_000), To: at(20_100)}
	ds := []Disruption{stop, moved}
	const et = time.Second
	for _, tc := range []struct {
		name      string
		call, ret int
		explained bool
	}{
		{"in flight when the member stopped", 9_990, 10_050, true},
		{"failed within the election timeout after it", 10_900, 11_050, true},
		{"called before, timed out after (2 s)", 8_500, 10_500, true},
		{"ended just within the timeout before it", 8_000, 9_000, true},
		{"ended 1.1 s before it", 7_000, 8_899, false},
		{"called 1.2 s after it", 11_300, 11_400, false},
		{"around the leader change", 20_500, 21_000, true},
		{"between the two, far from both", 15_000, 15_100, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := Failure{Op: "put", Key: "k", Call: at(tc.call), Return: at(tc.ret), Err: "x"}
			got := len(Unexplained([]Failure{f}, ds, et)) == 0
			if got != tc.explained {
				d, gap, _ := Nearest(f, ds)
				t.Errorf("explained %v, want %v (nearest %s, %s away)", got, tc.explained, d, gap)
			}
		})
	}
	if u := Unexplained([]Failure{{Call: at(0), Return: at(1)}}, nil, et); len(u) != 1 {
		t.Errorf("with no disruption a failure is unexplained; got %v", u)
	}
	if _, _, ok := Nearest(Failure{}, nil); ok {
		t.Error("Nearest found a disruption in none")
	}
}
