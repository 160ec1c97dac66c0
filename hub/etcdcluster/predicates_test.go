package etcdcluster

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/event"

	etcdfedv1 "github.com/etcdfed/etcdfed/api/v1alpha1"
)

func TestMemberNews(t *testing.T) {
	at := metav1.NewTime(time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC))
	old := ring().cluster("member-1").members["main-0"].DeepCopy()
	old.Status.Etcd = &etcdfedv1.MemberEtcdView{ID: "1", LeaderID: "1", RaftIndex: 10, RaftTerm: 2, DBSize: 1 << 20, DBSizeInUse: 1 << 20, ObservedAt: &at,
		WALFsync: &etcdfedv1.MemberDiskView{P99Millis: 2, MaxMillis: 16, Syncs: 900, WindowSeconds: 60}}
	p := memberNews()
	for _, tc := range []struct {
		name   string
		change func(*etcdfedv1.EtcdMember)
		news   bool
	}{
		{"counters only", func(m *etcdfedv1.EtcdMember) {
			later := metav1.NewTime(at.Add(time.Minute))
			m.Status.Etcd.RaftIndex, m.Status.Etcd.DBSize, m.Status.Etcd.DBSizeInUse, m.Status.Etcd.ObservedAt = 99, 1<<20+64<<10, 1<<20, &later
			m.ResourceVersion = "7"
		}, false},
		// Sizes a size policy acts on wake the hub (TestScenarioDefrag: a
		// fragmented file went unseen for a resync period).
		{"file grown to 380 MiB", func(m *etcdfedv1.EtcdMember) {
			m.Status.Etcd.RaftIndex, m.Status.Etcd.DBSize, m.Status.Etcd.DBSizeInUse = 9000, 380<<20, 380<<20
		}, true},
		{"a fragmented file (380 MiB, 48 KiB in use)", func(m *etcdfedv1.EtcdMember) {
			m.Status.Etcd.DBSize, m.Status.Etcd.DBSizeInUse = 380<<20, 48<<10
		}, true},
		{"the disk view's counts", func(m *etcdfedv1.EtcdMember) {
			m.Status.Etcd.WALFsync.Syncs, m.Status.Etcd.WALFsync.WindowSeconds = 5000, 300
		}, false},
		{"the disk view's tail (a stall)", func(m *etcdfedv1.EtcdMember) { m.Status.Etcd.WALFsync.MaxMillis = 2048 }, true},
		{"the disk view's window full", func(m *etcdfedv1.EtcdMember) { m.Status.Etcd.WALFsync.WindowSeconds = 620 }, true},
		{"late heartbeats came", func(m *etcdfedv1.EtcdMember) { m.Status.Etcd.WALFsync.LateHeartbeats = 4 }, true},
		{"leader", func(m *etcdfedv1.EtcdMember) { m.Status.Etcd.LeaderID = "2" }, true},
		{"term", func(m *etcdfedv1.EtcdMember) { m.Status.Etcd.RaftTerm = 3 }, true},
		{"learner", func(m *etcdfedv1.EtcdMember) { m.Status.Etcd.IsLearner = true }, true},
		{"view gone", func(m *etcdfedv1.EtcdMember) { m.Status.Etcd = nil }, true},
		{"condition", func(m *etcdfedv1.EtcdMember) { m.Status.Conditions[0].Status = metav1.ConditionFalse }, true},
		{"address", func(m *etcdfedv1.EtcdMember) { m.Status.Address = "127.0.9.9" }, true},
		{"spec", func(m *etcdfedv1.EtcdMember) { m.Spec.Image = "other" }, true},
		{"label", func(m *etcdfedv1.EtcdMember) { m.Labels["x"] = "y" }, true},
		{"deleted", func(m *etcdfedv1.EtcdMember) { m.DeletionTimestamp = &at }, true},
	} {
		n := old.DeepCopy()
		tc.change(n)
		if got := p.Update(event.UpdateEvent{ObjectOld: old, ObjectNew: n}); got != tc.news {
			t.Errorf("%s: news %v, want %v", tc.name, got, tc.news)
		}
	}
}
