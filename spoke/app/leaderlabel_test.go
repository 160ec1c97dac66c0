package app

import (
	"context"
	"testing"
	"time"

	"github.com/go-logr/logr"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/etcdfed/etcdfed/dev/testenv"
)

// TestLeaderLabelFollowsTheLeader: the leader's pod alone carries
// LabelLeader (which the gossip Service selects). A replica clears it
// from its own pod at start; the leader sets it on its own and removes it
// from a pod that kept it from an earlier term; a clearing that lands
// after the leader set it (both start with the process) is undone at the
// leader's next check.
func TestLeaderLabelFollowsTheLeader(t *testing.T) {
	cl := testenv.Shared(t, "spoke-app")
	ns := testenv.NamespaceT(t, cl, "leader-label")
	ctx := context.Background()
	g := NewWithT(t)
	for _, name := range []string{"spoke-a", "spoke-b"} {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{LabelLeader: "true"}},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "spoke", Image: "spoke"}}}}
		g.Expect(cl.Client.Create(ctx, p)).To(Succeed())
	}
	labelled := func(g Gomega) []string {
		pods := &corev1.PodList{}
		g.Expect(cl.Client.List(ctx, pods, client.InNamespace(ns), client.HasLabels{LabelLeader})).To(Succeed())
		var out []string
		for _, p := range pods.Items {
			out = append(out, p.Name)
		}
		return out
	}
	run := func(pod string, leader bool) context.CancelFunc {
		ctx, cancel := context.WithCancel(ctx)
		l := &leaderLabel{c: cl.Client, reader: cl.Client, namespace: ns, pod: pod, leader: leader, log: logr.Discard()}
		done := make(chan struct{})
		go func() { _ = l.Start(ctx); close(done) }()
		t.Cleanup(func() { cancel(); <-done })
		return cancel
	}

	run("spoke-a", false) // a replica starting: clears its own pod
	g.Eventually(func(g Gomega) []string { return labelled(g) }).WithTimeout(10 * time.Second).Should(Equal([]string{"spoke-b"}))

	run("spoke-a", true) // a elected: labels itself, unlabels b
	g.Eventually(func(g Gomega) []string { return labelled(g) }).WithTimeout(10 * time.Second).Should(Equal([]string{"spoke-a"}))

	run("spoke-a", false) // a's own clearing, late
	g.Eventually(func(g Gomega) []string { return labelled(g) }).WithTimeout(10 * time.Second).Should(BeEmpty())
	g.Eventually(func(g Gomega) []string { return labelled(g) }).WithTimeout(2*leaderRecheck).Should(Equal([]string{"spoke-a"}), "the leader puts its label back")
}
