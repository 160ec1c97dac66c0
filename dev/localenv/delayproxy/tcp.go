package delayproxy

import (
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"
)

// originalDst is a redirected connection's destination before the
// REDIRECT.
func originalDst(c *net.TCPConn) (netip.AddrPort, error) {
	rc, err := c.SyscallConn()
	if err != nil {
		return netip.AddrPort{}, err
	}
	var mreq *unix.IPv6Mreq
	var gerr error
	err = rc.Control(func(fd uintptr) {
		// struct sockaddr_in fits IPv6Mreq's 20 bytes; the usual trick.
		mreq, gerr = unix.GetsockoptIPv6Mreq(int(fd), unix.SOL_IP, unix.SO_ORIGINAL_DST)
	})
	if err = errors.Join(err, gerr); err != nil {
		return netip.AddrPort{}, fmt.Errorf("delayproxy: SO_ORIGINAL_DST: %w", err)
	}
	b := mreq.Multiaddr
	return netip.AddrPortFrom(netip.AddrFrom4([4]byte{b[4], b[5], b[6], b[7]}), uint16(b[2])<<8|uint16(b[3])), nil
}

func (p *Proxy) serveTCP(r *route, l net.Listener) {
	for {
		c, err := l.Accept()
		if err != nil {
			return
		}
		go p.forwardTCP(r, c.(*net.TCPConn))
	}
}

func (p *Proxy) forwardTCP(r *route, c *net.TCPConn) {
	dst := r.Target
	if !dst.IsValid() && p.transparent {
		// TPROXY: the connection was accepted at its own destination.
		dst = c.LocalAddr().(*net.TCPAddr).AddrPort()
		dst = netip.AddrPortFrom(dst.Addr().Unmap(), dst.Port())
	}
	if !dst.IsValid() {
		var err error
		if dst, err = originalDst(c); err != nil {
			p.log.Info("Dropping a connection without its original destination", "route", r.Name, "err", err.Error())
			_ = c.Close()
			return
		}
	}
	from := c.RemoteAddr().(*net.TCPAddr).AddrPort().Addr()
	d := net.Dialer{Timeout: dialTimeout, Control: p.control, LocalAddr: &net.TCPAddr{IP: from.AsSlice()}}
	if p.transparent && isLocal(dst.Addr()) {
		d.LocalAddr = nil
	}
	u, err := d.Dial("tcp4", dst.String())
	if err != nil {
		// The peer refused, or is gone: so is the client's connection.
		_ = c.SetLinger(0)
		_ = c.Close()
		return
	}
	pp := &pipe{a: c, b: u.(*net.TCPConn)}
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		pp.abort()
		return
	}
	r.conns[pp] = struct{}{}
	r.mu.Unlock()
	pp.left.Store(2)
	done := func() {
		if pp.left.Add(-1) == 0 {
			_ = pp.a.Close()
			_ = pp.b.Close()
			r.mu.Lock()
			delete(r.conns, pp)
			r.mu.Unlock()
		}
	}
	seed := uint64(time.Now().UnixNano())
	go runDirection(r, pp, pp.a, pp.b, rand.New(rand.NewPCG(seed, 1)), done)
	go runDirection(r, pp, pp.b, pp.a, rand.New(rand.NewPCG(seed, 2)), done)
}

// pipe is one proxied TCP connection: a (the client's) and b (to the
// destination).
type pipe struct {
	a, b *net.TCPConn
	left atomic.Int32
}

// abort resets both sides.
func (p *pipe) abort() {
	_ = p.a.SetLinger(0)
	_ = p.b.SetLinger(0)
	_ = p.a.Close()
	_ = p.b.Close()
}

type chunk struct {
	buf  *[]byte
	n    int
	at   time.Time
	end  bool // EOF: close dst's write side
	fail bool // src failed: reset both
}

var bufs = sync.Pool{New: func() any { b := make([]byte, ChunkSize); return &b }}

// runDirection copies src to dst through a bounded queue, each chunk
// delivered at its time.
func runDirection(r *route, pp *pipe, src, dst *net.TCPConn, rng *rand.Rand, done func()) {
	q := make(chan chunk, QueueChunks)
	go func() { // writer
		defer done()
		defer func() { // what the reader still queues after a failure
			for ch := range q {
				if ch.buf != nil {
					bufs.Put(ch.buf)
				}
			}
		}()
		t := time.NewTimer(time.Hour)
		defer t.Stop()
		for ch := range q {
			if wait := time.Until(ch.at); wait > 0 {
				t.Reset(wait)
				<-t.C
			}
			switch {
			case ch.fail:
				pp.abort()
				return
			case ch.end:
				_ = dst.CloseWrite()
				return
			}
			_, err := dst.Write((*ch.buf)[:ch.n])
			bufs.Put(ch.buf)
			if err != nil {
				pp.abort()
				return
			}
		}
	}()
	var last time.Time
	stamp := func(n int) time.Time {
		l := *r.link.Load()
		at := time.Now().Add(l.Delay(rng))
		if l.Loss > 0 && n > 0 {
			segs := (n + MSS - 1) / MSS
			if rng.Float64() < 1-math.Pow(1-l.Loss, float64(segs)) {
				at = at.Add(l.RTO())
			}
		}
		if at.Before(last) { // never reorder bytes
			at = last
		}
		last = at
		return at
	}
	defer close(q)
	for {
		b := bufs.Get().(*[]byte)
		n, err := src.Read(*b)
		if n > 0 {
			q <- chunk{buf: b, n: n, at: stamp(n)}
		} else {
			bufs.Put(b)
		}
		if err != nil {
			// EOF is a FIN, delivered in order; anything else (a reset,
			// our own abort) resets the other side too.
			q <- chunk{at: stamp(0), end: isEOF(err), fail: !isEOF(err)}
			return
		}
	}
}

func isEOF(err error) bool { return errors.Is(err, io.EOF) }
