package embedded

import (
	"context"
	"errors"
	"net"
	"net/netip"
	"sync/atomic"
	"testing"
	"time"

	"github.com/miekg/dns"
)

// udpFrom is a client whose queries leave from a loopback address of its
// own (another /24 than the others').
func udpFrom(t *testing.T, ip string) *net.UDPConn {
	t.Helper()
	c, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.ParseIP(ip)})
	if err != nil {
		t.Skipf("cannot bind %s on loopback: %v", ip, err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// TestRRL: a flood of queries claiming one source prefix (a reflection
// attack's victim) is answered at most at the limit, every second answer
// over it sent truncated (TC, no records: as small as the query) and the
// rest dropped; a client in another prefix asking at the same time gets
// every answer in full; over TCP the flooded prefix is answered in full;
// an exempt prefix is never limited.
func TestRRL(t *testing.T) {
	const rate = 50
	srv := startServer(t, Config{RRL: RRLConfig{ResponsesPerSecond: rate, Burst: rate, Exempt: []netip.Prefix{netip.MustParsePrefix("127.3.0.0/24")}}}, mustBuild(t, testSpec()))
	addr := net.UDPAddrFromAddrPort(srv.Addr())
	q := new(dns.Msg).SetQuestion("main-0."+testOrigin, dns.TypeA)
	wire, err := q.Pack()
	if err != nil {
		t.Fatal(err)
	}

	flood := udpFrom(t, "127.0.0.2")
	_ = flood.SetReadBuffer(8 << 20)
	var full, tc atomic.Int64
	done := make(chan struct{})
	go func() {
		defer close(done)
		buf := make([]byte, 2048)
		for {
			_ = flood.SetReadDeadline(time.Now().Add(2 * time.Second))
			n, err := flood.Read(buf)
			if err != nil {
				return
			}
			m := new(dns.Msg)
			if m.Unpack(buf[:n]) != nil {
				continue
			}
			if m.Truncated && len(m.Answer) == 0 {
				tc.Add(1)
			} else if len(m.Answer) > 0 {
				full.Add(1)
			}
		}
	}()
	// Meanwhile a client in another prefix, at a resolver's pace.
	otherErr := make(chan error, 1)
	go func() {
		other := &dns.Client{Net: "udp", Timeout: 2 * time.Second, Dialer: &net.Dialer{LocalAddr: &net.UDPAddr{IP: net.ParseIP("127.1.0.2")}}}
		for range 20 {
			r, _, err := other.Exchange(q, srv.Addr().String())
			if err == nil && (r.Truncated || len(r.Answer) != 1) {
				err = errors.New("truncated or empty: " + r.String())
			}
			if err != nil {
				otherErr <- err
				return
			}
			time.Sleep(5 * time.Millisecond)
		}
		otherErr <- nil
	}()
	const sent = 3000
	start := time.Now()
	for i := range sent {
		if _, err := flood.WriteToUDP(wire, addr); err != nil {
			t.Fatal(err)
		}
		if i%100 == 0 {
			time.Sleep(time.Millisecond) // spread over the other client's queries
		}
	}
	if err := <-otherErr; err != nil {
		t.Fatalf("a query from another prefix during the flood: %v", err)
	}
	elapsed := time.Since(start)
	<-done
	limit := int64(rate + rate*elapsed.Seconds() + 1)
	t.Logf("%d queries from one prefix over %s: %d answered in full (limit %d), %d truncated", sent, elapsed.Round(time.Millisecond), full.Load(), limit, tc.Load())
	if full.Load() > limit || full.Load() < rate/2 {
		t.Errorf("%d full answers to the flooded prefix, want between %d and %d", full.Load(), rate/2, limit)
	}
	if tc.Load() == 0 {
		t.Error("no truncated answer: a real client behind the flooded prefix is never told to retry over TCP")
	}
	st := srv.Stats()
	if st.RRLDropped == 0 || st.RRLSlipped < uint64(tc.Load()) {
		t.Errorf("counters: dropped %d, slipped %d (received %d truncated)", st.RRLDropped, st.RRLSlipped, tc.Load())
	}

	// TCP from the flooded prefix: a source that completed a handshake is
	// not forged, and is answered in full.
	tcp := &dns.Client{Net: "tcp", Timeout: 2 * time.Second, Dialer: &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP("127.0.0.2")}}}
	if r, _, err := tcp.ExchangeContext(context.Background(), q, srv.Addr().String()); err != nil || len(r.Answer) != 1 {
		t.Fatalf("over TCP from the flooded prefix: %v %v", r, err)
	}
	// An exempt prefix.
	exempt := udpFrom(t, "127.3.0.2")
	got := 0
	buf := make([]byte, 2048)
	for range 3 * rate {
		if _, err := exempt.WriteToUDP(wire, addr); err != nil {
			t.Fatal(err)
		}
		_ = exempt.SetReadDeadline(time.Now().Add(2 * time.Second))
		n, err := exempt.Read(buf)
		if err != nil {
			break
		}
		m := new(dns.Msg)
		if m.Unpack(buf[:n]) == nil && !m.Truncated && len(m.Answer) == 1 {
			got++
		}
	}
	if got != 3*rate {
		t.Errorf("exempt prefix: %d of %d answered in full", got, 3*rate)
	}
}

