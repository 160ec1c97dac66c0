package embedded

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/miekg/dns"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/etcdfed/etcdfed/dnsprovider"
)

func exchange(t testing.TB, addr string, m *dns.Msg, network string) *dns.Msg {
	t.Helper()
	c := &dns.Client{Net: network, Timeout: 5 * time.Second}
	var r *dns.Msg
	var err error
	for try := 0; try < 3; try++ { // a lost UDP datagram is retried
		if r, _, err = c.Exchange(m, addr); err == nil {
			break
		}
	}
	if err != nil {
		t.Fatalf("exchange %s: %v", m.Question[0].String(), err)
	}
	return r
}

// TestSwapUnderConcurrentQueries swaps between two versions of the zone
// while clients query; every answer must come whole from one version.
func TestSwapUnderConcurrentQueries(t *testing.T) {
	specA := testSpec()
	specB := testSpec()
	specB.Members[0].Addresses = []netip.Addr{netip.MustParseAddr("10.0.0.20")}
	specB.Members = append(specB.Members, dnsprovider.Member{Name: "main-9", Addresses: []netip.Addr{netip.MustParseAddr("10.0.9.10")}})
	setA, setB := mustBuild(t, specA), mustBuild(t, specB)
	if setA.Serial() == setB.Serial() {
		t.Fatal("test needs two serials")
	}
	s := startServer(t, Config{}, setA)
	addr := s.Addr().String()

	var stop atomic.Bool
	var queries, nxA, foundB atomic.Int64
	errs := make(chan error, 16)
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c := &dns.Client{Timeout: 5 * time.Second}
			for i := 0; !stop.Load() || i < 50; i++ {
				// main-0's address and main-9's existence must agree on
				// the version; a lone query cannot show both, so check
				// each against the SOA it carries or the address set.
				m := new(dns.Msg)
				if (i+w)%2 == 0 {
					m.SetQuestion("main-0.main.etcd.test.", dns.TypeA)
				} else {
					m.SetQuestion("main-9.main.etcd.test.", dns.TypeA)
				}
				// UDP may drop a datagram on a loaded machine: a timeout
				// is retried, a wrong answer never is.
				var r *dns.Msg
				var err error
				for try := 0; try < 3; try++ {
					if r, _, err = c.Exchange(m, addr); err == nil {
						break
					}
				}
				if err != nil {
					errs <- err
					return
				}
				queries.Add(1)
				if err := checkSwapAnswer(r, setA.Serial()); err != nil {
					errs <- err
					return
				}
				if r.Rcode == dns.RcodeNameError {
					nxA.Add(1)
				} else if m.Question[0].Name == "main-9.main.etcd.test." {
					foundB.Add(1)
				}
			}
		}()
	}
	for i := range 400 {
		set := setA
		if i%2 == 0 {
			set = setB
		}
		if err := s.SetZone(set); err != nil {
			t.Fatal(err)
		}
		if i%20 == 0 {
			time.Sleep(time.Millisecond) // let the clients run between swaps
		}
	}
	stop.Store(true)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	t.Logf("%d queries, %d NXDOMAIN from version A, %d answers from version B", queries.Load(), nxA.Load(), foundB.Load())
}

func checkSwapAnswer(r *dns.Msg, serialA uint32) error {
	if !r.Authoritative {
		return fmt.Errorf("answer without AA: %v", r)
	}
	q := r.Question[0].Name
	switch {
	case q == "main-0.main.etcd.test." && r.Rcode == dns.RcodeSuccess && len(r.Answer) == 1:
		a := r.Answer[0].(*dns.A).A.String()
		if a != "10.0.0.10" && a != "10.0.0.20" {
			return fmt.Errorf("main-0 = %s", a)
		}
	case q == "main-9.main.etcd.test." && r.Rcode == dns.RcodeSuccess && len(r.Answer) == 1:
		if a := r.Answer[0].(*dns.A).A.String(); a != "10.0.9.10" {
			return fmt.Errorf("main-9 = %s", a)
		}
	case q == "main-9.main.etcd.test." && r.Rcode == dns.RcodeNameError && len(r.Ns) == 1:
		// NXDOMAIN only exists in version A, whose SOA it must carry.
		if soa := r.Ns[0].(*dns.SOA); soa.Serial != serialA {
			return fmt.Errorf("NXDOMAIN for main-9 with serial %d, version A has %d", soa.Serial, serialA)
		}
	default:
		return fmt.Errorf("wrong answer: %v", r)
	}
	return nil
}

