package dnsprovider

import (
	"errors"
	"net/netip"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/miekg/dns"
)

func testSpec() Spec {
	return Spec{
		Domain: "main.etcd.example.com",
		TTL:    60,
		Owner:  "6a1f0c2e-5b0e-4d8c-9d7e-0c7f5b2a1e11",
		TLS:    true,
		Members: []Member{
			{Name: "main-0", Addresses: []netip.Addr{netip.MustParseAddr("10.0.0.10")}},
			{Name: "main-1", Addresses: []netip.Addr{netip.MustParseAddr("10.0.1.10"), netip.MustParseAddr("fd00::1:10")}},
			{Name: "main-2", Hostname: "lb-2.elb.example.net", PeerPort: 32380, ClientPort: 32379},
		},
		NameServers: []NameServer{
			{Name: "ns1.main.etcd.example.com.", Addresses: []netip.Addr{netip.MustParseAddr("10.0.0.53")}},
			{Name: "ns.example.net"},
		},
	}
}

func TestBuild(t *testing.T) {
	s, err := Build(testSpec())
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, r := range s.Records() {
		if r.Type == "SOA" {
			// The serial is a hash; checked in TestBuildSerial.
			f := strings.Fields(r.Data[0])
			f[2] = "SERIAL"
			r.Data = []string{strings.Join(f, " ")}
		}
		for _, d := range r.Data {
			got = append(got, strings.Join([]string{r.Name, r.Type, itoa(r.TTL), d}, " "))
		}
	}
	want := []string{
		"main.etcd.example.com. SOA 60 ns1.main.etcd.example.com. hostmaster.main.etcd.example.com. SERIAL 3600 600 1209600 60",
		"main.etcd.example.com. NS 60 ns.example.net.",
		"main.etcd.example.com. NS 60 ns1.main.etcd.example.com.",
		`_etcdfed-owner.main.etcd.example.com. TXT 60 "heritage=etcdfed" "owner=6a1f0c2e-5b0e-4d8c-9d7e-0c7f5b2a1e11" "rrset=_etcd-client-ssl._tcp SRV" "rrset=_etcd-server-ssl._tcp SRV" "rrset=main-0 A" "rrset=main-1 A" "rrset=main-1 AAAA" "rrset=main-2 CNAME" "rrset=ns1 A"`,
		"_etcd-client-ssl._tcp.main.etcd.example.com. SRV 60 0 0 2379 main-0.main.etcd.example.com.",
		"_etcd-client-ssl._tcp.main.etcd.example.com. SRV 60 0 0 2379 main-1.main.etcd.example.com.",
		"_etcd-client-ssl._tcp.main.etcd.example.com. SRV 60 0 0 32379 main-2.main.etcd.example.com.",
		"_etcd-server-ssl._tcp.main.etcd.example.com. SRV 60 0 0 2380 main-0.main.etcd.example.com.",
		"_etcd-server-ssl._tcp.main.etcd.example.com. SRV 60 0 0 2380 main-1.main.etcd.example.com.",
		"_etcd-server-ssl._tcp.main.etcd.example.com. SRV 60 0 0 32380 main-2.main.etcd.example.com.",
		"main-0.main.etcd.example.com. A 60 10.0.0.10",
		"main-1.main.etcd.example.com. A 60 10.0.1.10",
		"main-1.main.etcd.example.com. AAAA 60 fd00::1:10",
		"main-2.main.etcd.example.com. CNAME 60 lb-2.elb.example.net.",
		"ns1.main.etcd.example.com. A 60 10.0.0.53",
	}
	if !slices.Equal(got, want) {
		t.Errorf("records:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if s.Owner() != testSpec().Owner {
		t.Errorf("Owner() = %q", s.Owner())
	}
	for _, r := range s.Managed() {
		if r.Type == "SOA" || r.Type == "NS" {
			t.Errorf("Managed() holds %s %s", r.Name, r.Type)
		}
	}
}

func itoa(i int32) string { return strconv.Itoa(int(i)) }

func TestBuildPlainSRVWithoutTLS(t *testing.T) {
	spec := testSpec()
	spec.TLS = false
	s, err := Build(spec)
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range []string{"_etcd-server._tcp.main.etcd.example.com.", "_etcd-client._tcp.main.etcd.example.com."} {
		if _, ok := s.Get(n, dns.TypeSRV); !ok {
			t.Errorf("no SRV at %s", n)
		}
	}
	if _, ok := s.Get("_etcd-server-ssl._tcp.main.etcd.example.com.", dns.TypeSRV); ok {
		t.Error("TLS SRV present with TLS off")
	}
}

func TestBuildSerial(t *testing.T) {
	a, err := Build(testSpec())
	if err != nil {
		t.Fatal(err)
	}
	b, err := Build(testSpec())
	if err != nil {
		t.Fatal(err)
	}
	if a.Serial() != b.Serial() || a.Serial() == 0 {
		t.Errorf("same content, serials %d and %d", a.Serial(), b.Serial())
	}
	spec := testSpec()
	spec.Members[0].Addresses = []netip.Addr{netip.MustParseAddr("10.0.0.11")}
	c, err := Build(spec)
	if err != nil {
		t.Fatal(err)
	}
	if c.Serial() == a.Serial() {
		t.Errorf("changed content kept serial %d", a.Serial())
	}
	spec.Serial = 42
	d, err := Build(spec)
	if err != nil {
		t.Fatal(err)
	}
	if d.Serial() != 42 {
		t.Errorf("explicit serial: got %d", d.Serial())
	}
}

func TestRecordsRoundTrip(t *testing.T) {
	s, err := Build(testSpec())
	if err != nil {
		t.Fatal(err)
	}
	back, err := ParseRecords(s.Origin(), s.Records())
	if err != nil {
		t.Fatal(err)
	}
	if !back.Equal(s) || !reflect.DeepEqual(back.Records(), s.Records()) || back.Owner() != s.Owner() {
		t.Errorf("round trip changed the set:\n%v\n%v", back.Records(), s.Records())
	}
	z, err := FromZoneFile(s.Origin(), []byte(s.ZoneFile()))
	if err != nil {
		t.Fatal(err)
	}
	if !z.Equal(s) {
		t.Errorf("zone file round trip changed the set:\n%s", z.ZoneFile())
	}
}

func TestParseRecordsNormalises(t *testing.T) {
	s, err := ParseRecords("Example.TEST.", []Record{
		{Name: "Example.Test.", Type: "soa", TTL: 10, Data: []string{"ns1 hostmaster 1 2 3 4 5"}},
		{Name: "WWW.example.test.", Type: "AAAA", TTL: 10, Data: []string{"2001:0db8:0:0::1", "2001:db8::0002"}},
		{Name: "txt.example.test.", Type: "TXT", TTL: 10, Data: []string{`"a b" c`}},
	})
	if err != nil {
		t.Fatal(err)
	}
	want := []Record{
		{Name: "example.test.", Type: "SOA", TTL: 10, Data: []string{"ns1.example.test. hostmaster.example.test. 1 2 3 4 5"}},
		{Name: "txt.example.test.", Type: "TXT", TTL: 10, Data: []string{`"a b" "c"`}},
		{Name: "www.example.test.", Type: "AAAA", TTL: 10, Data: []string{"2001:db8::1", "2001:db8::2"}},
	}
	if got := s.Records(); !reflect.DeepEqual(got, want) {
		t.Errorf("got %v\nwant %v", got, want)
	}
}

func TestParseRecordsRejects(t *testing.T) {
	const o = "example.test."
	soa := Record{Name: o, Type: "SOA", TTL: 60, Data: []string{"ns1.example.test. h.example.test. 1 2 3 4 5"}}
	a := func(name string) Record { return Record{Name: name, Type: "A", TTL: 60, Data: []string{"192.0.2.1"}} }
	for _, tc := range []struct {
		name   string
		origin string
		recs   []Record
		want   string
	}{
		{"relative origin", "example.test", nil, "must be absolute"},
		{"relative name", o, []Record{a("www")}, "must be absolute"},
		{"bad character", o, []Record{a("w w.example.test.")}, "only a-z"},
		{"wildcard", o, []Record{a("*.example.test.")}, "only a-z"},
		{"long label", o, []Record{a(strings.Repeat("x", 64) + ".example.test.")}, "longer than 63"},
		{"outside zone", o, []Record{a("www.example.org.")}, "outside zone"},
		{"sibling suffix", o, []Record{a("www.badexample.test.")}, "outside zone"},
		{"unsupported type", o, []Record{{Name: "m.example.test.", Type: "MX", TTL: 1, Data: []string{"10 x.example.test."}}}, `type "MX" not supported`},
		{"negative TTL", o, []Record{{Name: "w.example.test.", Type: "A", TTL: -1, Data: []string{"192.0.2.1"}}}, "TTL -1 out of range"},
		{"no data", o, []Record{{Name: "w.example.test.", Type: "A", TTL: 1}}, "no data"},
		{"bad address", o, []Record{{Name: "w.example.test.", Type: "A", TTL: 1, Data: []string{"300.1.1.1"}}}, `data "300.1.1.1"`},
		{"v6 in A", o, []Record{{Name: "w.example.test.", Type: "A", TTL: 1, Data: []string{"::1"}}}, `data "::1"`},
		{"line break", o, []Record{{Name: "w.example.test.", Type: "TXT", TTL: 1, Data: []string{"a\nb"}}}, "line breaks"},
		{"duplicate data", o, []Record{{Name: "w.example.test.", Type: "A", TTL: 1, Data: []string{"192.0.2.1", "192.0.2.1"}}}, "appears twice"},
		{"duplicate rrset", o, []Record{a("w.example.test."), a("w.example.test.")}, "duplicate RRset"},
		{"cname beside data", o, []Record{a("w.example.test."), {Name: "w.example.test.", Type: "CNAME", TTL: 1, Data: []string{"x.example.org."}}}, "CNAME cannot stand beside other data (A)"},
		{"cname at apex", o, []Record{soa, {Name: o, Type: "CNAME", TTL: 1, Data: []string{"x.example.org."}}}, "CNAME not allowed at the zone apex"},
		{"two cname targets", o, []Record{{Name: "w.example.test.", Type: "CNAME", TTL: 1, Data: []string{"x.example.org.", "y.example.org."}}}, "exactly one CNAME target"},
		{"soa off apex", o, []Record{{Name: "w.example.test.", Type: "SOA", TTL: 1, Data: soa.Data}}, "SOA only allowed at the zone apex"},
		{"delegation", o, []Record{{Name: "sub.example.test.", Type: "NS", TTL: 1, Data: []string{"ns.example.org."}}}, "delegation is not supported"},
		{"reserved owner name", o, []Record{a("_etcdfed-owner.example.test.")}, "reserved for the ownership TXT"},
		{"ownership of a missing RRset", o, []Record{a("w.example.test."), {Name: "_etcdfed-owner.example.test.", Type: "TXT", TTL: 1, Data: []string{`"heritage=etcdfed" "owner=x" "rrset=w A" "rrset=v A"`}}}, "lists RRsets the set lacks: v.example.test. A"},
		{"ownership record not etcdfed's", o, []Record{{Name: "_etcdfed-owner.example.test.", Type: "TXT", TTL: 1, Data: []string{`"x"`}}}, "must start with"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParseRecords(tc.origin, tc.recs)
			if err == nil {
				t.Fatalf("no error, want %q", tc.want)
			}
			if !errors.Is(err, ErrInvalid) {
				t.Errorf("error does not wrap ErrInvalid: %v", err)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %q does not contain %q", err, tc.want)
			}
		})
	}
}

