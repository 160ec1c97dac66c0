package timing

import (
	"slices"
	"time"
)

// WindowSize is how many probes a Window keeps: with memberlist probing
// one peer at a time, about two minutes of a three-cluster ring's local
// profile, and ten of its wan profile.
const WindowSize = 128

// The least changes of a round trip that are published (by the spoke) or
// recorded (by the hub) again, whatever their fraction: 10 ms of the
// median, 200 ms of the p99. The p99 of a window on a busy machine moves
// by hundreds of milliseconds with a few stalled probes; a derived
// heartbeat counts a quarter of it (wanted), so under 200 ms its change
// cannot move the heartbeat by the 50 ms Choose applies, and the status
// is not written for it.
const (
	SignificantMedianMicros int64 = 10_000
	SignificantP99Micros    int64 = 200_000
)

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

// TrimFrom is the number of samples from which the p99 leaves out the
// largest one.
const TrimFrom = 10

// Stats returns the median and the 99th percentile in microseconds, and
// the number of samples; zero values without samples. The p99 is the
// nearest rank (with WindowSize samples, the second largest), and from
// TrimFrom samples on never the largest: one probe stalled on a busy
// machine (a pause of the spoke, not of the network) does not set it,
// two do.
func (w *Window) Stats() (medianMicros, p99Micros int64, n int) {
	n = len(w.samples)
	if n == 0 {
		return 0, 0, 0
	}
	s := slices.Clone(w.samples)
	slices.Sort(s)
	r := rank(n, 99)
	if n >= TrimFrom {
		r = min(r, n-2)
	}
	return s[rank(n, 50)].Microseconds(), s[r].Microseconds(), n
}

// rank is the nearest-rank index of percentile p among n sorted values.
func rank(n, p int) int {
	r := (n*p + 99) / 100 // ceil(n*p/100)
	return min(max(r, 1), n) - 1
}

// Moved says whether a round trip whose median and p99 went from old to
// new (in microseconds) is published or recorded again: one of them moved
// by more than a quarter of its old value and by more than its least
// change (SignificantMedianMicros, SignificantP99Micros).
func Moved(oldMedian, oldP99, newMedian, newP99 int64) bool {
	return moved(oldMedian, newMedian, SignificantMedianMicros) || moved(oldP99, newP99, SignificantP99Micros)
}

func moved(old, new, least int64) bool {
	d := new - old
	if d < 0 {
		d = -d
	}
	return d > least && 4*d > old
}

// Confirmations is how many consecutive probes of a peer must show the
// same significant move of its round trip (Moved against what was
// published, and not Moved against each other) before the spoke publishes
// it again. A loaded prober's window flips its median between its fast
// probes and its stalled ones as probes come in (seen with twenty
// simulated spokes in one busy process: 5, 39, 8, 35 ms between the same
// two clusters, one probe apart); each flip published was a status write,
// and a pass and a status write for every ring across the pair. A real
// change of distance moves the median once the window holds more new
// probes than old, and it stays moved: it is published Confirmations-1
// probes later (two probes of the peer: a few seconds with three
// clusters, memberlist probing one peer a second).
const Confirmations = 3

// Confirm is the hysteresis over probes of one peer's published round
// trip (Confirmations). The zero value confirms nothing yet. Not safe for
// concurrent use.
type Confirm struct {
	// n is how many consecutive probes showed the move being confirmed;
	// median and p99 are the stats of its first probe.
	n           int
	median, p99 int64
}

// Publish says whether the window's stats after a probe (median, p99, in
// microseconds) are published now, given what was published before
// (published false: nothing yet, published at once). A move is published
// on the Confirmations-th consecutive probe that shows it: a probe whose
// stats are back within the dead band of what was published, or that
// moved significantly from the move's first probe (a flip, or a new
// move), starts the count again.
func (c *Confirm) Publish(published bool, pubMedian, pubP99, median, p99 int64) bool {
	if !published {
		c.n = 0
		return true
	}
	if !Moved(pubMedian, pubP99, median, p99) {
		c.n = 0
		return false
	}
	if c.n == 0 || Moved(c.median, c.p99, median, p99) {
		c.n, c.median, c.p99 = 1, median, p99
	} else {
		c.n++
	}
	if c.n < Confirmations {
		return false
	}
	c.n = 0
	return true
}