func TestZoneManagement(t *testing.T) {
	s := startServer(t, Config{})
	addr := s.Addr().String()
	q := new(dns.Msg).SetQuestion("main-0.main.etcd.test.", dns.TypeA)
	if r := exchange(t, addr, q, "udp"); r.Rcode != dns.RcodeRefused {
		t.Errorf("before SetZone: %s", dns.RcodeToString[r.Rcode])
	}
	set := mustBuild(t, testSpec())
	ctx := context.Background()
	if err := s.Apply(ctx, set); err != nil {
		t.Fatal(err)
	}
	if r := exchange(t, addr, q, "udp"); r.Rcode != dns.RcodeSuccess || len(r.Answer) != 1 {
		t.Errorf("after Apply: %v", r)
	}
	if got := s.Zones(); !slices.Equal(got, []string{testOrigin}) {
		t.Errorf("Zones() = %v", got)
	}
	cur, err := s.Current(ctx, testOrigin, testOwner)
	if err != nil || len(cur) != len(set.Managed()) {
		t.Errorf("Current = %d records, %v; want %d", len(cur), err, len(set.Managed()))
	}
	other := testSpec()
	other.Owner = "someone-else"
	if err := s.Apply(ctx, mustBuild(t, other)); !errors.Is(err, dnsprovider.ErrNotOwner) {
		t.Errorf("Apply for another owner: %v, want ErrNotOwner", err)
	}
	if err := s.Remove(ctx, testOrigin, "someone-else"); !errors.Is(err, dnsprovider.ErrNotOwner) {
		t.Errorf("Remove for another owner: %v, want ErrNotOwner", err)
	}
	if err := s.Remove(ctx, testOrigin, testOwner); err != nil {
		t.Fatal(err)
	}
	if r := exchange(t, addr, q, "udp"); r.Rcode != dns.RcodeRefused {
		t.Errorf("after Remove: %s", dns.RcodeToString[r.Rcode])
	}
	noSOA, err := dnsprovider.ParseRecords("x.test.", []dnsprovider.Record{{Name: "a.x.test.", Type: "A", TTL: 1, Data: []string{"192.0.2.1"}}})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.SetZone(noSOA); err == nil || !strings.Contains(err.Error(), "no SOA") {
		t.Errorf("SetZone without SOA: %v", err)
	}
	if err := s.SetZones([]*dnsprovider.RecordSet{set, bigZone(t)}); err != nil {
		t.Fatal(err)
	}
	if got := s.Zones(); !slices.Equal(got, []string{bigOrigin, testOrigin}) {
		t.Errorf("Zones() = %v", got)
	}
}

func TestTSIGErrors(t *testing.T) {
	s := startServer(t, Config{TSIGKeys: []TSIGKey{{Name: keyName, Secret: keySecret}}}, mustBuild(t, testSpec()))
	addr := s.Addr().String()
	for _, tc := range []struct {
		name      string
		keyName   string
		alg       string
		secret    string
		wantRcode int
		wantTSIG  uint16
	}{
		{"good key", keyName, dns.HmacSHA256, keySecret, dns.RcodeSuccess, 0},
		{"wrong secret", keyName, dns.HmacSHA256, "d3JvbmdzZWNyZXR3cm9uZ3NlY3JldA==", dns.RcodeNotAuth, dns.RcodeBadSig},
		{"unknown key", "other-key.", dns.HmacSHA256, keySecret, dns.RcodeNotAuth, dns.RcodeBadKey},
		{"wrong algorithm", keyName, dns.HmacSHA512, keySecret, dns.RcodeNotAuth, dns.RcodeBadKey},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := new(dns.Msg).SetQuestion(testOrigin, dns.TypeSOA)
			m.SetTsig(tc.keyName, tc.alg, 300, time.Now().Unix())
			c := &dns.Client{Timeout: 5 * time.Second, TsigSecret: map[string]string{tc.keyName: tc.secret}}
			r, _, err := c.Exchange(m, addr)
			if tc.wantRcode == dns.RcodeSuccess && err != nil {
				t.Fatalf("exchange: %v", err)
			}
			if r == nil {
				t.Fatalf("no response: %v", err)
			}
			if r.Rcode != tc.wantRcode {
				t.Errorf("rcode %s, want %s", dns.RcodeToString[r.Rcode], dns.RcodeToString[tc.wantRcode])
			}
			ts := r.IsTsig()
			if ts == nil || ts.Error != tc.wantTSIG {
				t.Errorf("TSIG in response %v, want error %s", ts, dns.RcodeToString[int(tc.wantTSIG)])
			}
		})
	}
}

