package member

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	etcdfedv1 "github.com/etcdfed/etcdfed/api/v1alpha1"
	"github.com/etcdfed/etcdfed/spoke/component/pod"
)

// A member's etcd view is written when something other than its counters
// changed, when its database sizes moved in a way a size policy acts on
// (TestScenarioDefrag found the hub 5 minutes late on a fragmented file:
// the sizes were counters like the raft index), and otherwise once per
// etcdViewRefresh: at rest a member costs its cluster one status patch in
// five minutes.
func TestEtcdViewNews(t *testing.T) {
	t0 := time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC)
	at := func(d time.Duration) *metav1.Time { v := metav1.NewTime(t0.Add(d)); return &v }
	last := &etcdfedv1.MemberEtcdView{ID: "a1", LeaderID: "b2", RaftIndex: 100, RaftTerm: 3, DBSize: 1 << 20, DBSizeInUse: 1 << 20, Version: "3.6.16", ObservedAt: at(0)}
	with := func(f func(v *etcdfedv1.MemberEtcdView)) *etcdfedv1.MemberEtcdView {
		v := last.DeepCopy()
		f(v)
		return v
	}
	big := with(func(v *etcdfedv1.MemberEtcdView) { v.DBSize, v.DBSizeInUse = 380<<20, 380<<20 })
	for _, tc := range []struct {
		name string
		old  *etcdfedv1.MemberEtcdView
		cur  *etcdfedv1.MemberEtcdView
		want bool
	}{
		{"first view", nil, last, true},
		{"counters moved, a second later", last, with(func(v *etcdfedv1.MemberEtcdView) {
			v.RaftIndex, v.DBSize, v.ObservedAt = 120, 1<<20+100<<10, at(time.Second)
		}), false},
		{"the file grew from 1 to 380 MiB: at once", last, with(func(v *etcdfedv1.MemberEtcdView) {
			v.RaftIndex, v.DBSize, v.ObservedAt = 9000, 380<<20, at(10*time.Second)
		}), true},
		{"compacted: 380 MiB file, 48 KiB in use: at once", big, with(func(v *etcdfedv1.MemberEtcdView) {
			v.RaftIndex, v.DBSize, v.DBSizeInUse, v.ObservedAt = 9100, 380<<20, 48<<10, at(10*time.Second)
		}), true},
		{"defragmented: the file back to 1 MiB: at once", with(func(v *etcdfedv1.MemberEtcdView) { v.DBSize, v.DBSizeInUse = 380<<20, 48<<10 }), with(func(v *etcdfedv1.MemberEtcdView) {
			v.DBSize, v.DBSizeInUse, v.ObservedAt = 1<<20, 48<<10, at(10*time.Second)
		}), true},
		{"the file past 90% of the quota: at once", with(func(v *etcdfedv1.MemberEtcdView) { v.DBSize, v.DBSizeInUse = 1840<<20, 1800<<20 }), with(func(v *etcdfedv1.MemberEtcdView) {
			v.DBSize, v.DBSizeInUse, v.ObservedAt = 1850<<20, 1810<<20, at(10*time.Second)
		}), true},
		{"a large file grew by 1%: kept", big, with(func(v *etcdfedv1.MemberEtcdView) {
			v.DBSize, v.DBSizeInUse, v.ObservedAt = 384<<20, 384<<20, at(10*time.Second)
		}), false},
		{"a disk view appeared", last, with(func(v *etcdfedv1.MemberEtcdView) {
			v.WALFsync, v.ObservedAt = &etcdfedv1.MemberDiskView{P99Millis: 2, MaxMillis: 8, Syncs: 900, WindowSeconds: 30}, at(10*time.Second)
		}), true},
		{"the disk view's counts moved, its tail did not", with(func(v *etcdfedv1.MemberEtcdView) {
			v.WALFsync = &etcdfedv1.MemberDiskView{P99Millis: 2, MaxMillis: 8, Syncs: 900, WindowSeconds: 30}
		}), with(func(v *etcdfedv1.MemberEtcdView) {
			v.WALFsync, v.ObservedAt = &etcdfedv1.MemberDiskView{P99Millis: 2, MaxMillis: 8, Syncs: 1900, WindowSeconds: 40}, at(10*time.Second)
		}), false},
		{"a quick disk's tail moved by a bucket: kept", with(func(v *etcdfedv1.MemberEtcdView) {
			v.WALFsync = &etcdfedv1.MemberDiskView{P99Millis: 2, MaxMillis: 8, Syncs: 900, WindowSeconds: 30}
		}), with(func(v *etcdfedv1.MemberEtcdView) {
			v.WALFsync, v.ObservedAt = &etcdfedv1.MemberDiskView{P99Millis: 4, MaxMillis: 16, Syncs: 1900, WindowSeconds: 40}, at(10*time.Second)
		}), false},
		{"a stall left the window: at once", with(func(v *etcdfedv1.MemberEtcdView) {
			v.WALFsync = &etcdfedv1.MemberDiskView{P99Millis: 2, MaxMillis: 1024, Syncs: 900, WindowSeconds: 600}
		}), with(func(v *etcdfedv1.MemberEtcdView) {
			v.WALFsync, v.ObservedAt = &etcdfedv1.MemberDiskView{P99Millis: 2, MaxMillis: 16, Syncs: 800, WindowSeconds: 600}, at(10*time.Second)
		}), true},
		{"the window came to its full length: at once", with(func(v *etcdfedv1.MemberEtcdView) {
			v.WALFsync = &etcdfedv1.MemberDiskView{P99Millis: 2, MaxMillis: 8, Syncs: 900, WindowSeconds: 300}
		}), with(func(v *etcdfedv1.MemberEtcdView) {
			v.WALFsync, v.ObservedAt = &etcdfedv1.MemberDiskView{P99Millis: 2, MaxMillis: 8, Syncs: 1900, WindowSeconds: 601}, at(10*time.Second)
		}), true},
		{"a stall entered the window: at once", with(func(v *etcdfedv1.MemberEtcdView) {
			v.WALFsync = &etcdfedv1.MemberDiskView{P99Millis: 2, MaxMillis: 8, Syncs: 900, WindowSeconds: 30}
		}), with(func(v *etcdfedv1.MemberEtcdView) {
			v.WALFsync, v.ObservedAt = &etcdfedv1.MemberDiskView{P99Millis: 2, MaxMillis: 2048, Syncs: 1900, WindowSeconds: 40}, at(10*time.Second)
		}), true},
		{"late heartbeats entered the window: at once", with(func(v *etcdfedv1.MemberEtcdView) {
			v.WALFsync = &etcdfedv1.MemberDiskView{P99Millis: 2, MaxMillis: 8, Syncs: 900, WindowSeconds: 30}
		}), with(func(v *etcdfedv1.MemberEtcdView) {
			v.WALFsync, v.ObservedAt = &etcdfedv1.MemberDiskView{P99Millis: 2, MaxMillis: 8, Syncs: 1900, WindowSeconds: 40, LateHeartbeats: 2}, at(10*time.Second)
		}), true},
		{"more late heartbeats: kept", with(func(v *etcdfedv1.MemberEtcdView) {
			v.WALFsync = &etcdfedv1.MemberDiskView{P99Millis: 2, MaxMillis: 8, Syncs: 900, WindowSeconds: 30, LateHeartbeats: 2}
		}), with(func(v *etcdfedv1.MemberEtcdView) {
			v.WALFsync, v.ObservedAt = &etcdfedv1.MemberDiskView{P99Millis: 2, MaxMillis: 8, Syncs: 1900, WindowSeconds: 40, LateHeartbeats: 6}, at(10*time.Second)
		}), false},
		{"counters moved, a minute later", last, with(func(v *etcdfedv1.MemberEtcdView) {
			v.RaftIndex, v.ObservedAt = 900, at(time.Minute)
		}), false},
		{"counters moved, just short of the refresh", last, with(func(v *etcdfedv1.MemberEtcdView) {
			v.RaftIndex, v.ObservedAt = 900, at(etcdViewRefresh-time.Second)
		}), false},
		{"the refresh is due", last, with(func(v *etcdfedv1.MemberEtcdView) {
			v.RaftIndex, v.ObservedAt = 900, at(etcdViewRefresh)
		}), true},
		{"the leader lost (a quorum lost): at once, with the raft index", last, with(func(v *etcdfedv1.MemberEtcdView) {
			v.LeaderID, v.RaftIndex, v.ObservedAt = "", 130, at(time.Second)
		}), true},
		{"a new term", last, with(func(v *etcdfedv1.MemberEtcdView) { v.RaftTerm, v.ObservedAt = 4, at(time.Second) }), true},
		{"promoted", with(func(v *etcdfedv1.MemberEtcdView) { v.IsLearner = true }), with(func(v *etcdfedv1.MemberEtcdView) { v.ObservedAt = at(time.Second) }), true},
		{"an error", last, with(func(v *etcdfedv1.MemberEtcdView) {
			v.Error, v.ObservedAt = "context deadline exceeded", at(time.Second)
		}), true},
		{"a peer lost", last, with(func(v *etcdfedv1.MemberEtcdView) {
			v.Peers, v.ObservedAt = &etcdfedv1.MemberPeerView{Lost: []string{"c3"}}, at(time.Second)
		}), true},
	} {
		if got := etcdViewNews(tc.old, tc.cur, etcdfedv1.DefaultQuotaBackendBytes); got != tc.want {
			t.Errorf("%s: news %v, want %v", tc.name, got, tc.want)
		}
	}
}

