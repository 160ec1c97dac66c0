package delayproxy

import (
	"context"
	"errors"
	"fmt"
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
