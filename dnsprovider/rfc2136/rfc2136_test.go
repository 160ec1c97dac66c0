package rfc2136_test

import (
	"context"
	"errors"
	"net/netip"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/etcdfed/etcdfed/dev/dnstest"
	"github.com/etcdfed/etcdfed/dnsprovider"
	"github.com/etcdfed/etcdfed/dnsprovider/embedded"
	"github.com/etcdfed/etcdfed/dnsprovider/rfc2136"
)

const (
	zone      = "example.test."
	domain    = "main.etcd.example.test."
	owner     = "uid-1111"
	keyName   = "etcdfed-update."
	keySecret = "c2VjcmV0c2VjcmV0c2VjcmV0c2VjcmV0c2VjcmV0MTI="
)

// The zone as its operator wrote it: SOA, NS, and records of others.
const zoneFile = `$ORIGIN example.test.
@ 300 IN SOA ns1 hostmaster 1 3600 600 1209600 300
@ 300 IN NS ns1
@ 300 IN TXT "v=spf1 -all"
ns1 300 IN A 127.0.0.1
www 300 IN A 192.0.2.80
; a record below our domain that etcdfed did not write
manual.main.etcd 300 IN A 192.0.2.99
; another etcd cluster, held by another owner
other-0.other.etcd 300 IN A 192.0.2.10
_etcdfed-owner.other.etcd 300 IN TXT "heritage=etcdfed" "owner=uid-2222" "rrset=other-0 A"
`

func spec() dnsprovider.Spec {
	return dnsprovider.Spec{
		Domain: domain,
		TTL:    60,
		Owner:  owner,
		TLS:    true,
		Members: []dnsprovider.Member{
			{Name: "main-0", Addresses: []netip.Addr{netip.MustParseAddr("10.0.0.10")}},
			{Name: "main-1", Addresses: []netip.Addr{netip.MustParseAddr("10.0.1.10")}},
			{Name: "main-2", Addresses: []netip.Addr{netip.MustParseAddr("10.0.2.10")}},
		},
		NameServers: []dnsprovider.NameServer{{Name: "ns1.example.test."}},
	}
}

func build(t *testing.T, s dnsprovider.Spec) *dnsprovider.RecordSet {
	t.Helper()
	set, err := dnsprovider.Build(s)
	if err != nil {
		t.Fatal(err)
	}
	return set
}

// server is something the provider can publish to: BIND or our own.
type server struct {
	name  string
	start func(t *testing.T) string
}

func servers() []server {
	return []server{
		{"bind9", func(t *testing.T) string {
			b := dnstest.StartBIND(t,
				[]dnstest.Key{{Name: keyName, Algorithm: "hmac-sha256", Secret: keySecret}},
				[]dnstest.Zone{{Origin: zone, ZoneFile: zoneFile, UpdateKey: keyName, TransferKey: keyName}})
			return b.Addr
		}},
		{"embedded", func(t *testing.T) string {
			s, err := embedded.New(embedded.Config{Addr: "127.0.0.1:0", AllowUpdate: true,
				TSIGKeys: []embedded.TSIGKey{{Name: keyName, Secret: keySecret}}})
			if err != nil {
				t.Fatal(err)
			}
			set, err := dnsprovider.FromZoneFile(zone, []byte(zoneFile))
			if err != nil {
				t.Fatal(err)
			}
			if err := s.SetZone(set); err != nil {
				t.Fatal(err)
			}
			if err := s.Start(); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = s.Stop() })
			return s.Addr().String()
		}},
	}
}

