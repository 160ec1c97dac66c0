package reports

import (
	"fmt"
	"net"
	"net/netip"
	"slices"
	"strings"
	"testing"

	etcdfedv1 "github.com/etcdfed/etcdfed/api/v1alpha1"
)

var podIP = Member{DNSName: "main-0.main.etcd.test", Domain: "main.etcd.test", TLS: true}

func TestCheckURLs(t *testing.T) {
	nodePort := podIP
	nodePort.NodePort = true
	plain := podIP
	plain.TLS = false
	for _, tc := range []struct {
		name   string
		url    string
		m      Member
		client bool
		bad    string // substring of the error; "" accepted
	}{
		{"peer", "https://main-0.main.etcd.test:2380", podIP, false, ""},
		{"client", "https://main-0.main.etcd.test:2379", podIP, true, ""},
		{"plain http without TLS", "http://main-0.main.etcd.test:2380", plain, false, ""},
		{"node port", "https://main-0.main.etcd.test:31380", nodePort, false, ""},
		{"another member's name", "https://main-1.main.etcd.test:2380", podIP, false, "not the member's DNS name"},
		{"a name outside the ring", "https://evil.example.com:2380", podIP, false, "not the member's DNS name"},
		{"an IP", "https://10.0.0.9:2380", podIP, false, "not the member's DNS name"},
		{"upper case", "https://MAIN-0.main.etcd.test:2380", podIP, false, "not the member's DNS name"},
		{"a suffix of the name", "https://main-0.main.etcd.test.evil.com:2380", podIP, false, "not the member's DNS name"},
		{"http with TLS", "http://main-0.main.etcd.test:2380", podIP, false, "scheme"},
		{"https without TLS", "https://main-0.main.etcd.test:2380", plain, false, "scheme"},
		{"unix socket", "unix://main-0.main.etcd.test:2380", podIP, false, "scheme"},
		{"the client port as peer", "https://main-0.main.etcd.test:2379", podIP, false, "port 2379, want 2380"},
		{"no port", "https://main-0.main.etcd.test", podIP, false, "not a port"},
		{"port 0 with node ports", "https://main-0.main.etcd.test:0", nodePort, false, "not a port"},
		{"port too big", "https://main-0.main.etcd.test:65536", nodePort, false, "not a port"},
		{"leading zero", "https://main-0.main.etcd.test:02380", podIP, false, "not in the form"},
		{"a user", "https://admin:secret@main-0.main.etcd.test:2380", podIP, false, "user"},
		{"a path", "https://main-0.main.etcd.test:2380/x", podIP, false, "path"},
		{"a query", "https://main-0.main.etcd.test:2380?a=b", podIP, false, "path, query"},
		{"a second URL", "https://main-0.main.etcd.test:2380,https://evil:2380", podIP, false, ""},
		{"too long", "https://" + strings.Repeat("a", 400), podIP, false, "too long"},
		{"not a URL", "%zz", podIP, false, "not a URL"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			check := CheckPeerURL
			if tc.client {
				check = CheckClientURL
			}
			err := check(tc.url, tc.m)
			if tc.name == "a second URL" { // any error: never accepted
				if err == nil {
					t.Fatal("accepted")
				}
				return
			}
			if (err == nil) != (tc.bad == "") || (err != nil && !strings.Contains(err.Error(), tc.bad)) {
				t.Fatalf("check(%q) = %v, want %q", tc.url, err, tc.bad)
			}
		})
	}
}

