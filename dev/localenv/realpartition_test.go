package localenv

import (
	"strings"
	"testing"
)

// The filter rules of a partition with real nodes (slot 7, two member
// clusters of two zones, a node each): a group's blocks to the other
// group's, both ways; a one-way cut drops only what its From opens.
func TestRealPartitionRules(t *testing.T) {
	st := newState("/state", 7, Config{Clusters: 2, ZonesPerCluster: 2, NodesPerZone: 1, Nodes: NodesReal})
	p, err := st.resolvePartition(Partition{Groups: [][]string{{"hub", "zone-1a"}, {"member-2"}}, OneWay: []Cut{{From: "zone-1b", To: "hub"}}}, "")
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, r := range realPartitionRules(p, st.realBlocks) {
		got = append(got, strings.Join(r, " "))
	}
	want := []string{
		"-s 172.20.0.0/21 -d 172.20.16.0/21 -j DROP",
		"-s 172.20.0.0/21 -d 10.102.0.0/16 -j DROP",
		"-s 10.100.0.0/16 -d 172.20.16.0/21 -j DROP",
		"-s 10.100.0.0/16 -d 10.102.0.0/16 -j DROP",
		"-s 172.20.9.0/24 -d 172.20.16.0/21 -j DROP",
		"-s 172.20.9.0/24 -d 10.102.0.0/16 -j DROP",
		"-s 10.101.16.0/24 -d 172.20.16.0/21 -j DROP",
		"-s 10.101.16.0/24 -d 10.102.0.0/16 -j DROP",
		"-s 172.20.16.0/21 -d 172.20.0.0/21 -j DROP",
		"-s 172.20.16.0/21 -d 10.100.0.0/16 -j DROP",
		"-s 10.102.0.0/16 -d 172.20.0.0/21 -j DROP",
		"-s 10.102.0.0/16 -d 10.100.0.0/16 -j DROP",
		"-s 172.20.16.0/21 -d 172.20.9.0/24 -j DROP",
		"-s 172.20.16.0/21 -d 10.101.16.0/24 -j DROP",
		"-s 10.102.0.0/16 -d 172.20.9.0/24 -j DROP",
		"-s 10.102.0.0/16 -d 10.101.16.0/24 -j DROP",
		"-s 172.20.10.0/24 -d 172.20.0.0/21 -m conntrack --ctdir ORIGINAL -j DROP",
		"-s 172.20.10.0/24 -d 10.100.0.0/16 -m conntrack --ctdir ORIGINAL -j DROP",
		"-s 10.101.32.0/24 -d 172.20.0.0/21 -m conntrack --ctdir ORIGINAL -j DROP",
		"-s 10.101.32.0/24 -d 10.100.0.0/16 -m conntrack --ctdir ORIGINAL -j DROP",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("rules:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// StopNodeLeases with real nodes (slot 7, two member clusters of two
// zones): a zone's node block is cut from its own cluster's apiserver
// only.
func TestRealLeaseRules(t *testing.T) {
	st := newState("/state", 7, Config{Clusters: 2, ZonesPerCluster: 2, NodesPerZone: 1, Nodes: NodesReal})
	rules, err := realLeaseRules(st, map[ZoneRef]bool{{Cluster: "member-2", Zone: "zone-2a"}: true, {Cluster: "member-1", Zone: "zone-1b"}: true})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, r := range rules {
		got = append(got, strings.Join(r, " "))
	}
	want := []string{
		"-s 172.20.10.0/24 -d 172.20.8.1/32 -p tcp --dport 6443 -j DROP",
		"-s 172.20.17.0/24 -d 172.20.16.1/32 -p tcp --dport 6443 -j DROP",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("rules:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}
