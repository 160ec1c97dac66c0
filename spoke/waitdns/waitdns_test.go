package waitdns_test

import (
	"context"
	"net"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr/testr"

	"github.com/etcdfed/etcdfed/dnsprovider"
	"github.com/etcdfed/etcdfed/dnsprovider/embedded"
	"github.com/etcdfed/etcdfed/spoke/waitdns"
)

// server starts the embedded DNS server on loopback and returns a resolver
// that asks only it: real DNS queries over UDP through Go's resolver.
func server(t *testing.T) (*embedded.Server, *net.Resolver) {
	t.Helper()
	srv, err := embedded.New(embedded.Config{Addr: "127.0.0.1:0", Log: testr.New(t)})
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Stop() })
	addr := srv.Addr().String()
	return srv, &net.Resolver{PreferGo: true, Dial: func(ctx context.Context, network, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, network, addr)
	}}
}

func zone(t *testing.T, members ...dnsprovider.Member) *dnsprovider.RecordSet {
	t.Helper()
	set, err := dnsprovider.Build(dnsprovider.Spec{
		Domain: "etcd.test", TTL: 5, Owner: "test", TLS: true, Members: members,
		NameServers: []dnsprovider.NameServer{{Name: "ns1.etcd.test.", Addresses: []netip.Addr{netip.MustParseAddr("127.0.0.1")}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	return set
}

func ip(s string) []netip.Addr { return []netip.Addr{netip.MustParseAddr(s)} }

func TestWaitFollowsTheRecord(t *testing.T) {
	srv, res := server(t)
	if err := srv.SetZone(zone(t, dnsprovider.Member{Name: "main-0", Addresses: ip("10.1.0.1")})); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var reports []string
	first := make(chan struct{})
	report := func(s string) {
		mu.Lock()
		defer mu.Unlock()
		if reports = append(reports, s); len(reports) == 1 {
			close(first)
		}
	}
	done := make(chan error, 1)
	go func() {
		done <- waitdns.Wait(context.Background(), res, "main-0.etcd.test", "10.1.0.2", 20*time.Millisecond, time.Minute, report)
	}()
	// Wait reports the old address and keeps waiting.
	select {
	case <-first:
	case err := <-done:
		t.Fatalf("Wait returned %v while the name pointed elsewhere", err)
	}
	changed := time.Now()
	if err := srv.SetZone(zone(t, dnsprovider.Member{Name: "main-0", Addresses: ip("10.1.0.2")})); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatalf("Wait: %v", err)
	}
	mu.Lock()
	defer mu.Unlock()
	t.Logf("wait-dns returned %v after the record changed; reports: %q", time.Since(changed), reports)
	if !strings.Contains(reports[0], "10.1.0.1") {
		t.Errorf("first report %q does not say what the name resolved to", reports[0])
	}
}

func TestCheck(t *testing.T) {
	srv, res := server(t)
	if err := srv.SetZone(zone(t,
		dnsprovider.Member{Name: "main-0", Addresses: ip("10.1.0.1")},
		dnsprovider.Member{Name: "main-1", Addresses: []netip.Addr{netip.MustParseAddr("10.1.0.5"), netip.MustParseAddr("fd00::5")}},
		dnsprovider.Member{Name: "main-2", Hostname: "lb-2.etcd.test."},
		dnsprovider.Member{Name: "lb-2", Addresses: ip("10.9.0.2")},
	)); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for _, tc := range []struct {
		name, address string
		ok            bool
		err           bool
	}{
		{"main-0.etcd.test", "10.1.0.1", true, false},
		{"main-0.etcd.test", "10.1.0.2", false, false},
		{"main-1.etcd.test", "10.1.0.5", false, false}, // also has an IPv6 address: not exactly one
		{"main-2.etcd.test", "lb-2.etcd.test", true, false},
		{"main-2.etcd.test", "lb-2.etcd.test.", true, false},
		{"main-2.etcd.test", "10.9.0.2", true, false}, // an LB IP literal: the CNAME chain ends there
		{"main-0.etcd.test", "lb-2.etcd.test", false, false},
		{"main-9.etcd.test", "10.1.0.1", false, true},
		{"main-0.etcd.test", "", false, true},
	} {
		ok, seen, err := waitdns.Check(ctx, res, tc.name, tc.address)
		if ok != tc.ok || (err != nil) != tc.err {
			t.Errorf("Check(%s, %s) = %v, %q, %v; want ok=%v err=%v", tc.name, tc.address, ok, seen, err, tc.ok, tc.err)
		}
	}
}

func TestWaitTimesOut(t *testing.T) {
	_, res := server(t)
	err := waitdns.Wait(context.Background(), res, "main-0.etcd.test", "10.1.0.1", 10*time.Millisecond, 100*time.Millisecond, func(string) {})
	if err == nil {
		t.Fatal("Wait without a zone returned nil")
	}
}