func newProvider(t *testing.T, addr, secret string) *rfc2136.Provider {
	t.Helper()
	p, err := rfc2136.New(rfc2136.Config{Server: addr, Zone: zone, KeyName: keyName, KeySecret: secret})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// lookup asks the server directly.
func lookup(t *testing.T, addr, name string, qtype uint16) []string {
	t.Helper()
	c := &dns.Client{Net: "tcp", Timeout: 5 * time.Second}
	r, _, err := c.Exchange(new(dns.Msg).SetQuestion(name, qtype), addr)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, rr := range r.Answer {
		if rr.Header().Rrtype == qtype {
			out = append(out, strings.TrimPrefix(rr.String(), rr.Header().String()))
		}
	}
	return out
}

func TestProvider(t *testing.T) {
	for _, srv := range servers() {
		t.Run(srv.name, func(t *testing.T) {
			if srv.name == "bind9" {
				dnstest.RequireTool(t, "named")
			}
			addr := srv.start(t)
			p := newProvider(t, addr, keySecret)
			ctx := context.Background()

			// Create.
			set := build(t, spec())
			if err := p.Apply(ctx, set); err != nil {
				t.Fatalf("create: %v", err)
			}
			if got := lookup(t, addr, "main-1."+domain, dns.TypeA); !reflect.DeepEqual(got, []string{"10.0.1.10"}) {
				t.Errorf("main-1 A = %v", got)
			}
			if got := lookup(t, addr, "_etcd-server-ssl._tcp."+domain, dns.TypeSRV); len(got) != 3 {
				t.Errorf("server SRV = %v", got)
			}
			cur, err := p.Current(ctx, domain, owner)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(cur, set.Managed()) {
				t.Errorf("Current after create:\n%v\nwant\n%v", cur, set.Managed())
			}
			// Idempotent: nothing left to send.
			if ch, err := p.Plan(ctx, set); err != nil || !ch.Empty() {
				t.Errorf("plan after apply: %+v, %v", ch, err)
			}
			if err := p.Apply(ctx, set); err != nil {
				t.Fatalf("apply again: %v", err)
			}

			// Change main-1's address, remove main-2, move main-0 behind a
			// load balancer (A becomes CNAME), in one update.
			s2 := spec()
			s2.Members[1].Addresses = []netip.Addr{netip.MustParseAddr("10.0.1.11")}
			s2.Members[0] = dnsprovider.Member{Name: "main-0", Hostname: "lb-0.example.net"}
			s2.Members = s2.Members[:2]
			set2 := build(t, s2)
			if err := p.Apply(ctx, set2); err != nil {
				t.Fatalf("change: %v", err)
			}
			if got := lookup(t, addr, "main-1."+domain, dns.TypeA); !reflect.DeepEqual(got, []string{"10.0.1.11"}) {
				t.Errorf("main-1 A after change = %v", got)
			}
			if got := lookup(t, addr, "main-2."+domain, dns.TypeA); len(got) != 0 {
				t.Errorf("main-2 A after removal = %v", got)
			}
			if got := lookup(t, addr, "main-0."+domain, dns.TypeCNAME); !reflect.DeepEqual(got, []string{"lb-0.example.net."}) {
				t.Errorf("main-0 CNAME = %v", got)
			}
			if got := lookup(t, addr, "main-0."+domain, dns.TypeA); len(got) != 0 {
				t.Errorf("main-0 still has A %v", got)
			}
			cur, err = p.Current(ctx, domain, owner)
			if err != nil || !reflect.DeepEqual(cur, set2.Managed()) {
				t.Errorf("Current after change:\n%v (%v)\nwant\n%v", cur, err, set2.Managed())
			}

			// Records of others are untouched.
			checkOthers := func() {
				t.Helper()
				for name, want := range map[string]string{"www." + zone: "192.0.2.80", "manual." + domain: "192.0.2.99", "other-0.other.etcd." + zone: "192.0.2.10"} {
					if got := lookup(t, addr, name, dns.TypeA); !reflect.DeepEqual(got, []string{want}) {
						t.Errorf("%s = %v, want %s", name, got, want)
					}
				}
				if got := lookup(t, addr, zone, dns.TypeTXT); !reflect.DeepEqual(got, []string{`"v=spf1 -all"`}) {
					t.Errorf("apex TXT = %v", got)
				}
				if got := lookup(t, addr, zone, dns.TypeNS); !reflect.DeepEqual(got, []string{"ns1.example.test."}) {
					t.Errorf("apex NS = %v", got)
				}
			}
			checkOthers()

			// Another owner cannot take our domain, and we cannot take theirs.
			intruder := spec()
			intruder.Owner = "uid-3333"
			if err := p.Apply(ctx, build(t, intruder)); !errors.Is(err, dnsprovider.ErrNotOwner) {
				t.Errorf("apply by another owner: %v, want ErrNotOwner", err)
			}
			theirs := spec()
			theirs.Domain = "other.etcd.example.test."
			if err := p.Apply(ctx, build(t, theirs)); !errors.Is(err, dnsprovider.ErrNotOwner) {
				t.Errorf("apply into another owner's domain: %v, want ErrNotOwner", err)
			}
			// A name held by nobody is not overwritten.
			clash := spec()
			clash.Members = append(clash.Members, dnsprovider.Member{Name: "manual", Addresses: []netip.Addr{netip.MustParseAddr("10.9.9.9")}})
			if err := p.Apply(ctx, build(t, clash)); !errors.Is(err, dnsprovider.ErrConflict) || !strings.Contains(err.Error(), "manual."+domain) {
				t.Errorf("apply over an unowned record: %v, want ErrConflict naming it", err)
			}
			checkOthers()

			// Remove everything the owner holds.
			if err := p.Remove(ctx, domain, owner); err != nil {
				t.Fatalf("remove: %v", err)
			}
			for _, n := range []string{"main-0." + domain, "main-1." + domain, "_etcd-server-ssl._tcp." + domain, dnsprovider.OwnershipName(domain)} {
				for _, qt := range []uint16{dns.TypeA, dns.TypeCNAME, dns.TypeSRV, dns.TypeTXT} {
					if got := lookup(t, addr, n, qt); len(got) != 0 {
						t.Errorf("after remove %s %s = %v", n, dns.TypeToString[qt], got)
					}
				}
			}
			if cur, err := p.Current(ctx, domain, owner); err != nil || len(cur) != 0 {
				t.Errorf("Current after remove = %v, %v", cur, err)
			}
			if err := p.Remove(ctx, domain, owner); err != nil {
				t.Errorf("second remove: %v", err)
			}
			checkOthers()

			// A wrong key is refused with a clear error, and nothing changes.
			bad := newProvider(t, addr, "d3JvbmdzZWNyZXR3cm9uZ3NlY3JldA==")
			err = bad.Apply(ctx, set)
			if !errors.Is(err, rfc2136.ErrTSIG) || !strings.Contains(err.Error(), keyName) {
				t.Errorf("apply with a wrong key: %v, want ErrTSIG naming the key", err)
			}
			if got := lookup(t, addr, "main-1."+domain, dns.TypeA); len(got) != 0 {
				t.Errorf("wrong key changed the zone: %v", got)
			}
		})
	}
}

func TestWrongKeyOnUpdateOnly(t *testing.T) {
	// Transfers allowed to anyone on loopback, updates only with the key:
	// the update itself must fail with ErrTSIG.
	dnstest.RequireTool(t, "named")
	conf := []dnstest.Zone{{Origin: zone, ZoneFile: zoneFile, UpdateKey: keyName, TransferKey: keyName}}
	b := dnstest.StartBIND(t, []dnstest.Key{
		{Name: keyName, Algorithm: "hmac-sha256", Secret: keySecret},
	}, conf)
	p, err := rfc2136.New(rfc2136.Config{Server: b.Addr, Zone: zone, KeyName: "unknown-key.", KeySecret: keySecret})
	if err != nil {
		t.Fatal(err)
	}
	err = p.Apply(context.Background(), build(t, spec()))
	if !errors.Is(err, rfc2136.ErrTSIG) {
		t.Errorf("unknown key: %v, want ErrTSIG", err)
	}
}

func TestConfigErrors(t *testing.T) {
	for _, tc := range []struct {
		cfg  rfc2136.Config
		want string
	}{
		{rfc2136.Config{Server: "nope", Zone: zone, KeyName: keyName, KeySecret: keySecret}, "host:port"},
		{rfc2136.Config{Server: "127.0.0.1:53", Zone: zone}, "TSIG key"},
		{rfc2136.Config{Server: "127.0.0.1:53", Zone: zone, KeyName: keyName, KeySecret: keySecret, KeyAlgorithm: "hmac-md5"}, "not supported"},
	} {
		if _, err := rfc2136.New(tc.cfg); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("New(%+v) = %v, want %q", tc.cfg, err, tc.want)
		}
	}
	p, err := rfc2136.New(rfc2136.Config{Server: "127.0.0.1:1", Zone: "other.test.", KeyName: keyName, KeySecret: keySecret})
	if err != nil {
		t.Fatal(err)
	}
	// Checked before anything is sent: port 1 would fail otherwise.
	if err := p.Apply(context.Background(), build(t, spec())); err == nil || !strings.Contains(err.Error(), "outside zone") {
		t.Errorf("apply outside the zone: %v", err)
	}
}
