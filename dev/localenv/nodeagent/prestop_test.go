package nodeagent_test

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// A deleted pod's exec preStop hook runs before SIGTERM, as kubelet runs
// it: with the container's environment and mounts. The hook saves a
// snapshot of the still serving etcd into the claim (/var/lib/etcd mapped
// to the volume's directory); after SIGTERM etcd would serve no client.
func TestPreStopHookRunsBeforeSIGTERM(t *testing.T) {
	_, cs := fixture(t)
	ctx := context.Background()
	ns := namespace(t, cs)
	g := NewWithT(t)

	_, err := cs.CoreV1().PersistentVolumeClaims(ns).Create(ctx, claim("data-etcd-0"), metav1.CreateOptions{})
	g.Expect(err).NotTo(HaveOccurred())
	pod := etcdPod("etcd-0", zoneA, "data-etcd-0")
	c := &pod.Spec.Containers[0]
	c.Env = append(c.Env, corev1.EnvVar{Name: "ETCDCTL_ENDPOINTS", Value: "http://$(POD_IP):2379"})
	c.Lifecycle = &corev1.Lifecycle{PreStop: &corev1.LifecycleHandler{Exec: &corev1.ExecAction{
		Command: []string{"/usr/local/bin/etcdctl", "snapshot", "save", "/var/lib/etcd/prestop.db"},
	}}}
	_, err = cs.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{})
	g.Expect(err).NotTo(HaveOccurred())
	g.Eventually(func(g Gomega) {
		p, err := cs.CoreV1().Pods(ns).Get(ctx, "etcd-0", metav1.GetOptions{})
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(podReady(p)).To(BeTrue(), "conditions %+v", p.Status.Conditions)
	}).WithTimeout(60 * time.Second).WithPolling(200 * time.Millisecond).Should(Succeed())

	g.Expect(cs.CoreV1().Pods(ns).Delete(ctx, "etcd-0", metav1.DeleteOptions{})).To(Succeed())
	g.Eventually(func(g Gomega) { waitGone(g, cs, ns, "etcd-0") }).WithTimeout(60 * time.Second).Should(Succeed())
	pvc, err := cs.CoreV1().PersistentVolumeClaims(ns).Get(ctx, "data-etcd-0", metav1.GetOptions{})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(filepath.Join(volumeDir(pvc.Spec.VolumeName), "prestop.db")).To(BeARegularFile(), "the preStop hook saved no snapshot of the serving etcd")
}
