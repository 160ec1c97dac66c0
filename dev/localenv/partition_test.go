package localenv

import (
	"errors"
	"strings"
	"testing"
)

// TestPartitionRules: the DROP rules of a partition, as iptables
// arguments, on a hub and two member clusters of two zones each (slot 7).
// Each group's units drop what they send to the other groups' blocks,
// and the replies to the connections they opened there (marked with the
// opener's unit: issue 35, a cut used to let the accepting side's
// packets through, a connection half cut, which no real network does);
// units no group names get no rule; a one-way cut is one rule (a
// stateful firewall's); a zone isolated by FailZone drops both ways too.
func TestPartitionRules(t *testing.T) {
	st := newState("/state", 7, Config{Clusters: 2, ZonesPerCluster: 2, NodesPerZone: 1})
	const cgfs, cgroot = "/sys/fs/cgroup", "/sys/fs/cgroup/etcdfed-7"
	render := func(rules []dropRule) []string {
		var out []string
		for _, r := range rules {
			if r.reply {
				out = append(out, strings.Join(r.replyArgs(), " "))
				continue
			}
			out = append(out, strings.Join(r.args(cgfs), " "))
		}
		return out
	}
	for _, tc := range []struct {
		name     string
		p        Partition
		isolated []string
		want     []string
	}{{
		name: "the hub with member-2, apart from member-1",
		p:    Partition{Groups: [][]string{{"hub", "member-2"}, {"member-1"}}},
		want: []string{
			"-m cgroup --path etcdfed-7/hub -d 127.7.8.0/21 -j MARK --set-xmark 0x800000/0x800000",
			"-m connmark --mark 0xfe000000/0xff000000 -m conntrack --ctdir REPLY --ctorigdst 127.7.8.0/21 -j MARK --set-xmark 0x800000/0x800000",
			"-m cgroup --path etcdfed-7/member-2 -d 127.7.8.0/21 -j MARK --set-xmark 0x800000/0x800000",
			"-m connmark --mark 0x2000000/0xff000000 -m conntrack --ctdir REPLY --ctorigdst 127.7.8.0/21 -j MARK --set-xmark 0x800000/0x800000",
			"-m cgroup --path etcdfed-7/member-1 -d 127.7.0.0/21 -j MARK --set-xmark 0x800000/0x800000",
			"-m connmark --mark 0x1000000/0xff000000 -m conntrack --ctdir REPLY --ctorigdst 127.7.0.0/21 -j MARK --set-xmark 0x800000/0x800000",
			"-m cgroup --path etcdfed-7/member-1 -d 127.7.16.0/21 -j MARK --set-xmark 0x800000/0x800000",
			"-m connmark --mark 0x1000000/0xff000000 -m conntrack --ctdir REPLY --ctorigdst 127.7.16.0/21 -j MARK --set-xmark 0x800000/0x800000",
		},
	}, {
		name: "zones in three groups; the hub and the clusters' apiservers and spokes bridge",
		p:    Partition{Groups: [][]string{{"zone-1a"}, {"zone-1b", "zone-2a"}, {"zone-2b"}}},
		want: []string{
			"-m cgroup --path etcdfed-7/member-1/zone-1a -d 127.7.10.0/24 -j MARK --set-xmark 0x800000/0x800000",
			"-m connmark --mark 0x1010000/0xffff0000 -m conntrack --ctdir REPLY --ctorigdst 127.7.10.0/24 -j MARK --set-xmark 0x800000/0x800000",
			"-m cgroup --path etcdfed-7/member-1/zone-1a -d 127.7.17.0/24 -j MARK --set-xmark 0x800000/0x800000",
			"-m connmark --mark 0x1010000/0xffff0000 -m conntrack --ctdir REPLY --ctorigdst 127.7.17.0/24 -j MARK --set-xmark 0x800000/0x800000",
			"-m cgroup --path etcdfed-7/member-1/zone-1a -d 127.7.18.0/24 -j MARK --set-xmark 0x800000/0x800000",
			"-m connmark --mark 0x1010000/0xffff0000 -m conntrack --ctdir REPLY --ctorigdst 127.7.18.0/24 -j MARK --set-xmark 0x800000/0x800000",
			"-m cgroup --path etcdfed-7/member-1/zone-1b -d 127.7.9.0/24 -j MARK --set-xmark 0x800000/0x800000",
			"-m connmark --mark 0x1020000/0xffff0000 -m conntrack --ctdir REPLY --ctorigdst 127.7.9.0/24 -j MARK --set-xmark 0x800000/0x800000",
			"-m cgroup --path etcdfed-7/member-2/zone-2a -d 127.7.9.0/24 -j MARK --set-xmark 0x800000/0x800000",
			"-m connmark --mark 0x2010000/0xffff0000 -m conntrack --ctdir REPLY --ctorigdst 127.7.9.0/24 -j MARK --set-xmark 0x800000/0x800000",
			"-m cgroup --path etcdfed-7/member-1/zone-1b -d 127.7.18.0/24 -j MARK --set-xmark 0x800000/0x800000",
			"-m connmark --mark 0x1020000/0xffff0000 -m conntrack --ctdir REPLY --ctorigdst 127.7.18.0/24 -j MARK --set-xmark 0x800000/0x800000",
			"-m cgroup --path etcdfed-7/member-2/zone-2a -d 127.7.18.0/24 -j MARK --set-xmark 0x800000/0x800000",
			"-m connmark --mark 0x2010000/0xffff0000 -m conntrack --ctdir REPLY --ctorigdst 127.7.18.0/24 -j MARK --set-xmark 0x800000/0x800000",
			"-m cgroup --path etcdfed-7/member-2/zone-2b -d 127.7.9.0/24 -j MARK --set-xmark 0x800000/0x800000",
			"-m connmark --mark 0x2020000/0xffff0000 -m conntrack --ctdir REPLY --ctorigdst 127.7.9.0/24 -j MARK --set-xmark 0x800000/0x800000",
			"-m cgroup --path etcdfed-7/member-2/zone-2b -d 127.7.10.0/24 -j MARK --set-xmark 0x800000/0x800000",
			"-m connmark --mark 0x2020000/0xffff0000 -m conntrack --ctdir REPLY --ctorigdst 127.7.10.0/24 -j MARK --set-xmark 0x800000/0x800000",
			"-m cgroup --path etcdfed-7/member-2/zone-2b -d 127.7.17.0/24 -j MARK --set-xmark 0x800000/0x800000",
			"-m connmark --mark 0x2020000/0xffff0000 -m conntrack --ctdir REPLY --ctorigdst 127.7.17.0/24 -j MARK --set-xmark 0x800000/0x800000",
		},
	}, {
		name:     "one way, beside an isolated zone",
		p:        Partition{OneWay: []Cut{{From: "member-1", To: "hub"}}},
		isolated: []string{"zone-2b"},
		want: []string{
			"-m cgroup --path etcdfed-7/member-2/zone-2b ! -d 127.7.18.0/24 -j MARK --set-xmark 0x800000/0x800000",
			"-m cgroup ! --path etcdfed-7/member-2/zone-2b -d 127.7.18.0/24 -j MARK --set-xmark 0x800000/0x800000",
			"-m connmark --mark 0x2020000/0xffff0000 -m conntrack --ctdir REPLY ! --ctorigdst 127.7.18.0/24 -j MARK --set-xmark 0x800000/0x800000",
			"-m connmark ! --mark 0x2020000/0xffff0000 -m conntrack --ctdir REPLY --ctorigdst 127.7.18.0/24 -j MARK --set-xmark 0x800000/0x800000",
			"-m cgroup --path etcdfed-7/member-1 -d 127.7.0.0/21 -j MARK --set-xmark 0x800000/0x800000",
		},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			rp, err := st.resolvePartition(tc.p, cgroot)
			if err != nil {
				t.Fatal(err)
			}
			var iso []partitionUnit
			for _, n := range tc.isolated {
				u, _ := st.unit(n, cgroot)
				iso = append(iso, u)
			}
			got := render(partitionRules(iso, rp))
			if strings.Join(got, "\n") != strings.Join(tc.want, "\n") {
				t.Errorf("rules:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(tc.want, "\n"))
			}
		})
	}
}