func TestCheckAddress(t *testing.T) {
	lb := podIP
	lb.LoadBalancer = true
	local := podIP
	local.AllowLoopback = true
	for _, tc := range []struct {
		name string
		a    string
		m    Member
		bad  string
	}{
		{"IPv4", "10.1.2.3", podIP, ""},
		{"IPv6", "fd00::1", podIP, ""},
		{"public", "203.0.113.7", podIP, ""},
		{"loopback refused", "127.0.0.1", podIP, "loopback"},
		{"loopback IPv6 refused", "::1", podIP, "loopback"},
		{"loopback in the local environment", "127.1.16.10", local, ""},
		{"unspecified", "0.0.0.0", podIP, "unspecified"},
		{"unspecified IPv6", "::", podIP, "unspecified"},
		{"link-local (metadata service)", "169.254.169.254", podIP, "link-local"},
		{"link-local IPv6", "fe80::1", podIP, "link-local"},
		{"multicast", "224.0.0.1", podIP, "multicast"},
		{"broadcast", "255.255.255.255", podIP, "broadcast"},
		{"mapped loopback", "::ffff:127.0.0.1", podIP, "loopback"},
		{"zone", "fe80::1%eth0", podIP, ""},
		{"a hostname without a load balancer", "lb.example.com", podIP, "not an IP address"},
		{"a load balancer's hostname", "a1b2.elb.amazonaws.com", lb, ""},
		{"a hostname inside the ring's domain", "main-1.main.etcd.test", lb, "inside the ring's own domain"},
		{"the ring's domain itself", "main.etcd.test", lb, "inside the ring's own domain"},
		{"not a name", "bad_name!", lb, "neither an IP address nor a DNS name"},
		{"too long", strings.Repeat("a", 300), lb, "too long"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := CheckAddress(tc.a, tc.m)
			if tc.name == "zone" { // refused either way
				if err == nil {
					t.Fatal("accepted")
				}
				return
			}
			if (err == nil) != (tc.bad == "") || (err != nil && !strings.Contains(err.Error(), tc.bad)) {
				t.Fatalf("CheckAddress(%q) = %v, want %q", tc.a, err, tc.bad)
			}
		})
	}
}

func TestCheckHostPort(t *testing.T) {
	for _, tc := range []struct {
		a            string
		portOptional bool
		ok           bool
	}{
		{"10.0.0.5:53", true, true},
		{"10.0.0.5", true, true},
		{"10.0.0.5", false, false},
		{"[fd00::5]:7946", false, true},
		{"dns.example.com:53", true, false},
		{"10.0.0.5:0", false, false},
		{"10.0.0.5:99999", false, false},
		{"10.0.0.5:053", false, false},
		{"127.0.0.1:53", true, false},
		{"169.254.169.254:80", false, false},
		{"0.0.0.0:7946", false, false},
		{strings.Repeat("1", 100), true, false},
	} {
		if err := CheckHostPort(tc.a, false, tc.portOptional); (err == nil) != tc.ok {
			t.Errorf("CheckHostPort(%q, portOptional %v) = %v, want ok %v", tc.a, tc.portOptional, err, tc.ok)
		}
	}
}

// One member's bad fields are cleared and named; its good ones are kept.
func TestMemberStatus(t *testing.T) {
	in := etcdfedv1.EtcdMemberStatus{
		PeerURL:   "https://main-1.main.etcd.test:2380", // another member's name
		ClientURL: "https://main-0.main.etcd.test:2379",
		Address:   "10.0.0.7",
		PodIP:     "whatever", // not used by anyone else: not checked
	}
	out, rej := MemberStatus(in, podIP)
	if out.PeerURL != "" || out.ClientURL != in.ClientURL || out.Address != in.Address || out.PodIP != in.PodIP {
		t.Errorf("status after the check: %+v", out)
	}
	if len(rej) != 1 || rej[0].Field != "status.peerURL" || !strings.Contains(rej[0].String(), "main-1.main.etcd.test") {
		t.Errorf("rejections %v, want the peer URL named", rej)
	}
}

func TestSpokeStatus(t *testing.T) {
	in := etcdfedv1.EtcdSpokeStatus{
		DNSAddresses:       []string{"10.0.0.53:53", "169.254.169.254:53", "10.0.1.53"},
		GossipAddress:      "evil.example.com:7946",
		Zones:              []string{"eu-1a", "not a zone!", ""},
		UnschedulableZones: []string{"eu-1a"},
	}
	out, rej := SpokeStatus(in, false)
	if strings.Join(out.DNSAddresses, ",") != "10.0.0.53:53,10.0.1.53" || out.GossipAddress != "" || strings.Join(out.Zones, ",") != "eu-1a" || len(out.UnschedulableZones) != 1 {
		t.Errorf("status after the check: %+v", out)
	}
	var fields []string
	for _, r := range rej {
		fields = append(fields, r.Field)
	}
	if got := strings.Join(fields, ","); got != "status.dnsAddresses[1],status.gossipAddress,status.zones[1],status.zones[2]" {
		t.Errorf("rejected fields %s", got)
	}
	// A cluster without zones reports itself closed with the empty zone.
	closed, rej := SpokeStatus(etcdfedv1.EtcdSpokeStatus{UnschedulableZones: []string{"", "not a zone!"}}, false)
	if len(closed.UnschedulableZones) != 1 || closed.UnschedulableZones[0] != "" || len(rej) != 1 || rej[0].Field != "status.unschedulableZones[1]" {
		t.Errorf("a cluster without zones, closed: %+v, rejections %v", closed.UnschedulableZones, rej)
	}
}

