package member_test

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	etcdfedv1 "github.com/etcdfed/etcdfed/api/v1alpha1"
	"github.com/etcdfed/etcdfed/spoke/app"
	"github.com/etcdfed/etcdfed/spoke/etcdstatus"
	"github.com/etcdfed/etcdfed/spoke/member"
)

// TestRunsLeavesOtherMembersAlone: a reconciler that runs only some
// members (Reconciler.Runs, as the fleet benchmark's clusters run some
// members for real and simulate the rest) takes the members it runs
// (finalizer, volume) and leaves the others as they are, although their
// events reach it: no finalizer, no volume, no status. It once took a
// simulated member mapped from its certificate Secret for its own, found
// no PVC for the volume its status named, and reported the volume lost.
func TestRunsLeavesOtherMembersAlone(t *testing.T) {
	e := start(t, func(o *app.Options) {
		image, interval := o.HelperImage, o.MemberStatusInterval
		o.MemberController = func(mgr manager.Manager, etcd *etcdstatus.Reader) error {
			return (&member.Reconciler{
				Runs:   func(m *etcdfedv1.EtcdMember) bool { return m.Name != "other-0" },
				Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(), Scheme: mgr.GetScheme(),
				Recorder: mgr.GetEventRecorder("etcdfed-spoke"), Etcd: etcd, HelperImage: image, StatusInterval: interval,
			}).SetupWithManager(context.Background(), mgr)
		}
	})
	run := e.member("main-0")
	other := e.member("other-0")
	e.g.Eventually(func(g Gomega) {
		_, err := e.pvc("main-0-data-0")
		g.Expect(err).NotTo(HaveOccurred())
	}).Should(Succeed(), "the member it runs gets its volume")
	e.g.Consistently(func(g Gomega) {
		cur := &etcdfedv1.EtcdMember{}
		g.Expect(e.c.Get(e.ctx, client.ObjectKeyFromObject(other), cur)).To(Succeed())
		g.Expect(cur.Finalizers).To(BeEmpty())
		g.Expect(cur.Status.Conditions).To(BeEmpty())
		_, err := e.pvc("other-0-data-0")
		g.Expect(err).To(HaveOccurred())
	}, 3*time.Second, 200*time.Millisecond).Should(Succeed(), "the member it does not run is left alone")
	cur := &etcdfedv1.EtcdMember{}
	e.g.Expect(e.c.Get(e.ctx, client.ObjectKeyFromObject(run), cur)).To(Succeed())
	e.g.Expect(cur.Finalizers).NotTo(BeEmpty())
}
