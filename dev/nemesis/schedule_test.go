package nemesis

import (
	"crypto/sha256"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/etcdfed/etcdfed/dev/localenv"
)

// three is the local environment of TestNemesis: the hub and three
// member clusters of one zone each.
var three = Topology{Hub: "hub", Clusters: []Cluster{{"member-1", []string{"zone-1"}}, {"member-2", []string{"zone-2"}}, {"member-3", []string{"zone-3"}}}}

// The same seed and index give the same schedule, whatever else was
// drawn before; other seeds give other schedules.
func TestGenerateIsReproducible(t *testing.T) {
	for i := range 20 {
		a, b := Generate(42, i, three, Full), Generate(42, i, three, Full)
		if !reflect.DeepEqual(a, b) {
			t.Fatalf("schedule %d of seed 42 drawn twice differs:\n%s\n%s", i, a, b)
		}
	}
	differ := 0
	for i := range 20 {
		if Generate(42, i, three, Full).String() != Generate(43, i, three, Full).String() {
			differ++
		}
	}
	if differ < 15 {
		t.Errorf("only %d of 20 schedules differ between seeds 42 and 43", differ)
	}
	t.Log(Generate(42, 0, three, Full))
}

// Over many schedules: every fault is healed within the schedule, never
// two cuts or two hub faults at once, a cluster never killed twice at
// once, no more clusters killed than MaxKilled, and every partition
// well formed (two groups or more, no unit twice, never a zone beside
// its own cluster; one-way cuts between units apart).
func TestGenerateKeepsItsRules(t *testing.T) {
	for _, p := range []Profile{Full, CI, WAN} {
		for seed := range uint64(50) {
			for i := range 10 {
				s := Generate(seed, i, three, p)
				if len(s.Faults) == 0 || len(s.Faults) > p.MaxFaults {
					t.Fatalf("%d faults:\n%s", len(s.Faults), s)
				}
				checkSchedule(t, s)
			}
		}
	}
}

func checkSchedule(t *testing.T, s Schedule) {
	t.Helper()
	// Replay the events: the state after each must be legal, and empty
	// at the end.
	cut, hub, dist := -1, -1, -1
	killed := map[string]int{}
	for _, e := range s.Events() {
		f := s.Faults[e.Fault]
		switch {
		case e.Heal && (f.Kind == Partition || f.Kind == OneWay):
			cut = -1
		case e.Heal && f.Kind == StopHub:
			hub = -1
		case e.Heal && f.Kind == Distance:
			dist = -1
		case f.Kind == Distance:
			if dist >= 0 {
				t.Fatalf("two distances at once:\n%s", s)
			}
			dist = e.Fault
			if f.Distance.IsZero() {
				t.Fatalf("a zero distance:\n%s", s)
			}
			if back, err := localenv.ParseDistance(f.Distance.String()); err != nil || back.String() != f.Distance.String() {
				t.Fatalf("distance %s does not read back: %v", f.Distance, err)
			}
		case e.Heal && f.Kind == KillCluster:
			delete(killed, f.Cluster)
		case f.Kind == Partition || f.Kind == OneWay:
			if cut >= 0 {
				t.Fatalf("two cuts at once (%d and %d):\n%s", cut, e.Fault, s)
			}
			cut = e.Fault
			checkCut(t, s, f)
		case f.Kind == StopHub || f.Kind == KillHub:
			if hub >= 0 {
				t.Fatalf("two hub faults at once:\n%s", s)
			}
			if f.Kind == StopHub {
				hub = e.Fault
			}
		case f.Kind == KillCluster:
			if _, ok := killed[f.Cluster]; ok {
				t.Fatalf("%s killed twice at once:\n%s", f.Cluster, s)
			}
			killed[f.Cluster] = e.Fault
			if len(killed) > s.Profile.MaxKilled {
				t.Fatalf("%d clusters killed at once:\n%s", len(killed), s)
			}
		}
		if !e.Heal && f.Kind != KillHub && f.Hold < s.Profile.Short[0] {
			t.Fatalf("fault %d held %s:\n%s", e.Fault, f.Hold, s)
		}
	}
	if cut >= 0 || hub >= 0 || dist >= 0 || len(killed) > 0 {
		t.Fatalf("not healed at the end (cut %d, hub %d, killed %v):\n%s", cut, hub, killed, s)
	}
}

func checkCut(t *testing.T, s Schedule, f Fault) {
	t.Helper()
	if f.Kind == Partition {
		if len(f.Cut.Groups) < 2 || len(f.Cut.OneWay) > 0 {
			t.Fatalf("partition %s:\n%s", f.Cut, s)
		}
		var named []string
		for _, g := range f.Cut.Groups {
			if len(g) == 0 {
				t.Fatalf("empty group in %s", f.Cut)
			}
			for _, u := range g {
				for _, o := range named {
					if u == o || (three.family(u) != "" && three.family(u) == three.family(o)) {
						t.Fatalf("%s named beside %s in %s", u, o, f.Cut)
					}
				}
				named = append(named, u)
			}
		}
		return
	}
	if len(f.Cut.OneWay) == 0 || len(f.Cut.Groups) > 0 {
		t.Fatalf("one-way %s:\n%s", f.Cut, s)
	}
	for _, c := range f.Cut.OneWay {
		if c.From == c.To || (three.family(c.From) != "" && three.family(c.From) == three.family(c.To)) {
			t.Fatalf("one-way cut %s>%s", c.From, c.To)
		}
	}
}