// The bucket: a burst, then the rate; a slip every second response over
// it; prefixes share a bucket by /24 and /56; idle prefixes are forgotten
// when the table is full.
func TestRRLBucket(t *testing.T) {
	r, err := newRRL(RRLConfig{ResponsesPerSecond: 10, Burst: 5, MaxPrefixes: rrlShards})
	if err != nil {
		t.Fatal(err)
	}
	a, sameNet := netip.MustParseAddr("192.0.2.1"), netip.MustParseAddr("192.0.2.200")
	var now int64 = 1e9
	for i := range 5 {
		if v := r.check(a, now); v != rrlSend {
			t.Fatalf("burst response %d: %v", i, v)
		}
	}
	if v1, v2 := r.check(sameNet, now), r.check(a, now); v1 != rrlDrop || v2 != rrlSlip {
		t.Fatalf("over the burst, the same /24: %v then %v, want drop then slip", v1, v2)
	}
	now += 1e8 // 100 ms: one more token at 10/s
	if v := r.check(a, now); v != rrlSend {
		t.Fatalf("after 100 ms: %v", v)
	}
	if v := r.check(netip.MustParseAddr("2001:db8:0:ff::1"), now); v != rrlSend {
		t.Fatalf("another prefix: %v", v)
	}
	for i := range 1000 {
		r.check(netip.AddrFrom4([4]byte{10, byte(i >> 8), byte(i), 1}), now)
	}
	n := 0
	for i := range r.shards {
		n += len(r.shards[i].buckets)
	}
	if n > 2*rrlShards {
		t.Errorf("%d prefixes tracked, bound %d", n, rrlShards)
	}
}

func TestTruncated(t *testing.T) {
	srv := startServer(t, Config{}, mustBuild(t, testSpec()))
	_ = srv
	q := new(dns.Msg).SetQuestion("main-1."+testOrigin, dns.TypeAAAA)
	resp := srv.snap.Load().answer(q)
	wire, err := resp.Pack()
	if err != nil {
		t.Fatal(err)
	}
	m := new(dns.Msg)
	if err := m.Unpack(truncated(wire)); err != nil {
		t.Fatal(err)
	}
	if !m.Truncated || !m.Response || len(m.Answer)+len(m.Ns)+len(m.Extra) != 0 || len(m.Question) != 1 || m.Question[0].Name != "main-1."+testOrigin || m.Id != q.Id {
		t.Fatalf("truncated response %v", m)
	}
}

// BenchmarkRRLCheck: the limiter's cost per response.
func BenchmarkRRLCheck(b *testing.B) {
	r, err := newRRL(RRLConfig{ResponsesPerSecond: 1 << 30})
	if err != nil {
		b.Fatal(err)
	}
	src := netip.MustParseAddr("10.1.2.3")
	now := time.Now().UnixNano()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		r.check(src, now+int64(i))
	}
}
