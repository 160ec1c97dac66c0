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
	"strings"
	"sync"
	"time"
)

// EnvVar names the variable read by Install.
const EnvVar = "ETCDFED_DNS_SERVERS"

// Install replaces net.DefaultResolver when EnvVar is set.
//
// Each UDP query goes to every server at once and the first answer wins:
// the servers are the spokes of several member clusters, and the point of
// the ring is that some of them may be gone. A dead server's port refuses
// (or a frozen one never answers) while a live one answers; sending to one
// server at a time would make every lookup a gamble on which one comes up,
// and a lost gamble costs the resolver's whole timeout. TCP (only after a
// truncated answer) tries the servers in turn.
func Install() {
	servers := parse(os.Getenv(EnvVar))
	if len(servers) == 0 {
		return
	}
	net.DefaultResolver = NewResolver(servers)
}

// NewResolver is a resolver asking servers (host:port) as Install's does:
// each UDP query to all of them, the first answer that is not REFUSED
// wins.
func NewResolver(servers []string) *net.Resolver {
	return &net.Resolver{PreferGo: true, Dial: dialer(servers)}
}

func dialer(servers []string) func(ctx context.Context, network, _ string) (net.Conn, error) {
	return func(ctx context.Context, network, _ string) (net.Conn, error) {
		var d net.Dialer
		if strings.HasPrefix(network, "udp") {
			return dialFanout(ctx, &d, network, servers)
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

// fanout is one UDP "connection" to several servers: a write goes to all,
// a read returns the next datagram any of them sent. Errors of single
// servers (a refused port) are dropped while another may still answer; the
// read fails only when every server has failed, or at the deadline. An
// answer with rcode REFUSED (a spoke whose member cluster does not serve
// the ring's zone) counts as that server's failure too, and is returned
// when no server gave another answer, or none did within refusalGrace of
// the first refusal: a server that stays silent (cut off by a partition)
// must not hold every lookup a refusal answers until the deadline (it
// held etcd's peer checks long enough that a new member never joined). It is a net.PacketConn so that
// Go's resolver speaks datagrams over it.
type fanout struct {
	conns   []net.Conn
	packets chan []byte
	done    chan struct{}
	once    sync.Once

	mu        sync.Mutex
	deadline  time.Time
	failed    int
	lastErr   error
	refusal   []byte        // the last REFUSED answer
	refusalAt time.Time     // when the first REFUSED answer came
	wake      chan struct{} // closed and replaced when failed changes
}

// refusalGrace is how long after the first REFUSED answer another server
// may still give a real one before the refusal is the answer.
const refusalGrace = 200 * time.Millisecond

// rcodeRefused is DNS's REFUSED in the low four bits of a message's
// fourth byte.
const rcodeRefused = 5

// isRefusal: b is a DNS response with rcode REFUSED.
func isRefusal(b []byte) bool {
	return len(b) >= 4 && b[2]&0x80 != 0 && b[3]&0x0f == rcodeRefused
}

func dialFanout(ctx context.Context, d *net.Dialer, network string, servers []string) (net.Conn, error) {
	f := &fanout{packets: make(chan []byte, 4*len(servers)), done: make(chan struct{}), wake: make(chan struct{})}
	var err error
	for _, s := range servers {
		c, derr := d.DialContext(ctx, network, s)
		if derr != nil {
			err = derr
			continue
		}
		f.conns = append(f.conns, c)
	}
	if len(f.conns) == 0 {
		return nil, err
	}
	for _, c := range f.conns {
		go f.receive(c)
	}
	return f, nil
}

// receive forwards c's datagrams until c fails or f is closed. A refused
// port (ICMP port unreachable) fails one read and can be retried, but one
// refusal is enough to tell that server is away for this query.
func (f *fanout) receive(c net.Conn) {
	for {
		b, err := readDatagram(c)
		if err == nil && isRefusal(b) {
			// This server does not serve the name: another may.
			f.mu.Lock()
			f.failed++
			if f.refusal == nil {
				f.refusalAt = time.Now()
			}
			f.refusal = b
			close(f.wake)
			f.wake = make(chan struct{})
			f.mu.Unlock()
			return
		}
		if err != nil {
			f.mu.Lock()
			f.failed++
			f.lastErr = err
			close(f.wake)
			f.wake = make(chan struct{})
			f.mu.Unlock()
			return
		}
		select {
		case f.packets <- b:
		case <-f.done:
			return
		}
	}
}

// datagrams holds the buffers UDP answers are read into: a datagram may
// be 64 KiB, an answer is a few hundred bytes, and every lookup reads one
// from each server (a fleet's hub, resolving its members' names through
// twenty spokes, spent a quarter of its CPU allocating 64 KiB per server
// and lookup, and more collecting them).
var datagrams = sync.Pool{New: func() any { return new([64 << 10]byte) }}

// readDatagram reads one datagram from c into a pooled buffer and returns
// a copy of exactly its length.
func readDatagram(c net.Conn) ([]byte, error) {
	buf := datagrams.Get().(*[64 << 10]byte)
	defer datagrams.Put(buf)
	n, err := c.Read(buf[:])
	if err != nil {
		return nil, err
	}
	return append([]byte(nil), buf[:n]...), nil
}

func (f *fanout) Read(b []byte) (int, error) {
	for {
		f.mu.Lock()
		deadline, wake := f.deadline, f.wake
		allFailed := f.failed == len(f.conns)
		lastErr, refusal, refusalAt := f.lastErr, f.refusal, f.refusalAt
		f.mu.Unlock()
		// Packets already received win over failures seen since.
		select {
		case p := <-f.packets:
			return copy(b, p), nil
		default:
		}
		if allFailed {
			if refusal != nil {
				return copy(b, refusal), nil
			}
			return 0, lastErr
		}
		var grace <-chan time.Time
		var graceTimer *time.Timer
		if refusal != nil {
			wait := time.Until(refusalAt.Add(refusalGrace))
			if wait <= 0 {
				return copy(b, refusal), nil
			}
			graceTimer = time.NewTimer(wait)
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

func (f *fanout) Write(b []byte) (int, error) {
	var errs []error
	for _, c := range f.conns {
		if _, err := c.Write(b); err != nil {
			errs = append(errs, err)
		}
	}
	if len(errs) == len(f.conns) {
		return 0, errors.Join(errs...)
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
		close(f.done)
		for _, c := range f.conns {
			_ = c.Close()
		}
	})
	return nil
}

func (f *fanout) LocalAddr() net.Addr  { return f.conns[0].LocalAddr() }
func (f *fanout) RemoteAddr() net.Addr { return f.conns[0].RemoteAddr() }

func (f *fanout) SetDeadline(t time.Time) error {
	f.mu.Lock()
	f.deadline = t
	f.mu.Unlock()
	return nil
}

func (f *fanout) SetReadDeadline(t time.Time) error { return f.SetDeadline(t) }

func (f *fanout) SetWriteDeadline(time.Time) error { return nil }
