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
	old.Status.Etcd = &etcdfedv1.MemberEtcdView{ID: "1", LeaderID: "1", RaftIndex: 10, RaftTerm: 2, DBSize: 1 << 20, ObservedAt: &at}
	p := memberNews()
	for _, tc := range []struct {
		name   string
		change func(*etcdfedv1.EtcdMember)
		news   bool
	}{
		{"counters only", func(m *etcdfedv1.EtcdMember) {
			later := metav1.NewTime(at.Add(time.Minute))
			m.Status.Etcd.RaftIndex, m.Status.Etcd.DBSize, m.Status.Etcd.ObservedAt = 99, 2<<20, &later
			m.ResourceVersion = "7"
		}, false},
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