func TestBuildRejects(t *testing.T) {
	for _, tc := range []struct {
		name   string
		modify func(*Spec)
		want   string
	}{
		{"no domain", func(s *Spec) { s.Domain = "" }, "domain is empty"},
		{"bad domain", func(s *Spec) { s.Domain = "a..b" }, "empty label"},
		{"no owner", func(s *Spec) { s.Owner = "" }, "owner is empty"},
		{"owner with space", func(s *Spec) { s.Owner = "a b" }, "owner"},
		{"negative ttl", func(s *Spec) { s.TTL = -5 }, "TTL -5 out of range"},
		{"no name servers", func(s *Spec) { s.NameServers = nil }, "no name servers"},
		{"glue missing", func(s *Spec) { s.NameServers[0].Addresses = nil }, "needs glue"},
		{"glue outside", func(s *Spec) { s.NameServers[1].Addresses = []netip.Addr{netip.MustParseAddr("192.0.2.1")} }, "cannot carry glue"},
		{"member without address", func(s *Spec) { s.Members[0].Addresses = nil }, `member 0 (main-0): no address`},
		{"member with both", func(s *Spec) { s.Members[0].Hostname = "x.example.net" }, "not both"},
		{"two ipv4", func(s *Spec) {
			s.Members[0].Addresses = append(s.Members[0].Addresses, netip.MustParseAddr("10.0.0.2"))
		}, "at most one of each"},
		{"member name with dot", func(s *Spec) { s.Members[0].Name = "a.b" }, "one lowercase DNS label"},
		{"member name upper", func(s *Spec) { s.Members[0].Name = "Main-0" }, "one lowercase DNS label"},
		{"duplicate member", func(s *Spec) { s.Members[1].Name = "main-0" }, "name used twice"},
		{"bad port", func(s *Spec) { s.Members[0].PeerPort = 70000 }, "out of range 1..65535"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			spec := testSpec()
			tc.modify(&spec)
			_, err := Build(spec)
			if err == nil {
				t.Fatalf("no error, want %q", tc.want)
			}
			if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %q: want ErrInvalid containing %q", err, tc.want)
			}
		})
	}
}

