package addr

import (
	"errors"
	"testing"
)

func TestPlan(t *testing.T) {
	p := Plan{Slot: 7}
	for _, tc := range []struct{ got, want string }{
		{p.Prefix().String(), "127.7.0.0/16"},
		{p.Cluster(0).String(), "127.7.0.0/20"},
		{p.Cluster(2).String(), "127.7.32.0/20"},
		{p.Zone(2, 1).String(), "127.7.33.0/24"},
		{p.APIServer(2).String(), "127.7.32.1:6443"},
		{p.APIEtcd(0).String(), "127.7.0.1:2379"},
		{p.DNS(3).String(), "127.7.48.2:1053"},
		{p.Gossip(3).String(), "127.7.48.2:7946"},
		{p.Node(1, 2, 0).String(), "127.7.18.1"},
	} {
		if tc.got != tc.want {
			t.Errorf("got %s, want %s", tc.got, tc.want)
		}
	}
	// Every zone lies inside its cluster, clusters do not overlap.
	for c := 0; c <= MaxMemberClusters; c++ {
		for z := 1; z <= MaxZones; z++ {
			if !p.Cluster(c).Contains(p.Zone(c, z).Addr()) {
				t.Fatalf("zone %d of cluster %d outside it", z, c)
			}
		}
		if c > 0 && p.Cluster(c).Overlaps(p.Cluster(c-1)) {
			t.Fatalf("clusters %d and %d overlap", c, c-1)
		}
	}
}

func TestAcquire(t *testing.T) {
	a, err := Acquire(0)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Release()
	if !Held(a.Slot) {
		t.Fatalf("slot %d not reported held", a.Slot)
	}
	if _, err := Acquire(a.Slot); !errors.Is(err, ErrSlotTaken) {
		t.Fatalf("second acquire of slot %d: %v", a.Slot, err)
	}
	b, err := Acquire(0)
	if err != nil {
		t.Fatal(err)
	}
	if b.Slot == a.Slot {
		t.Fatalf("two holders of slot %d", a.Slot)
	}
	b.Release()
	c, err := Acquire(b.Slot)
	if err != nil {
		t.Fatalf("released slot %d not free: %v", b.Slot, err)
	}
	c.Release()
}
