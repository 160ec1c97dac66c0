package main

import (
	"strings"
	"testing"

	"github.com/etcdfed/etcdfed/dev/drill"
	"github.com/etcdfed/etcdfed/dev/localenv"
)

func TestLocalZoneName(t *testing.T) {
	st := &localenv.State{MemberClusters: []localenv.ClusterState{
		{Name: "member-1", Zones: []localenv.ZoneState{{Name: "zone-1a"}, {Name: "zone-1b"}}},
		{Name: "member-2", Zones: []localenv.ZoneState{{Name: "zone-2a"}, {Name: "shared"}}},
		{Name: "member-3", Zones: []localenv.ZoneState{{Name: "shared"}}},
	}}
	for _, tc := range []struct {
		zone, want, err string
	}{
		{"zone-1a", "zone-1a", ""},
		{"member-1/zone-1b", "zone-1b", ""},
		{"shared", "shared", ""},
		{"zone-9", "", "has no zone zone-9"},
		{"member-2/zone-1a", "", "member cluster member-2 of the local environment has no zone zone-1a (it is in member-1)"},
		{"member-2/shared", "", "fails zones by name and shared is in member-2, member-3"},
	} {
		z, err := drill.ParseZone(tc.zone)
		if err != nil {
			t.Fatal(err)
		}
		got, err := localZoneName(st, z)
		switch {
		case tc.err == "" && (err != nil || got != tc.want):
			t.Errorf("%s: %q, %v; want %q", tc.zone, got, err, tc.want)
		case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
			t.Errorf("%s: error %v, want %q", tc.zone, err, tc.err)
		}
	}
}

func TestSameHost(t *testing.T) {
	for _, tc := range []struct {
		a, b string
		want bool
	}{
		{"https://127.1.0.1:6443", "https://127.1.0.1:6443", true},
		{"https://127.1.0.1:6443", "https://127.1.0.1:6443/", true},
		{"https://127.1.0.1:6443", "https://127.1.0.2:6443", false},
		{"", "", false},
	} {
		if got := sameHost(tc.a, tc.b); got != tc.want {
			t.Errorf("sameHost(%q, %q) = %v", tc.a, tc.b, got)
		}
	}
}
