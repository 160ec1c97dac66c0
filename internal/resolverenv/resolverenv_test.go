package resolverenv

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/miekg/dns"
)

// serve answers A queries for name with addr on a loopback UDP port.
func serve(t *testing.T, name, addr string) string {
	t.Helper()
	return newSwitchable(t, name, addr, modeServe).addr
}

// refused returns a loopback UDP address nothing listens on: queries to it
// are refused, as a killed spoke's are.
func refused(t *testing.T) string {
	t.Helper()
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := pc.LocalAddr().String()
	_ = pc.Close()
	return addr
}

// frozen returns a loopback UDP address that takes queries and never
// answers, as a stopped (SIGSTOP) or black-holed spoke's does.
func frozen(t *testing.T) string {
	t.Helper()
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = pc.Close() })
	return pc.LocalAddr().String()
}

// TestOneLiveServerIsEnough: with two of three servers away (one refusing,
// one silent), every lookup is answered by the live one within a deadline
// far shorter than the resolver's own 5 s timeout. Sending each query to
// one server in turn, as this package did before, failed most of these
// lookups: two in three picks are away and a silent one holds the query
// until the deadline.
func TestOneLiveServerIsEnough(t *testing.T) {
	live := serve(t, "m-0.ring.etcd.test", "127.0.0.9")
	for _, order := range [][]string{
		{refused(t), frozen(t), live},
		{frozen(t), live, refused(t)},
		{live, refused(t), frozen(t)},
	} {
		r := &net.Resolver{PreferGo: true, Dial: dialer(order)}
		for i := range 10 {
			ctx, cancel := context.WithTimeout(t.Context(), 2*time.Second)
			addrs, err := r.LookupHost(ctx, "m-0.ring.etcd.test")
			cancel()
			if err != nil || len(addrs) != 1 || addrs[0] != "127.0.0.9" {
				t.Fatalf("servers %v, lookup %d: %v %v, want 127.0.0.9", order, i, addrs, err)
			}
		}
	}
}

// TestAllServersAway: with no live server the lookup fails, with the
// refusal when every server refuses, and at the deadline when one is silent.
func TestAllServersAway(t *testing.T) {
	r := &net.Resolver{PreferGo: true, Dial: dialer([]string{refused(t), refused(t)})}
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	if addrs, err := r.LookupHost(ctx, "m-0.ring.etcd.test"); err == nil {
		t.Fatalf("every server refuses, yet the lookup answered %v", addrs)
	} else if ctx.Err() != nil {
		t.Fatalf("every server refuses, and the lookup waited for the deadline: %v", err)
	}

	r = &net.Resolver{PreferGo: true, Dial: dialer([]string{refused(t), frozen(t)})}
	ctx, cancel = context.WithTimeout(t.Context(), 500*time.Millisecond)
	defer cancel()
	if addrs, err := r.LookupHost(ctx, "m-0.ring.etcd.test"); err == nil {
		t.Fatalf("no server answers, yet the lookup answered %v", addrs)
	}
}

// TestNameNotFound: a live server's negative answer is an answer.
func TestNameNotFound(t *testing.T) {
	live := serve(t, "m-0.ring.etcd.test", "127.0.0.9")
	r := &net.Resolver{PreferGo: true, Dial: dialer([]string{refused(t), live})}
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Second)
	defer cancel()
	_, err := r.LookupHost(ctx, "m-9.ring.etcd.test")
	var dnsErr *net.DNSError
	if !errors.As(err, &dnsErr) || !dnsErr.IsNotFound {
		t.Fatalf("lookup of an unknown name: %v, want not found", err)
	}
}