// The fuzz targets: whatever a member cluster writes, a check never
// panics, and what it accepts is what the hub may use.

func FuzzCheckPeerURL(f *testing.F) {
	for _, s := range []string{"https://main-0.main.etcd.test:2380", "https://main-1.main.etcd.test:2380", "http://main-0.main.etcd.test:2380",
		"https://main-0.main.etcd.test:2380/", "https://u@main-0.main.etcd.test:2380", "https://main-0.main.etcd.test:31000"} {
		f.Add(s, false)
	}
	f.Fuzz(func(t *testing.T, u string, nodePort bool) {
		m := podIP
		m.NodePort = nodePort
		if CheckPeerURL(u, m) == nil {
			mustBeMemberURL(t, u, m, etcdfedv1.DefaultPeerPort)
		}
	})
}

func FuzzCheckClientURL(f *testing.F) {
	for _, s := range []string{"https://main-0.main.etcd.test:2379", "https://main-0.main.etcd.test:2380", "https://[::1]:2379"} {
		f.Add(s, false)
	}
	f.Fuzz(func(t *testing.T, u string, nodePort bool) {
		m := podIP
		m.NodePort = nodePort
		if CheckClientURL(u, m) == nil {
			mustBeMemberURL(t, u, m, etcdfedv1.DefaultClientPort)
		}
	})
}

// mustBeMemberURL: an accepted URL is the member's own DNS name in the
// one form etcdfed writes, on the expected port.
func mustBeMemberURL(t *testing.T, u string, m Member, port int32) {
	t.Helper()
	prefix := "https://" + m.DNSName + ":"
	if !strings.HasPrefix(u, prefix) {
		t.Fatalf("accepted %q, not %s...", u, prefix)
	}
	if !m.NodePort && u != etcdfedv1.MemberURL(etcdfedv1.TLSEnabled, m.DNSName, port) {
		t.Fatalf("accepted %q on another port than %d", u, port)
	}
	for _, c := range strings.TrimPrefix(u, prefix) {
		if c < '0' || c > '9' {
			t.Fatalf("accepted %q with more than a port after the name", u)
		}
	}
}

func FuzzCheckAddress(f *testing.F) {
	for _, s := range []string{"10.0.0.1", "127.0.0.1", "::1", "169.254.169.254", "lb.example.com", "main-1.main.etcd.test", "::ffff:10.0.0.1"} {
		f.Add(s, false)
	}
	f.Fuzz(func(t *testing.T, a string, lb bool) {
		m := podIP
		m.LoadBalancer = lb
		if CheckAddress(a, m) != nil {
			return
		}
		if ip, err := netip.ParseAddr(a); err == nil {
			ip = ip.Unmap()
			if ip.IsLoopback() || ip.IsUnspecified() || ip.IsMulticast() || ip.IsLinkLocalUnicast() || ip.Zone() != "" {
				t.Fatalf("accepted the address %q", a)
			}
			return
		}
		h := strings.ToLower(a)
		if !lb || len(a) > MaxAddress || strings.HasSuffix(h, ".main.etcd.test") || h == "main.etcd.test" || strings.ContainsAny(a, " /:@?#") {
			t.Fatalf("accepted the hostname %q (load balancer %v)", a, lb)
		}
	})
}

func FuzzCheckHostPort(f *testing.F) {
	for _, s := range []string{"10.0.0.5:53", "10.0.0.5", "[fd00::5]:7946", "dns.example.com:53", "127.0.0.1:53", "0.0.0.0:1"} {
		f.Add(s, true)
	}
	f.Fuzz(func(t *testing.T, a string, portOptional bool) {
		if CheckHostPort(a, false, portOptional) != nil {
			return
		}
		host := a
		if h, _, err := net.SplitHostPort(a); err == nil {
			host = h
		} else if !portOptional {
			t.Fatalf("accepted %q without a port", a)
		}
		ip, err := netip.ParseAddr(host)
		if err != nil || CheckIP(ip, false) != nil {
			t.Fatalf("accepted %q whose host is not a unicast IP", a)
		}
	})
}

