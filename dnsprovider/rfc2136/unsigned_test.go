package rfc2136_test

import (
	"context"
	"errors"
	"net"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/etcdfed/etcdfed/dnsprovider/rfc2136"
)

// forger answers on loopback as someone on the path to the DNS server
// would: AXFR with a zone it made up, UPDATE with NOERROR. signAXFR: the
// transfer is signed with the real key (the server), only the update's
// answer is forged.
func forger(t *testing.T, signAXFR bool) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	soa, _ := dns.NewRR(zone + " 300 IN SOA ns1." + zone + " hostmaster." + zone + " 1 3600 600 1209600 300")
	a, _ := dns.NewRR("main-0." + domain + " 30 IN A 192.0.2.66")
	accept := func(dns.Header) dns.MsgAcceptAction { return dns.MsgAccept } // updates too
	srv := &dns.Server{Listener: ln, TsigSecret: map[string]string{keyName: keySecret}, MsgAcceptFunc: accept, Handler: dns.HandlerFunc(func(w dns.ResponseWriter, r *dns.Msg) {
		m := new(dns.Msg).SetReply(r)
		sign := false
		if len(r.Question) == 1 && r.Question[0].Qtype == dns.TypeAXFR {
			m.Answer = []dns.RR{soa, a, soa}
			if sign = signAXFR; sign {
				m.Answer = []dns.RR{soa, soa} // an empty zone: the update goes out
			}
		}
		if sign && r.IsTsig() != nil && w.TsigStatus() == nil {
			m.SetTsig(keyName, dns.HmacSHA256, 300, time.Now().Unix())
		}
		_ = w.WriteMsg(m)
	})}
	go func() { _ = srv.ActivateAndServe() }()
	t.Cleanup(func() { _ = srv.Shutdown() })
	return ln.Addr().String()
}

// TestUnsignedUpdateAnswerRefused: the answer to a signed update must be
// signed with the key. Before, an answer without a TSIG was taken as the
// server's (the client checks a TSIG only when one is present): a forged
// NOERROR made the hub believe records were published that never were.
// An unsigned zone transfer was already refused by the DNS library; it is
// now reported as a TSIG failure like the rest.
func TestUnsignedUpdateAnswerRefused(t *testing.T) {
	ctx := context.Background()
	p := newProvider(t, forger(t, false), keySecret)
	if cur, err := p.Current(ctx, domain, owner); !errors.Is(err, rfc2136.ErrTSIG) {
		t.Fatalf("an unsigned zone transfer: %v, %v; want ErrTSIG", cur, err)
	}
	p = newProvider(t, forger(t, true), keySecret)
	if err := p.Apply(ctx, build(t, spec())); !errors.Is(err, rfc2136.ErrTSIG) {
		t.Fatalf("an unsigned answer to an update was taken as success: %v; want ErrTSIG", err)
	}
}
