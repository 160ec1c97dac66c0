package embedded

import (
	"testing"
	"time"

	"github.com/miekg/dns"
)

// TestHoldAnswersOnlyAfterRelease: a server started with Hold answers no
// query before Release, not even REFUSED for the zone it has not loaded
// yet; a query sent while it held is answered after Release from the zone
// set meanwhile.
func TestHoldAnswersOnlyAfterRelease(t *testing.T) {
	s := startServer(t, Config{Hold: true})
	if s.Serving() {
		t.Fatal("a held server says it serves")
	}
	q := new(dns.Msg).SetQuestion("main-0."+testOrigin, dns.TypeA)
	c := &dns.Client{Timeout: 300 * time.Millisecond}
	if r, _, err := c.Exchange(q, s.Addr().String()); err == nil {
		t.Fatalf("a held server answered %s", dns.RcodeToString[r.Rcode])
	}

	queued := make(chan *dns.Msg, 1)
	go func() {
		c := &dns.Client{Timeout: 10 * time.Second}
		r, _, err := c.Exchange(q, s.Addr().String())
		if err != nil {
			t.Errorf("query queued while held: %v", err)
		}
		queued <- r
	}()
	time.Sleep(100 * time.Millisecond) // the query is in the socket's queue
	if err := s.SetZone(mustBuild(t, testSpec())); err != nil {
		t.Fatal(err)
	}
	s.Release()
	if !s.Serving() {
		t.Fatal("a released server says it does not serve")
	}
	r := <-queued
	if r == nil || r.Rcode != dns.RcodeSuccess || len(r.Answer) != 1 {
		t.Fatalf("query queued while held: %v", r)
	}
	if r := exchange(t, s.Addr().String(), q, "tcp"); r.Rcode != dns.RcodeSuccess || len(r.Answer) != 1 {
		t.Fatalf("TCP after release: %v", r)
	}
}
