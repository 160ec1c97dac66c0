package delayproxy

import (
	"math/rand/v2"
	"time"
)

// Link is what lies between two units.
type Link struct {
	// RTT is the round trip; each direction is delayed by half of it.
	RTT time.Duration
	// Jitter spreads each direction uniformly over RTT/2 ± Jitter/2, so
	// a round trip stays within RTT ± Jitter (see Delay).
	Jitter time.Duration
	// Loss is the probability (0..1) that a segment or datagram is lost.
	Loss float64
}

// IsZero reports whether the link adds nothing.
func (l Link) IsZero() bool { return l == Link{} }

// Delay draws one direction's delay: RTT/2 plus a uniform draw from
// ±Jitter/2, so that a round trip (two directions) stays within
// RTT ± Jitter.
func (l Link) Delay(r *rand.Rand) time.Duration {
	d := l.RTT / 2
	if l.Jitter > 0 {
		d += time.Duration((r.Float64() - 0.5) * float64(l.Jitter))
	}
	return max(d, 0)
}

// RTO is what a lost TCP segment costs on top of its delay: a
// retransmission timeout, MinRTO or the round trip with its jitter,
// whichever is longer.
func (l Link) RTO() time.Duration { return max(MinRTO, l.RTT+l.Jitter) }
