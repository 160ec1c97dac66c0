package delayproxy

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"net"
	"net/netip"
	"sort"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/go-logr/logr"
	"golang.org/x/sys/unix"
)

// Sizes that bound the proxy's memory.
const (
	// ChunkSize is the most a TCP reader reads at once.
	ChunkSize = 16 << 10
	// QueueChunks is how many chunks wait per direction of a connection.
	QueueChunks = 64
	// MaxInFlight bounds the datagrams one UDP route holds at once.
	MaxInFlight = 4096
	// MSS is the segment size loss is drawn per (loopback's MTU is larger,
	// but a network between zones is not).
	MSS = 1448
	// MinRTO is Linux's smallest retransmission timeout: what a lost
	// segment costs at least.
	MinRTO = 200 * time.Millisecond
	// FlowIdle is how long a UDP flow lives without a datagram (as
	// conntrack's UDP timeout).
	FlowIdle = 30 * time.Second
	// MaxFlows bounds the UDP flows of one route; a datagram that would
	// open one more is dropped, as a full table would.
	MaxFlows = 1024
	// MaxDatagram is the largest datagram a flow passes back (DNS over
	// UDP with EDNS stays under 4096 bytes, memberlist under 1400).
	MaxDatagram = 16 << 10
	dialTimeout = 10 * time.Second
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

// Route is one port of the proxy.
type Route struct {
	// Name says which pair the route serves ("member-1>member-2/tcp").
	Name string
	// UDP routes datagrams; else TCP.
	UDP bool
	// Target is where the route sends: required for UDP; for TCP zero
	// means the connection's original destination (SO_ORIGINAL_DST).
	Target netip.AddrPort
	// AnswerEnds: a UDP flow ends once its answer is passed back, as a
	// DNS query does (its client sends the next from a new port); the
	// flow does not hold a socket and a goroutine for FlowIdle.
	AnswerEnds bool
}

// Proxy serves routes.
type Proxy struct {
	mark uint32
	log  logr.Logger
	// transparent: see NewTransparent.
	transparent bool

	mu     sync.Mutex
	routes map[Route]*route
	closed bool
}

// New returns a proxy whose own sockets carry mark (SO_MARK; 0: none).
func New(mark uint32, log logr.Logger) *Proxy {
	return &Proxy{mark: mark, log: log, routes: map[Route]*route{}}
}

// NewTransparent returns a proxy for traffic that passes through this
// network namespace rather than starting in it (the real-node
// environment's network, which routes between nodes): TCP reaches it by
// an iptables TPROXY rule (mangle PREROUTING, --on-ip 127.0.0.1) and
// keeps its destination as the accepted connection's local address; UDP
// reaches it by a REDIRECT rule (nat PREROUTING), which sends it to the
// address of the interface it came in on, so UDP routes listen on every
// address. Its sockets are IP_TRANSPARENT: it dials a destination from
// the sender's address, which is not one of this namespace's, and the
// caller routes the replies to its sockets (an iptables `-m socket
// --transparent` rule marking them, and a policy route of that mark to
// the local table). A destination that is an address of this namespace
// (an apiserver) is dialed from the proxy's own address: a reply to a
// foreign address would be routed away from it.
func NewTransparent(mark uint32, log logr.Logger) *Proxy {
	p := New(mark, log)
	p.transparent = true
	return p
}

type route struct {
	Route
	link atomic.Pointer[Link]
	port uint16
	// active: the route is one of Set's; a retired one serves what it
	// still holds at zero distance. Guarded by Proxy.mu, as are port,
	// tcp and udp.
	active   bool
	tcp      net.Listener
	udp      *net.UDPConn
	inFlight atomic.Int64
	// conns are the TCP connections and UDP flows, closed with the route
	// only when the proxy closes.
	mu     sync.Mutex
	conns  map[*pipe]struct{}
	flows  map[netip.AddrPort]*flow
	closed bool
}

// Set makes routes the proxy's routes: new ones get a port on
// 127.0.0.1, kept ones take their new link, and the others retire: their
// link becomes zero, a TCP route stops listening (its connections go on,
// at zero distance), a UDP route serves its flows on at zero distance
// (and takes its port back should it return). It returns the port of
// every route of routes.
func (p *Proxy) Set(routes map[Route]Link) (map[Route]uint16, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return nil, errors.New("delayproxy: closed")
	}
	var errs []error
	for k, r := range p.routes {
		if _, ok := routes[k]; !ok && r.active {
			r.link.Store(&Link{})
			r.active = false
			if r.tcp != nil {
				_ = r.tcp.Close()
				r.tcp = nil
			}
		}
	}
	ports := map[Route]uint16{}
	for k, l := range routes {
		if k.UDP && !k.Target.IsValid() {
			errs = append(errs, fmt.Errorf("delayproxy: UDP route %s has no target", k.Name))
			continue
		}
		r := p.routes[k]
		if r == nil {
			r = &route{Route: k, conns: map[*pipe]struct{}{}, flows: map[netip.AddrPort]*flow{}}
			r.link.Store(&Link{})
			p.routes[k] = r
		}
		if err := p.listen(r); err != nil {
			errs = append(errs, err)
			continue
		}
		l := l
		r.link.Store(&l)
		r.active = true
		ports[k] = r.port
	}
	return ports, errors.Join(errs...)
}

