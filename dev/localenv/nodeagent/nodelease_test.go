package nodeagent_test

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/etcdfed/etcdfed/dev/localenv/nodeagent"
)

// Every node's Lease in kube-node-lease is renewed as kubelet renews it;
// a failed zone's Leases stop being renewed, and start again when the
// zone is restored: what a zone witness watching them sees on a real
// cluster.
func TestNodeLeasesStopInFailedZone(t *testing.T) {
	agent, cs := fixture(t)
	ctx := context.Background()
	g := NewWithT(t)
	t.Cleanup(func() { _ = agent.RestoreZone(context.Background(), zoneB) })
	leases := cs.CoordinationV1().Leases(nodeagent.NodeLeaseNamespace)
	renewed := func(node string) time.Time {
		l, err := leases.Get(ctx, node, metav1.GetOptions{})
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(l.Spec.HolderIdentity).To(HaveValue(Equal(node)))
		g.Expect(l.Spec.RenewTime).NotTo(BeNil())
		g.Expect(l.OwnerReferences).To(ContainElement(HaveField("Kind", "Node")))
		return l.Spec.RenewTime.Time
	}
	// Both zones renew.
	for _, z := range []string{zoneA, zoneB} {
		node := "node-" + z
		var first time.Time
		g.Eventually(func(g Gomega) {
			l, err := leases.Get(ctx, node, metav1.GetOptions{})
			g.Expect(err).NotTo(HaveOccurred())
			first = l.Spec.RenewTime.Time
		}).WithTimeout(30 * time.Second).Should(Succeed())
		g.Eventually(func() time.Time { return renewed(node) }).WithTimeout(10 * time.Second).Should(BeTemporally(">", first))
	}

	g.Expect(agent.FailZone(ctx, zoneB)).To(Succeed())
	// A renewal already under way when the zone failed may still land:
	// zone B's last renewal is read after zone A renewed once more.
	a0 := renewed("node-" + zoneA)
	g.Eventually(func() time.Time { return renewed("node-" + zoneA) }).WithTimeout(10 * time.Second).Should(BeTemporally(">", a0))
	stale := renewed("node-" + zoneB)
	// Zone A renews at least twice more while zone B's Lease stays put.
	a1 := renewed("node-" + zoneA)
	g.Eventually(func() time.Time { return renewed("node-" + zoneA) }).WithTimeout(10 * time.Second).Should(BeTemporally(">", a1))
	a1 = renewed("node-" + zoneA)
	g.Eventually(func() time.Time { return renewed("node-" + zoneA) }).WithTimeout(10 * time.Second).Should(BeTemporally(">", a1))
	g.Expect(renewed("node-"+zoneB)).To(BeTemporally("==", stale), "a failed zone's node Lease was renewed")

	g.Expect(agent.RestoreZone(ctx, zoneB)).To(Succeed())
	g.Eventually(func() time.Time { return renewed("node-" + zoneB) }).WithTimeout(10 * time.Second).Should(BeTemporally(">", stale))
}
