package embedded

import (
	"fmt"
	"net/netip"
	"testing"

	"github.com/go-logr/logr/testr"

	"github.com/etcdfed/etcdfed/dnsprovider"
)

const (
	testOrigin = "main.etcd.test."
	bigOrigin  = "big.test."
	testOwner  = "0b8f5c8e-1111-4c3a-9e2f-5d9b7f0a1c22"
	keyName    = "etcdfed-test."
	keySecret  = "c2VjcmV0c2VjcmV0c2VjcmV0c2VjcmV0c2VjcmV0MTI="
)

func testSpec() dnsprovider.Spec {
	return dnsprovider.Spec{
		Domain: testOrigin,
		TTL:    60,
		Owner:  testOwner,
		TLS:    true,
		Members: []dnsprovider.Member{
			{Name: "main-0", Addresses: []netip.Addr{netip.MustParseAddr("10.0.0.10")}},
			{Name: "main-1", Addresses: []netip.Addr{netip.MustParseAddr("10.0.1.10"), netip.MustParseAddr("fd00::1:10")}},
			{Name: "main-2", Hostname: "lb-2.example.net"},
			{Name: "main-3", Hostname: "main-0.main.etcd.test"},
		},
		NameServers: []dnsprovider.NameServer{
			{Name: "ns1.main.etcd.test", Addresses: []netip.Addr{netip.MustParseAddr("127.0.0.53")}},
		},
	}
}

func mustBuild(t testing.TB, spec dnsprovider.Spec) *dnsprovider.RecordSet {
	t.Helper()
	s, err := dnsprovider.Build(spec)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// bigZone has a name with 100 AAAA records, too large for any UDP answer.
func bigZone(t testing.TB) *dnsprovider.RecordSet {
	t.Helper()
	many := dnsprovider.Record{Name: "many." + bigOrigin, Type: "AAAA", TTL: 60}
	for i := range 100 {
		many.Data = append(many.Data, fmt.Sprintf("2001:db8::%x", i+1))
	}
	s, err := dnsprovider.ParseRecords(bigOrigin, []dnsprovider.Record{
		{Name: bigOrigin, Type: "SOA", TTL: 60, Data: []string{"ns.big.test. hostmaster.big.test. 7 3600 600 1209600 60"}},
		{Name: bigOrigin, Type: "NS", TTL: 60, Data: []string{"ns.big.test."}},
		{Name: "ns." + bigOrigin, Type: "A", TTL: 60, Data: []string{"127.0.0.54"}},
		many,
	})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func startServer(t testing.TB, cfg Config, sets ...*dnsprovider.RecordSet) *Server {
	t.Helper()
	if cfg.Addr == "" {
		cfg.Addr = "127.0.0.1:0"
	}
	if tt, ok := t.(*testing.T); ok {
		cfg.Log = testr.New(tt)
	}
	s, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	for _, set := range sets {
		if err := s.SetZone(set); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Stop() })
	return s
}
