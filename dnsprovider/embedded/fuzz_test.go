package embedded

import (
	"encoding/binary"
	"slices"
	"testing"
	"time"

	"github.com/miekg/dns"
)

// FuzzServe feeds arbitrary bytes to the message handler over both
// transports. It must never panic; every answer must parse, carry the
// request's ID with QR set, and fit UDP limits; and whenever the fast path
// answers, the full path must give the same answer.
func FuzzServe(f *testing.F) {
	add := func(m *dns.Msg) {
		b, err := m.Pack()
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b, false)
		f.Add(b, true)
	}
	for _, q := range []struct {
		name string
		t    uint16
	}{
		{"main-0.main.etcd.test.", dns.TypeA},
		{"MAIN-1.main.etcd.test.", dns.TypeAAAA},
		{"main-3.main.etcd.test.", dns.TypeA},
		{"_etcd-server-ssl._tcp.main.etcd.test.", dns.TypeSRV},
		{"nope.main.etcd.test.", dns.TypeA},
		{"main.etcd.test.", dns.TypeNS},
		{"many.big.test.", dns.TypeAAAA},
		{"main.etcd.test.", dns.TypeAXFR},
		{"main.etcd.test.", dns.TypeIXFR},
		{"example.com.", dns.TypeANY},
	} {
		m := new(dns.Msg).SetQuestion(q.name, q.t)
		add(m)
		m.SetEdns0(1232, true)
		add(m)
	}
	up := new(dns.Msg).SetUpdate(testOrigin)
	rr, _ := dns.NewRR("new.main.etcd.test. 60 IN A 192.0.2.1")
	up.Insert([]dns.RR{rr})
	add(up)
	signed := new(dns.Msg).SetQuestion(testOrigin, dns.TypeSOA)
	signed.SetTsig(keyName, dns.HmacSHA256, 300, time.Now().Unix())
	if b, _, err := dns.TsigGenerate(signed, keySecret, "", false); err == nil {
		f.Add(b, false)
	}
	f.Add([]byte{0, 1, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0xc0, 12, 0, 1, 0, 1}, false)

	s, err := New(Config{Addr: "127.0.0.1:0", AllowUpdate: true, TSIGKeys: []TSIGKey{{Name: keyName, Secret: keySecret}}})
	if err != nil {
		f.Fatal(err)
	}
	if err := s.SetZone(mustBuild(f, testSpec())); err != nil {
		f.Fatal(err)
	}
	if err := s.SetZone(bigZone(f)); err != nil {
		f.Fatal(err)
	}
	out := make([]byte, 65535)
	f.Fuzz(func(t *testing.T, raw []byte, tcp bool) {
		if len(raw) > 65535 {
			return
		}
		var answers [][]byte
		send := func(b []byte) error { answers = append(answers, slices.Clone(b)); return nil }
		var lower [256]byte
		snap := s.snap.Load()
		n, _ := snap.fastAnswer(raw, out, s.maxUDP, tcp, &lower)
		var fast []byte
		if n > 0 {
			fast = slices.Clone(out[:n])
		}
		s.serveFull(snap, request{raw: raw, tcp: tcp, st: &stats{}, send: send})
		for _, a := range answers {
			var m dns.Msg
			if err := m.Unpack(a); err != nil {
				t.Fatalf("answer does not unpack: %v\n%x", err, a)
			}
			if binary.BigEndian.Uint16(a) != binary.BigEndian.Uint16(raw) || !m.Response {
				t.Fatalf("answer header %x does not match request %x", a[:4], raw[:4])
			}
			if !tcp && len(a) > int(s.maxUDP) {
				t.Fatalf("UDP answer of %d bytes", len(a))
			}
		}
		if fast != nil {
			if len(answers) != 1 {
				t.Fatalf("fast path answered, full path sent %d answers", len(answers))
			}
			if err := sameAnswer(fast, answers[0]); err != nil {
				t.Fatal(err)
			}
		}
	})
}
