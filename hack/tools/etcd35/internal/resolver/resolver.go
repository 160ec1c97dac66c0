// Package resolver points Go's DNS resolver at the DNS servers named in the
// ETCDFED_DNS_SERVERS environment variable (comma-separated host:port).
//
// The local environment runs etcd as plain processes on one machine, where
// the ring's DNS servers listen on loopback ports other than 53 and the
// machine's /etc/resolv.conf must not be touched. Kubelet would give a pod
// its cluster DNS; this package is the local stand-in. Without the variable
// nothing changes and the binaries behave exactly as upstream's. The code
// below the package clause is internal/resolverenv's, kept equal by that
// package's tests.
package resolver

import (
	"context"
	"errors"
	"net"
	"os"
	"slices"
	"strings"
	"sync"
	"time"
)

// EnvVar names the variable read by Install.
const EnvVar = "ETCDFED_DNS_SERVERS"

// Install replaces net.DefaultResolver when EnvVar is set.
//
// Each UDP query goes to every server at once (but those that refused its
// name lately: see refusals) and the first answer wins: the servers are
// the spokes of several member clusters, and the point of the ring is
// that some of them may be gone. A dead server's port refuses (or a frozen
// one never answers) while a live one answers; sending to one server at a
// time would make every lookup a gamble on which one comes up, and a lost
// gamble costs the resolver's whole timeout. TCP (only after a truncated
// answer) tries the servers in turn.
func Install() {
	servers := parse(os.Getenv(EnvVar))
	if len(servers) == 0 {
		return
	}
	net.DefaultResolver = NewResolver(servers)
}

// NewResolver is a resolver asking servers (host:port) as Install's does:
// each UDP query to all of them but those that refused its name lately,
// the first answer that is not REFUSED wins.
func NewResolver(servers []string) *net.Resolver {
	return &net.Resolver{PreferGo: true, Dial: dialer(servers)}
}

func dialer(servers []string) func(ctx context.Context, network, _ string) (net.Conn, error) {
	known := &refusals{servers: servers}
	return func(ctx context.Context, network, _ string) (net.Conn, error) {
		var d net.Dialer
		if strings.HasPrefix(network, "udp") {
			return &fanout{known: known, network: network, packets: make(chan []byte, 4*len(servers)), done: make(chan struct{}), wake: make(chan struct{})}, nil
		}
		var err error
		for _, server := range servers {
			var c net.Conn
			if c, err = d.DialContext(ctx, network, server); err == nil {
				return c, nil
			}
		}
		return nil, err
	}
}

func parse(v string) []string {
	var out []string
	for _, s := range strings.Split(v, ",") {
		if s = strings.TrimSpace(s); s != "" {
			out = append(out, s)
		}
	}
	return out
}

// refusals remembers, per query name, which servers answered it REFUSED:
// a spoke serves the zones of the rings with members in its member
// cluster and refuses the others, and that changes only when a ring's
// members move between clusters. A query goes first to the servers not
// known to refuse its name (for a fleet's hub, the three to five spokes of
// a ring's clusters instead of every spoke: a hub over twenty spokes sent
// twenty queries per lookup, forty per name with the IPv6 one, and on two
// cores their lookups piled up faster than the spokes answered them).
type refusals struct {
	servers []string

	mu sync.Mutex
	by map[string][]time.Time // query name -> until when each server is known to refuse it
}

// refusalMemory is how long a refusal is remembered. A stale memory costs
// little: the query goes to every other server as soon as one asked
// refuses or fails, or none answered within refusalGrace.
const refusalMemory = 30 * time.Second

// split returns the indexes of the servers to ask first about name and of
// the others.
func (r *refusals) split(name string, now time.Time) (first, rest []int) {
	r.mu.Lock()
	until := r.by[name]
	for i := range r.servers {
		if until != nil && now.Before(until[i]) {
			rest = append(rest, i)
		} else {
			first = append(first, i)
		}
	}
	r.mu.Unlock()
	if len(first) == 0 { // every server refused lately: ask them all again
		return rest, nil
	}
	return first, rest
}

