package etcdcluster

import (
	"testing"

	"github.com/etcdfed/etcdfed/hub/planner"
	"github.com/etcdfed/etcdfed/pkg/topology"
)

// A member moved to another cluster keeps its DNS record, with its old
// address, until the new incarnation reports one. The record once vanished
// at the start of the move: when the moved member was etcd's leader, the
// hub could no longer reach it to move leadership away, and the move hung
// (found by the cordon scenario in test/multicluster).
func TestMovedMemberKeepsItsRecordUntilTheNewOneHasAnAddress(t *testing.T) {
	v := threeZoneView()
	for i, cv := range v.clusters {
		cv.spoke.Status.DNSAddresses = []string{"127.0.0.1:53"}
		v.ec.Status.Members[i].Address = "10.0.0." + string(rune('1'+i))
	}
	v.ec.Spec.DNS.Domain = "etcd.test"
	v.ec.UID = "uid-1"
	resolves := func(name, want string) {
		t.Helper()
		set, err := buildRecordSet(v, &v.ec.Status)
		if err != nil || set == nil {
			t.Fatalf("record set: %v (nil: %v)", err, set == nil)
		}
		for _, r := range set.Records() {
			if r.Name == name+".etcd.test." && r.Type == "A" {
				if len(r.Data) != 1 || r.Data[0] != want {
					t.Fatalf("%s resolves to %s, want %s", name, r.Data, want)
				}
				return
			}
		}
		t.Fatalf("no A record for %s in %v", name, set.Records())
	}
	resolves("main-1", "10.0.0.1")

	recordStep(v, &v.ec.Status, planner.Decision{
		Action:    planner.ActBegin,
		Operation: &planner.Operation{Type: "Replace", Member: "main-1"},
		Assign:    []planner.Assignment{{Member: "main-1", Domain: topology.Domain{Cluster: "member-2", Zone: "zone-2"}, Incarnation: 5}},
	})
	resolves("main-1", "10.0.0.1")
}