// A pod running its init containers has been started by its cluster: it
// is not PodPending, which the hub reads as the cluster not starting the
// ring's spec (planner.NotStarting). On real nodes a crash-looping member
// whose new pod was still in its init containers when the member grace
// ended was moved out of its cluster, and the cluster closed to the ring,
// instead of being replaced in place (TestScenarioCrashLoop with
// ETCDFED_NODES=real). A pod not scheduled, not started, or pulling its
// etcd image after its init containers is still PodPending.
func TestPodInitializingIsNotPending(t *testing.T) {
	m := &etcdfedv1.EtcdMember{Spec: etcdfedv1.EtcdMemberSpec{Incarnation: 4, DNSName: "crash-2.crash.etcd.test"}}
	done := corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 0, Reason: "Completed"}}
	running := corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}
	waiting := func(reason string) corev1.ContainerState {
		return corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: reason}}
	}
	podWith := func(node string, init []corev1.ContainerStatus, etcd *corev1.ContainerState) *corev1.Pod {
		p := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: "crash-loop-crash-2", Labels: map[string]string{etcdfedv1.LabelIncarnation: "4"}},
			Spec:       corev1.PodSpec{NodeName: node},
			Status:     corev1.PodStatus{Phase: corev1.PodPending, InitContainerStatuses: init},
		}
		if etcd != nil {
			p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: pod.ContainerEtcd, State: *etcd}}
		}
		return p
	}
	initializing := waiting("PodInitializing")
	creating := waiting("ContainerCreating")
	for _, tc := range []struct {
		name string
		pod  *corev1.Pod
		want string
	}{
		{"prepare-data runs", podWith("node-0", []corev1.ContainerStatus{
			{Name: pod.ContainerWaitDNS, State: done}, {Name: pod.ContainerPrepareData, State: running}, {Name: pod.ContainerInstallHelper, State: waiting("PodInitializing")},
		}, &initializing), ReasonPodInitializing},
		{"between two init containers", podWith("node-0", []corev1.ContainerStatus{
			{Name: pod.ContainerWaitDNS, State: done}, {Name: pod.ContainerPrepareData, State: done}, {Name: pod.ContainerInstallHelper, State: waiting("PodInitializing")},
		}, &initializing), ReasonPodInitializing},
		{"not scheduled", podWith("", nil, nil), ReasonPodPending},
		{"scheduled, no container started", podWith("node-0", []corev1.ContainerStatus{
			{Name: pod.ContainerPrepareData, State: waiting("PodInitializing")},
		}, &initializing), ReasonPodPending},
		{"init done, etcd's image being pulled", podWith("node-0", []corev1.ContainerStatus{
			{Name: pod.ContainerWaitDNS, State: done}, {Name: pod.ContainerPrepareData, State: done}, {Name: pod.ContainerInstallHelper, State: done},
		}, &creating), ReasonPodPending},
	} {
		t.Run(tc.name, func(t *testing.T) {
			status, reason, msg := podReadiness(m, pod.Decision{Action: pod.Keep}, tc.pod, nil, nil)
			if status != metav1.ConditionFalse || reason != tc.want {
				t.Errorf("PodReady %s %s (%s), want False %s", status, reason, msg, tc.want)
			}
		})
	}
}