// TestCopiesMatch: the etcd builds under hack/tools carry copies of this
// package (modules of their own cannot import it); below the package
// clause they must be this file.
func TestCopiesMatch(t *testing.T) {
	body := func(path string) string {
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		s := string(b)
		i := strings.Index(s, "\nimport (")
		if i < 0 {
			t.Fatalf("%s: no import block", path)
		}
		return s[i:]
	}
	want := body("resolverenv.go")
	for _, copy := range []string{"../../hack/tools/etcd/internal/resolver/resolver.go", "../../hack/tools/etcd35/internal/resolver/resolver.go", "../../hack/tools/etcd37/internal/resolver/resolver.go"} {
		if body(copy) != want {
			t.Errorf("%s differs from resolverenv.go below the package clause: copy the change there (hack/tools.sh rebuilds the binary)", copy)
		}
	}
}

// refusing answers every query with REFUSED at once, as a spoke does for a
// ring whose zone its member cluster does not serve.
func refusing(t *testing.T) string {
	t.Helper()
	return newSwitchable(t, "", "", modeRefuse).addr
}

// slow answers like serve, after delay.
func slow(t *testing.T, name, addr string, delay time.Duration) string {
	t.Helper()
	live := serve(t, name, addr)
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &dns.Server{PacketConn: pc, Handler: dns.HandlerFunc(func(w dns.ResponseWriter, r *dns.Msg) {
		time.Sleep(delay)
		in, err := dns.Exchange(r, live)
		if err != nil {
			return
		}
		_ = w.WriteMsg(in)
	})}
	go func() { _ = srv.ActivateAndServe() }()
	t.Cleanup(func() { _ = srv.Shutdown() })
	return pc.LocalAddr().String()
}

// TestRefusalIsNoAnswer: a spoke whose member cluster does not serve a
// ring's zone answers REFUSED, at once; a server that serves it answers a
// little later. Every lookup gets the answer (before, the first datagram
// won: the refusal, and the lookup failed). With every server refusing,
// the lookup fails at once.
func TestRefusalIsNoAnswer(t *testing.T) {
	live := slow(t, "m-0.ring.etcd.test", "127.0.0.9", 20*time.Millisecond)
	r := &net.Resolver{PreferGo: true, Dial: dialer([]string{refusing(t), live, refusing(t)})}
	for i := range 10 {
		ctx, cancel := context.WithTimeout(t.Context(), 2*time.Second)
		addrs, err := r.LookupHost(ctx, "m-0.ring.etcd.test")
		cancel()
		if err != nil || len(addrs) != 1 || addrs[0] != "127.0.0.9" {
			t.Fatalf("lookup %d: %v %v, want 127.0.0.9 from the server that serves the zone", i, addrs, err)
		}
	}
	r = &net.Resolver{PreferGo: true, Dial: dialer([]string{refusing(t), refusing(t)})}
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	if addrs, err := r.LookupHost(ctx, "m-0.ring.etcd.test"); err == nil {
		t.Fatalf("every server refuses, yet the lookup answered %v", addrs)
	} else if ctx.Err() != nil {
		t.Fatalf("every server refuses, and the lookup waited for the deadline: %v", err)
	}
	// One server refuses and another is silent (cut off by a partition):
	// the refusal is the answer after a short grace, not after the
	// resolver's deadline. Waiting for the silent one held etcd's peer
	// checks until a new member's peers timed it out, and it never joined.
	silent, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = silent.Close() })
	r = &net.Resolver{PreferGo: true, Dial: dialer([]string{refusing(t), silent.LocalAddr().String()})}
	ctx2, cancel2 := context.WithTimeout(t.Context(), 3*time.Second)
	defer cancel2()
	if addrs, err := r.LookupHost(ctx2, "m-0.ring.etcd.test"); err == nil {
		t.Fatalf("one server refuses and one is silent, yet the lookup answered %v", addrs)
	} else if ctx2.Err() != nil {
		t.Fatalf("one server refuses and one is silent, and the lookup waited for the deadline: %v", err)
	}
}

// switchable is a DNS server whose behaviour a test changes while it runs:
// it answers name (serving), refuses every query (a spoke whose member
// cluster does not serve the zone), or stays silent (cut off). It counts
// the queries it gets.
type switchable struct {
	addr    string
	mode    atomic.Int32
	queries atomic.Int64
}