func FuzzCheckZone(f *testing.F) {
	for _, s := range []string{"eu-west-1a", "", "a b", strings.Repeat("z", 64)} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, z string) {
		if CheckZone(z) == nil && (z == "" || len(z) > 63 || strings.ContainsAny(z, " /:")) {
			t.Fatalf("accepted the zone %q", z)
		}
	})
}

// FuzzMemberStatus: whatever the three fields hold, what is left passes
// the checks one by one, and a field is either kept as reported or
// cleared (never rewritten into something else).
func FuzzMemberStatus(f *testing.F) {
	f.Add("https://main-0.main.etcd.test:2380", "https://main-0.main.etcd.test:2379", "10.0.0.1")
	f.Add("https://main-0.main.etcd.test:2380", "https://main-0.main.etcd.test:2380", "lb.example.com")
	f.Fuzz(func(t *testing.T, peer, client, addr string) {
		in := etcdfedv1.EtcdMemberStatus{PeerURL: peer, ClientURL: client, Address: addr}
		out, rej := MemberStatus(in, podIP)
		for _, kept := range []struct{ got, in string }{{out.PeerURL, peer}, {out.ClientURL, client}, {out.Address, addr}} {
			if kept.got != "" && kept.got != kept.in {
				t.Fatalf("a field was rewritten: %q -> %q", kept.in, kept.got)
			}
		}
		if out.PeerURL != "" && CheckPeerURL(out.PeerURL, podIP) != nil || out.ClientURL != "" && CheckClientURL(out.ClientURL, podIP) != nil ||
			out.Address != "" && CheckAddress(out.Address, podIP) != nil {
			t.Fatalf("kept a bad field: %+v", out)
		}
		if (out.PeerURL == "" && peer != "" || out.ClientURL == "" && client != "" || out.Address == "" && addr != "") && len(rej) == 0 {
			t.Fatal("a field was cleared without a rejection")
		}
	})
}

// FuzzSpokeStatus: the same for a spoke's lists and gossip address.
func FuzzSpokeStatus(f *testing.F) {
	f.Add("10.0.0.53:53", "10.0.0.9:7946", "eu-1a")
	f.Add("169.254.169.254:53", "x:1", "bad zone")
	f.Fuzz(func(t *testing.T, dns, gossip, zone string) {
		out, _ := SpokeStatus(etcdfedv1.EtcdSpokeStatus{DNSAddresses: []string{dns, dns}, GossipAddress: gossip, Zones: []string{zone}}, false)
		for _, a := range out.DNSAddresses {
			if a != dns || CheckHostPort(a, false, true) != nil {
				t.Fatalf("kept the DNS address %q", a)
			}
		}
		if out.GossipAddress != "" && (out.GossipAddress != gossip || CheckHostPort(gossip, false, false) != nil) {
			t.Fatalf("kept the gossip address %q", out.GossipAddress)
		}
		for _, z := range out.Zones {
			if z != zone || CheckZone(z) != nil {
				t.Fatalf("kept the zone %q", z)
			}
		}
	})
}

