package addr

import (
	"errors"
	"testing"
)

func TestPlan(t *testing.T) {
	p := Plan{Slot: 7}
	for _, tc := range []struct{ got, want string }{
		{p.Prefix().String(), "127.7.0.0/16"},
		{p.Cluster(0).String(), "127.7.0.0/21"},
		{p.Cluster(2).String(), "127.7.16.0/21"},
		{p.Zone(2, 1).String(), "127.7.17.0/24"},
		{p.APIServer(2).String(), "127.7.16.1:6443"},
		{p.APIEtcd(0).String(), "127.7.0.1:2379"},
		{p.DNS(3).String(), "127.7.24.2:1053"},
		{p.Gossip(3).String(), "127.7.24.2:7946"},
		{p.Node(1, 2, 0).String(), "127.7.10.1"},
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
		if !p.Prefix().Contains(p.Zone(c, MaxZones).Addr()) {
			t.Fatalf("zone %d of cluster %d outside the slot's /16", MaxZones, c)
		}
	}
	// A fleet of 20 member clusters fits one slot.
	if MaxMemberClusters < 20 {
		t.Fatalf("MaxMemberClusters %d: a fleet of 20 member clusters does not fit", MaxMemberClusters)
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

func TestRealPlan(t *testing.T) {
	p := Plan{Slot: 7}
	for _, tc := range []struct{ got, want string }{
		{p.RealCluster(2).String(), "172.20.16.0/21"},
		{p.RealZone(2, 1).String(), "172.20.17.0/24"},
		{p.RealAPIServer(0).String(), "172.20.0.1:6443"},
		{p.RealNode(1, 2, 0).String(), "172.20.10.1"},
		{p.RealLB(3, 0).String(), "172.20.24.128"},
		{p.RealLBs(3).String(), "172.20.24.128/26"},
		{p.RealPods(3).String(), "10.103.0.0/16"},
		{p.RealZonePods(3, 2).String(), "10.103.32.0/20"},
		{p.RealNodePods(3, 2, 1).String(), "10.103.33.0/24"},
	} {
		if tc.got != tc.want {
			t.Errorf("got %s, want %s", tc.got, tc.want)
		}
	}
	// Nodes, zones and load balancers inside their cluster; node pod
	// ranges inside their zone's and cluster's; no two overlap.
	seen := map[string]bool{}
	for c := 0; c <= MaxMemberClusters; c++ {
		for i := 0; i < RealLBCount; i++ {
			if !p.RealCluster(c).Contains(p.RealLB(c, i)) || !p.RealLBs(c).Contains(p.RealLB(c, i)) || p.RealLBs(c).Contains(p.RealAPIServer(c).Addr()) {
				t.Fatalf("load balancer %d of cluster %d at %s", i, c, p.RealLB(c, i))
			}
		}
		for z := 1; z <= MaxZones; z++ {
			if !p.RealCluster(c).Overlaps(p.RealZone(c, z)) || p.RealZone(c, z).Contains(p.RealLB(c, 0)) {
				t.Fatalf("zone %d of cluster %d", z, c)
			}
			for n := 0; n < MaxNodesPerZone; n++ {
				pods := p.RealNodePods(c, z, n)
				if !p.RealZonePods(c, z).Overlaps(pods) || !p.RealPods(c).Overlaps(pods) || seen[pods.String()] {
					t.Fatalf("pods of node %d/%d/%d: %s", c, z, n, pods)
				}
				seen[pods.String()] = true
				if !p.RealZone(c, z).Contains(p.RealNode(c, z, n)) {
					t.Fatalf("node %d/%d/%d at %s", c, z, n, p.RealNode(c, z, n))
				}
			}
		}
	}
}
