// Package faultproxy is a TCP proxy that tests put in front of a real
// server to make it fail the ways servers fail in production: answering
// normally, refusing (every connection reset at once, like a crashed
// process), or black-holing (connections accepted, requests read, nothing
// ever answered; established connections freeze mid-stream, like a hung
// process or a load balancer that lost its backend).
package faultproxy

import (
	"fmt"
	"io"
	"net"
	"sync"
)

// Mode is how the proxy treats connections.
type Mode int

const (
	// Forward passes bytes both ways.
	Forward Mode = iota
	// Reset closes every connection, new and established.
	Reset
	// BlackHole accepts and reads but never answers; established
	// connections stop moving bytes. Leaving BlackHole closes them, as a
	// recovered peer would have long forgotten them.
	BlackHole
)

func (m Mode) String() string {
	switch m {
	case Forward:
		return "forward"
	case Reset:
		return "reset"
	case BlackHole:
		return "black-hole"
	}
	return fmt.Sprintf("Mode(%d)", int(m))
}

// Proxy forwards one listening address to one target.
type Proxy struct {
	ln     net.Listener
	target string

	mu    sync.Mutex
	cond  *sync.Cond
	mode  Mode
	conns map[net.Conn]struct{}
	done  bool
	wg    sync.WaitGroup
}

// Start listens on listen (host:port; port 0 picks one) and forwards to
// target.
func Start(listen, target string) (*Proxy, error) {
	ln, err := net.Listen("tcp", listen)
	if err != nil {
		return nil, fmt.Errorf("faultproxy: listen %s: %w", listen, err)
	}
	p := &Proxy{ln: ln, target: target, conns: map[net.Conn]struct{}{}}
	p.cond = sync.NewCond(&p.mu)
	p.wg.Add(1)
	go p.serve()
	return p, nil
}

// Addr is the address the proxy listens on.
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// Mode returns the current mode.
func (p *Proxy) Mode() Mode {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.mode
}

// SetMode switches the mode. Entering Reset, or leaving BlackHole, closes
// every established connection.
func (p *Proxy) SetMode(m Mode) {
	p.mu.Lock()
	old := p.mode
	p.mode = m
	var drop []net.Conn
	if m == Reset || (old == BlackHole && m != BlackHole) {
		for c := range p.conns {
			drop = append(drop, c)
			delete(p.conns, c)
		}
	}
	p.cond.Broadcast()
	p.mu.Unlock()
	for _, c := range drop {
		_ = c.Close()
	}
}

// Close stops listening and closes every connection.
func (p *Proxy) Close() error {
	p.mu.Lock()
	p.done = true
	var drop []net.Conn
	for c := range p.conns {
		drop = append(drop, c)
	}
	p.conns = map[net.Conn]struct{}{}
	p.cond.Broadcast()
	p.mu.Unlock()
	err := p.ln.Close()
	for _, c := range drop {
		_ = c.Close()
	}
	p.wg.Wait()
	return err
}

func (p *Proxy) track(cs ...net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.done {
		return false
	}
	for _, c := range cs {
		p.conns[c] = struct{}{}
	}
	return true
}

func (p *Proxy) serve() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		switch p.Mode() {
		case Reset:
			_ = c.Close()
		case BlackHole:
			if !p.track(c) {
				_ = c.Close()
				continue
			}
			go func() { _, _ = io.Copy(io.Discard, c) }()
		default:
			go p.forward(c)
		}
	}
}

func (p *Proxy) forward(c net.Conn) {
	t, err := net.Dial("tcp", p.target)
	if err != nil {
		_ = c.Close()
		return
	}
	if !p.track(c, t) {
		_ = c.Close()
		_ = t.Close()
		return
	}
	go p.pipe(t, c)
	go p.pipe(c, t)
}

// pipe copies src to dst; while the proxy black-holes, bytes read are held
// back (the connection freezes).
func (p *Proxy) pipe(dst, src net.Conn) {
	defer func() { _ = dst.Close(); _ = src.Close() }()
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			if !p.pass(src) {
				return
			}
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

// pass waits while the proxy black-holes; false once the connection was
// dropped.
func (p *Proxy) pass(c net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	for p.mode == BlackHole && !p.done {
		if _, ok := p.conns[c]; !ok {
			return false
		}
		p.cond.Wait()
	}
	_, ok := p.conns[c]
	return ok && !p.done
}
