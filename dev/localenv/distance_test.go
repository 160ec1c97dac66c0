package localenv

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/etcdfed/etcdfed/dev/localenv/delayproxy"
)

func TestParseDistance(t *testing.T) {
	for _, tc := range []struct {
		in, want string
		links    []PairLink
	}{
		{in: "none", want: "none"},
		{in: " three-regions ", want: "three-regions"},
		{in: "zone-1:zone-2=20ms/5ms/0.1%", want: "zone-1:zone-2=20ms/5ms/0.1%",
			links: []PairLink{{A: "zone-1", B: "zone-2", Link: Link{RTT: 20 * time.Millisecond, Jitter: 5 * time.Millisecond, Loss: 0.001}}}},
		{in: "one-region, hub:member-3=40ms", want: "one-region,hub:member-3=40ms",
			links: []PairLink{{A: "hub", B: "member-3", Link: Link{RTT: 40 * time.Millisecond}}}},
		{in: "member-1:member-2=1.5ms/1ms,zone-1a:zone-2a=0s", want: "member-1:member-2=1.5ms/1ms,zone-1a:zone-2a=0s",
			links: []PairLink{{A: "member-1", B: "member-2", Link: Link{RTT: 1500 * time.Microsecond, Jitter: time.Millisecond}}, {A: "zone-1a", B: "zone-2a"}}},
		{in: "none,zone-1:zone-2=3ms", want: "zone-1:zone-2=3ms", links: []PairLink{{A: "zone-1", B: "zone-2", Link: Link{RTT: 3 * time.Millisecond}}}},
	} {
		d, err := ParseDistance(tc.in)
		if err != nil {
			t.Errorf("%q: %v", tc.in, err)
			continue
		}
		if d.String() != tc.want {
			t.Errorf("%q reads back as %q, want %q", tc.in, d.String(), tc.want)
		}
		if len(d.Links) != len(tc.links) {
			t.Errorf("%q: links %v, want %v", tc.in, d.Links, tc.links)
			continue
		}
		for i := range d.Links {
			if d.Links[i] != tc.links[i] {
				t.Errorf("%q: link %d is %+v, want %+v", tc.in, i, d.Links[i], tc.links[i])
			}
		}
		// Through state.json and back.
		var back struct{ D *Distance }
		data, _ := json.Marshal(struct{ D *Distance }{&d})
		if err := json.Unmarshal(data, &back); err != nil || back.D.String() != d.String() {
			t.Errorf("%q through JSON (%s): %v, %v", tc.in, data, back.D, err)
		}
	}
}

// Bad input is refused with what is wrong and what is wanted.
func TestParseDistanceRefuses(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"", "empty (give a preset: none, one-region, three-regions"},
		{"two-regions", `no preset "two-regions" (presets: none, one-region, three-regions`},
		{"zone-1:zone-2=20", `round trip "20": want a duration with its unit, e.g. 20ms`},
		{"zone-1:zone-2", `"zone-1:zone-2": a link needs its round trip: A:B=ROUNDTRIP[/JITTER[/LOSS%]], e.g. zone-1:zone-2=20ms`},
		{"zone-1=20ms", "want A:B=ROUNDTRIP[/JITTER[/LOSS%]] (two units"},
		{"zone-1:zone-1=20ms", "a unit has no distance to itself"},
		{"zone-1:zone-2=20ms,zone-2:zone-1=5ms", "zone-2:zone-1 is given twice"},
		{"zone-1:zone-2=20ms/30ms", "jitter 30ms exceeds the round trip 20ms"},
		{"zone-1:zone-2=-1ms", "round trip -1ms: want 0..10s"},
		{"zone-1:zone-2=20ms/1ms/5", `loss "5": want a percentage, e.g. 0.1%`},
		{"zone-1:zone-2=20ms/1ms/60%", "loss 60%: want 0%..50%"},
		{"zone-1:zone-2=20ms/1ms/1%/2", "want ROUNDTRIP[/JITTER[/LOSS%]]"},
		{"zone-1:zone-2=1ms,three-regions", `"three-regions": a preset comes first`},
	} {
		_, err := ParseDistance(tc.in)
		if !errors.Is(err, ErrBadDistance) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: %v, want ErrBadDistance with %q", tc.in, err, tc.want)
		}
	}
}

