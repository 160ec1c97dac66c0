package embedded

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/go-logr/logr"
	"github.com/miekg/dns"
	"golang.org/x/sys/unix"

	"github.com/etcdfed/etcdfed/dnsprovider"
)

// Defaults of Config.
const (
	DefaultMaxUDPSize     = 1232 // RFC 9715 / DNS flag day 2020
	DefaultMaxTCPConns    = 256
	DefaultTCPIdleTimeout = 10 * time.Second
)

// Config configures a Server.
type Config struct {
	// Addr is the UDP and TCP address to listen on, for example
	// "0.0.0.0:53" or "127.0.0.1:0" (port 0: any free port, see Addr).
	Addr string
	// TransferAllow lists the client networks that may transfer zones
	// (AXFR) without TSIG. Requests signed with one of TSIGKeys may always
	// transfer.
	TransferAllow []netip.Prefix
	// TSIGKeys are the keys the server accepts for transfers and updates.
	TSIGKeys []TSIGKey
	// AllowUpdate accepts RFC 2136 updates signed with one of TSIGKeys.
	// Unsigned updates are always refused. A later SetZone replaces what
	// updates changed.
	AllowUpdate bool
	// UDPSockets is the number of UDP sockets (SO_REUSEPORT) each served
	// by one goroutine; 0 means GOMAXPROCS.
	UDPSockets int
	// MaxUDPSize is the EDNS UDP payload size the server offers; 0 means
	// DefaultMaxUDPSize.
	MaxUDPSize uint16
	// MaxTCPConns bounds concurrent TCP connections; 0 means
	// DefaultMaxTCPConns. Connections over the bound are closed at once.
	MaxTCPConns int
	// TCPIdleTimeout closes idle TCP connections; 0 means
	// DefaultTCPIdleTimeout.
	TCPIdleTimeout time.Duration
	// RRL limits UDP responses per client prefix (rrl.go); the zero value
	// limits nothing.
	RRL RRLConfig
	// Log receives start, stop and zone change messages.
	Log logr.Logger
	// Hold makes Start bind the sockets without answering: queries wait in
	// the sockets' queues (a resolver times out and asks another server)
	// until Release, so a server that is still loading its zones never
	// answers REFUSED for a zone it is about to serve.
	Hold bool
}

// Server is an authoritative DNS server for any number of zones, each a
// dnsprovider.RecordSet swapped atomically by SetZone. It serves UDP and
// TCP on one address. It implements dnsprovider.Provider, so the spoke can
// feed it like any other provider.
type Server struct {
	cfg    Config
	maxUDP uint16
	keys   keyring
	log    logr.Logger

	snap    atomic.Pointer[snapshot]
	writeMu sync.Mutex // serialises zone changes

	metrics *metrics
	rrl     *rrl

	mu      sync.Mutex
	started bool
	stopped bool
	held    bool
	addr    netip.AddrPort
	udp     []*net.UDPConn
	tcp     net.Listener
	conns   map[net.Conn]struct{}
	wg      sync.WaitGroup
}

var _ dnsprovider.Provider = (*Server)(nil)

// New checks cfg and returns a server that is not yet listening.
func New(cfg Config) (*Server, error) {
	if cfg.Addr == "" {
		return nil, errors.New("embedded: Addr is empty")
	}
	if _, err := netip.ParseAddrPort(cfg.Addr); err != nil {
		return nil, fmt.Errorf("embedded: Addr %q must be ip:port: %w", cfg.Addr, err)
	}
	keys, err := newKeyring(cfg.TSIGKeys)
	if err != nil {
		return nil, fmt.Errorf("embedded: %w", err)
	}
	if cfg.AllowUpdate && len(keys) == 0 {
		return nil, errors.New("embedded: AllowUpdate needs at least one TSIG key: unsigned updates are never accepted")
	}
	if cfg.MaxUDPSize == 0 {
		cfg.MaxUDPSize = DefaultMaxUDPSize
	}
	if cfg.MaxUDPSize < dns.MinMsgSize {
		return nil, fmt.Errorf("embedded: MaxUDPSize %d below %d", cfg.MaxUDPSize, dns.MinMsgSize)
	}
	if cfg.UDPSockets <= 0 {
		cfg.UDPSockets = runtime.GOMAXPROCS(0)
	}
	if cfg.MaxTCPConns <= 0 {
		cfg.MaxTCPConns = DefaultMaxTCPConns
	}
	if cfg.TCPIdleTimeout <= 0 {
		cfg.TCPIdleTimeout = DefaultTCPIdleTimeout
	}
	limiter, err := newRRL(cfg.RRL)
	if err != nil {
		return nil, fmt.Errorf("embedded: %w", err)
	}
	s := &Server{cfg: cfg, maxUDP: cfg.MaxUDPSize, keys: keys, log: cfg.Log, conns: map[net.Conn]struct{}{}, rrl: limiter}
	s.metrics = newMetrics(cfg.UDPSockets)
	s.snap.Store(&snapshot{zones: map[string]*zone{}})
	return s, nil
}

