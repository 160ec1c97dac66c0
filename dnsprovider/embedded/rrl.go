package embedded

import (
	"encoding/binary"
	"fmt"
	"net/netip"
	"sync"
)

// Response-rate limiting (RRL), as BIND's: a DNS server answers UDP to
// whatever source address a datagram claims, so a flood of queries with a
// victim's address as source turns the server into a reflector, each
// small query answered with a larger response. The limiter gives every
// client prefix (a /24 of IPv4, a /56 of IPv6, as BIND's defaults) a token
// bucket of responses per second. A response over the limit is dropped,
// except every Slip-th one, which is sent truncated (TC set, no records):
// as small as the query, so worthless to a reflector, while a real client
// asked in its name retries over TCP, where a source cannot be forged and
// nothing is limited. Legitimate load, a few resolvers asking for a few
// names, stays far below any sensible limit.

// RRLConfig configures response-rate limiting of UDP responses. The zero
// value (ResponsesPerSecond 0) limits nothing.
type RRLConfig struct {
	// ResponsesPerSecond each client prefix is answered at most, on
	// average; 0 turns the limiter off.
	ResponsesPerSecond int
	// Burst is how many responses a prefix may get at once after a quiet
	// time; default 2 x ResponsesPerSecond.
	Burst int
	// Slip: every Slip-th response over the limit is sent truncated
	// instead of dropped, so a real client behind the prefix retries
	// over TCP. 0 means the default 2; -1 drops every one.
	Slip int
	// IPv4PrefixLen and IPv6PrefixLen are the client prefixes that share
	// a bucket; defaults 24 and 56.
	IPv4PrefixLen, IPv6PrefixLen int
	// Exempt lists client networks never limited (loopback, a cluster's
	// own resolvers).
	Exempt []netip.Prefix
	// MaxPrefixes bounds the prefixes tracked; default 65536. Over it,
	// idle prefixes are forgotten first.
	MaxPrefixes int
}

func (c RRLConfig) withDefaults() (RRLConfig, error) {
	if c.ResponsesPerSecond < 0 {
		return c, fmt.Errorf("RRL: ResponsesPerSecond %d below 0", c.ResponsesPerSecond)
	}
	if c.Burst <= 0 {
		c.Burst = 2 * c.ResponsesPerSecond
	}
	if c.Slip == 0 {
		c.Slip = 2
	}
	if c.IPv4PrefixLen == 0 {
		c.IPv4PrefixLen = 24
	}
	if c.IPv6PrefixLen == 0 {
		c.IPv6PrefixLen = 56
	}
	if c.IPv4PrefixLen < 1 || c.IPv4PrefixLen > 32 || c.IPv6PrefixLen < 1 || c.IPv6PrefixLen > 128 {
		return c, fmt.Errorf("RRL: prefix lengths %d/%d out of range", c.IPv4PrefixLen, c.IPv6PrefixLen)
	}
	if c.MaxPrefixes <= 0 {
		c.MaxPrefixes = 65536
	}
	return c, nil
}

// rrlVerdict is what happens to one response.
type rrlVerdict uint8

const (
	rrlSend rrlVerdict = iota
	rrlDrop
	rrlSlip // send truncated
)

const rrlShards = 64

type rrlBucket struct {
	tokens  float64
	last    int64 // nanoseconds
	limited uint32
}

type rrlShard struct {
	mu      sync.Mutex
	buckets map[netip.Prefix]*rrlBucket
	_       [40]byte // keep shards' locks on their own cache lines
}

// rrl is the limiter; nil limits nothing.
type rrl struct {
	cfg      RRLConfig
	perNanos float64
	perShard int
	shards   [rrlShards]rrlShard
}

func newRRL(c RRLConfig) (*rrl, error) {
	c, err := c.withDefaults()
	if err != nil || c.ResponsesPerSecond == 0 {
		return nil, err
	}
	r := &rrl{cfg: c, perNanos: float64(c.ResponsesPerSecond) / 1e9, perShard: max(c.MaxPrefixes/rrlShards, 1)}
	for i := range r.shards {
		r.shards[i].buckets = map[netip.Prefix]*rrlBucket{}
	}
	return r, nil
}