// The presets on a topology: three member clusters in three regions
// (10, 30, 60ms apart), zones of one cluster one-region apart, the hub
// at zero distance; a link of one's own wins over the preset's.
func TestDistancePresets(t *testing.T) {
	st := newState("/state", 7, Config{Clusters: 4, ZonesPerCluster: 2, NodesPerZone: 1})
	links := func(spec string) map[[2]string]Link {
		d, err := ParseDistance(spec)
		if err != nil {
			t.Fatal(err)
		}
		l, err := st.links(d)
		if err != nil {
			t.Fatal(err)
		}
		return l
	}
	ms := time.Millisecond
	got := links("three-regions,member-1:member-3=45ms")
	for pair, want := range map[[2]string]Link{
		{"member-1", "member-2"}: {RTT: 10 * ms, Jitter: ms},
		{"member-1", "member-3"}: {RTT: 45 * ms},
		{"member-2", "member-3"}: {RTT: 60 * ms, Jitter: 6 * ms},
		{"member-1", "member-4"}: oneRegion, // both in region 1
		{"member-2", "member-4"}: {RTT: 10 * ms, Jitter: ms},
		{"member-3", "member-4"}: {RTT: 30 * ms, Jitter: 3 * ms},
		{"zone-1a", "zone-1b"}:   oneRegion,
		{"zone-4a", "zone-4b"}:   oneRegion,
	} {
		if got[pair] != want {
			t.Errorf("three-regions %s: %+v, want %+v", pair, got[pair], want)
		}
	}
	if len(got) != 6+4 {
		t.Errorf("three-regions on 4 clusters of 2 zones: %d links, want 10: %v", len(got), got)
	}
	for pair, l := range links("one-region") {
		if l != oneRegion {
			t.Errorf("one-region %s: %+v", pair, l)
		}
		if l.RTT-l.Jitter/2 < ms || l.RTT+l.Jitter/2 > 2*ms {
			t.Errorf("one-region's round trips leave 1..2ms: %+v", l)
		}
	}
	if l := links("none"); len(l) != 0 {
		t.Errorf("none: %v", l)
	}
}

