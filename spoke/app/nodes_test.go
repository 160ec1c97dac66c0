package app_test

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdfedv1 "github.com/etcdfed/etcdfed/api/v1alpha1"
	"github.com/etcdfed/etcdfed/dev/testenv"
	"github.com/etcdfed/etcdfed/spoke/app"
	"github.com/etcdfed/etcdfed/spoke/gossip"
	"github.com/etcdfed/etcdfed/spoke/spokestatus"
)

// A spoke that listed its cluster's zones before the nodes registered
// reported no zones, and the hub placed a member in a pseudo-zone and then
// moved it (found in test/multicluster). The spoke now says NoNodes until
// it has seen a node, and reports the zones once it has.
func TestSpokeSaysNoNodesUntilNodesExist(t *testing.T) {
	cl := testenv.StartT(t, "spoke-no-nodes")[0] // its own apiserver: nodes are cluster-wide
	ctx := context.Background()
	g := NewWithT(t)
	g.SetDefaultEventuallyTimeout(60 * time.Second)
	ns := testenv.NamespaceT(t, cl, "ring")

	o := app.DefaultOptions()
	o.Namespace = ns
	o.ClusterName = "lonely"
	o.DNSListen = "127.0.0.1:0"
	o.Gossip = gossip.Config{}
	o.LeaderElection = false
	run(t, cl.Config, o)

	key := types.NamespacedName{Namespace: ns, Name: etcdfedv1.SpokeObjectName}
	ready := func(g Gomega) (*metav1.Condition, []string) {
		sp := &etcdfedv1.EtcdSpoke{}
		g.Expect(cl.Client.Get(ctx, key, sp)).To(Succeed())
		c := meta.FindStatusCondition(sp.Status.Conditions, etcdfedv1.ConditionReady)
		g.Expect(c).NotTo(BeNil())
		return c, sp.Status.Zones
	}
	g.Eventually(func(g Gomega) {
		c, zones := ready(g)
		g.Expect(c.Status).To(Equal(metav1.ConditionFalse))
		g.Expect(c.Reason).To(Equal(spokestatus.ReasonNoNodes))
		g.Expect(zones).To(BeEmpty())
	}).Should(Succeed())

	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-a", Labels: map[string]string{corev1.LabelTopologyZone: "zone-a"}}}
	g.Expect(cl.Client.Create(ctx, n)).To(Succeed())
	g.Eventually(func(g Gomega) {
		c, zones := ready(g)
		g.Expect(c.Status).To(Equal(metav1.ConditionTrue), c.Message)
		g.Expect(zones).To(Equal([]string{"zone-a"}))
	}).Should(Succeed())
}

// The spoke reports the zones where no node takes new pods: a zone whose
// only node is cordoned, then one whose node is not Ready, and neither
// once its node is back.
func TestSpokeReportsUnschedulableZones(t *testing.T) {
	cl := testenv.StartT(t, "spoke-closed-zones")[0] // nodes are cluster-wide
	ctx := context.Background()
	g := NewWithT(t)
	g.SetDefaultEventuallyTimeout(60 * time.Second)
	ns := testenv.NamespaceT(t, cl, "ring")

	nodes := map[string]*corev1.Node{}
	for _, z := range []string{"zone-a", "zone-b"} {
		n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-" + z, Labels: map[string]string{corev1.LabelTopologyZone: z}}}
		g.Expect(cl.Client.Create(ctx, n)).To(Succeed())
		n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "KubeletReady", LastHeartbeatTime: metav1.Now(), LastTransitionTime: metav1.Now()}}
		g.Expect(cl.Client.Status().Update(ctx, n)).To(Succeed())
		nodes[z] = n
	}
	o := app.DefaultOptions()
	o.Namespace = ns
	o.ClusterName = "closing"
	o.DNSListen = "127.0.0.1:0"
	o.Gossip = gossip.Config{}
	o.LeaderElection = false
	run(t, cl.Config, o)

	key := types.NamespacedName{Namespace: ns, Name: etcdfedv1.SpokeObjectName}
	closed := func(want []string) {
		t.Helper()
		g.Eventually(func(g Gomega) {
			sp := &etcdfedv1.EtcdSpoke{}
			g.Expect(cl.Client.Get(ctx, key, sp)).To(Succeed())
			g.Expect(sp.Status.Zones).To(Equal([]string{"zone-a", "zone-b"}))
			if len(want) == 0 {
				g.Expect(sp.Status.UnschedulableZones).To(BeEmpty())
			} else {
				g.Expect(sp.Status.UnschedulableZones).To(Equal(want))
			}
		}).Should(Succeed())
	}
	closed(nil)

	b := nodes["zone-b"]
	g.Expect(cl.Client.Get(ctx, client.ObjectKeyFromObject(b), b)).To(Succeed())
	b.Spec.Unschedulable = true
	g.Expect(cl.Client.Update(ctx, b)).To(Succeed())
	closed([]string{"zone-b"})

	b.Spec.Unschedulable = false
	g.Expect(cl.Client.Update(ctx, b)).To(Succeed())
	closed(nil)

	a := nodes["zone-a"]
	g.Expect(cl.Client.Get(ctx, client.ObjectKeyFromObject(a), a)).To(Succeed())
	a.Status.Conditions[0].Status, a.Status.Conditions[0].Reason = corev1.ConditionUnknown, "NodeStatusUnknown"
	g.Expect(cl.Client.Status().Update(ctx, a)).To(Succeed())
	closed([]string{"zone-a"})
}