// check takes a token for one response to src at now (nanoseconds).
func (r *rrl) check(src netip.Addr, now int64) rrlVerdict {
	if r == nil || !src.IsValid() {
		return rrlSend
	}
	for _, p := range r.cfg.Exempt {
		if p.Contains(src) {
			return rrlSend
		}
	}
	bits := r.cfg.IPv6PrefixLen
	if src.Is4() {
		bits = r.cfg.IPv4PrefixLen
	}
	pfx, err := src.Prefix(bits)
	if err != nil {
		return rrlSend
	}
	sh := &r.shards[shardOf(pfx)]
	sh.mu.Lock()
	defer sh.mu.Unlock()
	b := sh.buckets[pfx]
	if b == nil {
		if len(sh.buckets) >= r.perShard {
			r.forgetIdle(sh, now)
		}
		b = &rrlBucket{tokens: float64(r.cfg.Burst), last: now}
		sh.buckets[pfx] = b
	}
	if el := now - b.last; el > 0 {
		b.tokens = min(float64(r.cfg.Burst), b.tokens+float64(el)*r.perNanos)
		b.last = now
	}
	if b.tokens >= 1 {
		b.tokens--
		return rrlSend
	}
	b.limited++
	if r.cfg.Slip > 0 && b.limited%uint32(r.cfg.Slip) == 0 {
		return rrlSlip
	}
	return rrlDrop
}

// forgetIdle drops the shard's prefixes whose bucket has filled up again
// (idle for a burst's worth of time), or, when none has, half of them.
func (r *rrl) forgetIdle(sh *rrlShard, now int64) {
	for p, b := range sh.buckets {
		if b.tokens+float64(now-b.last)*r.perNanos >= float64(r.cfg.Burst) {
			delete(sh.buckets, p)
		}
	}
	if len(sh.buckets) < r.perShard {
		return
	}
	n := len(sh.buckets) / 2
	for p := range sh.buckets {
		if n == 0 {
			break
		}
		delete(sh.buckets, p)
		n--
	}
}

func shardOf(p netip.Prefix) int {
	a := p.Addr().As16()
	h := binary.LittleEndian.Uint64(a[0:8])*0x9e3779b97f4a7c15 ^ binary.LittleEndian.Uint64(a[8:16])
	return int((h ^ h>>29) % rrlShards)
}

// limit applies the limiter to a UDP answer to src: the answer, its
// truncated form (a slip), or nil (dropped).
func (s *Server) limit(answer []byte, src netip.Addr, now int64, st *stats) []byte {
	switch s.rrl.check(src, now) {
	case rrlDrop:
		st.rrlDropped.Add(1)
		return nil
	case rrlSlip:
		st.rrlSlipped.Add(1)
		return truncated(answer)
	}
	return answer
}

// truncated turns the response in msg into the truncated response a slip
// sends: its header with TC set and no records, and its question. It
// returns nil when msg has no question it can find.
func truncated(msg []byte) []byte {
	if len(msg) < 12 || binary.BigEndian.Uint16(msg[4:]) != 1 {
		return nil
	}
	off := 12
	for {
		if off >= len(msg) {
			return nil
		}
		l := int(msg[off])
		if l == 0 {
			off++
			break
		}
		if l&0xc0 != 0 {
			return nil // the first name of a message is never compressed
		}
		off += 1 + l
	}
	off += 4 // type and class
	if off > len(msg) {
		return nil
	}
	out := msg[:off]
	out[2] |= 0x02 // TC
	binary.BigEndian.PutUint16(out[6:], 0)
	binary.BigEndian.PutUint16(out[8:], 0)
	binary.BigEndian.PutUint16(out[10:], 0)
	return out
}