// The nat rules of a distance, as iptables arguments (slot 7, two
// member clusters of two zones): the proxy's own traffic first, then
// zone pairs before cluster pairs, an explicit zero as a RETURN, TCP for
// the destination's block and UDP for its spoke's DNS and gossip only.
func TestDistanceRules(t *testing.T) {
	st := newState("/state", 7, Config{Clusters: 2, ZonesPerCluster: 2, NodesPerZone: 1})
	const cgfs, cgroot = "/sys/fs/cgroup", "/sys/fs/cgroup/etcdfed-7"
	d, err := ParseDistance("member-1:member-2=20ms/2ms,zone-1a:zone-2a=0s")
	if err != nil {
		t.Fatal(err)
	}
	pairs, err := st.resolveDistance(d, cgroot)
	if err != nil {
		t.Fatal(err)
	}
	ports := map[delayproxy.Route]uint16{}
	for i, r := range sortedRoutes(distanceRoutes(pairs)) {
		ports[r] = uint16(40000 + i)
	}
	var got []string
	for _, r := range distanceRules(pairs, ports, proxyMark, cgfs) {
		got = append(got, strings.Join(r, " "))
	}
	want := []string{
		"-m mark --mark 0x6566 -j RETURN",
		"-m cgroup --path etcdfed-7/member-1/zone-1a -d 127.7.17.0/24 -j RETURN",
		"-m cgroup --path etcdfed-7/member-2/zone-2a -d 127.7.9.0/24 -j RETURN",
		"-p udp -m cgroup --path etcdfed-7/member-1 -d 127.7.16.2/32 --dport 1053 -j REDIRECT --to-ports 40001",
		"-p udp -m cgroup --path etcdfed-7/member-1 -d 127.7.16.2/32 --dport 7946 -j REDIRECT --to-ports 40002",
		"-p tcp -m cgroup --path etcdfed-7/member-1 -d 127.7.16.0/21 -j REDIRECT --to-ports 40000",
		"-p udp -m cgroup --path etcdfed-7/member-2 -d 127.7.8.2/32 --dport 1053 -j REDIRECT --to-ports 40004",
		"-p udp -m cgroup --path etcdfed-7/member-2 -d 127.7.8.2/32 --dport 7946 -j REDIRECT --to-ports 40005",
		"-p tcp -m cgroup --path etcdfed-7/member-2 -d 127.7.8.0/21 -j REDIRECT --to-ports 40003",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("rules:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}

	for _, tc := range []struct{ spec, want string }{
		{"zone-1a:member-1=5ms", "member-1:zone-1a: they overlap (a zone and its own cluster)"},
		{"hub:member-9=5ms", `no unit "member-9" (units: hub, member-1, zone-1a, zone-1b, member-2, zone-2a, zone-2b)`},
	} {
		d, err := ParseDistance(tc.spec)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := st.resolveDistance(d, cgroot); !errors.Is(err, ErrBadDistance) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want ErrBadDistance with %q", tc.spec, err, tc.want)
		}
	}
}

// Partitions match connections redirected to the delay proxy on their
// original destination, before 127.0.0.1 (where a redirected connection
// goes) is let through.
func TestPartitionRulesSeeRedirectedConnections(t *testing.T) {
	r := dropRule{cgroup: "/sys/fs/cgroup/etcdfed-7/member-1", cidr: "127.7.16.0/21"}
	if got, want := strings.Join(r.redirectedArgs("/sys/fs/cgroup"), " "),
		"-m cgroup --path etcdfed-7/member-1 -m conntrack --ctstate DNAT --ctdir ORIGINAL --ctorigdst 127.7.16.0/21 -j MARK --set-xmark 0x800000/0x800000"; got != want {
		t.Errorf("redirected:\n%s\nwant\n%s", got, want)
	}
	iso := dropRule{cgroup: "/sys/fs/cgroup/etcdfed-7/member-1", notFrom: true, cidr: "127.7.8.0/21", notTo: true}
	if got, want := strings.Join(iso.redirectedArgs("/sys/fs/cgroup"), " "),
		"-m cgroup ! --path etcdfed-7/member-1 -m conntrack --ctstate DNAT --ctdir ORIGINAL ! --ctorigdst 127.7.8.0/21 -j MARK --set-xmark 0x800000/0x800000"; got != want {
		t.Errorf("isolated:\n%s\nwant\n%s", got, want)
	}
}

// sortedRoutes orders routes by name, so that a test can number ports.
func sortedRoutes(m map[delayproxy.Route]Link) []delayproxy.Route {
	var out []delayproxy.Route
	for r := range m {
		out = append(out, r)
	}
	for i := range out {
		for j := i + 1; j < len(out); j++ {
			if out[j].Name < out[i].Name {
				out[i], out[j] = out[j], out[i]
			}
		}
	}
	return out
}

// The rules of a distance with real nodes (slot 7, two member clusters
// of two zones, a node each): the proxy's own connections and flows
// first, then zone pairs before cluster pairs by their node and pod
// ranges, an explicit zero as a RETURN in both tables, TCP by TPROXY for
// the destination's blocks, UDP by REDIRECT for its spoke's DNS on its
// first load balancer address and its gossip on the second, the gossip
// Service's (the first before issue 35: the spokes' probes missed it).
func TestRealDistanceRules(t *testing.T) {
	st := newState("/state", 7, Config{Clusters: 2, ZonesPerCluster: 2, NodesPerZone: 1, Nodes: NodesReal})
	d, err := ParseDistance("member-1:member-2=20ms/2ms,zone-1a:zone-2a=0s")
	if err != nil {
		t.Fatal(err)
	}
	pairs, err := st.resolveDistance(d, "")
	if err != nil {
		t.Fatal(err)
	}
	ports := map[delayproxy.Route]uint16{}
	for i, r := range sortedRoutes(distanceRoutes(pairs)) {
		ports[r] = uint16(40000 + i)
	}
	mangle, nat := realDistanceRules(pairs, ports, st.realBlocks)
	join := func(rs [][]string) string {
		var out []string
		for _, r := range rs {
			out = append(out, strings.Join(r, " "))
		}
		return strings.Join(out, "\n")
	}
	tp := func(from, to string, port int) string {
		return fmt.Sprintf("-p tcp -s %s -d %s -j TPROXY --on-ip 127.0.0.1 --on-port %d --tproxy-mark 0x6567", from, to, port)
	}
	wantMangle := []string{
		"-p tcp -m socket --transparent -j MARK --set-mark 0x6567",
		"-p udp -m socket --transparent -j MARK --set-mark 0x6567",
		"-m mark --mark 0x6567 -j RETURN",
		"-s 172.20.9.0/24 -d 172.20.17.0/24 -j RETURN",
		"-s 172.20.9.0/24 -d 10.102.16.0/24 -j RETURN",
		"-s 10.101.16.0/24 -d 172.20.17.0/24 -j RETURN",
		"-s 10.101.16.0/24 -d 10.102.16.0/24 -j RETURN",
		"-s 172.20.17.0/24 -d 172.20.9.0/24 -j RETURN",
		"-s 172.20.17.0/24 -d 10.101.16.0/24 -j RETURN",
		"-s 10.102.16.0/24 -d 172.20.9.0/24 -j RETURN",
		"-s 10.102.16.0/24 -d 10.101.16.0/24 -j RETURN",
		tp("172.20.8.0/21", "172.20.16.0/21", 40000),
		tp("172.20.8.0/21", "10.102.0.0/16", 40000),
		tp("10.101.0.0/16", "172.20.16.0/21", 40000),
		tp("10.101.0.0/16", "10.102.0.0/16", 40000),
		tp("172.20.16.0/21", "172.20.8.0/21", 40003),
		tp("172.20.16.0/21", "10.101.0.0/16", 40003),
		tp("10.102.0.0/16", "172.20.8.0/21", 40003),
		tp("10.102.0.0/16", "10.101.0.0/16", 40003),
	}
	if got, want := join(mangle), strings.Join(wantMangle, "\n"); got != want {
		t.Errorf("mangle:\n%s\nwant:\n%s", got, want)
	}
	wantNat := []string{
		"-s 172.20.9.0/24 -d 172.20.17.0/24 -j RETURN",
		"-s 172.20.9.0/24 -d 10.102.16.0/24 -j RETURN",
		"-s 10.101.16.0/24 -d 172.20.17.0/24 -j RETURN",
		"-s 10.101.16.0/24 -d 10.102.16.0/24 -j RETURN",
		"-s 172.20.17.0/24 -d 172.20.9.0/24 -j RETURN",
		"-s 172.20.17.0/24 -d 10.101.16.0/24 -j RETURN",
		"-s 10.102.16.0/24 -d 172.20.9.0/24 -j RETURN",
		"-s 10.102.16.0/24 -d 10.101.16.0/24 -j RETURN",
		"-p udp -s 172.20.8.0/21 -d 172.20.16.128/32 --dport 53 -j REDIRECT --to-ports 40001",
		"-p udp -s 172.20.8.0/21 -d 172.20.16.129/32 --dport 7946 -j REDIRECT --to-ports 40002",
		"-p udp -s 10.101.0.0/16 -d 172.20.16.128/32 --dport 53 -j REDIRECT --to-ports 40001",
		"-p udp -s 10.101.0.0/16 -d 172.20.16.129/32 --dport 7946 -j REDIRECT --to-ports 40002",
		"-p udp -s 172.20.16.0/21 -d 172.20.8.128/32 --dport 53 -j REDIRECT --to-ports 40004",
		"-p udp -s 172.20.16.0/21 -d 172.20.8.129/32 --dport 7946 -j REDIRECT --to-ports 40005",
		"-p udp -s 10.102.0.0/16 -d 172.20.8.128/32 --dport 53 -j REDIRECT --to-ports 40004",
		"-p udp -s 10.102.0.0/16 -d 172.20.8.129/32 --dport 7946 -j REDIRECT --to-ports 40005",
	}
	if got, want := join(nat), strings.Join(wantNat, "\n"); got != want {
		t.Errorf("nat:\n%s\nwant:\n%s", got, want)
	}
}