// TestPartitionRefused: what cannot be a partition is refused with a
// reason before any rule is written.
func TestPartitionRefused(t *testing.T) {
	st := newState("/state", 7, Config{Clusters: 2, ZonesPerCluster: 2, NodesPerZone: 1})
	for _, tc := range []struct {
		p    Partition
		want string
	}{
		{Partition{Groups: [][]string{{"hub", "member-1", "member-2"}}}, "one group cuts nothing"},
		{Partition{Groups: [][]string{{"hub"}, {"member-9"}}}, `no unit "member-9" (units: hub, member-1, zone-1a, zone-1b, member-2, zone-2a, zone-2b)`},
		{Partition{Groups: [][]string{{"member-1"}, {"zone-1a"}}}, "member-1 and zone-1a overlap"},
		{Partition{Groups: [][]string{{"hub", "member-1"}, {"hub"}}}, "hub is named twice"},
		{Partition{OneWay: []Cut{{From: "zone-2a", To: "member-2"}}}, "they overlap"},
	} {
		_, err := st.resolvePartition(tc.p, "/cg")
		if !errors.Is(err, ErrBadPartition) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want ErrBadPartition with %q", tc.p, err, tc.want)
		}
	}
}

func TestParsePartition(t *testing.T) {
	g, err := ParseGroups(" hub, member-3 | member-1,member-2 ")
	if err != nil || len(g) != 2 || strings.Join(g[0], ",") != "hub,member-3" || strings.Join(g[1], ",") != "member-1,member-2" {
		t.Errorf("ParseGroups: %v %v", g, err)
	}
	if _, err := ParseGroups("hub||member-1"); err == nil {
		t.Error("an empty group was accepted")
	}
	c, err := ParseCut("member-1>hub")
	if err != nil || c != (Cut{From: "member-1", To: "hub"}) {
		t.Errorf("ParseCut: %v %v", c, err)
	}
	for _, bad := range []string{"member-1", ">hub", "member-1>"} {
		if _, err := ParseCut(bad); err == nil {
			t.Errorf("ParseCut(%q) accepted", bad)
		}
	}
	p := Partition{Groups: g, OneWay: []Cut{c}}
	if got := p.String(); got != "groups hub,member-3|member-1,member-2; one-way member-1>hub" {
		t.Errorf("String: %s", got)
	}
	back, err := partitionFromQuery(partitionQuery(p))
	if err != nil || back.String() != p.String() {
		t.Errorf("through the control socket: %v %v", back, err)
	}
}