func FuzzParseRecordsRoundTrip(f *testing.F) {
	f.Add("example.test.", "www.example.test.", "A", int32(60), "192.0.2.1")
	f.Add("example.test.", "t.example.test.", "TXT", int32(0), `"a\"b" c\255`)
	f.Add("example.test.", "_s._tcp.example.test.", "SRV", int32(5), "0 0 1 x")
	f.Fuzz(func(t *testing.T, origin, name, typ string, ttl int32, data string) {
		s, err := ParseRecords(origin, []Record{{Name: name, Type: typ, TTL: ttl, Data: []string{data}}})
		if err != nil {
			return
		}
		back, err := ParseRecords(s.Origin(), s.Records())
		if err != nil {
			t.Fatalf("records of a valid set do not parse: %v\n%v", err, s.Records())
		}
		if !reflect.DeepEqual(back.Records(), s.Records()) {
			t.Fatalf("round trip changed the set:\n%v\n%v", s.Records(), back.Records())
		}
	})
}

// TestOwnershipRecordSplits keeps every Data string of the ownership
// record within the API's 1024-character bound, however long the names.
func TestOwnershipRecordSplits(t *testing.T) {
	spec := testSpec()
	spec.Members = nil
	for i := range 9 {
		spec.Members = append(spec.Members, Member{
			Name:      strings.Repeat("m", 55) + "-" + strconv.Itoa(i),
			Addresses: []netip.Addr{netip.AddrFrom4([4]byte{10, 0, byte(i), 1}), netip.MustParseAddr("fd00::" + strconv.Itoa(i+1))},
		})
	}
	s, err := Build(spec)
	if err != nil {
		t.Fatal(err)
	}
	own, ok := s.Get(OwnershipName(spec.Domain), dns.TypeTXT)
	if !ok || len(own.RRs) < 2 {
		t.Fatalf("ownership record not split: %v", own.RRs)
	}
	for _, r := range s.Records() {
		for _, d := range r.Data {
			if len(d) > 1024 {
				t.Errorf("%s %s: data of %d characters", r.Name, r.Type, len(d))
			}
		}
	}
	back, err := ParseRecords(s.Origin(), s.Records())
	if err != nil || !back.Equal(s) || back.Owner() != spec.Owner {
		t.Errorf("round trip: %v", err)
	}
}