// Routes returns the routes served and their ports, by name.
func (p *Proxy) Routes() []RouteStatus {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make([]RouteStatus, 0, len(p.routes))
	for k, r := range p.routes {
		if !r.active {
			continue
		}
		r.mu.Lock()
		n := len(r.conns) + len(r.flows)
		r.mu.Unlock()
		out = append(out, RouteStatus{Route: k, Port: r.port, Link: *r.link.Load(), Open: n})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// RouteStatus is one route served.
type RouteStatus struct {
	Route
	Port uint16
	Link Link
	// Open counts its connections (TCP) or flows (UDP).
	Open int
}

// Close stops every route and closes every connection and flow.
func (p *Proxy) Close() {
	p.mu.Lock()
	p.closed = true
	routes := p.routes
	p.routes = map[Route]*route{}
	p.mu.Unlock()
	for _, r := range routes {
		if r.tcp != nil {
			_ = r.tcp.Close()
		}
		r.closeAll()
	}
}

// listen opens r's socket unless it has one: a UDP route keeps its
// socket (and port) for its life, a TCP route gets a new listener when it
// returns.
func (p *Proxy) listen(r *route) error {
	if r.UDP {
		if r.udp != nil {
			return nil
		}
		ip := net.IPv4(127, 0, 0, 1)
		if p.transparent {
			ip = net.IPv4zero
		}
		c, err := net.ListenUDP("udp4", &net.UDPAddr{IP: ip})
		if err != nil {
			return fmt.Errorf("delayproxy: listen for %s: %w", r.Name, err)
		}
		r.udp, r.port = c, uint16(c.LocalAddr().(*net.UDPAddr).Port)
		go p.serveUDP(r)
		return nil
	}
	if r.tcp != nil {
		return nil
	}
	var lc net.ListenConfig
	if p.transparent {
		// TPROXY delivers only to a transparent listener.
		lc.Control = p.control
	}
	ln, err := lc.Listen(context.Background(), "tcp4", "127.0.0.1:0")
	if err != nil {
		return fmt.Errorf("delayproxy: listen for %s: %w", r.Name, err)
	}
	l := ln.(*net.TCPListener)
	r.tcp, r.port = l, uint16(l.Addr().(*net.TCPAddr).Port)
	go p.serveTCP(r, l)
	return nil
}

func (r *route) closeAll() {
	r.mu.Lock()
	r.closed = true
	conns, flows := r.conns, r.flows
	r.conns, r.flows = map[*pipe]struct{}{}, map[netip.AddrPort]*flow{}
	r.mu.Unlock()
	for c := range conns {
		c.abort()
	}
	for _, f := range flows {
		_ = f.up.Close()
	}
	if r.udp != nil {
		_ = r.udp.Close()
	}
}

// control marks the proxy's own sockets, and makes them transparent in
// a transparent proxy.
func (p *Proxy) control(_, _ string, rc syscall.RawConn) error {
	var serr error
	err := rc.Control(func(fd uintptr) {
		if p.mark != 0 {
			serr = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_MARK, int(p.mark))
		}
		if p.transparent && serr == nil {
			serr = unix.SetsockoptInt(int(fd), unix.SOL_IP, unix.IP_TRANSPARENT, 1)
		}
	})
	return errors.Join(err, serr)
}

// isLocal reports whether a is an address of this network namespace.
func isLocal(a netip.Addr) bool {
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		return false
	}
	for _, ia := range addrs {
		if n, ok := ia.(*net.IPNet); ok {
			if ip, ok := netip.AddrFromSlice(n.IP); ok && ip.Unmap() == a {
				return true
			}
		}
	}
	return false
}

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