const (
	modeServe int32 = iota
	modeRefuse
	modeSilent
)

func newSwitchable(t *testing.T, name, ip string, mode int32) *switchable {
	t.Helper()
	s := &switchable{}
	s.mode.Store(mode)
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s.addr = pc.LocalAddr().String()
	srv := &dns.Server{PacketConn: pc, Handler: dns.HandlerFunc(func(w dns.ResponseWriter, r *dns.Msg) {
		s.queries.Add(1)
		switch s.mode.Load() {
		case modeSilent:
			return
		case modeRefuse:
			_ = w.WriteMsg(new(dns.Msg).SetRcode(r, dns.RcodeRefused))
			return
		}
		m := new(dns.Msg)
		m.SetReply(r)
		m.Authoritative = true
		if q := r.Question[0]; q.Name != dns.Fqdn(name) {
			m.Rcode = dns.RcodeNameError
		} else if q.Qtype == dns.TypeA {
			m.Answer = append(m.Answer, &dns.A{Hdr: dns.RR_Header{Name: q.Name, Rrtype: dns.TypeA, Class: dns.ClassINET, Ttl: 5}, A: net.ParseIP(ip)})
		}
		_ = w.WriteMsg(m)
	})}
	go func() { _ = srv.ActivateAndServe() }()
	t.Cleanup(func() { _ = srv.Shutdown() })
	return s
}

// TestRefusersAreNotAskedAgain: once a server refused a name, the next
// lookups of that name go to the servers that serve it only (a fleet's
// hub asked all twenty spokes for every name and its lookups piled up).
// When the name's zone moves (the server that served it refuses, one that
// refused serves), or the server that served it falls silent, the lookup
// still gets its answer, long before the resolver's deadline.
func TestRefusersAreNotAskedAgain(t *testing.T) {
	const name = "m-0.ring.etcd.test"
	serving := newSwitchable(t, name, "127.0.0.9", modeServe)
	var refusers []*switchable
	servers := []string{serving.addr}
	for range 5 {
		s := newSwitchable(t, name, "127.0.0.9", modeRefuse)
		refusers = append(refusers, s)
		servers = append(servers, s.addr)
	}
	r := &net.Resolver{PreferGo: true, Dial: dialer(servers)}
	lookup := func(what string, within time.Duration) {
		t.Helper()
		ctx, cancel := context.WithTimeout(t.Context(), 3*time.Second)
		defer cancel()
		start := time.Now()
		addrs, err := r.LookupHost(ctx, name)
		if err != nil || len(addrs) != 1 || addrs[0] != "127.0.0.9" {
			t.Fatalf("%s: %v %v, want 127.0.0.9", what, addrs, err)
		}
		if took := time.Since(start); took > within {
			t.Fatalf("%s: answered after %v, want within %v", what, took, within)
		}
	}
	asked := func() (n int64) {
		for _, s := range refusers {
			n += s.queries.Load()
		}
		return n
	}
	lookup("first lookup", 2*time.Second)
	// Refusals that come after the answer are read for refusalGrace after
	// the lookup; the servers count their queries on their own time.
	time.Sleep(2 * refusalGrace)
	before := asked()
	for i := range 10 {
		lookup(fmt.Sprintf("lookup %d", i), 2*time.Second)
	}
	if got := asked() - before; got != 0 {
		t.Fatalf("servers that refused the name were asked %d more times in 10 lookups, want 0", got)
	}

	// The zone moves: the server that served the name refuses it, one
	// that refused it serves it.
	serving.mode.Store(modeRefuse)
	refusers[2].mode.Store(modeServe)
	lookup("after the zone moved", time.Second)

	// The server that serves it now falls silent; another serves it.
	refusers[2].mode.Store(modeSilent)
	refusers[4].mode.Store(modeServe)
	lookup("with the serving server silent", time.Second)
}