// Over the 20 schedules of a run, the profile's mix shows: every kind of
// fault, holds within and beyond the grace (beyond it by at least the
// hub's detection), both recovery policies, partitions naming the hub,
// a zone alone, and three groups.
func TestGenerateDrawsEveryShape(t *testing.T) {
	kinds := map[Kind]int{}
	var within, beyond, automatic, hub, zone, three3 int
	for seed := range uint64(5) {
		for i := range 20 {
			s := Generate(seed, i, three, Full)
			if s.Automatic {
				automatic++
			}
			for _, f := range s.Faults {
				kinds[f.Kind]++
				switch {
				case f.Kind == KillHub:
				case f.Hold > Full.Grace:
					beyond++
					if f.Hold < Full.Grace+15*time.Second {
						t.Errorf("a long hold of %s: the hub would barely have declared the failure", f.Hold)
					}
				default:
					within++
				}
				if f.Kind == Partition {
					s := f.Cut.String()
					if strings.Contains(s, "hub") {
						hub++
					}
					if strings.Contains(s, "zone-") {
						zone++
					}
					if len(f.Cut.Groups) == 3 {
						three3++
					}
				}
			}
		}
	}
	for _, k := range Kinds {
		if kinds[k] == 0 && Full.Weights[k] > 0 {
			t.Errorf("no %s in 100 schedules", k)
		}
	}
	if kinds[Distance] > 0 {
		t.Errorf("profile full drew %d distances", kinds[Distance])
	}
	for name, n := range map[string]int{"hold within the grace": within, "hold beyond the grace": beyond, "Automatic schedule": automatic,
		"partition naming the hub": hub, "partition naming a zone": zone, "partition into three groups": three3} {
		if n == 0 {
			t.Errorf("no %s in 100 schedules", name)
		}
	}
	t.Logf("in 100 schedules: %v; holds %d within, %d beyond the grace; %d Automatic; partitions with the hub %d, with a zone %d, of three groups %d",
		kinds, within, beyond, automatic, hub, zone, three3)
}

// Events heal each fault after injecting it, a heal first at the same
// moment; a kill of the hub has no heal.
func TestEvents(t *testing.T) {
	s := Schedule{Profile: Full, Faults: []Fault{
		{Kind: KillCluster, Cluster: "member-1", At: 0, Hold: 10 * time.Second},
		{Kind: KillHub, At: 5 * time.Second},
		{Kind: StopHub, At: 10 * time.Second, Hold: 3 * time.Second},
	}}
	var got []string
	for _, e := range s.Events() {
		v := "inject"
		if e.Heal {
			v = "heal"
		}
		got = append(got, v+" "+string(s.Faults[e.Fault].Kind)+" at "+e.At.String())
	}
	want := []string{"inject kill-cluster at 0s", "inject kill-hub at 5s", "heal kill-cluster at 10s", "inject stop-hub at 10s", "heal stop-hub at 13s"}
	if !slices.Equal(got, want) {
		t.Errorf("events %v, want %v", got, want)
	}
	if s.Duration() != 13*time.Second {
		t.Errorf("duration %s", s.Duration())
	}
}

// Distance came after seeds were printed by runs: profiles full and ci
// still draw, seed for seed, the schedules they drew before it (a digest
// of 200 schedules each, taken before the kind existed).
func TestExistingSeedsDrawAsBefore(t *testing.T) {
	for p, want := range map[string]string{Full.Name: "0ed7c2d504da13df", CI.Name: "8e9768da0fc43b7a"} {
		prof, _ := ProfileNamed(p)
		h := sha256.New()
		for seed := range uint64(20) {
			for i := range 10 {
				fmt.Fprintln(h, Generate(seed, i, three, prof).String())
			}
		}
		if got := fmt.Sprintf("%x", h.Sum(nil)[:8]); got != want {
			t.Errorf("profile %s draws other schedules than before: digest %s, want %s", p, got, want)
		}
	}
}

// Profile wan draws distances: presets and links of its own, with and
// without loss.
func TestWANDrawsDistances(t *testing.T) {
	var presets, links, lossy int
	for seed := range uint64(5) {
		for i := range 20 {
			for _, f := range Generate(seed, i, three, WAN).Faults {
				if f.Kind != Distance {
					continue
				}
				if f.Distance.Preset != "" {
					presets++
				}
				for _, l := range f.Distance.Links {
					links++
					if l.Loss > 0 {
						lossy++
					}
					if l.RTT < 5*time.Millisecond || l.RTT > 150*time.Millisecond {
						t.Errorf("link %s:%s of %s", l.A, l.B, l.RTT)
					}
				}
			}
		}
	}
	if presets == 0 || links == 0 || lossy == 0 {
		t.Errorf("in 100 wan schedules: %d presets, %d links, %d with loss", presets, links, lossy)
	}
	t.Log(Generate(1, 0, three, WAN))
}