// Addr returns the address the server listens on, with the port chosen
// when Config.Addr had port 0. It is valid after Start.
func (s *Server) Addr() netip.AddrPort {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.addr
}

// Run starts the server and serves until ctx is done, then stops it.
func (s *Server) Run(ctx context.Context) error {
	if err := s.Start(); err != nil {
		return err
	}
	<-ctx.Done()
	return s.Stop()
}

// Start binds the UDP and TCP sockets and serves in the background.
func (s *Server) Start() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.started {
		return errors.New("embedded: server already started")
	}
	ap := netip.MustParseAddrPort(s.cfg.Addr)
	var err error
	for try := 0; try < 10; try++ {
		if err = s.listen(ap); err == nil {
			break
		}
		if ap.Port() != 0 {
			break
		}
	}
	if err != nil {
		return fmt.Errorf("embedded: listen on %s: %w", s.cfg.Addr, err)
	}
	s.started = true
	if s.cfg.Hold {
		s.held = true
		s.log.Info("Listening for DNS, holding queries until released", "addr", s.addr.String())
		return nil
	}
	s.serveLocked()
	return nil
}

// serveLocked starts the serving goroutines; s.mu is held.
func (s *Server) serveLocked() {
	for i, c := range s.udp {
		s.wg.Add(1)
		go s.serveUDP(c, s.metrics.udp[i])
	}
	s.wg.Add(1)
	go s.acceptTCP(s.tcp)
	s.log.Info("Serving DNS", "addr", s.addr.String(), "udpSockets", len(s.udp))
}

// Release starts answering on a server started with Config.Hold: the
// queries queued meanwhile are answered from the zones set by then. It is
// a no-op on a server that already answers, is stopped or not started.
func (s *Server) Release() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.started || s.stopped || !s.held {
		return
	}
	s.held = false
	s.serveLocked()
}

// Serving reports whether the server answers queries: started, not held,
// not stopped.
func (s *Server) Serving() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.started && !s.held && !s.stopped
}

// listen binds every socket on one port; with port 0 the TCP listener
// picks it.
func (s *Server) listen(ap netip.AddrPort) error {
	lc := net.ListenConfig{Control: func(network, address string, c syscall.RawConn) error {
		var serr error
		if err := c.Control(func(fd uintptr) {
			serr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_REUSEADDR, 1)
			if serr == nil && strings.HasPrefix(network, "udp") {
				serr = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_REUSEPORT, 1)
			}
		}); err != nil {
			return err
		}
		return serr
	}}
	// TCP first: with port 0 the kernel picks a port no other listener
	// holds, which keeps two servers from sharing a SO_REUSEPORT group.
	l, err := lc.Listen(context.Background(), "tcp", ap.String())
	if err != nil {
		return err
	}
	ap = l.Addr().(*net.TCPAddr).AddrPort()
	var udp []*net.UDPConn
	for i := 0; i < s.cfg.UDPSockets; i++ {
		pc, err := lc.ListenPacket(context.Background(), "udp", ap.String())
		if err != nil {
			for _, c := range udp {
				c.Close()
			}
			l.Close()
			return err
		}
		udp = append(udp, pc.(*net.UDPConn))
	}
	s.udp, s.tcp, s.addr = udp, l, ap
	return nil
}

// Stop closes every socket and connection and waits for the serving
// goroutines to return.
func (s *Server) Stop() error {
	s.mu.Lock()
	if !s.started || s.stopped {
		s.mu.Unlock()
		return nil
	}
	s.stopped = true
	for _, c := range s.udp {
		c.Close()
	}
	s.tcp.Close()
	for c := range s.conns {
		c.Close()
	}
	s.mu.Unlock()
	s.wg.Wait()
	s.log.Info("Stopped serving DNS", "addr", s.addr.String())
	return nil
}

func (s *Server) acceptTCP(l net.Listener) {
	defer s.wg.Done()
	for {
		c, err := l.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				continue
			}
			time.Sleep(10 * time.Millisecond) // EMFILE and friends
			continue
		}
		s.mu.Lock()
		if s.stopped || len(s.conns) >= s.cfg.MaxTCPConns {
			s.mu.Unlock()
			c.Close()
			continue
		}
		s.conns[c] = struct{}{}
		s.wg.Add(1)
		s.mu.Unlock()
		go s.serveTCP(c)
	}
}

