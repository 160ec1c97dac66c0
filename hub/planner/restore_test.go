package planner

import (
	"testing"

	"github.com/etcdfed/etcdfed/pkg/topology"
)

// A cluster founded from a snapshot: nothing is placed or created before
// the hub has resolved and checked the snapshot (every founding member
// restores that one); once it has, the bootstrap goes as any other; a
// founding member whose restore fails is named, with why, while the
// bootstrap waits.
func TestBootstrapFromSnapshot(t *testing.T) {
	fresh := func(r Restore) func() Input {
		return func() Input {
			in := Input{Now: t0, Replicas: 3, Automatic: true, Restore: r}
			in.Placement.Target = []topology.Member{{Name: "main-0", Domain: dA}, {Name: "main-1", Domain: dB}, {Name: "main-2", Domain: dC}}
			return in
		}
	}
	started := func(failing string) func() Input {
		return func() Input {
			in := fresh(Restore{Wanted: true, Verified: true})()
			in.Operation = &Operation{Type: OpBootstrap, Step: ActStartBootstrap, StartedAt: t0}
			in.Members = []Member{running("main-0", 0, dA, 1), running("main-1", 0, dB, 2), running("main-2", 0, dC, 3)}
			for i := range in.Members {
				in.Members[i].Object.Bootstrap = "new"
			}
			in.Members[1].Object.Failing = failing
			in.Etcd = Etcd{Error: "context deadline exceeded"}
			return in
		}
	}
	run(t, []struct {
		name   string
		input  func() Input
		checks []check
	}{
		{"snapshot not checked yet: nothing founded", fresh(Restore{Wanted: true, Message: "store unreachable: connection refused"}),
			[]check{action(ActWait), reason("snapshot to restore from"), reason("connection refused"), func(t *testing.T, d Decision) {
				if d.Operation != nil || len(d.Assign) > 0 {
					t.Errorf("a bootstrap was recorded before the snapshot was checked: %+v", d)
				}
			}}},
		{"snapshot refused: nothing founded", fresh(Restore{Wanted: true, Message: "SnapshotInvalid: sha256 mismatch"}),
			[]check{action(ActWait), reason("sha256 mismatch")}},
		{"snapshot checked: the founding placement is recorded", fresh(Restore{Wanted: true, Verified: true}),
			[]check{action(ActBegin), opRecorded(OpBootstrap, ActCreateObjects)}},
		{"no snapshot wanted: as ever", fresh(Restore{}), []check{action(ActBegin)}},
		{"a failing restore is named while etcd forms", started("container restore of pod main-1: CrashLoopBackOff: invalid snapshot"),
			[]check{action(ActWait), opRecorded(OpBootstrap, ActStartBootstrap), reason("main-1 in b: container restore of pod main-1: CrashLoopBackOff: invalid snapshot")}},
		{"no failure: waits for etcd to form", started(""), []check{action(ActWait), reason("waiting for etcd to form: context deadline exceeded")}},
	})
}
