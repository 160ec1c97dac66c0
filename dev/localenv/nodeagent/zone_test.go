package nodeagent_test

import (
	"context"
	"net/netip"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// A failed zone loses its processes and its nodes turn unreachable; pods
// for it wait; restoring it restarts the pods on their addresses with
// their data.
func TestZoneFailureAndRestore(t *testing.T) {
	agent, cs := fixture(t)
	ctx := context.Background()
	ns := namespace(t, cs)
	g := NewWithT(t)
	t.Cleanup(func() { _ = agent.RestoreZone(context.Background(), zoneB) })

	_, err := cs.CoreV1().PersistentVolumeClaims(ns).Create(ctx, claim("data"), metav1.CreateOptions{})
	g.Expect(err).NotTo(HaveOccurred())
	_, err = cs.CoreV1().Pods(ns).Create(ctx, etcdPod("etcd-b", zoneB, "data"), metav1.CreateOptions{})
	g.Expect(err).NotTo(HaveOccurred())
	var pod *corev1.Pod
	g.Eventually(func(g Gomega) {
		pod, err = cs.CoreV1().Pods(ns).Get(ctx, "etcd-b", metav1.GetOptions{})
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(podReady(pod)).To(BeTrue())
	}).WithTimeout(60 * time.Second).Should(Succeed())
	ip := pod.Status.PodIP
	pid := containerPID(g, pod)
	cli := etcdClient(t, "http://"+ip+":2379")
	wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	_, err = cli.Put(wctx, "before", "failure")
	g.Expect(err).NotTo(HaveOccurred())

	g.Expect(agent.FailZone(ctx, zoneB)).To(Succeed())
	g.Expect(processAlive(pid)).To(BeFalse(), "etcd survived the zone failure")
	node, err := cs.CoreV1().Nodes().Get(ctx, "node-"+zoneB, metav1.GetOptions{})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(node.Status.Conditions).To(ContainElement(And(HaveField("Type", corev1.NodeReady), HaveField("Status", corev1.ConditionUnknown))))
	g.Expect(node.Spec.Taints).To(ContainElement(HaveField("Key", corev1.TaintNodeUnreachable)))
	g.Expect(agent.FailedZones()).To(Equal([]string{zoneB}))

	// New work for the zone waits.
	_, err = cs.CoreV1().Pods(ns).Create(ctx, etcdPod("etcd-b2", zoneB, ""), metav1.CreateOptions{})
	g.Expect(err).NotTo(HaveOccurred())
	g.Eventually(func(g Gomega) {
		p, err := cs.CoreV1().Pods(ns).Get(ctx, "etcd-b2", metav1.GetOptions{})
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(p.Spec.NodeName).To(BeEmpty())
		g.Expect(p.Status.Conditions).To(ContainElement(HaveField("Reason", corev1.PodReasonUnschedulable)))
	}).WithTimeout(30 * time.Second).Should(Succeed())

	g.Expect(agent.RestoreZone(ctx, zoneB)).To(Succeed())
	g.Eventually(func(g Gomega) {
		p, err := cs.CoreV1().Pods(ns).Get(ctx, "etcd-b", metav1.GetOptions{})
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(podReady(p)).To(BeTrue())
		g.Expect(p.Status.ContainerStatuses[0].RestartCount).To(BeNumerically(">=", 1))
		g.Expect(p.Status.PodIP).To(Equal(ip), "the pod keeps its address")
		g.Expect(containerPID(g, p)).NotTo(Equal(pid))
		p2, err := cs.CoreV1().Pods(ns).Get(ctx, "etcd-b2", metav1.GetOptions{})
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(podReady(p2)).To(BeTrue())
		g.Expect(netip.MustParseAddr(p2.Status.PodIP)).NotTo(Equal(netip.MustParseAddr(ip)))
	}).WithTimeout(60 * time.Second).Should(Succeed())
	node, err = cs.CoreV1().Nodes().Get(ctx, "node-"+zoneB, metav1.GetOptions{})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(node.Spec.Taints).To(BeEmpty())
	g.Expect(agent.FailedZones()).To(BeEmpty())

	rctx, cancel2 := context.WithTimeout(ctx, 10*time.Second)
	defer cancel2()
	resp, err := cli.Get(rctx, "before")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(resp.Kvs).To(HaveLen(1))
	g.Expect(string(resp.Kvs[0].Value)).To(Equal("failure"))
}