// A spoke's round trips (rule 15): a bad entry is refused and named, the
// others are kept.
func TestSpokeStatusRoundTrips(t *testing.T) {
	good := etcdfedv1.PeerRoundTrip{Cluster: "member-2", MedianMicros: 800, P99Micros: 1500, Samples: 20}
	bad := func(f func(*etcdfedv1.PeerRoundTrip)) etcdfedv1.PeerRoundTrip {
		r := good
		r.Cluster = "member-3"
		f(&r)
		return r
	}
	for _, tc := range []struct {
		name string
		rt   etcdfedv1.PeerRoundTrip
		want string // "" accepted, else a word of the error
	}{
		{"good", good, ""},
		{"zero distance", etcdfedv1.PeerRoundTrip{Cluster: "member-3", Samples: 1}, ""},
		{"negative", bad(func(r *etcdfedv1.PeerRoundTrip) { r.MedianMicros = -1 }), "negative"},
		{"median over p99", bad(func(r *etcdfedv1.PeerRoundTrip) { r.MedianMicros = 2000 }), "over the p99"},
		{"over a minute", bad(func(r *etcdfedv1.PeerRoundTrip) { r.P99Micros = etcdfedv1.MaxRoundTripMicros + 1 }), "is over"},
		{"no samples", bad(func(r *etcdfedv1.PeerRoundTrip) { r.Samples = 0 }), "samples"},
		{"no cluster", bad(func(r *etcdfedv1.PeerRoundTrip) { r.Cluster = "" }), "no peer"},
		{"not a cluster name", bad(func(r *etcdfedv1.PeerRoundTrip) { r.Cluster = "Member 3!" }), "not a member cluster name"},
		{"a long name", bad(func(r *etcdfedv1.PeerRoundTrip) { r.Cluster = strings.Repeat("a", 254) }), "too long"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			other := etcdfedv1.PeerRoundTrip{Cluster: "member-9", MedianMicros: 1, P99Micros: 2, Samples: 5}
			out, rej := SpokeStatus(etcdfedv1.EtcdSpokeStatus{RoundTrips: []etcdfedv1.PeerRoundTrip{other, tc.rt}}, false)
			if tc.want == "" {
				if len(rej) != 0 || len(out.RoundTrips) != 2 {
					t.Errorf("refused %v, kept %v", rej, out.RoundTrips)
				}
				return
			}
			if len(rej) != 1 || rej[0].Field != "status.roundTrips[1]" || !strings.Contains(rej[0].Err.Error(), tc.want) {
				t.Fatalf("rejections %v, want one of status.roundTrips[1] saying %q", rej, tc.want)
			}
			if len(out.RoundTrips) != 1 || out.RoundTrips[0] != other {
				t.Errorf("kept %v, want only the good entry", out.RoundTrips)
			}
		})
	}
	// A peer reported twice: both refused.
	out, rej := SpokeStatus(etcdfedv1.EtcdSpokeStatus{RoundTrips: []etcdfedv1.PeerRoundTrip{good, good}}, false)
	if len(out.RoundTrips) != 0 || len(rej) != 2 {
		t.Errorf("a repeated peer: kept %v, refused %v", out.RoundTrips, rej)
	}
	// More than the bound: the rest refused.
	var many []etcdfedv1.PeerRoundTrip
	for i := range etcdfedv1.MaxRoundTrips + 2 {
		r := good
		r.Cluster = fmt.Sprintf("member-%d", i)
		many = append(many, r)
	}
	out, rej = SpokeStatus(etcdfedv1.EtcdSpokeStatus{RoundTrips: many}, false)
	if len(out.RoundTrips) != etcdfedv1.MaxRoundTrips || len(rej) != 2 {
		t.Errorf("%d entries: kept %d, refused %d", len(many), len(out.RoundTrips), len(rej))
	}
}

func FuzzCheckRoundTrip(f *testing.F) {
	f.Add("member-2", int64(800), int64(1500), int32(20))
	f.Add("", int64(-1), int64(0), int32(0))
	f.Add("a..b", int64(2), int64(1), int32(1))
	f.Fuzz(func(t *testing.T, cluster string, median, p99 int64, samples int32) {
		r := etcdfedv1.PeerRoundTrip{Cluster: cluster, MedianMicros: median, P99Micros: p99, Samples: samples}
		if CheckRoundTrip(r) != nil {
			return
		}
		if median < 0 || median > p99 || p99 > etcdfedv1.MaxRoundTripMicros || samples < 1 || cluster == "" || len(cluster) > 253 || strings.ContainsAny(cluster, " /:\x00") {
			t.Errorf("accepted %+v", r)
		}
	})
}

// FuzzSpokeZones: whatever zones a spoke reports against the registration
// labels, every zone kept is registered (or the cluster registers none),
// none is rewritten, and each dropped one has its rejection.
func FuzzSpokeZones(f *testing.F) {
	f.Add("zone.etcdfed.dev/eu-west-1a", "eu-west-1a", "eu-west-1b")
	f.Add("env", "a", "")
	f.Fuzz(func(t *testing.T, label, z1, z2 string) {
		registered := RegisteredZones(map[string]string{label: ""})
		in := etcdfedv1.EtcdSpokeStatus{Zones: []string{z1, z2}, UnschedulableZones: []string{z2}}
		out, rej := SpokeZones(*in.DeepCopy(), registered)
		for _, z := range append(slices.Clone(out.Zones), out.UnschedulableZones...) {
			if len(registered) > 0 && z != "" && !slices.Contains(registered, z) {
				t.Fatalf("kept %q outside the registered %v", z, registered)
			}
			if z != z1 && z != z2 {
				t.Fatalf("rewrote a zone into %q", z)
			}
		}
		if dropped := len(in.Zones) + len(in.UnschedulableZones) - len(out.Zones) - len(out.UnschedulableZones); dropped != len(rej) {
			t.Fatalf("%d zones dropped, %d rejections", dropped, len(rej))
		}
	})
}
