package realnode

import (
	"fmt"
	"net/netip"
	"strings"
	"testing"
)

// TestCutRules: a zone cut (its node links only) and a whole cluster's
// (links plus its apiserver and load balancer addresses) give every hook
// the jumps the partition needs, and every chain ends in DROP after
// letting through what stays inside the cut.
func TestCutRules(t *testing.T) {
	for _, tc := range []struct {
		name string
		cut  Cut
		want map[string][]string // hook -> jumps
		// chains: name suffix -> rules
		chains map[string][]string
	}{{
		name: "zone",
		cut:  Cut{Name: "member-1/zone-1a", Links: []string{"en1-1-0", "en1-1-1"}},
		want: map[string][]string{
			"FORWARD": {"-i en1-1-0 -j ETCDFED-CUT-0-FWD-OUT", "-o en1-1-0 -j ETCDFED-CUT-0-FWD-IN", "-i en1-1-1 -j ETCDFED-CUT-0-FWD-OUT", "-o en1-1-1 -j ETCDFED-CUT-0-FWD-IN"},
			"INPUT":   {"-i en1-1-0 -j ETCDFED-CUT-0-TO-OUTSIDE", "-i en1-1-1 -j ETCDFED-CUT-0-TO-OUTSIDE"},
			"OUTPUT":  {"-o en1-1-0 -j ETCDFED-CUT-0-FROM-LOCAL", "-o en1-1-1 -j ETCDFED-CUT-0-FROM-LOCAL"},
		},
		chains: map[string][]string{
			"FWD-OUT":    {"-o en1-1-0 -j RETURN", "-o en1-1-1 -j RETURN", "-j DROP"},
			"FWD-IN":     {"-i en1-1-0 -j RETURN", "-i en1-1-1 -j RETURN", "-j DROP"},
			"TO-OUTSIDE": {"-j DROP"},
			"FROM-LOCAL": {"-j DROP"},
		},
	}, {
		name: "cluster",
		cut:  Cut{Name: "member-2", Links: []string{"en2-1-0"}, Local: []netip.Prefix{netip.MustParsePrefix("172.20.16.1/32"), netip.MustParsePrefix("172.20.16.128/26")}},
		want: map[string][]string{
			"FORWARD": {"-i en2-1-0 -j ETCDFED-CUT-1-FWD-OUT", "-o en2-1-0 -j ETCDFED-CUT-1-FWD-IN", "-d 172.20.16.1/32 -j ETCDFED-CUT-1-FROM-OUTSIDE", "-d 172.20.16.128/26 -j ETCDFED-CUT-1-FROM-OUTSIDE"},
			"INPUT":   {"-i en2-1-0 -j ETCDFED-CUT-1-TO-OUTSIDE", "-d 172.20.16.1/32 -j ETCDFED-CUT-1-FROM-OUTSIDE", "-d 172.20.16.128/26 -j ETCDFED-CUT-1-FROM-OUTSIDE"},
			"OUTPUT":  {"-o en2-1-0 -j ETCDFED-CUT-1-FROM-LOCAL"},
		},
		chains: map[string][]string{
			"FROM-OUTSIDE": {"-i en2-1-0 -j RETURN", "-j DROP"},
			"TO-OUTSIDE":   {"-d 172.20.16.1/32 -j RETURN", "-d 172.20.16.128/26 -j RETURN", "-j DROP"},
			"FROM-LOCAL":   {"-s 172.20.16.1/32 -j RETURN", "-s 172.20.16.128/26 -j RETURN", "-j DROP"},
		},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			i := 0
			if tc.name == "cluster" {
				i = 1
			}
			chains, jumps := cutRules(i, tc.cut)
			for hook, want := range tc.want {
				var got []string
				for _, r := range jumps[hook] {
					got = append(got, strings.Join(r, " "))
				}
				if strings.Join(got, "|") != strings.Join(want, "|") {
					t.Errorf("%s jumps:\n got %v\nwant %v", hook, got, want)
				}
			}
			for suffix, want := range tc.chains {
				var got []string
				for _, r := range chains[fmt.Sprintf("ETCDFED-CUT-%d-%s", i, suffix)] {
					got = append(got, strings.Join(r, " "))
				}
				if strings.Join(got, "|") != strings.Join(want, "|") {
					t.Errorf("chain %s:\n got %v\nwant %v", suffix, got, want)
				}
			}
		})
	}
}