// TestOpenerMarks: every new connection is marked with the innermost unit
// whose processes opened it (a zone's before its cluster's), once.
func TestOpenerMarks(t *testing.T) {
	st := newState("/state", 7, Config{Clusters: 2, ZonesPerCluster: 2, NodesPerZone: 1})
	var got []string
	for _, r := range st.openerMarks("/sys/fs/cgroup/etcdfed-7") {
		got = append(got, strings.Join(r.args("/sys/fs/cgroup"), " "))
	}
	const pre = "-m conntrack --ctstate NEW -m connmark --mark 0x0/0xffff0000 -m cgroup --path etcdfed-7/"
	want := []string{
		pre + "member-1/zone-1a -j CONNMARK --set-xmark 0x1010000/0xffff0000",
		pre + "member-1/zone-1b -j CONNMARK --set-xmark 0x1020000/0xffff0000",
		pre + "member-2/zone-2a -j CONNMARK --set-xmark 0x2010000/0xffff0000",
		pre + "member-2/zone-2b -j CONNMARK --set-xmark 0x2020000/0xffff0000",
		pre + "member-1 -j CONNMARK --set-xmark 0x1000000/0xffff0000",
		pre + "member-2 -j CONNMARK --set-xmark 0x2000000/0xffff0000",
		pre + "hub -j CONNMARK --set-xmark 0xfe000000/0xffff0000",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("marks:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	for _, name := range []string{"hub", "member-1", "zone-2b"} {
		u, _ := st.unit(name, "/cg")
		for _, r := range st.openerMarks("/cg") {
			inside := strings.HasPrefix(r.cgroup+"/", u.Cgroup+"/")
			if matches := r.mark&u.MarkMask == u.Mark; matches != inside {
				t.Errorf("unit %s (%s): the mark of %s matches %t, want %t", name, markArg(u.Mark, u.MarkMask), r.cgroup, matches, inside)
			}
		}
	}
}
