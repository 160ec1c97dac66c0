package timing

import (
	"slices"
	"time"
)

// WindowSize is how many probes a Window keeps: with memberlist probing
// one peer at a time, about two minutes of a three-cluster ring's local
// profile, and ten of its wan profile.
const WindowSize = 128

// SignificantMicros is the least change of a round trip that is published
// or recorded again (10 ms), whatever its fraction.
const SignificantMicros int64 = 10_000

// Window keeps the last WindowSize round trips to one peer. Not safe for
// concurrent use.
type Window struct {
	samples []time.Duration
	next    int
}

// Add records one round trip; a negative one counts as zero.
func (w *Window) Add(rtt time.Duration) {
	rtt = max(rtt, 0)
	if len(w.samples) < WindowSize {
		w.samples = append(w.samples, rtt)
		return
	}
	w.samples[w.next] = rtt
	w.next = (w.next + 1) % WindowSize
}

// Stats returns the median and the 99th percentile (nearest rank: with
// WindowSize samples, the second largest, so that one stray probe does not
// set it) in microseconds, and the number of samples. Zero values without
// samples.
func (w *Window) Stats() (medianMicros, p99Micros int64, n int) {
	n = len(w.samples)
	if n == 0 {
		return 0, 0, 0
	}
	s := slices.Clone(w.samples)
	slices.Sort(s)
	return s[rank(n, 50)].Microseconds(), s[rank(n, 99)].Microseconds(), n
}

// rank is the nearest-rank index of percentile p among n sorted values.
func rank(n, p int) int {
	r := (n*p + 99) / 100 // ceil(n*p/100)
	return min(max(r, 1), n) - 1
}

// Significant says whether a round trip that moved from old to new (in
// microseconds) should be published or recorded again: it moved by more
// than a quarter of the old value and by more than SignificantMicros.
func Significant(old, new int64) bool {
	d := new - old
	if d < 0 {
		d = -d
	}
	return d > SignificantMicros && 4*d > old
}
