package multicluster

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/etcdfed/etcdfed/dev/localenv"
	"github.com/etcdfed/etcdfed/dev/nemesis"
)

// TestWithDistance: DISTANCE (ETCDFED_DISTANCE) puts every environment a
// test starts at that distance, leaves one a test placed itself where it
// is, and a distance it cannot read stops the test before anything starts,
// naming the variable.
func TestWithDistance(t *testing.T) {
	t.Setenv(DistanceEnv, "")
	cfg, err := withDistance(localenv.Config{Clusters: 3})
	if err != nil || cfg.Distance != nil {
		t.Fatalf("unset: %+v, %v; want no distance", cfg.Distance, err)
	}

	t.Setenv(DistanceEnv, "one-region,member-1:member-3=20ms/2ms")
	cfg, err = withDistance(localenv.Config{Clusters: 3})
	if err != nil {
		t.Fatal(err)
	}
	if d := cfg.Distance; d == nil || d.Preset != localenv.PresetOneRegion || len(d.Links) != 1 ||
		d.Links[0].A != "member-1" || d.Links[0].B != "member-3" || d.Links[0].RTT != 20*time.Millisecond || d.Links[0].Jitter != 2*time.Millisecond {
		t.Fatalf("distance %+v; want one-region with member-1:member-3=20ms/2ms", cfg.Distance)
	}

	own := &localenv.Distance{Preset: localenv.PresetThreeRegions}
	cfg, err = withDistance(localenv.Config{Distance: own})
	if err != nil || cfg.Distance != own {
		t.Fatalf("a test's own distance: %+v, %v; want three-regions kept", cfg.Distance, err)
	}

	t.Setenv(DistanceEnv, "two-regions")
	if _, err := startLocalEnv(t.Context(), localenv.Config{Clusters: 3}); err == nil ||
		!strings.Contains(err.Error(), `ETCDFED_DISTANCE="two-regions"`) || !strings.Contains(err.Error(), "no preset") {
		t.Fatalf("bad distance: %v; want an error naming ETCDFED_DISTANCE and the presets", err)
	}
}

// TestDistanceFaultHealsToBase: a distance fault of the nemesis heals
// back to the distance the environment started at, not to zero, so a run
// at DISTANCE stays at it between faults.
func TestDistanceFaultHealsToBase(t *testing.T) {
	base := localenv.Distance{Preset: localenv.PresetOneRegion}
	var set []localenv.Distance
	topo := &Topology{BaseDistance: base, SetDistance: func(_ context.Context, d localenv.Distance) error {
		set = append(set, d)
		return nil
	}}
	f := nemesis.Fault{Kind: nemesis.Distance, Distance: localenv.Distance{Preset: localenv.PresetThreeRegions}}
	if err := injectFault(t.Context(), topo, f); err != nil {
		t.Fatal(err)
	}
	if err := healFault(t.Context(), topo, f); err != nil {
		t.Fatal(err)
	}
	if len(set) != 2 || set[0].Preset != localenv.PresetThreeRegions || set[1].String() != base.String() {
		t.Fatalf("distances set %v; want three-regions, then the base %s", set, base)
	}
}