func (s *Server) serveTCP(c net.Conn) {
	defer s.wg.Done()
	defer func() {
		c.Close()
		s.mu.Lock()
		delete(s.conns, c)
		s.mu.Unlock()
	}()
	src := netip.Addr{}
	if a, ok := c.RemoteAddr().(*net.TCPAddr); ok {
		src = a.AddrPort().Addr()
	}
	send := func(b []byte) error {
		if len(b) > dns.MaxMsgSize {
			return errors.New("message too large")
		}
		buf := make([]byte, 2+len(b))
		binary.BigEndian.PutUint16(buf, uint16(len(b)))
		copy(buf[2:], b)
		_ = c.SetWriteDeadline(time.Now().Add(s.cfg.TCPIdleTimeout))
		_, err := c.Write(buf)
		return err
	}
	in := make([]byte, 65535)
	out := make([]byte, 65535)
	var lower [256]byte
	var lenbuf [2]byte
	for {
		_ = c.SetReadDeadline(time.Now().Add(s.cfg.TCPIdleTimeout))
		if _, err := io.ReadFull(c, lenbuf[:]); err != nil {
			return
		}
		n := int(binary.BigEndian.Uint16(lenbuf[:]))
		if _, err := io.ReadFull(c, in[:n]); err != nil {
			return
		}
		s.serve(request{raw: in[:n], src: src, tcp: true, send: send, st: s.metrics.tcp}, out, &lower)
	}
}

// SetZone serves set as the zone at set.Origin(), replacing any content it
// had. The swap is atomic: a query is answered from the old or from the new
// content, never from a mix. The set needs an SOA and apex NS records.
func (s *Server) SetZone(set *dnsprovider.RecordSet) error {
	if set == nil {
		return errors.New("embedded: nil record set")
	}
	z, err := compileZone(set)
	if err != nil {
		return fmt.Errorf("embedded: %w", err)
	}
	s.writeMu.Lock()
	defer s.writeMu.Unlock()
	s.swap(func(zones map[string]*zone) { zones[z.wire] = z })
	s.log.V(1).Info("Set zone", "zone", set.Origin(), "serial", set.Serial())
	return nil
}

// SetZones replaces every zone the server serves with sets, in one swap.
func (s *Server) SetZones(sets []*dnsprovider.RecordSet) error {
	var zs []*zone
	for _, set := range sets {
		z, err := compileZone(set)
		if err != nil {
			return fmt.Errorf("embedded: %w", err)
		}
		zs = append(zs, z)
	}
	s.writeMu.Lock()
	defer s.writeMu.Unlock()
	s.swap(func(zones map[string]*zone) {
		clear(zones)
		for _, z := range zs {
			zones[z.wire] = z
		}
	})
	return nil
}

// RemoveZone stops serving a zone; it reports whether the zone was served.
func (s *Server) RemoveZone(origin string) bool {
	w, err := wireName(strings.ToLower(origin))
	if err != nil {
		return false
	}
	s.writeMu.Lock()
	defer s.writeMu.Unlock()
	if s.snap.Load().zones[w] == nil {
		return false
	}
	s.swap(func(zones map[string]*zone) { delete(zones, w) })
	s.log.V(1).Info("Removed zone", "zone", origin)
	return true
}

// swap copies the zone map, lets change edit it and publishes it. Callers
// hold writeMu.
func (s *Server) swap(change func(map[string]*zone)) {
	old := s.snap.Load()
	zones := make(map[string]*zone, len(old.zones)+1)
	for k, v := range old.zones {
		zones[k] = v
	}
	change(zones)
	s.snap.Store(&snapshot{zones: zones})
	s.metrics.zoneChange(len(zones))
}

// Zone returns the record set served at origin, or nil.
func (s *Server) Zone(origin string) *dnsprovider.RecordSet {
	w, err := wireName(strings.ToLower(origin))
	if err != nil {
		return nil
	}
	if z := s.snap.Load().zones[w]; z != nil {
		return z.set
	}
	return nil
}

// Zones returns the origins the server serves, sorted.
func (s *Server) Zones() []string {
	var out []string
	for _, z := range s.snap.Load().zones {
		out = append(out, z.origin)
	}
	slices.Sort(out)
	return out
}

// Apply implements dnsprovider.Provider: it serves set as its zone. A zone
// served for another owner is not replaced.
func (s *Server) Apply(_ context.Context, set *dnsprovider.RecordSet) error {
	if set.Owner() == "" {
		return fmt.Errorf("embedded: apply %s: the set has no ownership record", set.Origin())
	}
	if cur := s.Zone(set.Origin()); cur != nil && cur.Owner() != set.Owner() {
		return fmt.Errorf("embedded: apply %s for %q: %w (%q)", set.Origin(), set.Owner(), dnsprovider.ErrNotOwner, cur.Owner())
	}
	return s.SetZone(set)
}

// Current implements dnsprovider.Provider.
func (s *Server) Current(_ context.Context, domain, owner string) ([]dnsprovider.Record, error) {
	cur := s.Zone(dns.Fqdn(domain))
	if cur == nil || cur.Owner() != owner {
		return nil, nil
	}
	return cur.Managed(), nil
}

// Remove implements dnsprovider.Provider: it stops serving the zone if
// owner holds it.
func (s *Server) Remove(_ context.Context, domain, owner string) error {
	cur := s.Zone(dns.Fqdn(domain))
	if cur == nil {
		return nil
	}
	if cur.Owner() != owner {
		return fmt.Errorf("embedded: remove %s for %q: %w (%q)", domain, owner, dnsprovider.ErrNotOwner, cur.Owner())
	}
	s.RemoveZone(cur.Origin())
	return nil
}