func TestTransferWithTSIGGoClient(t *testing.T) {
	set := mustBuild(t, testSpec())
	s := startServer(t, Config{TSIGKeys: []TSIGKey{{Name: keyName, Secret: keySecret}}}, set)
	m := new(dns.Msg).SetAxfr(testOrigin)
	m.SetTsig(keyName, dns.HmacSHA256, 300, time.Now().Unix())
	tr := &dns.Transfer{TsigSecret: map[string]string{keyName: keySecret}}
	ch, err := tr.In(m, s.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	var rrs []dns.RR
	for env := range ch {
		if env.Error != nil {
			t.Fatal(env.Error)
		}
		rrs = append(rrs, env.RR...)
	}
	got, err := dnsprovider.FromRRs(testOrigin, rrs[:len(rrs)-1])
	if err != nil {
		t.Fatal(err)
	}
	if !got.Equal(set) {
		t.Errorf("transferred zone differs:\n%s\nwant\n%s", got.ZoneFile(), set.ZoneFile())
	}
}

// TestFastPathMatchesFullPath asks every name of the test zones for many
// types, in mixed case, with and without EDNS, and checks that the
// precomputed answer equals the full path's answer.
func TestFastPathMatchesFullPath(t *testing.T) {
	s, err := New(Config{Addr: "127.0.0.1:0"})
	if err != nil {
		t.Fatal(err)
	}
	for _, set := range []*dnsprovider.RecordSet{mustBuild(t, testSpec()), bigZone(t)} {
		if err := s.SetZone(set); err != nil {
			t.Fatal(err)
		}
	}
	snap := s.snap.Load()
	var names []string
	for _, z := range snap.zones {
		for _, n := range z.nodes {
			names = append(names, n.name, "nx."+n.name, strings.ToUpper(n.name[:1])+n.name[1:])
		}
	}
	names = append(names, "example.com.", "test.", ".")
	types := []uint16{dns.TypeA, dns.TypeAAAA, dns.TypeCNAME, dns.TypeSRV, dns.TypeTXT, dns.TypeNS, dns.TypeSOA, dns.TypeMX, dns.TypeANY, dns.TypeNULL, 65000}
	var fast int
	for _, name := range names {
		for _, qt := range types {
			for _, edns := range []int{0, 512, 1232, 4096} {
				for _, tcp := range []bool{false, true} {
					m := new(dns.Msg).SetQuestion(name, qt)
					m.Id = 4242
					if edns > 0 {
						m.SetEdns0(uint16(edns), edns == 4096)
					}
					raw, err := m.Pack()
					if err != nil {
						t.Fatal(err)
					}
					var lower [256]byte
					out := make([]byte, 65535)
					n, _ := snap.fastAnswer(raw, out, s.maxUDP, tcp, &lower)
					var full []byte
					st := &stats{}
					s.serveFull(snap, request{raw: raw, tcp: tcp, st: st, send: func(b []byte) error { full = slices.Clone(b); return nil }})
					if n == 0 {
						continue
					}
					fast++
					if err := sameAnswer(out[:n], full); err != nil {
						t.Errorf("%s %s edns=%d tcp=%v: %v", name, dns.TypeToString[qt], edns, tcp, err)
					}
				}
			}
		}
	}
	if fast < len(names)*len(types) {
		t.Errorf("fast path answered only %d queries", fast)
	}
}

// sameAnswer compares two answers after unpacking, up to the case of
// names (the fast path points into the question, the full path writes
// names out).
func sameAnswer(a, b []byte) error {
	var ma, mb dns.Msg
	if err := ma.Unpack(a); err != nil {
		return fmt.Errorf("fast answer does not unpack: %w", err)
	}
	if err := mb.Unpack(b); err != nil {
		return fmt.Errorf("full answer does not unpack: %w", err)
	}
	norm := func(m *dns.Msg) string {
		m.Compress = false
		return strings.ToLower(m.String())
	}
	if na, nb := norm(&ma), norm(&mb); na != nb {
		return fmt.Errorf("fast:\n%s\nfull:\n%s", na, nb)
	}
	return nil
}

func TestMalformedPackets(t *testing.T) {
	s, err := New(Config{Addr: "127.0.0.1:0", TSIGKeys: []TSIGKey{{Name: keyName, Secret: keySecret}}})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.SetZone(mustBuild(t, testSpec())); err != nil {
		t.Fatal(err)
	}
	good, _ := new(dns.Msg).SetQuestion("main-0.main.etcd.test.", dns.TypeA).Pack()
	withQR := slices.Clone(good)
	withQR[2] |= 0x80
	loop := slices.Clone(good[:12])
	loop = append(loop, 0xc0, 12, 0, 1, 0, 1) // name pointing at itself
	twoQ := slices.Clone(good)
	binary.BigEndian.PutUint16(twoQ[4:], 2)
	twoQ = append(twoQ, good[12:]...)
	update := slices.Clone(good)
	update[2] = update[2]&0x87 | dns.OpcodeUpdate<<3
	status := slices.Clone(good)
	status[2] = status[2]&0x87 | dns.OpcodeStatus<<3
	for _, tc := range []struct {
		name      string
		raw       []byte
		wantRcode int // -1: no answer
	}{
		{"empty", nil, -1},
		{"short header", good[:5], -1},
		{"response bit set", withQR, -1},
		{"truncated question", good[:len(good)-2], dns.RcodeFormatError},
		{"pointer loop", loop, dns.RcodeFormatError},
		{"two questions", twoQ, dns.RcodeFormatError},
		{"no question", good[:12], dns.RcodeFormatError},
		{"unsigned update", update, dns.RcodeRefused},
		{"status opcode", status, dns.RcodeNotImplemented},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got []byte
			sent := false
			var lower [256]byte
			s.serve(request{raw: tc.raw, st: &stats{}, send: func(b []byte) error { got, sent = slices.Clone(b), true; return nil }}, make([]byte, 65535), &lower)
			if tc.wantRcode < 0 {
				if sent {
					t.Errorf("answered %x", got)
				}
				return
			}
			if !sent || len(got) < 12 {
				t.Fatalf("no answer")
			}
			if rc := int(got[3] & 0xf); rc != tc.wantRcode {
				t.Errorf("rcode %s, want %s", dns.RcodeToString[rc], dns.RcodeToString[tc.wantRcode])
			}
			if got[0] != tc.raw[0] || got[1] != tc.raw[1] || got[2]&0x80 == 0 {
				t.Errorf("answer header %x does not match request", got[:4])
			}
		})
	}
}

