package rfc2136_test

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/etcdfed/etcdfed/dnsprovider/rfc2136"
)

// signer is the forging server's TSIG: it accepts every request and signs
// each answer with whatever secret the handler chose for it.
type signer struct {
	mu     sync.Mutex
	secret string
}

func (s *signer) use(secret string) { s.mu.Lock(); s.secret = secret; s.mu.Unlock() }

func (s *signer) Generate(msg []byte, _ *dns.TSIG) ([]byte, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	raw, err := base64.StdEncoding.DecodeString(s.secret)
	if err != nil {
		return nil, err
	}
	h := hmac.New(sha256.New, raw)
	h.Write(msg)
	return h.Sum(nil), nil
}

func (s *signer) Verify([]byte, *dns.TSIG) error { return nil }

// badSigner answers a zone transfer as the real server would (signed with
// the key, an empty zone, so the update goes out) and the update with
// NOERROR under a TSIG that does not prove the key: forge picks how.
func badSigner(t *testing.T, forge func(m *dns.Msg, s *signer)) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	soa, _ := dns.NewRR(zone + " 300 IN SOA ns1." + zone + " hostmaster." + zone + " 1 3600 600 1209600 300")
	s := &signer{secret: keySecret}
	accept := func(dns.Header) dns.MsgAcceptAction { return dns.MsgAccept }
	srv := &dns.Server{Listener: ln, TsigProvider: s, MsgAcceptFunc: accept, Handler: dns.HandlerFunc(func(w dns.ResponseWriter, r *dns.Msg) {
		m := new(dns.Msg).SetReply(r)
		if len(r.Question) == 1 && r.Question[0].Qtype == dns.TypeAXFR {
			m.Answer = []dns.RR{soa, soa}
			s.use(keySecret)
			m.SetTsig(keyName, dns.HmacSHA256, 300, time.Now().Unix())
		} else {
			forge(m, s)
		}
		_ = w.WriteMsg(m)
	})}
	go func() { _ = srv.ActivateAndServe() }()
	t.Cleanup(func() { _ = srv.Shutdown() })
	return ln.Addr().String()
}

// TestBadlySignedUpdateAnswerRefused: an answer to an update that carries a
// TSIG is taken only when that TSIG proves the key, for this request, now.
// The DNS client checks the signature when the provider hands it the key
// (TsigSecret); without it a forged NOERROR under any TSIG counted as
// published. Each forgery must end in ErrTSIG naming the key.
func TestBadlySignedUpdateAnswerRefused(t *testing.T) {
	for _, tc := range []struct {
		name  string
		forge func(m *dns.Msg, s *signer)
	}{
		{"wrong secret", func(m *dns.Msg, s *signer) {
			s.use("d3JvbmdzZWNyZXR3cm9uZ3NlY3JldA==")
			m.SetTsig(keyName, dns.HmacSHA256, 300, time.Now().Unix())
		}},
		{"another key", func(m *dns.Msg, s *signer) {
			s.use(keySecret)
			m.SetTsig("someone-else.", dns.HmacSHA256, 300, time.Now().Unix())
		}},
		{"stale signature", func(m *dns.Msg, s *signer) {
			s.use(keySecret)
			m.SetTsig(keyName, dns.HmacSHA256, 300, time.Now().Add(-time.Hour).Unix())
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := newProvider(t, badSigner(t, tc.forge), keySecret)
			err := p.Apply(context.Background(), build(t, spec()))
			if !errors.Is(err, rfc2136.ErrTSIG) || !strings.Contains(err.Error(), keyName) {
				t.Fatalf("a badly signed answer to an update: %v; want ErrTSIG naming the key", err)
			}
		})
	}
	// The same server signing with the key is believed: the refusals above
	// are the signature's, not the forger's.
	p := newProvider(t, badSigner(t, func(m *dns.Msg, s *signer) {
		s.use(keySecret)
		m.SetTsig(keyName, dns.HmacSHA256, 300, time.Now().Unix())
	}), keySecret)
	if err := p.Apply(context.Background(), build(t, spec())); err != nil {
		t.Fatalf("a well signed answer: %v", err)
	}
}
