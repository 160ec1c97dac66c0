package delayproxy

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"
)

// flow is one UDP sender of a route: its datagrams leave from up, bound
// to the sender's address; replies come back through the route's socket.
type flow struct {
	client netip.AddrPort
	up     *net.UDPConn
	last   atomic.Int64 // unix nanoseconds of the last datagram
}

func (p *Proxy) serveUDP(r *route) {
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 3))
	var rngMu sync.Mutex
	draw := func() (time.Duration, bool) {
		l := *r.link.Load()
		rngMu.Lock()
		defer rngMu.Unlock()
		if l.Loss > 0 && rng.Float64() < l.Loss {
			return 0, false
		}
		return l.Delay(rng), true
	}
	buf := make([]byte, 64<<10)
	for {
		n, from, err := r.udp.ReadFromUDPAddrPort(buf)
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			continue
		}
		f, err := p.flowFor(r, from, draw)
		if err != nil {
			p.log.V(1).Info("Dropping a datagram", "route", r.Name, "err", err.Error())
			continue
		}
		f.last.Store(time.Now().UnixNano())
		d, ok := draw()
		if !ok {
			continue
		}
		later(r, buf[:n], d, func(b []byte) { _, _ = f.up.WriteToUDPAddrPort(b, r.Target) })
	}
}

// later sends a copy of b after d, unless the route holds too many
// datagrams already.
func later(r *route, b []byte, d time.Duration, send func([]byte)) {
	if r.inFlight.Add(1) > MaxInFlight {
		r.inFlight.Add(-1)
		return
	}
	cp := append([]byte(nil), b...)
	if d <= 0 {
		send(cp)
		r.inFlight.Add(-1)
		return
	}
	time.AfterFunc(d, func() {
		send(cp)
		r.inFlight.Add(-1)
	})
}

func (p *Proxy) flowFor(r *route, from netip.AddrPort, draw func() (time.Duration, bool)) (*flow, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return nil, net.ErrClosed
	}
	if f := r.flows[from]; f != nil {
		return f, nil
	}
	if len(r.flows) >= MaxFlows {
		return nil, fmt.Errorf("%d flows already", MaxFlows)
	}
	lc := net.ListenConfig{Control: p.control}
	pc, err := lc.ListenPacket(context.Background(), "udp4", netip.AddrPortFrom(from.Addr(), 0).String())
	if err != nil {
		return nil, fmt.Errorf("bind %s: %w", from.Addr(), err)
	}
	up := pc.(*net.UDPConn)
	f := &flow{client: from, up: up}
	r.flows[from] = f
	go func() { // replies, back to the client from the route's socket
		defer func() {
			_ = up.Close()
			r.mu.Lock()
			if r.flows[from] == f {
				delete(r.flows, from)
			}
			r.mu.Unlock()
		}()
		buf := make([]byte, MaxDatagram)
		for {
			_ = up.SetReadDeadline(time.Now().Add(FlowIdle))
			n, src, err := up.ReadFromUDPAddrPort(buf)
			if err != nil {
				var ne net.Error
				if errors.As(err, &ne) && ne.Timeout() && time.Since(time.Unix(0, f.last.Load())) < FlowIdle {
					continue
				}
				return
			}
			if src != r.Target {
				continue
			}
			f.last.Store(time.Now().UnixNano())
			if d, ok := draw(); ok {
				later(r, buf[:n], d, func(b []byte) { _, _ = r.udp.WriteToUDPAddrPort(b, from) })
			}
			if r.AnswerEnds {
				return
			}
		}
	}()
	return f, nil
}