// note records server i's answer about name: refused or not.
func (r *refusals) note(name string, i int, refused bool, now time.Time) {
	if name == "" {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	until := r.by[name]
	if !refused {
		if until != nil {
			until[i] = time.Time{}
		}
		return
	}
	if r.by == nil {
		r.by = map[string][]time.Time{}
	}
	if until == nil {
		if len(r.by) >= maxRemembered {
			r.forget(now)
		}
		until = make([]time.Time, len(r.servers))
		r.by[name] = until
	}
	until[i] = now.Add(refusalMemory)
}

// maxRemembered bounds the names remembered; past it, the names whose
// refusals all expired are dropped.
const maxRemembered = 4096

func (r *refusals) forget(now time.Time) {
	for name, until := range r.by {
		if !slices.ContainsFunc(until, now.Before) {
			delete(r.by, name)
		}
	}
}

// queryName returns the lower-cased first question name of a DNS query
// (uncompressed, as queries are), or "" when b is not one.
func queryName(b []byte) string {
	if len(b) < 12 || b[4] == 0 && b[5] == 0 {
		return ""
	}
	var name []byte
	for i := 12; i < len(b); {
		n := int(b[i])
		if n == 0 {
			return string(name)
		}
		if n > 63 || i+1+n > len(b) {
			return ""
		}
		for _, c := range b[i+1 : i+1+n] {
			if 'A' <= c && c <= 'Z' {
				c += 'a' - 'A'
			}
			name = append(name, c)
		}
		name = append(name, '.')
		i += 1 + n
	}
	return ""
}

// fanout is one UDP "connection" to several servers: a write goes to the
// servers not known to refuse the query's name, a read returns the next
// datagram any of them sent. The other servers are asked too (escalate)
// as soon as one asked refuses or fails, or none answered within
// refusalGrace. Errors of single servers (a refused port) are dropped
// while another may still answer; the read fails only when every server
// has failed, or at the deadline. An answer with rcode REFUSED (a spoke
// whose member cluster does not serve the ring's zone) counts as that
// server's failure too, and is returned when no server gave another
// answer, or none did within refusalGrace of the first refusal (or of the
// escalation after it): a server that stays silent (cut off by a
// partition) must not hold every lookup a refusal answers until the
// deadline (it held etcd's peer checks long enough that a new member never
// joined). It is a net.PacketConn so that Go's resolver speaks datagrams
// over it.
type fanout struct {
	known   *refusals
	network string
	packets chan []byte
	done    chan struct{}
	once    sync.Once

	mu        sync.Mutex
	conns     []net.Conn
	name      string    // the query's name
	query     []byte    // the query, for the servers asked later
	sentAt    time.Time // when the query went out
	rest      []int     // the servers not asked yet
	deadline  time.Time
	failed    int
	lastErr   error
	refusal   []byte        // the last REFUSED answer
	refusalAt time.Time     // when the first REFUSED answer came (or the escalation after it)
	wake      chan struct{} // closed and replaced when failed changes
	closed    bool
}

// refusalGrace is how long after the first REFUSED answer another server
// may still give a real one before the refusal is the answer, and how
// long the servers asked first may stay silent before the others are
// asked too.
const refusalGrace = 200 * time.Millisecond

// rcodeRefused is DNS's REFUSED in the low four bits of a message's
// fourth byte.
const rcodeRefused = 5

// isRefusal: b is a DNS response with rcode REFUSED.
func isRefusal(b []byte) bool {
	return len(b) >= 4 && b[2]&0x80 != 0 && b[3]&0x0f == rcodeRefused
}

// maxAnswer is the most of a UDP answer Go's resolver reads (and the
// size it announces in EDNS0): a larger buffer would hold memory for
// nothing while a receiver waits.
const maxAnswer = 1232

// ask sends the query to servers, connecting to each. Called with f.mu
// held; it returns how many it reached.
func (f *fanout) ask(servers []int) (reached int, err error) {
	var d net.Dialer
	for _, i := range servers {
		c, derr := d.Dial(f.network, f.known.servers[i])
		if derr != nil {
			err = derr
			f.failed++
			f.conns = append(f.conns, nil)
			continue
		}
		f.conns = append(f.conns, c)
		if _, werr := c.Write(f.query); werr != nil {
			err = werr
		} else {
			reached++
		}
		go f.receive(c, i)
	}
	return reached, err
}

// escalate asks the servers not asked yet. Called with f.mu held.
func (f *fanout) escalate() {
	if len(f.rest) == 0 || f.closed {
		return
	}
	rest := f.rest
	f.rest = nil
	_, _ = f.ask(rest)
	if f.refusal != nil {
		f.refusalAt = time.Now()
	}
	f.signal()
}

// signal wakes a waiting Read. Called with f.mu held.
func (f *fanout) signal() {
	close(f.wake)
	f.wake = make(chan struct{})
}

// receive forwards c's datagrams until c fails or f is closed. A refused
// port (ICMP port unreachable) fails one read and can be retried, but one
// refusal is enough to tell that server is away for this query.
//
// After f is closed, c is read until refusalGrace has passed, so that the
// refusals that came after the answer are remembered too (a server slower
// to refuse than another to answer would be asked again every time).
func (f *fanout) receive(c net.Conn, server int) {
	defer c.Close()
	buf := make([]byte, maxAnswer)
	for {
		n, err := c.Read(buf)
		select {
		case <-f.done:
			if err == nil {
				f.known.note(f.name, server, isRefusal(buf[:n]), time.Now())
			}
			return
		default:
		}
		if err == nil && isRefusal(buf[:n]) {
			// This server does not serve the name: another may.
			f.known.note(f.name, server, true, time.Now())
			f.mu.Lock()
			f.failed++
			if f.refusal == nil {
				f.refusalAt = time.Now()
			}
			f.refusal = append([]byte(nil), buf[:n]...)
			f.escalate()
			f.signal()
			f.mu.Unlock()
			return
		}
		if err != nil {
			f.mu.Lock()
			f.failed++
			f.lastErr = err
			f.escalate()
			f.signal()
			f.mu.Unlock()
			return
		}
		f.known.note(f.name, server, false, time.Now())
		select {
		case f.packets <- append([]byte(nil), buf[:n]...):
		case <-f.done:
			return
		}
	}
}

func (f *fanout) Read(b []byte) (int, error) {
	for {
		f.mu.Lock()
		if !f.sentAt.IsZero() && len(f.rest) > 0 && time.Since(f.sentAt) >= refusalGrace {
			f.escalate() // the servers asked first are silent
		}
		deadline, wake := f.deadline, f.wake
		allFailed := f.failed == len(f.conns) && len(f.rest) == 0
		lastErr, refusal, refusalAt := f.lastErr, f.refusal, f.refusalAt
		var hedge time.Time
		if len(f.rest) > 0 && !f.sentAt.IsZero() {
			hedge = f.sentAt.Add(refusalGrace)
		}
		f.mu.Unlock()
		// Packets already received win over failures seen since.
		select {
		case p := <-f.packets:
			return copy(b, p), nil
		default:
		}
		if allFailed && len(f.conns) > 0 {
			if refusal != nil {
				return copy(b, refusal), nil
			}
			return 0, lastErr
		}
		wakeAt := hedge
		if refusal != nil && hedge.IsZero() {
			wakeAt = refusalAt.Add(refusalGrace)
			if time.Until(wakeAt) <= 0 {
				return copy(b, refusal), nil
			}
		}
		var grace <-chan time.Time
		var graceTimer *time.Timer
		if !wakeAt.IsZero() {
			graceTimer = time.NewTimer(time.Until(wakeAt))
			grace = graceTimer.C
		}
		var timeout <-chan time.Time
		var timer *time.Timer
		if !deadline.IsZero() {
			timer = time.NewTimer(time.Until(deadline))
			timeout = timer.C
		}
		var p []byte
		var err error
		select {
		case p = <-f.packets:
		case <-wake:
		case <-grace:
		case <-timeout:
			err = &net.OpError{Op: "read", Net: "udp", Err: os.ErrDeadlineExceeded}
		case <-f.done:
			err = net.ErrClosed
		}
		if timer != nil {
			timer.Stop()
		}
		if graceTimer != nil {
			graceTimer.Stop()
		}
		if p != nil || err != nil {
			return copy(b, p), err
		}
	}
}

// Write sends the query to the servers not known to refuse its name.
func (f *fanout) Write(b []byte) (int, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed {
		return 0, net.ErrClosed
	}
	if f.query != nil { // a second query on this connection: to everyone asked
		f.query = append([]byte(nil), b...)
		var errs []error
		for _, c := range f.conns {
			if c == nil {
				continue
			}
			if _, err := c.Write(b); err != nil {
				errs = append(errs, err)
			}
		}
		if len(errs) == len(f.conns) {
			return 0, errors.Join(errs...)
		}
		return len(b), nil
	}
	f.query = append([]byte(nil), b...)
	f.name = queryName(b)
	f.sentAt = time.Now()
	first, rest := f.known.split(f.name, f.sentAt)
	f.rest = rest
	reached, err := f.ask(first)
	if reached == 0 && len(f.rest) > 0 {
		f.escalate()
		reached = len(f.conns) - f.failed
	}
	if reached == 0 {
		return 0, err
	}
	return len(b), nil
}

func (f *fanout) ReadFrom(b []byte) (int, net.Addr, error) {
	n, err := f.Read(b)
	return n, nil, err
}

func (f *fanout) WriteTo(b []byte, _ net.Addr) (int, error) { return f.Write(b) }

func (f *fanout) Close() error {
	f.once.Do(func() {
		f.mu.Lock()
		close(f.done)
		f.closed = true
		conns := f.conns
		f.mu.Unlock()
		// Each receiver closes its connection (see receive).
		linger := time.Now().Add(refusalGrace)
		for _, c := range conns {
			if c != nil {
				_ = c.SetReadDeadline(linger)
			}
		}
	})
	return nil
}

// fanoutAddr is the address of a fanout: it has no single one.
type fanoutAddr struct{}

func (fanoutAddr) Network() string { return "udp" }
func (fanoutAddr) String() string  { return "resolverenv-fanout" }

func (f *fanout) LocalAddr() net.Addr  { return fanoutAddr{} }
func (f *fanout) RemoteAddr() net.Addr { return fanoutAddr{} }

func (f *fanout) SetDeadline(t time.Time) error {
	f.mu.Lock()
	f.deadline = t
	f.mu.Unlock()
	return nil
}

func (f *fanout) SetReadDeadline(t time.Time) error { return f.SetDeadline(t) }

func (f *fanout) SetWriteDeadline(time.Time) error { return nil }