func TestMetrics(t *testing.T) {
	s := startServer(t, Config{}, mustBuild(t, testSpec()))
	addr := s.Addr().String()
	exchange(t, addr, new(dns.Msg).SetQuestion("main-0.main.etcd.test.", dns.TypeA), "udp")
	exchange(t, addr, new(dns.Msg).SetQuestion("nope.main.etcd.test.", dns.TypeA), "udp")
	exchange(t, addr, new(dns.Msg).SetQuestion("example.com.", dns.TypeA), "tcp")
	st := s.Stats()
	if st.Responses["udp"]["NOERROR"] != 1 || st.Responses["udp"]["NXDOMAIN"] != 1 || st.Responses["tcp"]["REFUSED"] != 1 || st.Zones != 1 {
		t.Errorf("stats %+v", st)
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(s.Collector())
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, mf := range mfs {
		names = append(names, mf.GetName())
	}
	if !slices.Contains(names, "etcdfed_dns_responses_total") || !slices.Contains(names, "etcdfed_dns_zones") {
		t.Errorf("metrics %v", names)
	}
}

func BenchmarkFastAnswer(b *testing.B) {
	s, err := New(Config{Addr: "127.0.0.1:0"})
	if err != nil {
		b.Fatal(err)
	}
	if err := s.SetZone(mustBuild(b, testSpec())); err != nil {
		b.Fatal(err)
	}
	m := new(dns.Msg).SetQuestion("main-1.main.etcd.test.", dns.TypeA)
	m.SetEdns0(1232, false)
	raw, _ := m.Pack()
	out := make([]byte, 65535)
	var lower [256]byte
	snap := s.snap.Load()
	b.ReportAllocs()
	for b.Loop() {
		if n, _ := snap.fastAnswer(raw, out, s.maxUDP, false, &lower); n == 0 {
			b.Fatal("no fast answer")
		}
	}
}

func BenchmarkFullPath(b *testing.B) {
	s, err := New(Config{Addr: "127.0.0.1:0"})
	if err != nil {
		b.Fatal(err)
	}
	if err := s.SetZone(mustBuild(b, testSpec())); err != nil {
		b.Fatal(err)
	}
	m := new(dns.Msg).SetQuestion("main-1.main.etcd.test.", dns.TypeA)
	m.SetEdns0(1232, false)
	raw, _ := m.Pack()
	snap := s.snap.Load()
	st := &stats{}
	send := func([]byte) error { return nil }
	b.ReportAllocs()
	for b.Loop() {
		s.serveFull(snap, request{raw: raw, st: st, send: send})
	}
}
